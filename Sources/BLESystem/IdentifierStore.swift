import BLECore
import Foundation
import Synchronization

/// Maps peer addresses to the stable `UUID` identifiers the public API shows (`CBPeer.identifier`).
///
/// An identifier is derived from the system's own name and the peer's address and address type, so it is
/// stable across runs of the same system (a simulated phone named "phone" sees the same identifier for the
/// same sensor every time) and different between systems, as iOS identifiers differ between phones. The
/// store remembers both directions so an identifier handed out once can be turned back into an address.
public final class IdentifierStore: Sendable {
    private let salt: String
    private let state = Mutex<(byAddress: [BluetoothAddress: UUID], byIdentifier: [UUID: BluetoothAddress])>(([:], [:]))

    public init(salt: String) { self.salt = salt }

    /// The identifier for `address`, created on first use.
    public func identifier(for address: BluetoothAddress) -> UUID {
        state.withLock { maps in
            if let id = maps.byAddress[address] { return id }
            let id = Self.derive(salt: salt, address: address)
            maps.byAddress[address] = id
            maps.byIdentifier[id] = address
            return id
        }
    }

    /// The address an identifier was handed out for, if any.
    public func address(for identifier: UUID) -> BluetoothAddress? {
        state.withLock { $0.byIdentifier[identifier] }
    }

    /// A version-4-shaped UUID from two independent 64-bit FNV-1a hashes of salt and address.
    static func derive(salt: String, address: BluetoothAddress) -> UUID {
        let input = Array(salt.utf8) + [0] + address.bytes + [address.type.rawValue]
        func fnv(_ seed: UInt64) -> UInt64 {
            var h = seed
            for b in input { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
            // Final avalanche (splitmix64 finaliser) so nearby addresses give unrelated identifiers.
            h = (h ^ (h >> 30)) &* 0xBF58_476D_1CE4_E5B9
            h = (h ^ (h >> 27)) &* 0x94D0_49BB_1331_11EB
            return h ^ (h >> 31)
        }
        let a = fnv(0xCBF2_9CE4_8422_2325)
        let b = fnv(0x8422_2325_CBF2_9CE4)
        var bytes: [UInt8] = []
        for word in [a, b] {
            for shift in stride(from: 0, to: 64, by: 8) {
                bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
            }
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
