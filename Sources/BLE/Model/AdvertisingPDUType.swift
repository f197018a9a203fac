/// The type of the advertising PDU a discovery came from: a swift-ble extension, not in CoreBluetooth (which
/// tells only `isConnectable`).
///
/// The values are the legacy advertising report's Event_Type: 0x00 ADV_IND (connectable and scannable),
/// 0x01 ADV_DIRECT_IND (connectable, directed at one scanner), 0x02 ADV_SCAN_IND (scannable, not
/// connectable), 0x03 ADV_NONCONN_IND (neither), 0x04 SCAN_RSP. An extended report of a legacy or extended PDU
/// is given the legacy type with the same connectable, scannable and directed properties. An open set: other
/// values round-trip and print as `0xNN`.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.2 (LE Advertising Report event, Event_Type) and 7.7.65.13
///   (LE Extended Advertising Report event); Vol 6, Part B, 2.3 (advertising physical channel PDUs).
public struct AdvertisingPDUType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// ADV_IND: connectable and scannable undirected advertising (Vol 6, Part B, 2.3.1.1).
    public static let advInd = AdvertisingPDUType(rawValue: 0x00)
    /// ADV_DIRECT_IND: connectable directed advertising (Vol 6, Part B, 2.3.1.2).
    public static let advDirectInd = AdvertisingPDUType(rawValue: 0x01)
    /// ADV_SCAN_IND: scannable undirected advertising (Vol 6, Part B, 2.3.1.4).
    public static let advScanInd = AdvertisingPDUType(rawValue: 0x02)
    /// ADV_NONCONN_IND: non-connectable, non-scannable undirected advertising (Vol 6, Part B, 2.3.1.3).
    public static let advNonconnInd = AdvertisingPDUType(rawValue: 0x03)
    /// SCAN_RSP: a scan response (Vol 6, Part B, 2.3.2.2).
    public static let scanRsp = AdvertisingPDUType(rawValue: 0x04)

    /// The PDU's name in the specification ("ADV_IND"), or `nil` for a value not listed.
    public var name: String? {
        switch rawValue {
        case 0x00: "ADV_IND"
        case 0x01: "ADV_DIRECT_IND"
        case 0x02: "ADV_SCAN_IND"
        case 0x03: "ADV_NONCONN_IND"
        case 0x04: "SCAN_RSP"
        default: nil
        }
    }

    /// Whether a central may connect in answer to this PDU.
    public var isConnectable: Bool { self == .advInd || self == .advDirectInd }

    /// Whether a scanner may send SCAN_REQ in answer to this PDU (so a scan response may follow).
    public var isScannable: Bool { self == .advInd || self == .advScanInd }

    public var description: String {
        if let name { return name }
        let hex = String(rawValue, radix: 16, uppercase: true)
        return "0x" + (hex.count == 1 ? "0" + hex : hex)
    }
}
