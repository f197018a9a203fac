import BLECore
import BLESMP
import Foundation
import GRDB
import Logging
import Synchronization

/// A Long Term Key as the store keeps it, with the EDIV and Rand that name it in a legacy bond.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 2.4.2 (LE legacy pairing: EDIV and Rand) and 3.6.2–3.6.3
///   (Encryption Information, Central Identification).
public struct StoredLongTermKey: Sendable, Hashable {
    /// 16 octets, least significant first (as HCI's LE Enable Encryption and LTK Request Reply carry it), already
    /// masked to the bond's key size.
    public var key: [UInt8]
    /// The Encrypted Diversifier; zero in Secure Connections.
    public var ediv: UInt16
    /// The 64-bit random number; zero in Secure Connections.
    public var rand: UInt64

    public init(key: [UInt8], ediv: UInt16 = 0, rand: UInt64 = 0) {
        self.key = key
        self.ediv = ediv
        self.rand = rand
    }
}

/// What the system keeps of a bond: the keys a pairing with the peer distributed, how strong they are, and the
/// peer's identity, under the identifier the system reports the peer by. The store's own type (BLESMP's
/// `SMPPairing.Result` is turned into it by the system), so what is on disk does not follow SMP's types.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part C, 9.4.4 (bonding) and Part H, 3.6 (key distribution).
public struct StoredBond: Sendable, Hashable {
    /// The peer's identifier (`SystemStore.identifier(for:)`): a bond is kept under a peer the store knows.
    public var identifier: UUID
    /// The peer's identity address (Identity Address Information: public, or static random), or the address it
    /// bonded from when it distributed none. Kept in its device form: an identity type (0x02, 0x03) becomes
    /// 0x00 or 0x01. It may differ from the address of the peer's row (`SystemStore.KnownPeer.address`).
    public var identityAddress: BluetoothAddress
    /// The peer's Identity Resolving Key: 16 octets, least significant first (as Identity Information carries
    /// it); nil when the peer distributed none.
    public var resolvingKey: [UInt8]?
    /// The key this device encrypts with as central (LE Enable Encryption): Secure Connections' LTK, or the LTK
    /// the peer distributed in legacy pairing. Nil when there is none.
    public var centralKey: StoredLongTermKey?
    /// The key this device answers the controller's LTK request with as peripheral: Secure Connections' LTK, or
    /// the LTK this device distributed in legacy pairing. Nil when there is none.
    public var peripheralKey: StoredLongTermKey?
    /// The encryption key size agreed, in octets, 7...16.
    public var keySize: UInt8
    /// Whether the keys are authenticated (MITM protection: Passkey Entry, Numeric Comparison).
    public var authenticated: Bool
    /// Whether the bond came from LE Secure Connections.
    public var secureConnections: Bool
    /// When the bond was made: seconds since 1970 (virtual time in a simulation), as `KnownPeer.lastSeen`.
    public var created: Int64

    public init(
        identifier: UUID, identityAddress: BluetoothAddress, resolvingKey: [UInt8]? = nil,
        centralKey: StoredLongTermKey? = nil, peripheralKey: StoredLongTermKey? = nil, keySize: UInt8,
        authenticated: Bool, secureConnections: Bool, created: Int64
    ) {
        self.identifier = identifier
        self.identityAddress = identityAddress
        self.resolvingKey = resolvingKey
        self.centralKey = centralKey
        self.peripheralKey = peripheralKey
        self.keySize = keySize
        self.authenticated = authenticated
        self.secureConnections = secureConnections
        self.created = created
    }

    /// Why the bond cannot be kept, or nil: keys are 16 octets, the key size 7...16.
    var fault: String? {
        if let resolvingKey, resolvingKey.count != 16 { return "an IRK of \(resolvingKey.count) octets" }
        for key in [centralKey, peripheralKey] {
            if let key, key.key.count != 16 { return "an LTK of \(key.key.count) octets" }
        }
        if !(7...16).contains(keySize) { return "a key size of \(keySize) octets" }
        return nil
    }
}

/// The bonds: committed at once, as identifiers are, and held in memory for the lookups the host needs on a
/// connection (by identifier, by EDIV and Rand, by a resolvable private address). A bonded peer is never aged
/// nor evicted, and keeps its identifier across address changes: `identifier(for:)` gives it for the peer's
/// identity address and for every resolvable private address its IRK resolves.
///
/// Bonds are read when the store opens: one another process of the device makes meanwhile is seen by this one
/// after it opens the store again.
extension SystemStore {
    /// Every bond, the oldest first.
    public var bonds: [StoredBond] {
        state.withLock { s in
            s.bonds.values.sorted { ($0.created, $0.identifier.uuidString) < ($1.created, $1.identifier.uuidString) }
        }
    }

