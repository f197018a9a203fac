import BLECore
import NIOCore

extension HCILEMetaEvent {
    /// LE Connection Complete: a connection was created (as central or peripheral), or LE Create Connection
    /// failed or was cancelled (status Unknown Connection Identifier, 0x02).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.1.
    public struct ConnectionComplete: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.connectionComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Role: this device's role on the connection.
        public var role: HCIRole
        /// Peer_Address_Type (0x00 public, 0x01 random) and Peer_Address.
        public var peerAddress: BluetoothAddress
        /// Connection_Interval: units of 1.25 ms, 0x0006...0x0C80.
        public var connectionInterval: UInt16
        /// Peripheral_Latency: connection events, 0x0000...0x01F3.
        public var peripheralLatency: UInt16
        /// Supervision_Timeout: units of 10 ms, 0x000A...0x0C80.
        public var supervisionTimeout: UInt16
        /// Central_Clock_Accuracy (meaningful on the peripheral; 0x00 on the central).
        public var centralClockAccuracy: HCIClockAccuracy

        public init(
            status: HCIStatus = .success, handle: ConnectionHandle, role: HCIRole, peerAddress: BluetoothAddress,
            connectionInterval: UInt16, peripheralLatency: UInt16, supervisionTimeout: UInt16,
            centralClockAccuracy: HCIClockAccuracy = .ppm500
        ) {
            self.status = status
            self.handle = handle
            self.role = role
            self.peerAddress = peerAddress
            self.connectionInterval = connectionInterval
            self.peripheralLatency = peripheralLatency
            self.supervisionTimeout = supervisionTimeout
            self.centralClockAccuracy = centralClockAccuracy
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            role = HCIRole(rawValue: try parameters.hciRead(UInt8.self, "Role"))
            peerAddress = try parameters.hciReadTypedAddress("Peer_Address_Type and Peer_Address")
            connectionInterval = try parameters.hciRead(UInt16.self, "Connection_Interval")
            peripheralLatency = try parameters.hciRead(UInt16.self, "Peripheral_Latency")
            supervisionTimeout = try parameters.hciRead(UInt16.self, "Supervision_Timeout")
            centralClockAccuracy = HCIClockAccuracy(
                rawValue: try parameters.hciRead(UInt8.self, "Central_Clock_Accuracy"))
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(role.rawValue)
            buffer.hciWriteTypedAddress(peerAddress)
            buffer.writeInteger(connectionInterval, endianness: .little)
            buffer.writeInteger(peripheralLatency, endianness: .little)
            buffer.writeInteger(supervisionTimeout, endianness: .little)
            buffer.writeInteger(centralClockAccuracy.rawValue)
        }
    }

    /// LE Enhanced Connection Complete [v1]: as LE Connection Complete, adding the resolvable private addresses
    /// in use. Sent instead of LE Connection Complete when both are unmasked.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.10.
    public struct EnhancedConnectionComplete: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.enhancedConnectionComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        public var role: HCIRole
        /// Peer_Address_Type (0x00...0x03; 0x02/0x03 identity addresses resolved from an RPA) and Peer_Address.
        public var peerAddress: BluetoothAddress
        /// Local_Resolvable_Private_Address, all zeros when none was used (type `.randomDevice`).
        public var localResolvablePrivateAddress: BluetoothAddress
        /// Peer_Resolvable_Private_Address, all zeros when none was used (type `.randomDevice`).
        public var peerResolvablePrivateAddress: BluetoothAddress
        /// Connection_Interval: units of 1.25 ms.
        public var connectionInterval: UInt16
        /// Peripheral_Latency: connection events.
        public var peripheralLatency: UInt16
        /// Supervision_Timeout: units of 10 ms.
        public var supervisionTimeout: UInt16
        public var centralClockAccuracy: HCIClockAccuracy

        public init(
            status: HCIStatus = .success, handle: ConnectionHandle, role: HCIRole, peerAddress: BluetoothAddress,
            localResolvablePrivateAddress: BluetoothAddress = BluetoothAddress(
                bytes: [0, 0, 0, 0, 0, 0], type: .randomDevice),
            peerResolvablePrivateAddress: BluetoothAddress = BluetoothAddress(
                bytes: [0, 0, 0, 0, 0, 0], type: .randomDevice),
            connectionInterval: UInt16, peripheralLatency: UInt16, supervisionTimeout: UInt16,
            centralClockAccuracy: HCIClockAccuracy = .ppm500
        ) {
            self.status = status
            self.handle = handle
            self.role = role
            self.peerAddress = peerAddress
            self.localResolvablePrivateAddress = localResolvablePrivateAddress
            self.peerResolvablePrivateAddress = peerResolvablePrivateAddress
            self.connectionInterval = connectionInterval
            self.peripheralLatency = peripheralLatency
            self.supervisionTimeout = supervisionTimeout
            self.centralClockAccuracy = centralClockAccuracy
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            role = HCIRole(rawValue: try parameters.hciRead(UInt8.self, "Role"))
            peerAddress = try parameters.hciReadTypedAddress("Peer_Address_Type and Peer_Address")
            localResolvablePrivateAddress = try parameters.hciReadAddress(
                type: .randomDevice, "Local_Resolvable_Private_Address")
            peerResolvablePrivateAddress = try parameters.hciReadAddress(
                type: .randomDevice, "Peer_Resolvable_Private_Address")
            connectionInterval = try parameters.hciRead(UInt16.self, "Connection_Interval")
            peripheralLatency = try parameters.hciRead(UInt16.self, "Peripheral_Latency")
            supervisionTimeout = try parameters.hciRead(UInt16.self, "Supervision_Timeout")
            centralClockAccuracy = HCIClockAccuracy(
                rawValue: try parameters.hciRead(UInt8.self, "Central_Clock_Accuracy"))
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(role.rawValue)
            buffer.hciWriteTypedAddress(peerAddress)
            buffer.writeAddress(localResolvablePrivateAddress)
            buffer.writeAddress(peerResolvablePrivateAddress)
            buffer.writeInteger(connectionInterval, endianness: .little)
            buffer.writeInteger(peripheralLatency, endianness: .little)
            buffer.writeInteger(supervisionTimeout, endianness: .little)
            buffer.writeInteger(centralClockAccuracy.rawValue)
        }
    }

    /// LE Connection Update Complete: the connection parameters changed (or the update failed).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.3.
    public struct ConnectionUpdateComplete: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.connectionUpdateComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Connection_Interval: units of 1.25 ms, 0x0006...0x0C80.
        public var connectionInterval: UInt16
        /// Peripheral_Latency: connection events, 0x0000...0x01F3.
        public var peripheralLatency: UInt16
        /// Supervision_Timeout: units of 10 ms, 0x000A...0x0C80.
        public var supervisionTimeout: UInt16

        public init(
            status: HCIStatus = .success, handle: ConnectionHandle, connectionInterval: UInt16,
            peripheralLatency: UInt16, supervisionTimeout: UInt16
        ) {
            self.status = status
            self.handle = handle
            self.connectionInterval = connectionInterval
            self.peripheralLatency = peripheralLatency
            self.supervisionTimeout = supervisionTimeout
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            connectionInterval = try parameters.hciRead(UInt16.self, "Connection_Interval")
            peripheralLatency = try parameters.hciRead(UInt16.self, "Peripheral_Latency")
            supervisionTimeout = try parameters.hciRead(UInt16.self, "Supervision_Timeout")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(connectionInterval, endianness: .little)
            buffer.writeInteger(peripheralLatency, endianness: .little)
            buffer.writeInteger(supervisionTimeout, endianness: .little)
        }
    }

    /// LE Read Remote Features Complete: the peer's LE feature set.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.4.
    public struct ReadRemoteFeaturesComplete: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.readRemoteFeaturesComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// LE_Features (8 octets).
        public var leFeatures: LEFeatures

        public init(status: HCIStatus = .success, handle: ConnectionHandle, leFeatures: LEFeatures) {
            self.status = status
            self.handle = handle
            self.leFeatures = leFeatures
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            leFeatures = LEFeatures(rawValue: try parameters.hciRead(UInt64.self, "LE_Features"))
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(leFeatures.rawValue, endianness: .little)
        }
    }

    /// LE Long Term Key Request: as peripheral, the central started encryption; the host answers with LE Long
    /// Term Key Request Reply or Negative Reply.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.5.
    public struct LongTermKeyRequest: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.longTermKeyRequest

        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Random_Number (Rand, 8 octets).
        public var randomNumber: UInt64
        /// Encrypted_Diversifier (EDIV).
        public var encryptedDiversifier: UInt16

        public init(handle: ConnectionHandle, randomNumber: UInt64, encryptedDiversifier: UInt16) {
            self.handle = handle
            self.randomNumber = randomNumber
            self.encryptedDiversifier = encryptedDiversifier
        }

        public init(parameters: inout ByteBuffer) throws {
            handle = try parameters.hciReadHandle()
            randomNumber = try parameters.hciRead(UInt64.self, "Random_Number")
            encryptedDiversifier = try parameters.hciRead(UInt16.self, "Encrypted_Diversifier")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(randomNumber, endianness: .little)
            buffer.writeInteger(encryptedDiversifier, endianness: .little)
        }
    }

    /// LE Remote Connection Parameter Request: the peer asks for new connection parameters; the host answers
    /// with the Reply or Negative Reply command.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.6.
    public struct RemoteConnectionParameterRequest: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.remoteConnectionParameterRequest

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

        public init(
            handle: ConnectionHandle, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16, timeout: UInt16
        ) {
            self.handle = handle
            self.intervalMin = intervalMin
            self.intervalMax = intervalMax
            self.maxLatency = maxLatency
            self.timeout = timeout
        }

        public init(parameters: inout ByteBuffer) throws {
            handle = try parameters.hciReadHandle()
            intervalMin = try parameters.hciRead(UInt16.self, "Interval_Min")
            intervalMax = try parameters.hciRead(UInt16.self, "Interval_Max")
            maxLatency = try parameters.hciRead(UInt16.self, "Max_Latency")
            timeout = try parameters.hciRead(UInt16.self, "Timeout")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(intervalMin, endianness: .little)
            buffer.writeInteger(intervalMax, endianness: .little)
            buffer.writeInteger(maxLatency, endianness: .little)
            buffer.writeInteger(timeout, endianness: .little)
        }
    }

    /// LE Data Length Change: the maximum payload or time in either direction changed.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.7.
    public struct DataLengthChange: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.dataLengthChange

        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Max_TX_Octets: 0x001B...0x00FB.
        public var maxTxOctets: UInt16
        /// Max_TX_Time: microseconds, 0x0148...0x4290.
        public var maxTxTime: UInt16
        /// Max_RX_Octets: 0x001B...0x00FB.
        public var maxRxOctets: UInt16
        /// Max_RX_Time: microseconds, 0x0148...0x4290.
        public var maxRxTime: UInt16

        public init(
            handle: ConnectionHandle, maxTxOctets: UInt16, maxTxTime: UInt16, maxRxOctets: UInt16, maxRxTime: UInt16
        ) {
            self.handle = handle
            self.maxTxOctets = maxTxOctets
            self.maxTxTime = maxTxTime
            self.maxRxOctets = maxRxOctets
            self.maxRxTime = maxRxTime
        }

        public init(parameters: inout ByteBuffer) throws {
            handle = try parameters.hciReadHandle()
            maxTxOctets = try parameters.hciRead(UInt16.self, "Max_TX_Octets")
            maxTxTime = try parameters.hciRead(UInt16.self, "Max_TX_Time")
            maxRxOctets = try parameters.hciRead(UInt16.self, "Max_RX_Octets")
            maxRxTime = try parameters.hciRead(UInt16.self, "Max_RX_Time")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(maxTxOctets, endianness: .little)
            buffer.writeInteger(maxTxTime, endianness: .little)
            buffer.writeInteger(maxRxOctets, endianness: .little)
            buffer.writeInteger(maxRxTime, endianness: .little)
        }
    }

    /// LE PHY Update Complete: a connection's PHYs changed, or LE Set PHY completed without a change.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.12.
    public struct PHYUpdateComplete: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.phyUpdateComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// TX_PHY.
        public var txPHY: HCIPHY
        /// RX_PHY.
        public var rxPHY: HCIPHY

        public init(status: HCIStatus = .success, handle: ConnectionHandle, txPHY: HCIPHY, rxPHY: HCIPHY) {
            self.status = status
            self.handle = handle
            self.txPHY = txPHY
            self.rxPHY = rxPHY
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            txPHY = HCIPHY(rawValue: try parameters.hciRead(UInt8.self, "TX_PHY"))
            rxPHY = HCIPHY(rawValue: try parameters.hciRead(UInt8.self, "RX_PHY"))
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(txPHY.rawValue)
            buffer.writeInteger(rxPHY.rawValue)
        }
    }
}
