import BLECore
import Foundation
import GRDB
import Logging
import Synchronization

/// This device's identity for LE privacy: the Identity Resolving Key its private addresses are made from, and
/// the static random identity address it gives a peer it bonds with (Core Spec 5.4, Vol 3, Part H, 3.6.4–3.6.5;
/// Vol 6, Part B, 1.3.2.1). Kept in the store, so a device's bonds hold across processes whatever address its
/// controller has (the shared room gives each process a new one).
public struct LocalIdentity: Sendable, Hashable {
    /// 16 octets, least significant first.
    public var resolvingKey: [UInt8]
    /// A static random address (its two most significant bits set).
    public var address: BluetoothAddress
}

extension SystemStore {
    /// The identity named `name` (one per role a process of this store plays: "" for the device itself, a
    /// served device's name for a peripheral the tool serves): made on first use, from the store's seed in a
    /// simulation and from the system's secure generator otherwise, then kept. Two processes asking at once
    /// get the same one. A store that cannot keep it (closed, failing) still answers, with an identity of this
    /// process alone, and logs it.
    public func localIdentity(named name: String = "") -> LocalIdentity {
        state.withLock { s in
            let made = Self.makeIdentity(seed: s.seed, name: name)
            do {
                guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
                return try writeNow { db -> LocalIdentity in
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO localIdentity (name, resolvingKey, address) VALUES (?, ?, ?)",
                        arguments: [name, Data(made.resolvingKey), Data(made.address.bytes)])
                    guard
                        let row = try Row.fetchOne(
                            db, sql: "SELECT * FROM localIdentity WHERE name = ?", arguments: [name]),
                        let identity = Self.identity(row)
                    else {
                        // A damaged row: replaced by the one just made.
                        try db.execute(
                            sql: "UPDATE localIdentity SET resolvingKey = ?, address = ? WHERE name = ?",
                            arguments: [Data(made.resolvingKey), Data(made.address.bytes), name])
                        return made
                    }
                    return identity
                }
            } catch {
                logger.error(
                    "this device's identity is not kept: bonds made now will not be recognised by the next process",
                    metadata: ["error": "\(Self.words(error))", "name": "\(name)"])
                return made
            }
        }
    }

    /// A row as an identity; a row of another shape (a column of another kind, a key or address of the wrong
    /// length, an all-zero key, an address that is not static) is nil, for the caller to replace. Read with the kinds
    /// checked (`column`): GRDB's typed subscript traps on an integer where bytes belong.
    static func identity(_ row: Row) -> LocalIdentity? {
        guard let key: Data = column(row, "resolvingKey"), key.count == 16, key.contains(where: { $0 != 0 }),
            let address: Data = column(row, "address"), address.count == 6,
            address.first.map({ $0 & 0xC0 == 0xC0 }) == true
        else { return nil }
        return LocalIdentity(
            resolvingKey: Array(key), address: BluetoothAddress(bytes: Array(address), type: .randomDevice))
    }

    /// A fresh identity: from the seed and the name in a simulation (the same each run), else from the system's
    /// secure generator.
    static func makeIdentity(seed: UInt64?, name: String) -> LocalIdentity {
        var octets: [UInt8]
        if let seed {
            var state = seed ^ 0x1DE7_1A11
            for byte in name.utf8 { state = (state ^ UInt64(byte)) &* 0x100_0000_01B3 }
            octets = []
            while octets.count < 22 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                octets += Self.octets([z])
            }
        } else {
            var generator = SystemRandomNumberGenerator()
            octets = (0..<22).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        var key = Array(octets[0..<16])
        if !key.contains(where: { $0 != 0 }) { key[0] = 1 }
        var address = Array(octets[16..<22])
        // Static: the two most significant bits set; the rest neither all zeros nor all ones (Vol 6, Part B,
        // 1.3.2.1).
        address[0] |= 0xC0
        if address[0] == 0xFF && address[1...].allSatisfy({ $0 == 0xFF }) { address[5] = 0xFE }
        if address[0] == 0xC0 && address[1...].allSatisfy({ $0 == 0 }) { address[5] = 1 }
        return LocalIdentity(resolvingKey: key, address: BluetoothAddress(bytes: address, type: .randomDevice))
    }

    /// The bonded peers whose private addresses this device resolves: identity address and IRK.
    public func resolvableBonds() -> [(address: BluetoothAddress, resolvingKey: [UInt8])] {
        state.withLock { s in
            s.bonds.values.sorted { $0.identifier.uuidString < $1.identifier.uuidString }.compactMap { bond in
                guard let key = bond.resolvingKey, key.contains(where: { $0 != 0 }) else { return nil }
                return (bond.identityAddress, key)
            }
        }
    }
}
