import BLECore
import NIOCore

/// HCI_LE_Create_Connection: scan for a connectable advertiser and connect to it as central. Acknowledged by
/// Command Status; LE Connection Complete (or LE Enhanced Connection Complete) follows, with status Unknown
/// Connection Identifier (0x02) after LE Create Connection Cancel.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.12.
public struct HCILECreateConnection: HCIAsyncCommand {
    public static let opcode = HCIOpcode.leCreateConnection

    /// LE_Scan_Interval: units of 0.625 ms, 0x0004...0x4000.
    public var scanInterval: UInt16
    /// LE_Scan_Window: units of 0.625 ms, 0x0004...0x4000, not above the interval.
    public var scanWindow: UInt16
    /// Initiator_Filter_Policy.
    public var initiatorFilterPolicy: HCIInitiatorFilterPolicy
    /// Peer_Address_Type (0x00...0x03) and Peer_Address: the device to connect to.
    public var peerAddress: BluetoothAddress
    /// Own_Address_Type: 0x00 public ... 0x03 RPA or random.
    public var ownAddressType: BluetoothAddress.AddressType
    /// Connection_Interval_Min: units of 1.25 ms, 0x0006...0x0C80 (7.5 ms...4 s).
    public var connectionIntervalMin: UInt16
    /// Connection_Interval_Max: units of 1.25 ms, 0x0006...0x0C80, not below the minimum.
    public var connectionIntervalMax: UInt16
    /// Max_Latency: peripheral latency in connection events, 0x0000...0x01F3.
    public var maxLatency: UInt16
    /// Supervision_Timeout: units of 10 ms, 0x000A...0x0C80 (100 ms...32 s).
    public var supervisionTimeout: UInt16
    /// Min_CE_Length: units of 0.625 ms, 0x0000...0xFFFF (a hint).
    public var minCELength: UInt16
    /// Max_CE_Length: units of 0.625 ms, 0x0000...0xFFFF (a hint).
    public var maxCELength: UInt16

    public init(
        scanInterval: UInt16, scanWindow: UInt16,
        initiatorFilterPolicy: HCIInitiatorFilterPolicy = .usePeerAddress,
        peerAddress: BluetoothAddress, ownAddressType: BluetoothAddress.AddressType = .publicDevice,
        connectionIntervalMin: UInt16, connectionIntervalMax: UInt16, maxLatency: UInt16,
        supervisionTimeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0
    ) {
        self.scanInterval = scanInterval
        self.scanWindow = scanWindow
        self.initiatorFilterPolicy = initiatorFilterPolicy
        self.peerAddress = peerAddress
        self.ownAddressType = ownAddressType
        self.connectionIntervalMin = connectionIntervalMin
        self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public init(parameters: inout ByteBuffer) throws {
        scanInterval = try parameters.hciRead(UInt16.self, "LE_Scan_Interval")
        scanWindow = try parameters.hciRead(UInt16.self, "LE_Scan_Window")
        initiatorFilterPolicy = HCIInitiatorFilterPolicy(
            rawValue: try parameters.hciRead(UInt8.self, "Initiator_Filter_Policy"))
        peerAddress = try parameters.hciReadTypedAddress("Peer_Address_Type and Peer_Address")
        ownAddressType = .init(rawValue: try parameters.hciRead(UInt8.self, "Own_Address_Type"))
        connectionIntervalMin = try parameters.hciRead(UInt16.self, "Connection_Interval_Min")
        connectionIntervalMax = try parameters.hciRead(UInt16.self, "Connection_Interval_Max")
        maxLatency = try parameters.hciRead(UInt16.self, "Max_Latency")
        supervisionTimeout = try parameters.hciRead(UInt16.self, "Supervision_Timeout")
        minCELength = try parameters.hciRead(UInt16.self, "Min_CE_Length")
        maxCELength = try parameters.hciRead(UInt16.self, "Max_CE_Length")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(scanInterval, endianness: .little)
        buffer.writeInteger(scanWindow, endianness: .little)
        buffer.writeInteger(initiatorFilterPolicy.rawValue)
        buffer.hciWriteTypedAddress(peerAddress)
        buffer.writeInteger(ownAddressType.rawValue)
        buffer.writeInteger(connectionIntervalMin, endianness: .little)
        buffer.writeInteger(connectionIntervalMax, endianness: .little)
        buffer.writeInteger(maxLatency, endianness: .little)
        buffer.writeInteger(supervisionTimeout, endianness: .little)
        buffer.writeInteger(minCELength, endianness: .little)
        buffer.writeInteger(maxCELength, endianness: .little)
    }
}

/// HCI_LE_Create_Connection_Cancel: stop a pending LE Create Connection. Completes with Command Complete
/// (Command Disallowed if none is pending), then the pending connection completes with Unknown Connection
/// Identifier (0x02).
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.13.
public struct HCILECreateConnectionCancel: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leCreateConnectionCancel

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}
}

