import BLECore
import NIOCore

/// HCI_LE_Set_Scan_Parameters: how legacy scanning is done.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.10.
public struct HCILESetScanParameters: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetScanParameters

    /// LE_Scan_Type: passive (default) or active.
    public var scanType: HCIScanType
    /// LE_Scan_Interval: units of 0.625 ms, 0x0004...0x4000 (2.5 ms...10.24 s); default 0x0010 (10 ms).
    public var scanInterval: UInt16
    /// LE_Scan_Window: units of 0.625 ms, 0x0004...0x4000, not above the interval; default 0x0010.
    public var scanWindow: UInt16
    /// Own_Address_Type used in scan requests: 0x00 public ... 0x03 RPA or random.
    public var ownAddressType: BluetoothAddress.AddressType
    /// Scanning_Filter_Policy.
    public var scanningFilterPolicy: HCIScanningFilterPolicy

    public init(
        scanType: HCIScanType = .passive, scanInterval: UInt16 = 0x0010, scanWindow: UInt16 = 0x0010,
        ownAddressType: BluetoothAddress.AddressType = .publicDevice,
        scanningFilterPolicy: HCIScanningFilterPolicy = .basicUnfiltered
    ) {
        self.scanType = scanType
        self.scanInterval = scanInterval
        self.scanWindow = scanWindow
        self.ownAddressType = ownAddressType
        self.scanningFilterPolicy = scanningFilterPolicy
    }

    public init(parameters: inout ByteBuffer) throws {
        scanType = HCIScanType(rawValue: try parameters.hciRead(UInt8.self, "LE_Scan_Type"))
        scanInterval = try parameters.hciRead(UInt16.self, "LE_Scan_Interval")
        scanWindow = try parameters.hciRead(UInt16.self, "LE_Scan_Window")
        ownAddressType = .init(rawValue: try parameters.hciRead(UInt8.self, "Own_Address_Type"))
        scanningFilterPolicy = HCIScanningFilterPolicy(
            rawValue: try parameters.hciRead(UInt8.self, "Scanning_Filter_Policy"))
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(scanType.rawValue)
        buffer.writeInteger(scanInterval, endianness: .little)
        buffer.writeInteger(scanWindow, endianness: .little)
        buffer.writeInteger(ownAddressType.rawValue)
        buffer.writeInteger(scanningFilterPolicy.rawValue)
    }
}

/// HCI_LE_Set_Scan_Enable: start or stop legacy scanning.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.11.
public struct HCILESetScanEnable: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetScanEnable

    /// LE_Scan_Enable: 0x00 disabled, 0x01 enabled.
    public var enable: Bool
    /// Filter_Duplicates: 0x00 report every packet, 0x01 filter duplicates while scanning is on.
    public var filterDuplicates: Bool

    public init(enable: Bool, filterDuplicates: Bool = false) {
        self.enable = enable
        self.filterDuplicates = filterDuplicates
    }

    public init(parameters: inout ByteBuffer) throws {
        enable = try parameters.hciReadBool("LE_Scan_Enable")
        filterDuplicates = try parameters.hciReadBool("Filter_Duplicates")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.hciWriteBool(enable)
        buffer.hciWriteBool(filterDuplicates)
    }
}
