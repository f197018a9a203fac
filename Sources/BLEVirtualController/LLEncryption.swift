import Crypto
import CryptoExtras

/// The LE link layer's ciphers: the security function e, the session key of the encryption start procedure and
/// AES-CCM over data channel PDUs, all on one AES-128 block operation (CryptoExtras' `AES.permute`; swift-crypto
/// has no CCM with a 4-octet MIC and a 13-octet nonce).
///
/// Octet order. HCI and the LL control PDUs carry keys, SKD and IV least significant octet first; AES takes its
/// key and block most significant octet first (Vol 3, Part H, 2.2.1). So e reverses what comes from the wire, and
/// the session key it returns is already in the order AES wants, which is how CCM uses it.
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 5.1.3.1 (session key and IV), Vol 6, Part E, 1 and 2 (CCM for LE),
///   Vol 6, Part C, 1 (sample data), Vol 4, Part E, 7.8.22 (HCI_LE_Encrypt).
enum LLCrypto {
    /// One AES-128 block: `block` encrypted under `key`, both most significant octet first.
    static func aes(key: [UInt8], _ block: [UInt8]) -> [UInt8] {
        precondition(key.count == 16 && block.count == 16, "AES-128 takes a 16-octet key and block")
        var out = block
        // Neither can throw: the sizes are checked above.
        try! AES.permute(&out, key: SymmetricKey(data: key))
        return out
    }

    /// HCI_LE_Encrypt's e: key and plaintext as HCI carries them (least significant octet first), the result in the
    /// same order (Vol 4, Part E, 7.8.22).
    static func hciEncrypt(key: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        Array(aes(key: key.reversed(), plaintext.reversed()).reversed())
    }
}

/// One direction's encryption state on a link: the session key and IV both sides derived, and a packet counter.
///
/// The central's PDUs carry direction bit 1, the peripheral's 0. The counter counts the encrypted PDUs sent in one
/// direction since the encryption started (39 bits; an empty PDU is neither encrypted nor counted).
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part E, 2 (the CCM nonce and its packet counter).
struct LLSession: Equatable {
    /// SK, most significant octet first (the AES key).
    let key: [UInt8]
    /// IV as the nonce carries it: IVc's four octets, then IVp's, each least significant octet first.
    let iv: [UInt8]

    init(key: [UInt8], iv: [UInt8]) {
        precondition(key.count == 16 && iv.count == 8)
        self.key = key
        self.iv = iv
    }