    /// The bond with the peer `identifier` names, if any.
    public func bond(for identifier: UUID) -> StoredBond? {
        state.withLock { $0.bonds[identifier] }
    }

    /// The bond whose peripheral-role key has this EDIV and Rand: the legacy bond a controller's LE Long Term Key
    /// Request names, when this device is peripheral (Core Spec 5.4, Vol 4, Part E, 7.7.65.5).
    ///
    /// Zero EDIV and Rand name no bond: Secure Connections keys all have them, so the request cannot tell one
    /// bond from another, and this returns nil. The caller looks the key up by the link's peer instead
    /// (`bond(for:)` with the link's identifier, then `peripheralKey`).
    public func bondAnswering(ediv: UInt16, rand: UInt64) -> StoredBond? {
        guard ediv != 0 || rand != 0 else { return nil }
        return state.withLock { s in
            // Two bonds with one EDIV and Rand (80 random bits) are a chance not worth a rule: the newest answers.
            s.bonds.values.filter { $0.peripheralKey?.ediv == ediv && $0.peripheralKey?.rand == rand }
                .max { ($0.created, $0.identifier.uuidString) < ($1.created, $1.identifier.uuidString) }
        }
    }

    /// The bonded peer whose IRK resolves `address`, a resolvable private address (Core Spec 5.4, Vol 6, Part B,
    /// 1.3.2.3): its 24 low bits are `ah(IRK, prand)` of its 24 high bits. Any other kind of address, or one no
    /// bonded IRK resolves, gives nil. An all-zero IRK resolves nothing (stacks send it when they do not use
    /// privacy, and anyone could make addresses it resolves). Each bond with an IRK costs one AES block.
    public func identifier(resolving address: BluetoothAddress) -> UUID? {
        state.withLock { s in resolving(address, in: s) }
    }

