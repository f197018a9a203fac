import BLECore
import Crypto

/// LE Secure Connections' functions, built on AES-CMAC. Byte order as everywhere in ``SMPCrypto``: every value
/// least significant octet first, as SMP carries it; inside, each function lays out the specification's
/// message most significant octet first.
extension SMPCrypto {
    /// The confirm value generation function `f4` (Vol 3, Part H, 2.2.6): `AES-CMAC_X(U || V || Z)`.
    /// Ca is `f4(PKax, PKbx, Na, z)` and Cb is `f4(PKbx, PKax, Nb, z)`.
    ///
    /// - Parameters:
    ///   - u: a public key's X coordinate, 32 octets, as Pairing Public Key carries it.
    ///   - v: the other public key's X coordinate, 32 octets.
    ///   - x: the nonce that keys the MAC (Na or Nb), 16 octets, as Pairing Random carries it.
    ///   - z: 0 for Just Works and Numeric Comparison; `0x80 | bit` for each Passkey Entry round.
    /// - Returns: the 16-octet confirm value, as Pairing Confirm carries it.
    public static func f4(u: [UInt8], v: [UInt8], x: [UInt8], z: UInt8) -> [UInt8] {
        precondition(u.count == 32 && v.count == 32 && x.count == 16, "f4 takes U and V of 32 octets, X of 16")
        return cmac(key: x.reversed(), message: u.reversed() + v.reversed() + [z]).reversed()
    }

    /// The key generation function `f5` (Vol 3, Part H, 2.2.7): the MacKey and the LTK from the DHKey.
    ///
    /// `T = AES-CMAC_SALT(W)`; then `AES-CMAC_T(Counter || keyID || N1 || N2 || A1 || A2 || Length)` with
    /// keyID "btle" and Length 256, Counter 0 giving the MacKey (the result's most significant half) and
    /// Counter 1 the LTK.
    ///
    /// - Parameters:
    ///   - w: the DHKey, 32 octets (``SMPKeyPair/dhKey(with:)``).
    ///   - n1: Na, 16 octets.
    ///   - n2: Nb, 16 octets.
    ///   - a1: the initiator's address on the link; its type (public or random) is part of the input.
    ///   - a2: the responder's.
    /// - Returns: the MacKey (for `f6`) and the LTK, 16 octets each; the LTK as HCI LE Enable Encryption takes it.
    public static func f5(
        w: [UInt8], n1: [UInt8], n2: [UInt8], a1: BluetoothAddress, a2: BluetoothAddress
    ) -> (macKey: [UInt8], longTermKey: [UInt8]) {
        precondition(w.count == 32 && n1.count == 16 && n2.count == 16, "f5 takes W of 32 octets, N1 and N2 of 16")
        let t = cmac(key: f5Salt, message: w.reversed())
        // Counter (set below), keyID "btle", N1, N2, A1, A2, Length = 256 bits.
        var m: [UInt8] = [0x00, 0x62, 0x74, 0x6C, 0x65] + n1.reversed() + n2.reversed()
        m += addressOctets(a1) + addressOctets(a2) + [0x01, 0x00]
        let macKey = cmac(key: t, message: m)
        m[0] = 0x01
        let longTermKey = cmac(key: t, message: m)
        return (macKey.reversed(), longTermKey.reversed())
    }

    /// The check value generation function `f6` (Vol 3, Part H, 2.2.8):
    /// `AES-CMAC_W(N1 || N2 || R || IOcap || A1 || A2)`. Ea is `f6(MacKey, Na, Nb, rb, IOcapA, A, B)` and
    /// Eb is `f6(MacKey, Nb, Na, ra, IOcapB, B, A)`.
    ///
    /// - Parameters:
    ///   - w: the MacKey from `f5`, 16 octets.
    ///   - n1: 16 octets.
    ///   - n2: 16 octets.
    ///   - r: 16 octets: the passkey in Passkey Entry (as a 128-bit number), the peer's OOB random in OOB, zero
    ///     otherwise.
    ///   - ioCap: the AuthReq, OOB data flag and IO capability of the Pairing Request (IOcapA) or Response
    ///     (IOcapB).
    ///   - a1: the address of the side whose check this is, with its type.
    ///   - a2: the other side's address.
    /// - Returns: the 16-octet check value, as Pairing DHKey Check carries it.
    public static func f6(
        w: [UInt8], n1: [UInt8], n2: [UInt8], r: [UInt8], ioCap: IOCap, a1: BluetoothAddress, a2: BluetoothAddress
    ) -> [UInt8] {
        precondition(w.count == 16 && n1.count == 16 && n2.count == 16 && r.count == 16, "f6 takes 16-octet values")
        var m: [UInt8] = n1.reversed() + n2.reversed() + r.reversed()
        m += [ioCap.authReq, ioCap.oobDataFlag, ioCap.ioCapability]
        m += addressOctets(a1) + addressOctets(a2)
        return cmac(key: w.reversed(), message: m).reversed()
    }