    /// SK = e(LTK, SKD) with SKD = SKDp || SKDc (SKDc the least significant half) and IV = IVp || IVc (IVc the
    /// least significant half), as LL_ENC_REQ and LL_ENC_RSP exchange them (Vol 6, Part B, 5.1.3.1).
    /// - Parameters:
    ///   - longTermKey: the LTK as HCI carries it, least significant octet first.
    ///   - skdCentral, skdPeripheral: SKDc and SKDp, 64 bits each.
    ///   - ivCentral, ivPeripheral: IVc and IVp, 32 bits each.
    init(longTermKey: [UInt8], skdCentral: UInt64, skdPeripheral: UInt64, ivCentral: UInt32, ivPeripheral: UInt32) {
        precondition(longTermKey.count == 16, "a long term key has 16 octets")
        var skd: [UInt8] = []
        for value in [skdPeripheral, skdCentral] {
            for i in (0..<8).reversed() { skd.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
        }
        var iv: [UInt8] = []
        for value in [ivCentral, ivPeripheral] {
            for i in 0..<4 { iv.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
        }
        self.init(key: LLCrypto.aes(key: longTermKey.reversed(), skd), iv: iv)
    }

    /// The length of the MIC every encrypted PDU carries after its payload (Vol 6, Part E, 1).
    static let micLength = 4

    /// The 13-octet CCM nonce: the packet counter (39 bits, least significant octet first) with the direction bit
    /// as the top bit of its fifth octet, then the IV (Vol 6, Part E, 2).
    func nonce(counter: UInt64, fromCentral: Bool) -> [UInt8] {
        var nonce: [UInt8] = []
        nonce.reserveCapacity(13)
        for i in 0..<5 { nonce.append(UInt8(truncatingIfNeeded: counter >> (8 * UInt64(i)))) }
        nonce[4] = (nonce[4] & 0x7F) | (fromCentral ? 0x80 : 0)
        return nonce + iv
    }

    /// Encrypts one PDU's payload and appends its MIC: what goes on the air after the header, whose length field
    /// then counts the MIC too. `header` is the header's first octet; the AAD is that octet with NESN, SN and MD
    /// masked to zero (Vol 6, Part E, 2), so a retransmission's changed sequence bits change nothing.
    func seal(_ payload: [UInt8], header: UInt8, counter: UInt64, fromCentral: Bool) -> [UInt8] {
        let nonce = nonce(counter: counter, fromCentral: fromCentral)
        let tag = authenticate(payload, header: header, nonce: nonce)
        var out = crypt(payload, nonce: nonce)
        let s0 = block(counterBlock: 0, nonce: nonce)
        for i in 0..<Self.micLength { out.append(tag[i] ^ s0[i]) }
        return out
    }

    /// Decrypts a sealed payload and checks its MIC: the plaintext, or nil when the MIC does not match (a wrong key,
    /// counter, direction or header) or the payload is too short to hold one.
    func open(_ sealed: [UInt8], header: UInt8, counter: UInt64, fromCentral: Bool) -> [UInt8]? {
        guard sealed.count > Self.micLength else { return nil }
        let nonce = nonce(counter: counter, fromCentral: fromCentral)
        let plaintext = crypt(Array(sealed.dropLast(Self.micLength)), nonce: nonce)
        let tag = authenticate(plaintext, header: header, nonce: nonce)
        let s0 = block(counterBlock: 0, nonce: nonce)
        var difference: UInt8 = 0
        for (i, received) in sealed.suffix(Self.micLength).enumerated() { difference |= received ^ tag[i] ^ s0[i] }
        return difference == 0 ? plaintext : nil
    }

    // MARK: CCM (Vol 6, Part E, 2: RFC 3610 with M = 4, L = 2)

    /// The CBC-MAC over B0 (flags 0x49: AAD present, M = 4, L = 2; the nonce; the payload length), the one-octet AAD
    /// block and the payload in zero-padded blocks (Vol 6, Part E, 2).
    private func authenticate(_ payload: [UInt8], header: UInt8, nonce: [UInt8]) -> [UInt8] {
        var b0: [UInt8] = [0x49] + nonce
        b0.append(UInt8(payload.count >> 8))
        b0.append(UInt8(payload.count & 0xFF))
        var x = LLCrypto.aes(key: key, b0)
        // The AAD's length (1) in two octets, the masked header octet, zeros.
        var b1 = [UInt8](repeating: 0, count: 16)
        b1[1] = 1
        b1[2] = header & 0xE3
        for i in 0..<16 { x[i] ^= b1[i] }
        x = LLCrypto.aes(key: key, x)
        var offset = 0
        while offset < payload.count {
            for i in 0..<min(16, payload.count - offset) { x[i] ^= payload[offset + i] }
            x = LLCrypto.aes(key: key, x)
            offset += 16
        }
        return x
    }

    /// Counter mode from A1 on: the same operation encrypts and decrypts (Vol 6, Part E, 2).
    private func crypt(_ input: [UInt8], nonce: [UInt8]) -> [UInt8] {
        var out = input
        var offset = 0
        var counter = 1
        while offset < input.count {
            let s = block(counterBlock: counter, nonce: nonce)
            for i in 0..<min(16, input.count - offset) { out[offset + i] ^= s[i] }
            offset += 16
            counter += 1
        }
        return out
    }

    /// S_i = e(SK, A_i), with A_i = flags 0x01 (L = 2), the nonce and i in two octets, most significant first.
    private func block(counterBlock i: Int, nonce: [UInt8]) -> [UInt8] {
        LLCrypto.aes(key: key, [0x01] + nonce + [UInt8(i >> 8), UInt8(i & 0xFF)])
    }
}
