import BLECore
import Testing

@testable import BLESMP

/// The Security Manager's toolbox against the specification's sample data (Core Spec 5.4, Vol 3, Part H, 2.2
/// and Appendix D; the P-256 data of Vol 2, Part G, 7.1.2).
///
/// The specification prints every value most significant octet first; `wire(_:)` turns a printed value into
/// the order this API and SMP's PDUs use, so each sample below reads exactly as the spec prints it.
@Suite struct SMPCryptoTests {
    /// A value as the specification prints it (hex, most significant octet first, spaces ignored), in SMP's
    /// wire order: least significant octet first.
    static func wire(_ printed: String) -> [UInt8] {
        let hex = Array(printed.filter { !$0.isWhitespace })
        return stride(from: 0, to: hex.count, by: 2).map { UInt8(String(hex[$0...$0 + 1]), radix: 16)! }.reversed()
    }

    // MARK: e (2.2.1)

    /// AES-128 blocks: key, plaintext, ciphertext.
    static let blocks: [(String, String, String)] = [
        // FIPS 197, Appendix C.1.
        (
            "00010203 04050607 08090a0b 0c0d0e0f", "00112233 44556677 8899aabb ccddeeff",
            "69c4e0d8 6a7b0430 d8cdb780 70b4c55a"
        ),
        // Appendix D.1 (RFC 4493, 4): the subkey step, AES-128(K, 0).
        (
            "2b7e1516 28aed2a6 abf71588 09cf4f3c", "00000000 00000000 00000000 00000000",
            "7df76b0c 1ab899b3 3e42f047 b91b546f"
        ),
        // 2.2.3's c1 example: e(k, r XOR p1) with k = 0.
        (
            "00000000 00000000 00000000 00000000", "5283dd21 56ae6d09 6498274e c7712ee1",
            "02c7aa2a 9857ac86 6ff91232 df0e3c95"
        ),
        // Appendix D.7: e(IRK, padding || prand).
        (
            "ec0234a3 57c8ad05 341010a6 0a397d9b", "00000000 00000000 00000000 00708194",
            "159d5fb7 2ebe2311 a48c1bdc c40dfbaa"
        ),
    ]

    @Test(arguments: blocks)
    func eIsAES128(key: String, plaintext: String, ciphertext: String) {
        #expect(SMPCrypto.e(key: Self.wire(key), plaintext: Self.wire(plaintext)) == Self.wire(ciphertext))
    }

    @Test func eTakesAndGivesLeastSignificantOctetFirst() {
        // FIPS 197 C.1 as HCI LE Encrypt carries it: key 0x000102...0f is sent 0f 0e ... 00.
        let key: [UInt8] = (0..<16).reversed()
        let plaintext: [UInt8] = [
            0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0xAA, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00,
        ]
        let ciphertext = SMPCrypto.e(key: key, plaintext: plaintext)
        #expect(ciphertext.first == 0x5A)
        #expect(ciphertext.last == 0x69)
    }

    // MARK: AES-CMAC (2.2.5, Appendix D.1: RFC 4493's examples)

    static let cmacKey = "2b7e1516 28aed2a6 abf71588 09cf4f3c"
    static let cmacExamples: [(String, String)] = [
        ("", "bb1d6929 e9593728 7fa37d12 9b756746"),
        ("6bc1bee2 2e409f96 e93d7e11 7393172a", "070a16b4 6b4d4144 f79bdd9d d04a287c"),
        (
            "6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 30c81c46 a35ce411",
            "dfa66747 de9ae630 30ca3261 1497c827"
        ),
        (
            "6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51"
                + " 30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710",
            "51f0bebf 7e3b9d92 fc497417 79363cfe"
        ),
    ]

    @Test(arguments: cmacExamples)
    func aesCMACMatchesRFC4493(message: String, mac: String) {
        #expect(SMPCrypto.aesCMAC(key: Self.wire(Self.cmacKey), message: Self.wire(message)) == Self.wire(mac))
    }

    // MARK: Legacy pairing (2.2.3, 2.2.4)

