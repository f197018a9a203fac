import BLECore
import NIOCore

/// HCI_LE_Set_Advertising_Parameters: how legacy advertising is done.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.5.
public struct HCILESetAdvertisingParameters: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetAdvertisingParameters

    /// Advertising_Interval_Min: units of 0.625 ms, 0x0020...0x4000 (20 ms...10.24 s); default 0x0800 (1.28 s).
    public var advertisingIntervalMin: UInt16
    /// Advertising_Interval_Max: units of 0.625 ms, 0x0020...0x4000; default 0x0800; not below the minimum.
    public var advertisingIntervalMax: UInt16
    /// Advertising_Type.
    public var advertisingType: HCIAdvertisingType
    /// Own_Address_Type: 0x00 public, 0x01 random, 0x02 RPA or public, 0x03 RPA or random.
    public var ownAddressType: BluetoothAddress.AddressType
    /// Peer_Address_Type (0x00 public or 0x01 random) and Peer_Address: the target of directed advertising
    /// (or the identity whose RPA is generated); ignored otherwise.
    public var peerAddress: BluetoothAddress
    /// Advertising_Channel_Map; default all three channels.
    public var advertisingChannelMap: HCIAdvertisingChannelMap
    /// Advertising_Filter_Policy.
    public var advertisingFilterPolicy: HCIAdvertisingFilterPolicy

    public init(
        advertisingIntervalMin: UInt16 = 0x0800, advertisingIntervalMax: UInt16 = 0x0800,
        advertisingType: HCIAdvertisingType = .advInd,
        ownAddressType: BluetoothAddress.AddressType = .publicDevice,
        peerAddress: BluetoothAddress = .zero,
        advertisingChannelMap: HCIAdvertisingChannelMap = .all,
        advertisingFilterPolicy: HCIAdvertisingFilterPolicy = .acceptAll
    ) {
        self.advertisingIntervalMin = advertisingIntervalMin
        self.advertisingIntervalMax = advertisingIntervalMax
        self.advertisingType = advertisingType
        self.ownAddressType = ownAddressType
        self.peerAddress = peerAddress
        self.advertisingChannelMap = advertisingChannelMap
        self.advertisingFilterPolicy = advertisingFilterPolicy
    }

    public init(parameters: inout ByteBuffer) throws {
        advertisingIntervalMin = try parameters.hciRead(UInt16.self, "Advertising_Interval_Min")
        advertisingIntervalMax = try parameters.hciRead(UInt16.self, "Advertising_Interval_Max")
        advertisingType = HCIAdvertisingType(rawValue: try parameters.hciRead(UInt8.self, "Advertising_Type"))
        ownAddressType = .init(rawValue: try parameters.hciRead(UInt8.self, "Own_Address_Type"))
        peerAddress = try parameters.hciReadTypedAddress("Peer_Address_Type and Peer_Address")
        advertisingChannelMap = HCIAdvertisingChannelMap(
            rawValue: try parameters.hciRead(UInt8.self, "Advertising_Channel_Map"))
        advertisingFilterPolicy = HCIAdvertisingFilterPolicy(
            rawValue: try parameters.hciRead(UInt8.self, "Advertising_Filter_Policy"))
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(advertisingIntervalMin, endianness: .little)
        buffer.writeInteger(advertisingIntervalMax, endianness: .little)
        buffer.writeInteger(advertisingType.rawValue)
        buffer.writeInteger(ownAddressType.rawValue)
        buffer.hciWriteTypedAddress(peerAddress)
        buffer.writeInteger(advertisingChannelMap.rawValue)
        buffer.writeInteger(advertisingFilterPolicy.rawValue)
    }
}

/// HCI_LE_Read_Advertising_Physical_Channel_Tx_Power: the transmit power used for legacy advertising.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.6.
public struct HCILEReadAdvertisingPhysicalChannelTxPower: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadAdvertisingPhysicalChannelTxPower

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// TX_Power_Level: dBm, -127...20.
        public var txPowerLevel: Int8

        public init(txPowerLevel: Int8) { self.txPowerLevel = txPowerLevel }

        public init(decoding buffer: inout ByteBuffer) throws {
            txPowerLevel = try buffer.hciRead(Int8.self, "TX_Power_Level")
        }

        public func encode(into buffer: inout ByteBuffer) { buffer.writeInteger(txPowerLevel) }
    }
}

/// The one-length-byte, 31-octet data block shared by LE Set Advertising Data and LE Set Scan Response Data.
enum HCILegacyAdvertisingDataBlock {
    static let capacity = 31

    static func read(_ buffer: inout ByteBuffer, _ field: String) throws -> [UInt8] {
        guard buffer.readableBytes >= 1 + capacity else { throw HCIError.truncated(field) }
        let length = Int(buffer.getInteger(at: buffer.readerIndex, as: UInt8.self)!)
        guard length <= capacity else {
            throw HCIError.invalidParameter("\(field) length \(length) exceeds \(capacity)")
        }
        buffer.moveReaderIndex(forwardBy: 1)
        let block = buffer.readBytes(length: capacity)!
        return Array(block.prefix(length))
    }

    static func write(_ data: [UInt8], into buffer: inout ByteBuffer) {
        precondition(data.count <= capacity, "legacy advertising data is at most 31 octets")
        buffer.writeInteger(UInt8(data.count))
        buffer.writeBytes(data)
        buffer.writeRepeatingByte(0, count: capacity - data.count)
    }
}

/// HCI_LE_Set_Advertising_Data: the data in legacy advertising PDUs. Sent as a length byte and 31 octets,
/// zero padded; decoding keeps only the significant octets.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.7.
public struct HCILESetAdvertisingData: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetAdvertisingData

    /// Advertising_Data: AD structures, 0...31 octets (more is a programming error when encoding).
    public var advertisingData: [UInt8]

    public init(advertisingData: [UInt8]) { self.advertisingData = advertisingData }

    public init(parameters: inout ByteBuffer) throws {
        advertisingData = try HCILegacyAdvertisingDataBlock.read(&parameters, "Advertising_Data")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        HCILegacyAdvertisingDataBlock.write(advertisingData, into: &buffer)
    }
}

/// HCI_LE_Set_Scan_Response_Data: the data in SCAN_RSP PDUs; same layout as LE Set Advertising Data.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.8.
public struct HCILESetScanResponseData: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetScanResponseData

    /// Scan_Response_Data: AD structures, 0...31 octets.
    public var scanResponseData: [UInt8]

    public init(scanResponseData: [UInt8]) { self.scanResponseData = scanResponseData }

    public init(parameters: inout ByteBuffer) throws {
        scanResponseData = try HCILegacyAdvertisingDataBlock.read(&parameters, "Scan_Response_Data")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        HCILegacyAdvertisingDataBlock.write(scanResponseData, into: &buffer)
    }
}

/// HCI_LE_Set_Advertising_Enable: start or stop legacy advertising.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.9.
public struct HCILESetAdvertisingEnable: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetAdvertisingEnable

    /// Advertising_Enable: 0x00 disabled (default), 0x01 enabled.
    public var enable: Bool

    public init(enable: Bool) { self.enable = enable }

    public init(parameters: inout ByteBuffer) throws {
        enable = try parameters.hciReadBool("Advertising_Enable")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) { buffer.hciWriteBool(enable) }
}
