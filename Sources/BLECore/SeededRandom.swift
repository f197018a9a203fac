/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): the one
/// seeded generator for what must repeat from a seed (a simulation, a pure machine's draws), and its mixing
/// function as a hash of one word. Package-wide, not public API: it serves the stack, not its users.
package struct SeededRandom: RandomNumberGenerator, Sendable, Hashable {
    /// The generator's whole state: the seed advanced by the golden-ratio increment once per draw.
    package private(set) var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.finalize(state)
    }

    /// One word's hash, as the generator would draw it from that state: different words give unrelated
    /// results (a seeded store draws its identifiers with it from the seed and a count).
    package static func mix(_ value: UInt64) -> UInt64 { finalize(value &+ increment) }

    /// 2^64 divided by the golden ratio, odd.
    static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// The generator's output function: two xor-shift-multiply rounds and a final xor-shift.
    static func finalize(_ word: UInt64) -> UInt64 {
        var z = word
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
