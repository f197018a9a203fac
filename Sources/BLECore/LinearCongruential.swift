/// A 64-bit linear congruential generator with the multiplier and increment Knuth chose for MMIX: each draw is
/// `state × 6364136223846793005 + 1442695040888963407` modulo 2^64. The stack's small generator for what must
/// repeat from a seed but needs no statistical quality (a host's static address from its seed, a demo's readings,
/// the robustness tests' inputs); `SeededRandom` is the one for simulations. Package-wide, not public API.
///
/// Its low bits are weak (bit k repeats every 2^(k+1) draws), so its users take the high ones: `nextHighBits()`.
package struct LinearCongruential: RandomNumberGenerator, Sendable, Hashable {
    /// The generator's whole state: the last draw (the seed before the first).
    package private(set) var state: UInt64

    package init(seed: UInt64) { state = seed }

    /// The next state, all 64 bits of it.
    package mutating func next() -> UInt64 {
        state = state &* Self.multiplier &+ Self.increment
        return state
    }

    /// The next state's 31 high bits (bits 33 to 63), the ones worth drawing from.
    package mutating func nextHighBits() -> UInt32 { UInt32(truncatingIfNeeded: next() >> 33) }

    /// MMIX's multiplier (Knuth's MMIXware).
    static let multiplier: UInt64 = 6_364_136_223_846_793_005

    /// MMIX's increment, odd, so the period is the full 2^64.
    static let increment: UInt64 = 1_442_695_040_888_963_407
}
