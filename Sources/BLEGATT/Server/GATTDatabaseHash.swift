import BLECore
import Crypto
import CryptoExtras

/// AES-CMAC (RFC 4493) with a 128-bit key: the Core Specification's `AES-CMAC` (Vol 3, Part H, 2.2.5), on
/// swift-crypto. Bytes in and out in the RFC's order (most significant first).
public enum AESCMAC {
    /// The 16-byte MAC of `message` under `key`; nil when `key` is not 16 bytes.
    public static func mac(key: [UInt8], message: [UInt8]) -> [UInt8]? {
        guard key.count == 16, var cmac = try? AES.CMAC(key: SymmetricKey(data: key)) else { return nil }
        cmac.update(data: message)
        return Array(cmac.finalize())
    }
}

extension GATTDatabase {
    /// What the Database Hash is computed over (Core Spec 5.4, Vol 3, Part G, 7.3.1), in handle order: for
    /// service, include and characteristic declarations and the Characteristic Extended Properties descriptor,
    /// the handle, the 16-bit type and the value; for the User Description, Client and Server Characteristic
    /// Configuration, Presentation Format and Aggregate Format descriptors, the handle and the type; nothing for
    /// any other attribute. Every field little-endian.
    public static func databaseHashInput(_ attributes: some Sequence<GATTAttribute>) -> [UInt8] {
        var m: [UInt8] = []
        for attribute in attributes.sorted(by: { $0.handle < $1.handle }) {
            guard let type = attribute.type.uint16 else { continue }
            let withValue: Bool
            switch type {
            case 0x2800, 0x2801, 0x2802, 0x2803, 0x2900: withValue = true
            case 0x2901...0x2905: withValue = false
            default: continue
            }
            m += [UInt8(attribute.handle.rawValue & 0xFF), UInt8(attribute.handle.rawValue >> 8)]
            m += [UInt8(type & 0xFF), UInt8(type >> 8)]
            if withValue { m += attribute.value ?? [] }
        }
        return m
    }

    /// The Database Hash of `attributes` as its characteristic serves it: AES-CMAC under a zero key over
    /// `databaseHashInput`, as the little-endian 128-bit number the spec types it (the CMAC's bytes reversed,
    /// as Zephyr and Android send it; BlueZ and Bumble send the CMAC unreversed, so a client should compare
    /// what it read with what it read before, never with a value it computed).
    public static func databaseHash(of attributes: some Sequence<GATTAttribute>) -> [UInt8] {
        // A zero key of 16 bytes is always accepted.
        let mac = AESCMAC.mac(key: [UInt8](repeating: 0, count: 16), message: databaseHashInput(attributes)) ?? []
        return mac.reversed()
    }

    /// This database's Database Hash (see ``databaseHash(of:)``).
    public var databaseHash: [UInt8] { Self.databaseHash(of: attributes) }
}