    /// Keeps `bond` under its peer's identifier, replacing what was kept there, and commits it at once: a process
    /// killed right after finds it. A bond of another peer with the same identity address is removed (one bond
    /// per identity). A bond for an identifier the store does not know, or with keys of the wrong length, is not
    /// kept (logged). When the write fails (a full disk, a closed store), the bond is kept in memory only, and the
    /// failure logged: it holds until the process ends.
    ///
    /// When the peer paired from a private address and distributed its identity, call
    /// `identifierAfterPairing(peerAddress:identityAddress:)` first and keep the bond under the identifier it
    /// gives.
    public func setBond(_ bond: StoredBond) {
        var bond = bond
        bond.identityAddress = bond.identityAddress.identityForm
        state.withLock { s in
            if let fault = bond.fault {
                logger.error(
                    "a bond is not kept: it has \(fault)", metadata: ["identifier": "\(bond.identifier)"])
                return
            }
            guard s.byIdentifier[bond.identifier] != nil else {
                logger.error(
                    "a bond is not kept: the store knows no peer with its identifier",
                    metadata: ["identifier": "\(bond.identifier)"])
                return
            }
            guard s.bonds[bond.identifier] != bond else { return }
            let displaced = s.byIdentity[bond.identityAddress].flatMap { $0 == bond.identifier ? nil : $0 }
            do {
                guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
                try writeNow { db in
                    if let displaced {
                        try db.execute(sql: "DELETE FROM bond WHERE identifier = ?", arguments: [displaced.uuidString])
                    }
                    // REPLACE also removes a row of the same identity that another process wrote.
                    try db.execute(
                        sql: """
                            INSERT OR REPLACE INTO bond (
                                identifier, identityAddress, identityAddressType, resolvingKey,
                                centralKey, centralEDIV, centralRand, peripheralKey, peripheralEDIV, peripheralRand,
                                keySize, authenticated, secureConnections, created)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: [
                            bond.identifier.uuidString, Data(bond.identityAddress.bytes),
                            bond.identityAddress.type.storeCode, bond.resolvingKey.map { Data($0) },
                            bond.centralKey.map { Data($0.key) }, bond.centralKey.map { Int64($0.ediv) },
                            bond.centralKey.map { Int64(bitPattern: $0.rand) }, bond.peripheralKey.map { Data($0.key) },
                            bond.peripheralKey.map { Int64($0.ediv) },
                            bond.peripheralKey.map { Int64(bitPattern: $0.rand) }, Int64(bond.keySize),
                            bond.authenticated ? 1 : 0, bond.secureConnections ? 1 : 0, bond.created,
                        ])
                }
            } catch {
                logger.error(
                    "a bond is kept in memory only: it could not be written",
                    metadata: ["error": "\(Self.words(error))", "identifier": "\(bond.identifier)"])
            }
            if let displaced {
                logger.notice(
                    "a bond replaces another peer's bond of the same identity address",
                    metadata: ["identifier": "\(bond.identifier)", "replaced": "\(displaced)"])
                s.forgetBond(displaced)
            }
            s.forgetBond(bond.identifier)
            s.bonds[bond.identifier] = bond
            s.byIdentity[bond.identityAddress] = bond.identifier
        }
    }

    /// Forgets the bond of the peer `identifier` names, at once. The peer stays, with its identifier, as a peer
    /// without a bond (aged and bounded again); addresses already mapped to it in this process stay mapped.
    /// Whether there was a bond to forget: in this store's memory, or in the file (another process's, made after
    /// this store opened).
    @discardableResult
    public func removeBond(_ identifier: UUID) -> Bool {
        state.withLock { s in
            var deleted = false
            do {
                guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
                try writeNow { db in
                    try db.execute(sql: "DELETE FROM bond WHERE identifier = ?", arguments: [identifier.uuidString])
                    deleted = db.changesCount > 0
                }
            } catch {
                logger.error(
                    "a bond is forgotten for this process only: it could not be deleted",
                    metadata: ["error": "\(Self.words(error))", "identifier": "\(identifier)"])
            }
            let held = s.bonds[identifier] != nil
            s.forgetBond(identifier)
            return held || deleted
        }
    }

    /// Forgets the peer `identifier` names, at once: its row, and with it its name, GATT cache and bond. A later
    /// report of the device gives it a new identifier. Whether there was such a peer: in this store's memory, or
    /// in the file (another process's, written after this store opened).
    @discardableResult
    public func removePeer(_ identifier: UUID) -> Bool {
        state.withLock { s in
            var deleted = false
            // Its addresses, heard again, give a new identifier: each counts one more forgetting (in the file, so
            // that two processes forgetting it at once count both).
            let addresses = (s.byIdentifier[identifier].map { [$0.address] } ?? []) + (s.aliases[identifier] ?? [])
            for address in addresses { s.forgotten[address, default: 0] += 1 }
            do {
                guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
                let counts = try writeNow { db -> [BluetoothAddress: Int64] in
                    // The GATT cache and the bond go with the row (ON DELETE CASCADE).
                    try db.execute(sql: "DELETE FROM peer WHERE identifier = ?", arguments: [identifier.uuidString])
                    deleted = db.changesCount > 0
                    var counts: [BluetoothAddress: Int64] = [:]
                    for address in addresses {
                        let key = Self.forgottenKey(address)
                        try db.execute(
                            sql: """
                                INSERT INTO meta (key, value) VALUES (?, 1)
                                ON CONFLICT(key) DO UPDATE SET value = value + 1
                                """, arguments: [key])
                        counts[address] = try Int64.fetchOne(
                            db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key])
                    }
                    return counts
                }
                for (address, count) in counts { s.forgotten[address] = UInt64(bitPattern: count) }
            } catch {
                logger.error(
                    "a peer is forgotten for this process only: it could not be deleted",
                    metadata: ["error": "\(Self.words(error))", "identifier": "\(identifier)"])
            }
            let held = s.byIdentifier[identifier] != nil
            s.forget(identifier)
            return held || deleted
        }
    }

    /// The identifier a peer has once it has told its identity address in pairing (Identity Address
    /// Information), so that it keeps one identifier whatever address it uses. Committed at once.
    ///
    /// - When the identity address already has an identifier (a bond made earlier, or the device seen with that
    ///   address), that identifier is the peer's from now on, and `peerAddress` maps to it too (in memory: a
    ///   private address changes anyway, and after a restart the bond's IRK resolves the next one). If
    ///   `peerAddress` had an identifier of its own, that peer's row is merged into the identity's and deleted:
    ///   the identity's name, GATT cache and bond are kept; its GATT cache comes from the other row when only
    ///   that one has one, and so does its name; the last-seen time is the later one. A bond kept under the
    ///   deleted row goes with it (`setBond` under the returned identifier replaces it). Addresses that mapped to
    ///   the deleted identifier map to the kept one.
    /// - Otherwise the identifier `peerAddress` has (drawn now if it has none) is the peer's; when `peerAddress`
    ///   is private, its row's address becomes the identity address, so the device seen with it later is the
    ///   same peer, and the row's former address maps to it in memory; a public or static `peerAddress` stays
    ///   the row's address (the peer is heard with it again), the bond mapping the identity to it.
    ///
    /// A write that fails is logged, and the change holds in memory until the process ends.
    public func identifierAfterPairing(peerAddress: BluetoothAddress, identityAddress: BluetoothAddress) -> UUID {
        let identity = identityAddress.identityForm
        defer { writer.startRun() }
        return state.withLock { s -> UUID in
            let owner = s.byIdentity[identity] ?? s.byAddress[identity]
            guard let current = knownIdentifier(for: peerAddress, in: &s) else {
                let kept = owner ?? identifier(for: identity, in: &s)
                s.alias(peerAddress, to: kept)
                return kept
            }
            if let owner, owner != current {
                merge(current, into: owner, &s)
                s.alias(peerAddress, to: owner)
                return owner
            }
            // A private address changes: the row takes the identity. A public or static one does not, and it is
            // what the peer is heard with next time (a device may advertise from a static address and give its
            // public one as identity, as Bumble does): the row keeps it, and the bond maps the identity.
            if owner == nil, !peerAddress.isStableOnAir { readdress(current, to: identity, &s) }
            s.alias(peerAddress, to: current)
            return current
        }
    }

    // MARK: Inside the lock

    /// The identifier `address` already has: a bond's identity address gives the bond's (before a row of the
    /// same address: the device is the bonded one, whatever was seen of it before), then the address's row or
    /// alias, then a private address a bonded IRK resolves (remembered as an alias, so the next lookup costs no
    /// AES).
    func knownIdentifier(for address: BluetoothAddress, in s: inout State) -> UUID? {
        if !s.byIdentity.isEmpty, let bonded = s.byIdentity[address.identityForm] { return bonded }
        if let known = s.byAddress[address] { return known }
        guard let resolved = resolving(address, in: s) else { return nil }
        s.alias(address, to: resolved)
        return resolved
    }

    private func resolving(_ address: BluetoothAddress, in s: State) -> UUID? {
        guard address.randomKind == .resolvablePrivate else { return nil }
        // The newest bond first, so the answer does not depend on the dictionary's order.
        let candidates = s.bonds.values.sorted {
            ($0.created, $0.identifier.uuidString) > ($1.created, $1.identifier.uuidString)
        }
        for bond in candidates {
            // Every kept IRK is 16 octets (`StoredBond.fault`, `bond(_:)`), as `SMPCrypto.ah` requires.
            guard let irk = bond.resolvingKey, irk.contains(where: { $0 != 0 }) else { continue }
            if SMPCrypto.resolves(address, irk: irk) { return bond.identifier }
        }
        return nil
    }

    /// The peer `identifier` names takes `identity` as its row's address; its former address maps to it in
    /// memory.
    private func readdress(_ identifier: UUID, to identity: BluetoothAddress, _ s: inout State) {
        guard var peer = s.byIdentifier[identifier], peer.address != identity else { return }
        do {
            guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
            try writeNow { db in
                try db.execute(
                    sql: "UPDATE peer SET address = ?, addressType = ? WHERE identifier = ?",
                    arguments: [Data(identity.bytes), identity.type.storeCode, identifier.uuidString])
            }
        } catch {
            logger.error(
                "a peer's identity address is kept in memory only: it could not be written",
                metadata: ["error": "\(Self.words(error))", "identifier": "\(identifier)"])
        }
        let former = peer.address
        peer.address = identity
        s.byIdentifier[identifier] = peer
        s.aliases[identifier]?.remove(identity)
        s.byAddress[identity] = identifier
        s.alias(former, to: identifier)
    }

    /// Merges the peer `duplicate` names into the one `kept` names, and deletes the duplicate's row (its bond and
    /// GATT cache go with it, by the foreign keys).
    private func merge(_ duplicate: UUID, into kept: UUID, _ s: inout State) {
        guard let other = s.byIdentifier[duplicate], var peer = s.byIdentifier[kept] else { return }
        let moved = gattCache(for: kept, in: s) == nil ? gattCache(for: duplicate, in: s) : nil
        peer.name = peer.name ?? other.name
        peer.lastSeen = max(peer.lastSeen, other.lastSeen, now())
        var written = false
        do {
            guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
            try writeNow { db in
                if let moved {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO gattCache (identifier, hash, record) VALUES (?, ?, ?)",
                        arguments: [kept.uuidString, Data(moved.hash), Data(moved.record)])
                }
                try db.execute(sql: "DELETE FROM peer WHERE identifier = ?", arguments: [duplicate.uuidString])
                try db.execute(
                    sql: "UPDATE peer SET name = ?, lastSeen = ? WHERE identifier = ?",
                    arguments: [peer.name, peer.lastSeen, kept.uuidString])
            }
            written = true
        } catch {
            logger.error(
                "two identifiers of one peer are merged in memory only: the merge could not be written",
                metadata: ["error": "\(Self.words(error))", "kept": "\(kept)", "merged": "\(duplicate)"])
        }
        let addresses = [other.address] + (s.aliases[duplicate] ?? [])
        s.forget(duplicate)
        for address in addresses { s.alias(address, to: kept) }
        s.byIdentifier[kept] = peer
        if let moved {
            if written {
                s.unwrittenCaches.removeValue(forKey: kept)
            } else {
                s.unwrittenCaches[kept] = .some(moved)
            }
        }
        if !written { s.unwritten.insert(kept) }
        logger.info(
            "a peer that told its identity keeps the identity's identifier",
            metadata: ["kept": "\(kept)", "merged": "\(duplicate)", "cacheMoved": "\(moved != nil)"])
    }

    // MARK: Reading rows

    /// A row as a bond; a row of another shape (a key of the wrong length, a text where bytes belong, a key's
    /// columns half set) is left out.
    static func bond(_ row: Row) -> StoredBond? {
        guard let text: String = column(row, "identifier"), let identifier = UUID(uuidString: text),
            let bytes: Data = column(row, "identityAddress"), bytes.count == 6,
            let typeCode: Int64 = column(row, "identityAddressType"),
            let type = BluetoothAddress.AddressType(storeCode: typeCode),
            let keySizeCode: Int64 = column(row, "keySize"), let keySize = UInt8(exactly: keySizeCode),
            (7...16).contains(keySize),
            let authenticated = flag(row, "authenticated"), let secureConnections = flag(row, "secureConnections"),
            let created: Int64 = column(row, "created"),
            let resolvingKey = optionalKey(row, "resolvingKey"),
            let centralKey = longTermKey(row, "central"), let peripheralKey = longTermKey(row, "peripheral")
        else { return nil }
        return StoredBond(
            identifier: identifier, identityAddress: BluetoothAddress(bytes: Array(bytes), type: type),
            resolvingKey: resolvingKey, centralKey: centralKey, peripheralKey: peripheralKey, keySize: keySize,
            authenticated: authenticated, secureConnections: secureConnections, created: created)
    }

    private static func isNull(_ row: Row, _ name: String) -> Bool {
        (row[name] as DatabaseValue?)?.isNull ?? true
    }

    private static func flag(_ row: Row, _ name: String) -> Bool? {
        guard let value: Int64 = column(row, name), value == 0 || value == 1 else { return nil }
        return value == 1
    }

    /// A nullable 16-octet key: `.some(nil)` when NULL, nil when unreadable.
    private static func optionalKey(_ row: Row, _ name: String) -> [UInt8]?? {
        if isNull(row, name) { return .some(nil) }
        guard let key: Data = column(row, name), key.count == 16 else { return nil }
        return .some(Array(key))
    }

    /// A Long Term Key's three columns (`<role>Key`, `<role>EDIV`, `<role>Rand`): `.some(nil)` when all are NULL,
    /// nil when unreadable.
    private static func longTermKey(_ row: Row, _ role: String) -> StoredLongTermKey?? {
        let names = [role + "Key", role + "EDIV", role + "Rand"]
        if names.allSatisfy({ isNull(row, $0) }) { return .some(nil) }
        guard let key: Data = column(row, names[0]), key.count == 16,
            let edivCode: Int64 = column(row, names[1]), let ediv = UInt16(exactly: edivCode),
            let rand: Int64 = column(row, names[2])
        else { return nil }
        return .some(StoredLongTermKey(key: Array(key), ediv: ediv, rand: UInt64(bitPattern: rand)))
    }
}

extension BluetoothAddress {
    /// Public or static random: an address a device keeps (private addresses change, Vol 6, Part B, 1.3.2).
    public var isStableOnAir: Bool { !type.isRandom || randomKind == .staticAddress }
}
