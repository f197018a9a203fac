import BLECore

/// LE legacy pairing's functions, built on `e`. Byte order as everywhere in ``SMPCrypto``: every value least
/// significant octet first, as SMP carries it.
extension SMPCrypto {
    /// The confirm value generation function `c1` (Vol 3, Part H, 2.2.3): Mconfirm or Sconfirm.
    ///
    /// `c1 = e(k, e(k, r XOR p1) XOR p2)`, with `p1 = pres || preq || rat' || iat'` and
    /// `p2 = padding || ia || ra`.
    ///
    /// - Parameters:
    ///   - tk: the Temporary Key, 16 octets.
    ///   - random: Mrand or Srand, 16 octets, as Pairing Random carries it.
    ///   - preq: the Pairing Request command's 7 octets as they were sent or received, code (0x01) first.
    ///   - pres: the Pairing Response command's 7 octets, code (0x02) first.
    ///   - initiatorAddress: the address the initiator connected with (`ia`); its type gives `iat` (0 public,
    ///     1 random).
    ///   - responderAddress: the responder's address on the link (`ra`), its type giving `rat`.
    /// - Returns: the 16-octet confirm value, as Pairing Confirm carries it.
    public static func c1(
        tk: [UInt8], random: [UInt8], preq: [UInt8], pres: [UInt8], initiatorAddress: BluetoothAddress,
        responderAddress: BluetoothAddress
    ) -> [UInt8] {
        precondition(tk.count == 16 && random.count == 16, "c1 takes a 16-octet TK and a 16-octet random")
        precondition(preq.count == 7 && pres.count == 7, "c1 takes the 7 octets of each pairing command")
        // In the spec's order (most significant first); each command's code octet is its least significant.
        let iat: UInt8 = initiatorAddress.type.isRandom ? 1 : 0
        let rat: UInt8 = responderAddress.type.isRandom ? 1 : 0
        let p1: [UInt8] = pres.reversed() + preq.reversed() + [rat, iat]
        let p2: [UInt8] = [0, 0, 0, 0] + initiatorAddress.bytes + responderAddress.bytes
        let k = Array(tk.reversed())
        let first = aes(key: k, block: xor(random.reversed(), p1))
        return aes(key: k, block: xor(first, p2)).reversed()
    }

    /// The key generation function `s1` (Vol 3, Part H, 2.2.4): the Short Term Key is `s1(TK, Srand, Mrand)`
    /// (2.3.5.5).
    ///
    /// `s1 = e(k, r1' || r2')`, where `r1'` and `r2'` are the least significant 64 bits of `r1` and `r2`.
    ///
    /// - Parameters:
    ///   - tk: the Temporary Key, 16 octets.
    ///   - r1: 16 octets (Srand when making the STK).
    ///   - r2: 16 octets (Mrand when making the STK).
    /// - Returns: 16 octets, as HCI LE Enable Encryption takes the key.
    public static func s1(tk: [UInt8], r1: [UInt8], r2: [UInt8]) -> [UInt8] {
        precondition(tk.count == 16 && r1.count == 16 && r2.count == 16, "s1 takes three 16-octet values")
        // Least significant first, r2' holds the low half of r' and r1' the high half.
        return e(key: tk, plaintext: Array(r2.prefix(8) + r1.prefix(8)))
    }

    static func xor(_ a: some Sequence<UInt8>, _ b: some Sequence<UInt8>) -> [UInt8] {
        zip(a, b).map { $0 ^ $1 }
    }
}
