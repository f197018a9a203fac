/// The random octets pairing needs (nonces, passkeys, keys to distribute), as a value: AES-128 in counter mode
/// keyed by a seed, so a machine that holds one stays a pure value and a run seeded alike repeats.
///
/// Only as good as its seed: a host on a real controller seeds it with 16 octets from the system's secure
/// generator (or the controller's LE Rand); a simulation seeds it from its own seed. The pure layer draws
/// nothing itself.
public struct SMPRandom: Sendable {
    private let key: [UInt8]
    private var counter: UInt64 = 0
    private var buffered: [UInt8] = []

    /// `seed`: at least 16 octets; a longer seed is folded in with AES-CMAC.
    public init(seed: [UInt8]) {
        precondition(seed.count >= 16, "an SMPRandom takes a seed of at least 16 octets")
        key = seed.count == 16 ? seed : SMPCrypto.aesCMAC(key: [UInt8](repeating: 0, count: 16), message: seed)
    }

    /// The next `count` octets.
    public mutating func next(_ count: Int) -> [UInt8] {
        while buffered.count < count {
            let block = (0..<16).map { $0 < 8 ? UInt8(truncatingIfNeeded: counter >> (8 * $0)) : 0 }
            counter &+= 1
            buffered += SMPCrypto.e(key: key, plaintext: block)
        }
        defer { buffered.removeFirst(count) }
        return Array(buffered.prefix(count))
    }
}
