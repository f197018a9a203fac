/// A bounds-checked little-endian reader over command parameters; every read returns `nil` when the bytes run
/// out, so a short command can never trap the controller.
struct ByteReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - index }

    mutating func u8() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func u16() -> UInt16? {
        guard index + 2 <= bytes.count else { return nil }
        defer { index += 2 }
        return UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
    }

    mutating func u64() -> UInt64? {
        guard index + 8 <= bytes.count else { return nil }
        var value: UInt64 = 0
        for i in 0..<8 { value |= UInt64(bytes[index + i]) << (8 * UInt64(i)) }
        index += 8
        return value
    }

    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, index + count <= bytes.count else { return nil }
        defer { index += count }
        return Array(bytes[index..<index + count])
    }
}

/// A little-endian writer for event parameters.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 16) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func i8(_ value: Int8) { bytes.append(UInt8(bitPattern: value)) }
    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(value & 0xFF))
        bytes.append(UInt8(value >> 8))
    }
    mutating func u16(_ value: Int) { u16(UInt16(clamping: value)) }
    /// The low three bytes of `value` (a CRC, a CRCInit).
    mutating func u24(_ value: UInt32) {
        for i in 0..<3 { bytes.append(UInt8((value >> (8 * UInt32(i))) & 0xFF)) }
    }
    mutating func u32(_ value: UInt32) {
        for i in 0..<4 { bytes.append(UInt8((value >> (8 * UInt32(i))) & 0xFF)) }
    }
    mutating func u64(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8((value >> (8 * UInt64(i))) & 0xFF)) }
    }
    mutating func append(_ more: [UInt8]) { bytes.append(contentsOf: more) }
}
