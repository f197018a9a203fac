/// A stable 64-bit FNV-1a hash of a string's UTF-8 (Swift's `Hasher` is seeded per process, so it cannot be used
/// for anything a seed must reproduce): the simulated radio derives addresses from it, a simulated system its
/// seeds.
public func stableHash(_ text: String) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01B3
    }
    return hash
}
