/// The packet indicator that precedes each HCI packet on an H4 (UART) transport.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 2 (UART transport: protocol).
public struct HCIPacketType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let command = HCIPacketType(rawValue: 0x01)
    public static let acl = HCIPacketType(rawValue: 0x02)
    public static let sco = HCIPacketType(rawValue: 0x03)
    public static let event = HCIPacketType(rawValue: 0x04)
    public static let iso = HCIPacketType(rawValue: 0x05)

    public var description: String {
        switch self {
        case .command: return "command"
        case .acl: return "acl"
        case .sco: return "sco"
        case .event: return "event"
        case .iso: return "iso"
        default: return hex2(rawValue)
        }
    }
}

func hex2(_ value: UInt8) -> String {
    let s = String(value, radix: 16, uppercase: true)
    return "0x" + (s.count == 1 ? "0" + s : s)
}

func hex4(_ value: UInt16) -> String {
    let s = String(value, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: 4 - s.count) + s
}