/// HCI_LE_Connection_Update: change a connection's parameters. Acknowledged by Command Status; LE Connection
/// Update Complete follows.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.18.
public struct HCILEConnectionUpdate: HCIAsyncCommand {
    public static let opcode = HCIOpcode.leConnectionUpdate

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// Connection_Interval_Min: units of 1.25 ms, 0x0006...0x0C80.
    public var connectionIntervalMin: UInt16
    /// Connection_Interval_Max: units of 1.25 ms, 0x0006...0x0C80.
    public var connectionIntervalMax: UInt16
    /// Max_Latency: connection events, 0x0000...0x01F3.
    public var maxLatency: UInt16
    /// Supervision_Timeout: units of 10 ms, 0x000A...0x0C80.
    public var supervisionTimeout: UInt16
    /// Min_CE_Length: units of 0.625 ms.
    public var minCELength: UInt16
    /// Max_CE_Length: units of 0.625 ms.
    public var maxCELength: UInt16

    public init(
        handle: ConnectionHandle, connectionIntervalMin: UInt16, connectionIntervalMax: UInt16,
        maxLatency: UInt16, supervisionTimeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0
    ) {
        self.handle = handle
        self.connectionIntervalMin = connectionIntervalMin
        self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        connectionIntervalMin = try parameters.hciRead(UInt16.self, "Connection_Interval_Min")
        connectionIntervalMax = try parameters.hciRead(UInt16.self, "Connection_Interval_Max")
        maxLatency = try parameters.hciRead(UInt16.self, "Max_Latency")
        supervisionTimeout = try parameters.hciRead(UInt16.self, "Supervision_Timeout")
        minCELength = try parameters.hciRead(UInt16.self, "Min_CE_Length")
        maxCELength = try parameters.hciRead(UInt16.self, "Max_CE_Length")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(connectionIntervalMin, endianness: .little)
        buffer.writeInteger(connectionIntervalMax, endianness: .little)
        buffer.writeInteger(maxLatency, endianness: .little)
        buffer.writeInteger(supervisionTimeout, endianness: .little)
        buffer.writeInteger(minCELength, endianness: .little)
        buffer.writeInteger(maxCELength, endianness: .little)
    }
}

/// HCI_LE_Read_Remote_Features: ask the peer's link layer for its LE features. Acknowledged by Command
/// Status; LE Read Remote Features Complete follows.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.21.
public struct HCILEReadRemoteFeatures: HCIAsyncCommand {
    public static let opcode = HCIOpcode.leReadRemoteFeatures

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle

    public init(handle: ConnectionHandle) { self.handle = handle }

    public init(parameters: inout ByteBuffer) throws { handle = try parameters.hciReadHandle() }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request_Reply: accept the peer's connection parameter request (LE Remote
/// Connection Parameter Request event), with the values the host chooses.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.31.
public struct HCILERemoteConnectionParameterRequestReply: HCISyncCommand {
    public typealias ReturnParameters = HCIConnectionHandleReturn
    public static let opcode = HCIOpcode.leRemoteConnectionParameterRequestReply

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// Interval_Min: units of 1.25 ms, 0x0006...0x0C80.
    public var intervalMin: UInt16
    /// Interval_Max: units of 1.25 ms, 0x0006...0x0C80.
    public var intervalMax: UInt16
    /// Max_Latency: connection events, 0x0000...0x01F3.
    public var maxLatency: UInt16
    /// Timeout: supervision timeout, units of 10 ms, 0x000A...0x0C80.
    public var timeout: UInt16
    /// Min_CE_Length: units of 0.625 ms.
    public var minCELength: UInt16
    /// Max_CE_Length: units of 0.625 ms.
    public var maxCELength: UInt16

    public init(
        handle: ConnectionHandle, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16,
        timeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0
    ) {
        self.handle = handle
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.timeout = timeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        intervalMin = try parameters.hciRead(UInt16.self, "Interval_Min")
        intervalMax = try parameters.hciRead(UInt16.self, "Interval_Max")
        maxLatency = try parameters.hciRead(UInt16.self, "Max_Latency")
        timeout = try parameters.hciRead(UInt16.self, "Timeout")
        minCELength = try parameters.hciRead(UInt16.self, "Min_CE_Length")
        maxCELength = try parameters.hciRead(UInt16.self, "Max_CE_Length")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(intervalMin, endianness: .little)
        buffer.writeInteger(intervalMax, endianness: .little)
        buffer.writeInteger(maxLatency, endianness: .little)
        buffer.writeInteger(timeout, endianness: .little)
        buffer.writeInteger(minCELength, endianness: .little)
        buffer.writeInteger(maxCELength, endianness: .little)
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request_Negative_Reply: reject the peer's connection parameter request.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.32.
public struct HCILERemoteConnectionParameterRequestNegativeReply: HCISyncCommand {
    public typealias ReturnParameters = HCIConnectionHandleReturn
    public static let opcode = HCIOpcode.leRemoteConnectionParameterRequestNegativeReply

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// Reason, typically Unacceptable Connection Parameters (0x3B).
    public var reason: HCIStatus

    public init(handle: ConnectionHandle, reason: HCIStatus = .unacceptableConnectionParameters) {
        self.handle = handle
        self.reason = reason
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        reason = try parameters.hciReadStatus("Reason")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(reason.rawValue)
    }
}
