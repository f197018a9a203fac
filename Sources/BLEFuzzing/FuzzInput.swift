/// Reads structured values from a fuzzer's bytes, front to back. When the bytes run out every read gives zero
/// or nothing, so a harness reads what it needs without checking, and libFuzzer's mutations (bytes inserted,
/// erased, changed) move one field without making the rest unreadable.
struct FuzzInput {
    private let data: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) {
        self.data = bytes
    }

    /// Whether every byte has been read.
    var isEmpty: Bool { index >= data.count }

    mutating func byte() -> UInt8 {
        guard index < data.count else { return 0 }
        defer { index += 1 }
        return data[index]
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// 0..<bound, from one byte (`bound` is at most 256).
    mutating func below(_ bound: Int) -> Int { Int(byte()) % bound }

    mutating func uint16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }

    mutating func uint32() -> UInt32 { UInt32(uint16()) | UInt32(uint16()) << 16 }

    mutating func uint64() -> UInt64 { UInt64(uint32()) | UInt64(uint32()) << 32 }

    /// Up to `count` bytes: fewer when the input ends first.
    mutating func bytes(_ count: Int) -> [UInt8] {
        let end = min(data.count, index + max(0, count))
        defer { index = max(index, end) }
        return index < end ? Array(data[index..<end]) : []
    }

    /// Exactly `count` bytes, zeros where the input ended.
    mutating func padded(_ count: Int) -> [UInt8] {
        let some = bytes(count)
        return some + [UInt8](repeating: 0, count: count - some.count)
    }

    /// A length-prefixed chunk: one length octet below 0xF0 gives that many bytes; 0xF0...0xFF and the next octet
    /// give up to 4095 (for PDUs longer than a one-octet length reaches).
    mutating func chunk() -> [UInt8] {
        let first = Int(byte())
        let length = first < 0xF0 ? first : (first & 0x0F) << 8 | Int(byte())
        return bytes(length)
    }

    /// What is left.
    mutating func rest() -> [UInt8] { bytes(data.count - index) }
}
