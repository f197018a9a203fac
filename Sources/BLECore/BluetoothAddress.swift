/// A 48-bit Bluetooth device address with its type.
///
/// `bytes` are in the printed order (`bytes[0]` is the most significant, first in "AA:BB:..."); HCI carries
/// them little-endian, so wire code uses `littleEndianBytes`.
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 1.3 (Device address); Vol 4, Part E, 7.8.12 (Peer_Address_Type).
public struct BluetoothAddress: Sendable, Hashable, CustomStringConvertible {
    public var bytes: [UInt8]
    public var type: AddressType

    /// The address type as HCI encodes it in `Own_Address_Type` / `Peer_Address_Type`.
    public struct AddressType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let publicDevice = AddressType(rawValue: 0x00)
        public static let randomDevice = AddressType(rawValue: 0x01)
        public static let publicIdentity = AddressType(rawValue: 0x02)
        public static let randomIdentity = AddressType(rawValue: 0x03)
        public var isRandom: Bool { rawValue & 0x01 == 1 }
        public var description: String {
            switch rawValue {
            case 0x00: return "public"
            case 0x01: return "random"
            case 0x02: return "public-identity"
            case 0x03: return "random-identity"
            default: return "0x" + String(rawValue, radix: 16)
            }
        }
    }

    public init(bytes: [UInt8], type: AddressType = .publicDevice) {
        precondition(bytes.count == 6, "a device address has 6 bytes")
        self.bytes = bytes
        self.type = type
    }

    /// From the 6 little-endian bytes HCI carries.
    public init?(littleEndian bytes: some Collection<UInt8>, type: AddressType) {
        guard bytes.count == 6 else { return nil }
        self.init(bytes: bytes.reversed(), type: type)
    }

    /// Parses "AA:BB:CC:DD:EE:FF" (or with dashes). Returns `nil` for anything else.
    public init?(string: String, type: AddressType = .publicDevice) {
        let parts = string.split(omittingEmptySubsequences: false, whereSeparator: { $0 == ":" || $0 == "-" })
        guard parts.count == 6 else { return nil }
        var out: [UInt8] = []
        for p in parts {
            // `UInt8(_:radix:)` alone would accept a sign ("+A").
            guard p.count == 2, p.allSatisfy(\.isHexDigit), let b = UInt8(p, radix: 16) else { return nil }
            out.append(b)
        }
        self.init(bytes: out, type: type)
    }

    public var littleEndianBytes: [UInt8] { bytes.reversed() }

    /// What kind of random address this is, read from its two most significant bits
    /// (Core Spec 5.4, Vol 6, Part B, 1.3.2).
    public var randomKind: RandomKind? {
        guard type.isRandom else { return nil }
        switch bytes[0] >> 6 {
        case 0b11: return .staticAddress
        case 0b01: return .resolvablePrivate
        case 0b00: return .nonResolvablePrivate
        default: return nil
        }
    }

    public enum RandomKind: Sendable, Hashable {
        case staticAddress, resolvablePrivate, nonResolvablePrivate
    }

    /// Upper-case colon-separated, as Bluetooth tools print addresses.
    public var string: String {
        bytes.map { b in
            let s = String(b, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }.joined(separator: ":")
    }

    public var description: String { "\(string) (\(type))" }

    public static let zero = BluetoothAddress(bytes: [0, 0, 0, 0, 0, 0])
}