    /// 2.2.3's example: k = 0, iat = 1 (random), ia = A1A2A3A4A5A6, rat = 0 (public), ra = B1B2B3B4B5B6.
    @Test func c1MatchesTheSpecificationsExample() throws {
        let preq: [UInt8] = Self.wire("07071000000101")
        let pres: [UInt8] = Self.wire("05000800000302")
        // They are real commands as sent: code first.
        #expect(try SMPPDU(decoding: preq).code == 0x01)
        #expect(try SMPPDU(decoding: pres).code == 0x02)
        var ia = try #require(BluetoothAddress(string: "A1:A2:A3:A4:A5:A6", type: .randomDevice))
        let ra = try #require(BluetoothAddress(string: "B1:B2:B3:B4:B5:B6", type: .publicDevice))
        let confirm = SMPCrypto.c1(
            tk: [UInt8](repeating: 0, count: 16), random: Self.wire("5783D52156AD6F0E6388274EC6702EE0"),
            preq: preq, pres: pres, initiatorAddress: ia, responderAddress: ra)
        #expect(confirm == Self.wire("1e1e3fef878988ead2a74dc5bef13b86"))

        // Each input counts: the other address type, or another random, gives another value.
        ia.type = .publicDevice
        let other = SMPCrypto.c1(
            tk: [UInt8](repeating: 0, count: 16), random: Self.wire("5783D52156AD6F0E6388274EC6702EE0"),
            preq: preq, pres: pres, initiatorAddress: ia, responderAddress: ra)
        #expect(other != confirm)
    }

