import BLECore
import Crypto
import CryptoExtras

/// The Security Manager's cryptographic toolbox (Core Spec 5.4, Vol 3, Part H, 2.2): the block function `e`,
/// AES-CMAC and the random address hash `ah` here; `c1` and `s1` for LE legacy pairing in
/// SMPCrypto+Legacy.swift; `f4`, `f5`, `f6`, `g2` and the P-256 keys for LE Secure Connections in
/// SMPCrypto+SecureConnections.swift. AES comes from swift-crypto; nothing here draws random numbers.
///
/// ## Byte order
///
/// The specification writes every toolbox value as a number, most significant octet first, while SMP PDUs
/// (and HCI) carry the same values least significant octet first. **Every multi-octet value this API takes or
/// returns is in SMP's wire order, least significant octet first**: a Pairing Random, a Pairing Confirm, a
/// public key coordinate or a DHKey Check goes in and comes out exactly as it travels, and a key comes out as
/// HCI LE Enable Encryption and Encryption Information carry it. Addresses are `BluetoothAddress` values. The
/// functions turn values around to the specification's order only inside, where AES and AES-CMAC run.
/// A value of the wrong length is a programming error and traps (the PDU decoder has already checked the
/// lengths of everything a peer sends).
///
/// So the spec's sample `r = 0x5783D52156AD6F0E6388274EC6702EE0` is passed as
/// `[0xE0, 0x2E, 0x70, 0xC6, ..., 0x83, 0x57]`.
public enum SMPCrypto {
    /// The security function `e`: AES-128 encryption of one block (Vol 3, Part H, 2.2.1). The same operation
    /// as the HCI LE Encrypt command, in the same order: `key` and `plaintext` (16 octets each) and the
    /// result, least significant octet first.
    public static func e(key: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        precondition(key.count == 16 && plaintext.count == 16, "e takes a 16-octet key and a 16-octet block")
        return aes(key: key.reversed(), block: plaintext.reversed()).reversed()
    }

    /// AES-CMAC with a 128-bit key, as the toolbox defines it on numbers (Vol 3, Part H, 2.2.5; RFC 4493).
    /// `key` (16 octets), `message` (any length) and the 16-octet MAC are least significant octet first:
    /// the message as the specification's number `m`, turned around whole. (RFC 4493 works on byte strings
    /// in their written order; its examples, which Appendix D.1 repeats, pass here with the key, the message
    /// and the MAC each reversed.)
    public static func aesCMAC(key: [UInt8], message: [UInt8]) -> [UInt8] {
        precondition(key.count == 16, "AES-CMAC takes a 16-octet key")
        return cmac(key: key.reversed(), message: message.reversed()).reversed()
    }

    /// The random address hash `ah` (Vol 3, Part H, 2.2.2): `e(k, padding || r) mod 2^24`.
    ///
    /// - Parameters:
    ///   - irk: the Identity Resolving Key, 16 octets, least significant first (as Identity Information
    ///     carries it).
    ///   - prand: the 24-bit random part, 3 octets, least significant first (as it lies in the upper half of a
    ///     resolvable private address sent little-endian).
    /// - Returns: the 24-bit hash, 3 octets, least significant first.
    public static func ah(irk: [UInt8], prand: [UInt8]) -> [UInt8] {
        precondition(irk.count == 16 && prand.count == 3, "ah takes a 16-octet IRK and a 3-octet prand")
        // r' = 104 zero bits || r: little-endian, r's octets come first.
        let encrypted = e(key: irk, plaintext: prand + [UInt8](repeating: 0, count: 13))
        return Array(encrypted.prefix(3))
    }

    /// Whether `address` is a resolvable private address generated from `irk` (Core Spec 5.4, Vol 6, Part B,
    /// 1.3.2.3): its 24 least significant bits are `ah(irk, prand)` of its 24 most significant bits.
    /// `irk` is 16 octets, least significant first. An address that is not a resolvable private address
    /// (public, static, non-resolvable) never resolves.
    public static func resolves(_ address: BluetoothAddress, irk: [UInt8]) -> Bool {
        guard address.randomKind == .resolvablePrivate else { return false }
        let wire = address.littleEndianBytes
        // Little-endian: the hash is the first three octets, prand the last three.
        return ah(irk: irk, prand: Array(wire[3..<6])) == Array(wire[0..<3])
    }

    /// The resolvable private address for `irk` and a caller's 24 random bits (Vol 6, Part B, 1.3.2.2).
    ///
    /// - Parameters:
    ///   - irk: the 16-octet Identity Resolving Key, least significant first.
    ///   - randomBits: 3 octets of randomness, least significant first; the two most significant bits
    ///     of the last octet are overwritten with `0b01`, which marks the address resolvable. The rest must not
    ///     be all zeros or all ones, or the address is invalid; this returns `nil` then.
    public static func resolvablePrivateAddress(irk: [UInt8], randomBits: [UInt8]) -> BluetoothAddress? {
        precondition(randomBits.count == 3, "a resolvable private address takes 3 random octets")
        let random22 = [randomBits[0], randomBits[1], randomBits[2] & 0x3F]
        guard random22 != [0, 0, 0], random22 != [0xFF, 0xFF, 0x3F] else { return nil }
        let prand = [random22[0], random22[1], random22[2] | 0x40]
        return BluetoothAddress(littleEndian: ah(irk: irk, prand: prand) + prand, type: .randomDevice)
    }

    // MARK: In the specification's order

    // Below, every value is most significant octet first, as the specification prints it and as AES and
    // RFC 4493 take their byte strings.

    /// AES-128 on one block, swift-crypto's block function (FIPS 197 order: octet 0 is the most significant).
    static func aes(key: [UInt8], block: [UInt8]) -> [UInt8] {
        var out = block
        do {
            try AES.permute(&out, key: SymmetricKey(data: key))
        } catch {
            // `permute` refuses only a block that is not 16 octets or a key that is not 16, 24 or 32 octets;
            // every caller passes 16 and 16.
            preconditionFailure("AES-128 refused a 16-octet key and block: \(error)")
        }
        return out
    }

    /// AES-CMAC (RFC 4493) on byte strings in their written order.
    static func cmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var mac: AES.CMAC
        do {
            mac = try AES.CMAC(key: SymmetricKey(data: key))
        } catch {
            // Only a key of a length AES does not take is refused; every caller passes 16 octets.
            preconditionFailure("AES-CMAC refused a 16-octet key: \(error)")
        }
        mac.update(data: message)
        return Array(mac.finalize())
    }

    /// The octets of a hexadecimal number written most significant first (spaces allowed), turned around to
    /// least significant first: how the spec's printed constants become this API's values.
    static func leastSignificantFirst(_ hex: String) -> [UInt8] {
        let digits = hex.filter { !$0.isWhitespace }.map { UInt8(String($0), radix: 16)! }
        precondition(digits.count % 2 == 0, "a whole number of octets")
        return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }.reversed()
    }
}
