import NIOCore

/// Little-endian helpers: Bluetooth is little-endian everywhere, while NIO's integer helpers default to
/// big-endian. Every read returns `nil` on shortfall and then consumes nothing.
extension ByteBuffer {
    @inlinable
    public mutating func readLE<T: FixedWidthInteger>(_: T.Type = T.self) -> T? {
        readInteger(endianness: .little, as: T.self)
    }

    @inlinable
    @discardableResult
    public mutating func writeLE<T: FixedWidthInteger>(_ value: T) -> Int {
        writeInteger(value, endianness: .little)
    }

    /// A 24-bit little-endian integer (e.g. connection-event counters, class of device).
    public mutating func readUInt24LE() -> UInt32? {
        guard let bytes = readBytes(length: 3) else { return nil }
        return UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16
    }

    @discardableResult
    public mutating func writeUInt24LE(_ value: UInt32) -> Int {
        writeBytes([UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF)])
    }

    /// Six little-endian address bytes.
    public mutating func readAddress(type: BluetoothAddress.AddressType) -> BluetoothAddress? {
        guard let bytes = readBytes(length: 6) else { return nil }
        return BluetoothAddress(littleEndian: bytes, type: type)
    }

    @discardableResult
    public mutating func writeAddress(_ address: BluetoothAddress) -> Int {
        writeBytes(address.littleEndianBytes)
    }

    /// A UUID in its little-endian wire form of `length` bytes (2, 4 or 16).
    public mutating func readUUID(length: Int) -> BluetoothUUID? {
        guard length == 2 || length == 4 || length == 16, readableBytes >= length else { return nil }
        let bytes = readBytes(length: length)!  // cannot fail: the guard checked `length` readable bytes
        return BluetoothUUID(littleEndian: bytes)
    }

    /// The remaining readable bytes as an array, consuming them.
    public mutating func readRemainingBytes() -> [UInt8] {
        readBytes(length: readableBytes) ?? []
    }
}

extension Sequence where Element == UInt8 {
    /// Lower-case hex without separators ("0a1b").
    public var hexString: String {
        var out = ""
        for byte in self {
            out += byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
        }
        return out
    }
}

extension Array where Element == UInt8 {
    /// Parses hex digits, ignoring spaces, colons and dashes; `nil` for anything else or an odd count.
    public init?(hex: String) {
        let digits = hex.filter { !" :-\n\t".contains($0) }
        // `UInt8(_:radix:)` alone would accept a sign ("+f").
        guard digits.count % 2 == 0, digits.allSatisfy(\.isHexDigit) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            out.append(byte)
            index = next
        }
        self = out
    }
}