    /// 2.2.4's example: k = 0; r' = 0x1122334455667788 99AABBCCDDEEFF00.
    @Test func s1MatchesTheSpecificationsExample() {
        let stk = SMPCrypto.s1(
            tk: [UInt8](repeating: 0, count: 16), r1: Self.wire("000F0E0D0C0B0A091122334455667788"),
            r2: Self.wire("010203040506070899AABBCCDDEEFF00"))
        #expect(stk == Self.wire("9a1fe1f0e8b0f49b5b4216ae796da062"))
        #expect(
            stk
                == SMPCrypto.e(
                    key: [UInt8](repeating: 0, count: 16), plaintext: Self.wire("1122334455667788 99AABBCCDDEEFF00")))
    }

    // MARK: Secure Connections (2.2.6–2.2.9, Appendix D.2–D.5)

    static let u = "20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6"
    /// Appendix D's V; the same number as P-256 data set 1's private key B, not a public key's X coordinate.
    /// f4 and g2 do not care.
    static let v = "55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd"
    static let n1 = "d5cb8454 d177733e ffffb2ec 712baeab"
    static let n2 = "a6e8e7cc 25a75f6e 216583f7 ff3dc4cf"
    static let dhKey = "ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698"
    static let macKey = "2965f176 a1084a02 fd3f6a20 ce636e20"
    /// A1 = 00 561237 37bfce and A2 = 00 a71370 2dcfc1: public addresses.
    static let a1 = BluetoothAddress(string: "56:12:37:37:BF:CE")!
    static let a2 = BluetoothAddress(string: "A7:13:70:2D:CF:C1")!

    /// D.2.
    @Test func f4MatchesAppendixD2() {
        let confirm = SMPCrypto.f4(u: Self.wire(Self.u), v: Self.wire(Self.v), x: Self.wire(Self.n1), z: 0x00)
        #expect(confirm == Self.wire("f2c916f1 07a9bd1c f1eda1be a974872d"))
    }

    /// D.3, with its intermediate T = AES-CMAC_SALT(W).
    @Test func f5MatchesAppendixD3() {
        let t = SMPCrypto.aesCMAC(
            key: Self.wire("6C888391 AAF5A538 60370BDB 5A6083BE"), message: Self.wire(Self.dhKey))
        #expect(t == Self.wire("3c128f20 de883288 97624bdb 8dac6989"))

        let keys = SMPCrypto.f5(
            w: Self.wire(Self.dhKey), n1: Self.wire(Self.n1), n2: Self.wire(Self.n2), a1: Self.a1, a2: Self.a2)
        #expect(keys.macKey == Self.wire(Self.macKey))
        #expect(keys.longTermKey == Self.wire("69867911 69d7cd23 980522b5 94750a38"))
    }

    @Test func f5TakesTheAddressTypes() {
        var random = Self.a1
        random.type = .randomDevice
        let keys = SMPCrypto.f5(
            w: Self.wire(Self.dhKey), n1: Self.wire(Self.n1), n2: Self.wire(Self.n2), a1: random, a2: Self.a2)
        #expect(keys.macKey != Self.wire(Self.macKey))
    }

    /// D.4: R = 12a3343b..., IOcap = 0x010102 (AuthReq 0x01, OOB data present, KeyboardOnly).
    @Test func f6MatchesAppendixD4() {
        let ioCap = SMPCrypto.IOCap(authReq: 0x01, oobDataFlag: 0x01, ioCapability: 0x02)
        let check = SMPCrypto.f6(
            w: Self.wire(Self.macKey), n1: Self.wire(Self.n1), n2: Self.wire(Self.n2),
            r: Self.wire("12a3343b b453bb54 08da42d2 0c2d0fc8"), ioCap: ioCap, a1: Self.a1, a2: Self.a2)
        #expect(check == Self.wire("e3c47398 9cd0e8c5 d26c0b09 da958f61"))
    }

    /// IOcap read from a Pairing Request as it travels: code, IO Capability, OOB data flag, AuthReq, ...
    @Test func ioCapComesFromThePairingCommandsOctets() {
        let request: [UInt8] = [0x01, 0x02, 0x01, 0x01, 0x10, 0x00, 0x00]
        #expect(
            SMPCrypto.IOCap(pairingCommand: request)
                == SMPCrypto.IOCap(authReq: 0x01, oobDataFlag: 0x01, ioCapability: 0x02))
        #expect(SMPCrypto.IOCap(pairingCommand: [0x03] + request.dropFirst()) == nil)
        #expect(SMPCrypto.IOCap(pairingCommand: Array(request.prefix(6))) == nil)
        let features = PairingFeatures(
            ioCapability: .keyboardOnly, oobDataPresent: true, authentication: .bonding, initiatorKeys: [],
            responderKeys: [])
        #expect(SMPCrypto.IOCap(features) == SMPCrypto.IOCap(pairingCommand: request))
    }

    /// D.5: the 32 least significant bits of 1536d18d e3d20df9 9b7044c1 2f9ed5ba.
    @Test func g2MatchesAppendixD5() {
        let value = SMPCrypto.g2(
            u: Self.wire(Self.u), v: Self.wire(Self.v), x: Self.wire(Self.n1), y: Self.wire(Self.n2))
        #expect(value == 0x2F9E_D5BA)
        // What Numeric Comparison shows: the six least significant decimal digits of 798_938_554.
        #expect(value % 1_000_000 == 938_554)
    }

    // MARK: ah (2.2.2, Appendix D.7)

    static let irk = "ec0234a3 57c8ad05 341010a6 0a397d9b"

    @Test func ahMatchesAppendixD7() {
        #expect(SMPCrypto.ah(irk: Self.wire(Self.irk), prand: Self.wire("708194")) == Self.wire("0dfbaa"))
    }

    /// D.7's values as an address: prand 0x708194 in the upper half, hash 0x0dfbaa in the lower.
    @Test func aResolvablePrivateAddressResolvesWithItsIRK() {
        let address = BluetoothAddress(string: "70:81:94:0D:FB:AA", type: .randomDevice)!
        #expect(address.randomKind == .resolvablePrivate)
        #expect(SMPCrypto.resolves(address, irk: Self.wire(Self.irk)))
        // Another hash, another IRK, or a public address of the same octets: no.
        #expect(
            !SMPCrypto.resolves(
                BluetoothAddress(string: "70:81:94:0D:FB:AB", type: .randomDevice)!, irk: Self.wire(Self.irk)))
        #expect(!SMPCrypto.resolves(address, irk: [UInt8](repeating: 0, count: 16)))
        #expect(!SMPCrypto.resolves(BluetoothAddress(string: "70:81:94:0D:FB:AA")!, irk: Self.wire(Self.irk)))

        // Made from D.7's prand (given least significant first), the same address comes back.
        #expect(
            SMPCrypto.resolvablePrivateAddress(irk: Self.wire(Self.irk), randomBits: Self.wire("708194")) == address)
        // prand's two top bits are set to 0b01; its 22 random bits may be neither all zeros nor all ones.
        let made = SMPCrypto.resolvablePrivateAddress(irk: Self.wire(Self.irk), randomBits: [0x12, 0x34, 0xF6])
        #expect(made?.bytes.first == 0x76)
        #expect(made.map { SMPCrypto.resolves($0, irk: Self.wire(Self.irk)) } == true)
        #expect(SMPCrypto.resolvablePrivateAddress(irk: Self.wire(Self.irk), randomBits: [0, 0, 0xC0]) == nil)
        #expect(SMPCrypto.resolvablePrivateAddress(irk: Self.wire(Self.irk), randomBits: [0xFF, 0xFF, 0x3F]) == nil)
    }

    // MARK: P-256 (2.3.5.6.1; Vol 2, Part G, 7.1.2)

    /// Private A, private B, public A (X, Y), public B (X, Y), DHKey. Data set 1's A is the debug key pair.
    static let p256DataSets: [[String]] = [
        [
            "3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd",
            "55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd",
            "20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6",
            "dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b",
            "1ea1f0f0 1faf1d96 09592284 f19e4c00 47b58afd 8615a69f 559077b2 2faaa190",
            "4c55f33e 429dad37 7356703a 9ab85160 472d1130 e28e3676 5f89aff9 15b1214a",
            "ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698",
        ],
        [
            "06a51669 3c9aa31a 6084545d 0c5db641 b48572b9 7203ddff b7ac73f7 d0457663",
            "529aa067 0d72cd64 97502ed4 73502b03 7e8803b5 c60829a5 a3caa219 505530ba",
            "2c31a47b 5779809e f44cb5ea af5c3e43 d5f8faad 4a8794cb 987e9b03 745c78dd",
            "91951218 3898dfbe cd52e240 8e43871f d0211091 17bd3ed4 eaf84377 43715d4f",
            "f465e43f f23d3f1b 9dc7dfc0 4da87581 84dbc966 204796ec cf0d6cf5 e16500cc",
            "0201d048 bcbbd899 eeefc424 164e33c2 01c2b010 ca6b4d43 a8a155ca d8ecb279",
            "ab85843a 2f6d883f 62e5684b 38e30733 5fe6e194 5ecd1960 4105c6f2 3221eb69",
        ],
    ]

    @Test(arguments: p256DataSets)
    func keyPairsAndDHKeyMatchTheP256SampleData(set: [String]) throws {
        let a = try #require(SMPKeyPair(privateKey: Self.wire(set[0])))
        let b = try #require(SMPKeyPair(privateKey: Self.wire(set[1])))
        #expect(a.publicKey.x == Self.wire(set[2]))
        #expect(a.publicKey.y == Self.wire(set[3]))
        #expect(b.publicKey.x == Self.wire(set[4]))
        #expect(b.publicKey.y == Self.wire(set[5]))
        // Each side, from the other's public key as received.
        let publicA = try #require(SMPPublicKey(x: Self.wire(set[2]), y: Self.wire(set[3])))
        let publicB = try #require(SMPPublicKey(x: Self.wire(set[4]), y: Self.wire(set[5])))
        #expect(a.dhKey(with: publicB) == Self.wire(set[6]))
        #expect(b.dhKey(with: publicA) == Self.wire(set[6]))
    }

    /// 3.5.6: Pairing Public Key carries X then Y, each least significant octet first.
    @Test func thePublicKeyTravelsInWireOrder() {
        let key = SMPPublicKey.debug
        let pdu = SMPPDU.pairingPublicKey(x: key.x, y: key.y).encoded
        #expect(pdu.count == 65)
        // X = 0x20b003d2 ... 0e359de6 and Y = 0xdc809c49 ... 1589d28b.
        #expect(Array(pdu[0...4]) == [0x0C, 0xE6, 0x9D, 0x35, 0x0E])
        #expect(pdu[32] == 0x20)
        #expect(Array(pdu[33...34]) == [0x8B, 0xD2])
        #expect(pdu[64] == 0xDC)
    }

    /// 2.3.5.6.1: the debug key pair, and a peer's debug key recognised.
    @Test func theDebugKeyIsRecognised() throws {
        #expect(SMPKeyPair.debug.publicKey == SMPPublicKey.debug)
        #expect(SMPPublicKey.debug.x == Self.wire(Self.u))
        let received = try #require(SMPPublicKey(x: SMPPublicKey.debug.x, y: SMPPublicKey.debug.y))
        #expect(received.isDebugKey)
        let other = try #require(SMPKeyPair(privateKey: Self.wire(Self.p256DataSets[1][0])))
        #expect(!other.publicKey.isDebugKey)
        #expect(!"\(SMPKeyPair.debug)".contains("3f49f6d4"))
    }

    /// 2.3.5.6.1 (the invalid public key attack): a point off the curve, or coordinates that are not a
    /// point at all, are refused before any DHKey is computed.
    @Test func anInvalidPublicKeyIsRefused() {
        let x = SMPPublicKey.debug.x
        var y = SMPPublicKey.debug.y
        #expect(SMPPublicKey(x: x, y: y) != nil)
        y[0] ^= 0x01
        #expect(SMPPublicKey(x: x, y: y) == nil)
        let zero = [UInt8](repeating: 0, count: 32)
        #expect(SMPPublicKey(x: zero, y: zero) == nil)
        #expect(SMPPublicKey(x: [UInt8](repeating: 0xFF, count: 32), y: [UInt8](repeating: 0xFF, count: 32)) == nil)
        // (0, sqrt(b)) is on the curve; the same point with X written as 0 + p is not accepted: a coordinate
        // must be below the field prime p.
        let yForZero = Self.wire("66485c78 0e2f83d7 2433bd5d 84a06bb6 541c2af3 1dae8717 28bf856a 174f93f4")
        #expect(SMPPublicKey(x: zero, y: yForZero) != nil)
        let p = Self.wire("ffffffff 00000001 00000000 00000000 00000000 ffffffff ffffffff ffffffff")
        #expect(SMPPublicKey(x: p, y: yForZero) == nil)
        // An X with a Y from another point.
        #expect(SMPPublicKey(x: x, y: Self.wire(Self.p256DataSets[0][5])) == nil)
        #expect(SMPPublicKey(x: Array(x.dropLast()), y: SMPPublicKey.debug.y) == nil)
        #expect(SMPPublicKey(x: x, y: SMPPublicKey.debug.y + [0]) == nil)
    }

    /// A private key is a number from 1 to n - 1.
    @Test func aPrivateKeyOutsideOneToNMinusOneIsRefused() {
        let n = "ffffffff 00000000 ffffffff ffffffff bce6faad a7179e84 f3b9cac2 fc632551"
        let nMinusOne = "ffffffff 00000000 ffffffff ffffffff bce6faad a7179e84 f3b9cac2 fc632550"
        #expect(SMPKeyPair(privateKey: [UInt8](repeating: 0, count: 32)) == nil)
        #expect(SMPKeyPair(privateKey: Self.wire(n)) == nil)
        #expect(SMPKeyPair(privateKey: [UInt8](repeating: 0xFF, count: 32)) == nil)
        #expect(SMPKeyPair(privateKey: Self.wire(nMinusOne)) != nil)
        #expect(SMPKeyPair(privateKey: [1] + [UInt8](repeating: 0, count: 31)) != nil)
        #expect(SMPKeyPair(privateKey: [UInt8](repeating: 1, count: 31)) == nil)
    }
}
