import Foundation

/// A Bluetooth UUID in any of its three forms (16-, 32- or 128-bit).
///
/// The short forms are aliases inside the Bluetooth Base UUID `0000xxxx-0000-1000-8000-00805F9B34FB`, so a
/// 16-bit UUID and its 128-bit expansion are equal and hash alike. The value remembers the form it was written
/// in only through its value: the shortest width that carries it (`width`) is what encoders put on the wire,
/// and `uuidString` prints it the way CoreBluetooth does: `"180D"` for a 16-bit alias (even one written in the
/// long form), 8 digits such as `"12345678"` for a 32-bit alias, and the upper-case hyphenated long form
/// otherwise.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part B, 2.5.1 (UUID), Assigned Numbers 2.5.1 (Base UUID).
public struct BluetoothUUID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The 128-bit value, big-endian as printed (`bytes128[0]` is the first printed byte).
    public let bytes128: [UInt8]
    /// The shortest width that carries this value.
    public var width: Width {
        guard isShort else { return .bits128 }
        return (bytes128[0] == 0 && bytes128[1] == 0) ? .bits16 : .bits32
    }

    public enum Width: Int, Sendable, Hashable {
        case bits16 = 2
        case bits32 = 4
        case bits128 = 16
    }

    /// The Bluetooth Base UUID's last 12 bytes, shared by every short-form UUID.
    static let baseTail: [UInt8] = [0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB]

    /// A 16-bit SIG-assigned UUID such as `0x180D`.
    public init(_ value: UInt16) {
        self.bytes128 = [0, 0, UInt8(value >> 8), UInt8(value & 0xFF)] + Self.baseTail
    }

    /// A 32-bit SIG-assigned UUID.
    public init(uint32 value: UInt32) {
        self.bytes128 =
            [
                UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF),
                UInt8(value & 0xFF),
            ] + Self.baseTail
    }

    /// A 128-bit UUID from Foundation's `UUID`. A value inside the Base UUID is shortened to 16 or 32 bits.
    public init(_ uuid: UUID) {
        let u = uuid.uuid
        self.init(bytes128: [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15])
    }

    /// From 16 big-endian bytes; a value inside the Base UUID takes its short width.
    public init(bytes128: [UInt8]) {
        precondition(bytes128.count == 16, "a 128-bit UUID has 16 bytes")
        self.bytes128 = bytes128
    }

    /// Parses `"180D"`, `"0x180D"`, `"0000180D"` (32-bit) or the long hyphenated form, in either case.
    /// Returns `nil` for anything else.
    public init?(string: String) {
        var text = string.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("0x") || text.hasPrefix("0X") { text.removeFirst(2) }
        // `UInt16(_:radix:)` accepts a leading sign ("+18D"); a UUID is hex digits only.
        guard text.count == 36 || text.allSatisfy(\.isHexDigit) else { return nil }
        switch text.count {
        case 4:
            guard let v = UInt16(text, radix: 16) else { return nil }
            self.init(v)
        case 8:
            guard let v = UInt32(text, radix: 16) else { return nil }
            self.init(uint32: v)
        case 36:
            guard let uuid = UUID(uuidString: text) else { return nil }
            self.init(uuid)
        default:
            return nil
        }
    }

    /// Decodes the little-endian wire form (2, 4 or 16 bytes), as ATT and AD structures carry it.
    /// Returns `nil` for any other length.
    public init?(littleEndian bytes: some Collection<UInt8>) {
        let reversed = Array(bytes.reversed())
        switch reversed.count {
        case 2: self.init(UInt16(reversed[0]) << 8 | UInt16(reversed[1]))
        case 4:
            self.init(
                uint32: UInt32(reversed[0]) << 24 | UInt32(reversed[1]) << 16
                    | UInt32(reversed[2]) << 8 | UInt32(reversed[3]))
        case 16:
            self.init(bytes128: reversed)
        default: return nil
        }
    }

    /// The 16-bit value, if this UUID is a 16-bit alias of the Base UUID.
    public var uint16: UInt16? {
        guard isShort, bytes128[0] == 0, bytes128[1] == 0 else { return nil }
        return UInt16(bytes128[2]) << 8 | UInt16(bytes128[3])
    }

    /// The 32-bit value, if this UUID is a 16- or 32-bit alias of the Base UUID.
    public var uint32: UInt32? {
        guard isShort else { return nil }
        return UInt32(bytes128[0]) << 24 | UInt32(bytes128[1]) << 16 | UInt32(bytes128[2]) << 8 | UInt32(bytes128[3])
    }

    /// Whether the value lies inside the Base UUID (whatever width it was written in).
    public var isShort: Bool { Array(bytes128[4...]) == Self.baseTail }

    /// The shortest wire form: 2 bytes for 16-bit aliases, 16 bytes otherwise. ATT carries only 2- or
    /// 16-byte UUIDs, so a 32-bit alias is sent in its 128-bit form.
    public var attWireBytes: [UInt8] {
        if let short = uint16 { return [UInt8(short & 0xFF), UInt8(short >> 8)] }
        return bytes128.reversed()
    }

    /// The little-endian wire form in the shortest width (for AD structures).
    public var littleEndianBytes: [UInt8] {
        switch width {
        case .bits16: return Array(bytes128[0..<4].reversed().prefix(2))
        case .bits32: return Array(bytes128[0..<4].reversed())
        case .bits128: return bytes128.reversed()
        }
    }

    /// Foundation's `UUID` for the full 128-bit value.
    public var uuid: UUID {
        let b = bytes128
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }

    /// As CoreBluetooth prints `CBUUID.uuidString`: 4 hex digits for 16-bit aliases, 8 for 32-bit ones,
    /// otherwise the upper-case 36-character form.
    public var uuidString: String {
        if let v = uint16 { return hex(v, digits: 4) }
        if let v = uint32 { return hex(v, digits: 8) }
        return uuid.uuidString.uppercased()
    }

    public var description: String {
        if let name { return "\(uuidString) (\(name))" }
        return uuidString
    }

    /// The SIG name of a well-known service, characteristic or descriptor, if this is one.
    public var name: String? { BluetoothUUID.names[self] ?? BluetoothUUID.assignedNames[self] }

    public static func == (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool { lhs.bytes128 == rhs.bytes128 }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes128) }
    public static func < (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        lhs.bytes128.lexicographicallyPrecedes(rhs.bytes128)
    }
}

extension BluetoothUUID: ExpressibleByStringLiteral {
    /// A literal must be a valid UUID string; a malformed literal is a programming error.
    public init(stringLiteral value: String) {
        guard let parsed = BluetoothUUID(string: value) else {
            preconditionFailure("not a Bluetooth UUID: \(value)")
        }
        self = parsed
    }
}

extension BluetoothUUID: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: UInt16) { self.init(value) }
}

private func hex<T: BinaryInteger>(_ value: T, digits: Int) -> String {
    let s = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - s.count)) + s
}