    /// The numeric comparison value function `g2` (Vol 3, Part H, 2.2.9): `AES-CMAC_X(U || V || Y) mod 2^32`.
    /// Both sides compute `g2(PKax, PKbx, Na, Nb)` and show its six least significant decimal digits
    /// (`g2(...) % 1_000_000`).
    ///
    /// - Parameters:
    ///   - u: PKax, 32 octets, as Pairing Public Key carries it.
    ///   - v: PKbx, 32 octets.
    ///   - x: Na, 16 octets, as Pairing Random carries it.
    ///   - y: Nb, 16 octets.
    public static func g2(u: [UInt8], v: [UInt8], x: [UInt8], y: [UInt8]) -> UInt32 {
        precondition(u.count == 32 && v.count == 32 && x.count == 16 && y.count == 16, "g2 takes 32, 32, 16, 16")
        let mac = cmac(key: x.reversed(), message: u.reversed() + v.reversed() + y.reversed())
        // The 32 least significant bits: the last four octets, most significant first.
        return mac.suffix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The IOcap input of `f6` (Vol 3, Part H, 2.2.8): AuthReq (its most significant octet), the OOB data flag
    /// and IO Capability (its least significant), as the Pairing Request or Response carried them. Kept as
    /// the raw octets, so a reserved value the peer sent goes into the check exactly as the peer used it.
    public struct IOCap: Hashable, Sendable {
        public var authReq: UInt8
        public var oobDataFlag: UInt8
        public var ioCapability: UInt8

        public init(authReq: UInt8, oobDataFlag: UInt8, ioCapability: UInt8) {
            self.authReq = authReq
            self.oobDataFlag = oobDataFlag
            self.ioCapability = ioCapability
        }

        /// From a Pairing Request or Response's 7 octets, code first (IO Capability, OOB data flag and AuthReq
        /// follow the code in that order: IOcap least significant octet first). `nil` for anything else.
        public init?(pairingCommand octets: [UInt8]) {
            guard octets.count == 7, octets[0] == 0x01 || octets[0] == 0x02 else { return nil }
            self.init(authReq: octets[3], oobDataFlag: octets[2], ioCapability: octets[1])
        }

        /// From decoded features (a reserved OOB data flag value was already read as "absent").
        public init(_ features: PairingFeatures) {
            self.init(
                authReq: features.authentication.rawValue, oobDataFlag: features.oobDataPresent ? 0x01 : 0x00,
                ioCapability: features.ioCapability.rawValue)
        }
    }

    /// f5's SALT, 0x6C888391AAF5A53860370BDB5A6083BE (Vol 3, Part H, 2.2.7), most significant octet first.
    static let f5Salt: [UInt8] = [
        0x6C, 0x88, 0x83, 0x91, 0xAA, 0xF5, 0xA5, 0x38, 0x60, 0x37, 0x0B, 0xDB, 0x5A, 0x60, 0x83, 0xBE,
    ]

    /// A1 or A2 of `f5` and `f6`: the address type octet (0x00 public, 0x01 random) then the 48-bit address,
    /// most significant octet first.
    static func addressOctets(_ address: BluetoothAddress) -> [UInt8] {
        [address.type.isRandom ? 0x01 : 0x00] + address.bytes
    }
}

/// A P-256 public key as Pairing Public Key carries it (Vol 3, Part H, 3.5.6): X then Y, each 32 octets,
/// least significant octet first. A value of this type is always a point on the curve: the initializer
/// refuses any other. That check is the defence against the invalid public key (invalid curve) attack, in
/// which a peer sends a point off the curve to learn the private key from the DHKey it leads to; a received key
/// that is not a valid point must not be used (Vol 3, Part H, 2.3.5.6.1).
public struct SMPPublicKey: Hashable, Sendable, CustomStringConvertible {
    /// The X coordinate, 32 octets, least significant first.
    public let x: [UInt8]
    /// The Y coordinate, 32 octets, least significant first.
    public let y: [UInt8]
    let key: P256.KeyAgreement.PublicKey

    /// The key with coordinates `x` and `y` (32 octets each, least significant first), or `nil` when they are
    /// not a point on P-256: a coordinate of another length, a coordinate not below the field prime, or a
    /// point off the curve (the point at infinity has no such coordinates).
    public init?(x: [UInt8], y: [UInt8]) {
        guard x.count == 32, y.count == 32,
            let key = try? P256.KeyAgreement.PublicKey(rawRepresentation: Array(x.reversed()) + Array(y.reversed()))
        else { return nil }
        self.init(key: key)
    }

    init(key: P256.KeyAgreement.PublicKey) {
        // swift-crypto's raw representation is X then Y, each most significant first.
        let raw = Array(key.rawRepresentation)
        self.x = raw[0..<32].reversed()
        self.y = raw[32..<64].reversed()
        self.key = key
    }

    /// The debug public key (Vol 3, Part H, 2.3.5.6.1), the public half of ``SMPKeyPair/debug``.
    public static let debug: SMPPublicKey = {
        let x = SMPCrypto.leastSignificantFirst(
            "20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
        let y = SMPCrypto.leastSignificantFirst(
            "dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
        // A point on the curve: always accepted.
        guard let key = SMPPublicKey(x: x, y: y) else { preconditionFailure("the debug public key") }
        return key
    }()

    /// Whether this is the debug public key (Vol 3, Part H, 2.3.5.6.1). Its private key is published, so anyone
    /// who records the pairing can compute the DHKey and every key after it: a host that is not being debugged
    /// should refuse a peer that sends it.
    public var isDebugKey: Bool { self == Self.debug }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.x == rhs.x && lhs.y == rhs.y }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(x)
        hasher.combine(y)
    }

    /// X and Y most significant first, as the specification prints keys.
    public var description: String {
        "P-256 public key X \(x.reversed().hexString) Y \(y.reversed().hexString)"
    }
}

/// A P-256 key pair for LE Secure Connections (Vol 3, Part H, 2.3.5.6.1), made from private key octets the
/// caller supplies; this layer draws no random numbers.
public struct SMPKeyPair: Hashable, Sendable, CustomStringConvertible {
    /// The public key, to send in Pairing Public Key.
    public let publicKey: SMPPublicKey
    private let privateKey: P256.KeyAgreement.PrivateKey

    /// The key pair whose private key is `privateKey`: 32 octets, least significant first (for a fresh key, 32
    /// random octets). `nil` when the number is not a valid private key, that is zero or not below the curve's
    /// order n; 32 random octets are that with probability below 2^-32, and the caller then draws again.
    public init?(privateKey: [UInt8]) {
        guard privateKey.count == 32 else { return nil }
        let scalar = Array(privateKey.reversed())
        guard scalar.contains(where: { $0 != 0 }), scalar.lexicographicallyPrecedes(Self.order),
            let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: scalar)
        else { return nil }
        self.privateKey = key
        self.publicKey = SMPPublicKey(key: key.publicKey)
    }

    /// The DHKey shared with the holder of `peer` (Vol 3, Part H, 2.3.5.6.1): the X coordinate of the product
    /// of this private key and the peer's point, 32 octets, least significant first (`W` of `f5`). `nil` only if
    /// swift-crypto refuses the computation, which it does not for a point that passed ``SMPPublicKey``'s
    /// check; the caller fails the pairing then.
    ///
    /// A peer that sends this pair's own public key back is not caught here; the pairing machine refuses it.
    public func dhKey(with peer: SMPPublicKey) -> [UInt8]? {
        guard let secret = try? privateKey.sharedSecretFromKeyAgreement(with: peer.key) else { return nil }
        return secret.withUnsafeBytes { Array($0) }.reversed()
    }

    /// The debug key pair (Vol 3, Part H, 2.3.5.6.1), used only in debug mode so that air traces can be
    /// decrypted. Private key 0x3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd.
    public static let debug: SMPKeyPair = {
        let octets = SMPCrypto.leastSignificantFirst(
            "3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd")
        // A constant between 1 and n - 1: always accepted.
        guard let pair = SMPKeyPair(privateKey: octets) else { preconditionFailure("the debug private key") }
        return pair
    }()

    /// The order n of P-256's base point, most significant octet first (FIPS 186-4, D.1.2.3).
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// Two pairs are the same when their public keys are: the public key determines the private one.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.publicKey == rhs.publicKey }

    public func hash(into hasher: inout Hasher) { hasher.combine(publicKey) }

    /// The public key only; the private key is never printed.
    public var description: String { "SMPKeyPair(\(publicKey))" }
}
