import BLECore
import Crypto
import Foundation
import GRDB
import Logging
import Synchronization

/// What a system keeps beyond its process, in one SQLite database (through GRDB): the identifier of every
/// peer address it reported, with the peer's last name and when it was last seen, and the GATT cache of each
/// peer whose database has a hash (what was discovered there, with the hash it was discovered under), the
/// preserved state of managers with a restore identifier (`SystemStore+Preserved.swift`), and the bonds: each
/// bonded peer's keys and identity, under its identifier (`SystemStore+Bonds.swift`).
///
/// - Identifiers are random per system, as on iOS, and stable: a peer's identifier is a keyed hash of its
///   address under the store's own secret key (kept in the file, made once with the system's generator; from
///   the seed in a simulation, so a run repeats), so a process killed right after reporting a peer, or two
///   processes of one device meeting it at once, give it the same identifier without waiting for the disk. Its
///   row (what `retrievePeripherals(withIdentifiers:)` needs after a restart) goes to the writer and is on disk
///   within its next run; a peer forgotten on purpose (`removePeer`) gets a new identifier when heard again.
/// - Names and last-seen times are written in batches: when a change finds `batchLimit` peers waiting or the
///   oldest waiting change `batchAge` seconds old, a batch goes to the store's writer (`StoreWriter`), which puts
///   it on disk on a queue of its own, so the event that filled it never waits for the disk; `flush()` and
///   `close()` (`shutDown`) write what waits before they return. A kill loses the changes not yet written: at
///   most `batchLimit` peers' worth and the batch on its way, but of any age if nothing changed since. Every
///   write reaches the disk in the order it was made, the batched ones and those written at once alike.
///   Identifiers are never lost that way. Last-seen times move when a scan reports a peer and when an app connects
///   to it. GATT caches are batched the same way (a lost one costs a rediscovery, nothing more); a peer forgotten
///   takes its cache with it.
/// - Known peers are bounded (`peerLimit`, the least recently seen go first) and aged (peers not seen for
///   `maximumAge` are forgotten when the store opens), so devices that rotate their random addresses cannot
///   grow the file without end. A bonded peer is neither: it stays until its bond is removed, and the limit
///   counts the peers without a bond.
/// - A file that cannot be used (not a database, corrupt, unreadable, written by a newer schema) fails the
///   initialiser with `StoreError`, naming the path; with `rebuildUnusable` the file is moved aside (and the
///   move logged) and a new one started. An empty file is a new store.
public final class SystemStore: Sendable {
    /// What was discovered of a peer's database, under the Database Hash it had then.
    public struct GATTCache: Sendable, Hashable {
        /// The Database Hash as read (compared byte for byte, never interpreted).
        public var hash: [UInt8]
        /// A `GATTCacheRecord`'s encoding.
        public var record: [UInt8]
        public init(hash: [UInt8], record: [UInt8]) {
            self.hash = hash
            self.record = record
        }
    }

    /// A peer the system has reported.
    public struct KnownPeer: Sendable, Hashable {
        public var identifier: UUID
        public var address: BluetoothAddress
        public var name: String?
        /// Seconds since 1970 (virtual time from 2026-01-01 in a simulation).
        public var lastSeen: Int64
    }

    /// Why a store file cannot be used.
    public struct StoreError: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var reason: String
        /// Another process held the file for longer than the store waits: the file is sound, and is never moved
        /// aside for it.
        var busy = false
        public var description: String { "the system store \(path) cannot be used: \(reason)" }
    }

    public static let peerLimit = 1_000
    public static let maximumAge: Int64 = 90 * 24 * 3600
    public static let batchLimit = 64
    public static let batchAge: Int64 = 60

    /// nil: in memory.
    public let path: String?
    let database: DatabaseQueue
    /// Puts the writes on disk, in order: batches off the caller's path, the rest at once (`writeNow`).
    let writer: StoreWriter
    let now: @Sendable () -> Int64
    let logger: Logger

    struct State {
        var byIdentifier: [UUID: KnownPeer] = [:]
        var byAddress: [BluetoothAddress: UUID] = [:]
        /// The key identifiers are derived under (`identifier(for:)`): the file's, or the seed's.
        var identifierKey = SymmetricKey(size: .bits128)
        /// How many times each address's peer was forgotten on purpose (`removePeer`): a part of what its next
        /// identifier is derived from, so that it is a new one.
        var forgotten: [BluetoothAddress: UInt64] = [:]
        var seed: UInt64?
        /// Peers whose name or last-seen time changed since the last write, and since when.
        var unwritten: Set<UUID> = []
        var unwrittenSince: Int64?
        /// GATT caches changed since the last batch (nil: to delete).
        var unwrittenCaches: [UUID: GATTCache?] = [:]
        /// GATT caches in a batch the writer may not have written yet, with the batch's sequence number: what a
        /// read answers until the writer is past it.
        var submittedCaches: [UUID: SubmittedCache] = [:]
        var closed = false
        /// The preserved state of managers (state restoration), by key, as read when the store opened and
        /// written since.
        var preserved: [PreservedManager.Key: PreservedManager] = [:]
        /// Preserved-state rows that could not be read as the store opened (logged, then ignored).
        var unreadablePreserved = 0
        /// Bonds by the peer's identifier; every one names a peer in `byIdentifier`.
        var bonds: [UUID: StoredBond] = [:]
        /// Bonded identifiers by the bond's identity address (in its identity form, `identityForm`).
        var byIdentity: [BluetoothAddress: UUID] = [:]
        /// Addresses other than its row's that map to a peer in `byAddress`, in memory only: a bonded peer's
        /// resolvable private addresses and identity address, and the address a peer paired from.
        var aliases: [UUID: Set<BluetoothAddress>] = [:]
        /// Bond rows that could not be read as the store opened (logged, then ignored).
        var unreadableBonds = 0
    }
    let state: Mutex<State>

    /// Opens (or creates) the store at `path`, or one in memory when `path` is nil.
    ///
    /// - Parameters:
    ///   - path: the SQLite file; nil keeps the store in memory.
    ///   - rebuildUnusable: move a file that cannot be used aside and start afresh, instead of throwing.
    ///   - seed: draws identifiers from this seed (a simulation); nil draws them from the system's generator.
    ///   - ageing: forget peers not seen for `maximumAge` as the store opens (false: a reader that only lists
    ///     them, whose clock may not be the one that stamped them, a simulation's virtual time say).
    ///   - now: the time in seconds since 1970, for last-seen times and ageing.
    ///   - logger: where the store says what it noticed (rows it could not read, a file moved aside).
    /// - Throws: `StoreError` when the file cannot be used and `rebuildUnusable` is false.
    public init(
        path: String?, rebuildUnusable: Bool = false, seed: UInt64? = nil, ageing: Bool = true,
        now: @escaping @Sendable () -> Int64, logger: Logger = Logger(label: "swift-ble.store")
    ) throws(StoreError) {
        self.path = path
        self.now = now
        self.logger = logger
        let opened: (DatabaseQueue, State)
        do {
            opened = try Self.open(path: path, now: ageing ? now() : Int64.min + Self.maximumAge)
        } catch let error as StoreError {
            guard rebuildUnusable, !error.busy, let path else { throw error }
            let aside = Self.moveAside(path)
            logger.warning(
                "the system store could not be used and was moved aside to start afresh",
                metadata: ["path": "\(path)", "reason": "\(error.reason)", "movedTo": "\(aside ?? "(removed)")"])
            do {
                opened = try Self.open(path: path, now: ageing ? now() : Int64.min + Self.maximumAge)
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(path: path, reason: "\(error)")
            }
        } catch {
            throw StoreError(path: path ?? ":memory:", reason: "\(error)")
        }
        database = opened.0
        writer = StoreWriter(database: opened.0, logger: logger)
        var state = opened.1
        state.seed = seed
        // The file's key when it has one (every process of the device derives under it); else one made now, from
        // the seed in a simulation.
        let proposed = seed.map(Self.identifierKeyWords(seed:)) ?? Self.randomKeyWords()
        do {
            state.identifierKey = try Self.storedIdentifierKey(database, proposed: proposed)
        } catch {
            state.identifierKey = Self.key(proposed)
            logger.error(
                "the store's identifier key could not be kept: this process's new identifiers are its own",
                metadata: ["path": "\(path ?? ":memory:")", "error": "\(Self.words(error))"])
        }
        if state.unreadablePreserved > 0 {
            logger.warning(
                "preserved manager rows that cannot be read are ignored",
                metadata: ["path": "\(path ?? ":memory:")", "rows": "\(state.unreadablePreserved)"])
        }
        if state.unreadableBonds > 0 {
            logger.warning(
                "bond rows that cannot be read are ignored: those peers are not bonded",
                metadata: ["path": "\(path ?? ":memory:")", "rows": "\(state.unreadableBonds)"])
        }
        self.state = Mutex(state)
    }

    // MARK: Opening

    private static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: peers") { db in
            try db.execute(
                sql: """
                    CREATE TABLE peer (
                        identifier TEXT PRIMARY KEY NOT NULL,
                        address BLOB NOT NULL,
                        addressType INTEGER NOT NULL,
                        name TEXT,
                        lastSeen INTEGER NOT NULL,
                        UNIQUE (address, addressType)
                    );
                    CREATE INDEX peerByLastSeen ON peer (lastSeen);
                    CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
                    """)
        }
        migrator.registerMigration("v2: gatt cache") { db in
            try db.execute(
                sql: """
                    CREATE TABLE gattCache (
                        identifier TEXT PRIMARY KEY NOT NULL REFERENCES peer (identifier) ON DELETE CASCADE,
                        hash BLOB NOT NULL,
                        record BLOB NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v3: preserved state") { db in
            try db.execute(
                sql: """
                    CREATE TABLE preservedManager (
                        app TEXT NOT NULL,
                        role TEXT NOT NULL,
                        restoreIdentifier TEXT NOT NULL,
                        backgroundModes TEXT NOT NULL,
                        record BLOB NOT NULL,
                        PRIMARY KEY (app, role, restoreIdentifier)
                    );
                    """)
        }
        // Keyed by the peer's identifier, like the GATT cache, so a bonded peer keeps its identifier and goes
        // with its row; one bond per identity address. Rand is written as its bit pattern (SQLite integers are
        // signed). A key's three columns are all NULL or all set.
        migrator.registerMigration("v4: bonds") { db in
            try db.execute(
                sql: """
                    CREATE TABLE bond (
                        identifier TEXT PRIMARY KEY NOT NULL REFERENCES peer (identifier) ON DELETE CASCADE,
                        identityAddress BLOB NOT NULL,
                        identityAddressType INTEGER NOT NULL,
                        resolvingKey BLOB,
                        centralKey BLOB,
                        centralEDIV INTEGER,
                        centralRand INTEGER,
                        peripheralKey BLOB,
                        peripheralEDIV INTEGER,
                        peripheralRand INTEGER,
                        keySize INTEGER NOT NULL,
                        authenticated INTEGER NOT NULL,
                        secureConnections INTEGER NOT NULL,
                        created INTEGER NOT NULL,
                        UNIQUE (identityAddress, identityAddressType)
                    );
                    """)
        }
        migrator.registerMigration("v5: local identities") { db in
            try db.execute(
                sql: """
                    CREATE TABLE localIdentity (
                        name TEXT PRIMARY KEY NOT NULL,
                        resolvingKey BLOB NOT NULL,
                        address BLOB NOT NULL
                    );
                    """)
        }
        return migrator
    }

    /// Opens the store, trying again while another process is opening or migrating the same file: two processes
    /// opening a new store at once (two `ble` commands of one device) both find it empty, and the one that loses
    /// the race to make the tables fails, reads the migrations' table between the other's creating it and
    /// committing, or finds the file locked while the other turns on its write-ahead log. Tried again, it finds the
    /// tables made.
    private static func open(path: String?, now: Int64) throws -> (DatabaseQueue, State) {
        var attempt = 1
        while true {
            do {
                return try openOnce(path: path, now: now)
            } catch let race as MigrationRace {
                guard attempt < 10 else { throw race.error }
            } catch let error as StoreError where error.busy && attempt < 10 {
            }
            attempt += 1
            Thread.sleep(forTimeInterval: 0.01 * Double(attempt * attempt))
        }
    }

    /// A migration that failed, perhaps because another process was making the same tables at the same moment:
    /// tried again, it finds them made (the migrator reads what is applied before its write transaction).
    private struct MigrationRace: Error {
        var error: StoreError
    }

    private static func openOnce(path: String?, now: Int64) throws -> (DatabaseQueue, State) {
        var configuration = Configuration()
        configuration.label = "swift-ble.store"
        // Two processes of one device (two `ble` commands at once) share the file: a writer waits for the other.
        configuration.busyMode = .timeout(2)
        let database: DatabaseQueue
        do {
            if let path {
                configuration.journalMode = .wal
                database = try DatabaseQueue(path: path, configuration: configuration)
            } else {
                database = try DatabaseQueue(configuration: configuration)
            }
        } catch {
            throw StoreError(path: path ?? ":memory:", reason: Self.words(error), busy: Self.isBusy(error))
        }
        let migrator = migrator()
        do {
            let check = try database.read { db in try String.fetchOne(db, sql: "PRAGMA quick_check") }
            guard check == "ok" else {
                throw StoreError(path: path ?? ":memory:", reason: "the database is damaged (\(check ?? "no answer"))")
            }
            do {
                if try database.read({ db in try migrator.hasBeenSuperseded(db) }) {
                    throw StoreError(
                        path: path ?? ":memory:", reason: "it was written by a newer version of swift-ble")
                }
                try migrator.migrate(database)
            } catch let error as DatabaseError {
                throw MigrationRace(
                    error: StoreError(path: path ?? ":memory:", reason: Self.words(error), busy: Self.isBusy(error)))
            }
            var state = State()
            try database.write { db in
                // A bonded peer is not aged: it stays until its bond is removed.
                try db.execute(
                    sql: "DELETE FROM peer WHERE lastSeen < ? AND identifier NOT IN (SELECT identifier FROM bond)",
                    arguments: [now - maximumAge])
                let rows = try Row.fetchAll(
                    db, sql: "SELECT identifier, address, addressType, name, lastSeen FROM peer")
                for row in rows {
                    guard let peer = Self.peer(row) else { continue }
                    state.byIdentifier[peer.identifier] = peer
                    state.byAddress[peer.address] = peer.identifier
                }
                // A count of identifiers drawn ('drawn'), which earlier versions kept, is no longer read.
                for row in try Row.fetchAll(db, sql: "SELECT key, value FROM meta WHERE key LIKE 'forgotten %'") {
                    guard let key: String = column(row, "key"), let count: Int64 = column(row, "value"),
                        let address = Self.forgottenAddress(key)
                    else { continue }
                    state.forgotten[address] = UInt64(bitPattern: count)
                }
                for row in try Row.fetchAll(db, sql: "SELECT * FROM preservedManager") {
                    guard let preserved = Self.preservedManager(row) else {
                        state.unreadablePreserved += 1
                        continue
                    }
                    state.preserved[preserved.key] = preserved
                }
                for row in try Row.fetchAll(db, sql: "SELECT * FROM bond") {
                    // A bond of a peer whose row could not be read names nobody the store knows.
                    guard let bond = Self.bond(row), state.byIdentifier[bond.identifier] != nil else {
                        state.unreadableBonds += 1
                        continue
                    }
                    state.bonds[bond.identifier] = bond
                    state.byIdentity[bond.identityAddress.identityForm] = bond.identifier
                }
            }
            return (database, state)
        } catch let race as MigrationRace {
            try? database.close()
            throw race
        } catch let error as StoreError {
            try? database.close()
            throw error
        } catch {
            try? database.close()
            throw StoreError(path: path ?? ":memory:", reason: Self.words(error), busy: Self.isBusy(error))
        }
    }

    /// A row as a peer; rows a hand or a newer version wrote wrongly are left out.
    private static func peer(_ row: Row) -> KnownPeer? {
        guard let text: String = column(row, "identifier"), let identifier = UUID(uuidString: text),
            let bytes: Data = column(row, "address"), bytes.count == 6,
            let typeCode: Int64 = column(row, "addressType"),
            let type = BluetoothAddress.AddressType(storeCode: typeCode),
            let lastSeen: Int64 = column(row, "lastSeen")
        else { return nil }
        return KnownPeer(
            identifier: identifier, address: BluetoothAddress(bytes: Array(bytes), type: type),
            name: column(row, "name"), lastSeen: lastSeen)
    }

    /// A column's value as `T`, or nil when it is NULL, missing or of another kind (GRDB's typed subscript
    /// would trap on a mismatch, and a file is input like any other).
    static func column<T: DatabaseValueConvertible>(_ row: Row, _ name: String) -> T? {
        guard let value = row[name] as DatabaseValue?, !value.isNull else { return nil }
        switch (value.storage, T.self) {
        case (.blob, is Data.Type), (.string, is String.Type), (.int64, is Int64.Type):
            return T.fromDatabaseValue(value)
        default: return nil
        }
    }

    /// Whether `error` says another process held the file, not that the file is unusable.
    private static func isBusy(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
    }

    static func words(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "\(error.message ?? "SQLite error") (SQLite code \(error.resultCode.rawValue))"
        }
        return "\(error)"
    }

    /// Moves `path` and its WAL companions aside; returns where to, or nil when it could only remove them.
    private static func moveAside(_ path: String) -> String? {
        let files = FileManager.default
        var aside = path + ".unusable"
        var n = 1
        while files.fileExists(atPath: aside) {
            n += 1
            aside = path + ".unusable-\(n)"
        }
        var moved: String? = aside
        do {
            try files.moveItem(atPath: path, toPath: aside)
        } catch {
            try? files.removeItem(atPath: path)
            moved = nil
        }
        for suffix in ["-wal", "-shm"] { try? files.removeItem(atPath: path + suffix) }
        return moved
    }

    /// The store's clock (seconds; virtual time in a simulation), for what callers stamp.
    public var currentTime: Int64 { now() }

    // MARK: Identifiers and known peers

    /// The identifier of `address`, given on first use. A bonded peer's identity address, and a resolvable
    /// private address one of the bonded peers' IRKs resolves (`identifier(resolving:)`), give the bonded peer's
    /// identifier: a bonded device keeps its identifier however often it changes its address. A new identifier
    /// is derived from the address under the store's key, so it is the same in every process of the device and
    /// after a crash; its row is handed to the writer (on disk within its next run). When the write fails (a full
    /// disk, a store closed by `shutDown`), the row is kept in memory only, and the failure logged.
    public func identifier(for address: BluetoothAddress) -> UUID {
        let identifier = state.withLock { s -> UUID in self.identifier(for: address, in: &s) }
        writer.startRun()
        return identifier
    }

    /// `identifier(for:)` inside the lock; the caller starts the writer's run once out of it.
    func identifier(for address: BluetoothAddress, in s: inout State) -> UUID {
        if let known = knownIdentifier(for: address, in: &s) { return known }
        let epoch = s.forgotten[address] ?? 0
        var attempt: UInt64 = 0
        var identifier = Self.derive(address, epoch: epoch, attempt: attempt, key: s.identifierKey)
        // Another address's identifier already (1 in 2^122): the next in the same derivation.
        while s.byIdentifier[identifier] != nil {
            attempt += 1
            identifier = Self.derive(address, epoch: epoch, attempt: attempt, key: s.identifierKey)
        }
        let time = now()
        // The limit counts the peers without a bond, and only they are evicted.
        let evicted = s.byIdentifier.count - s.bonds.count >= Self.peerLimit ? oldest(s) : nil
        if let evicted { s.forget(evicted) }
        s.byIdentifier[identifier] = KnownPeer(identifier: identifier, address: address, name: nil, lastSeen: time)
        s.byAddress[address] = identifier
        guard !s.closed else {
            logger.error(
                "a peer's identifier is kept in memory only: the store is closed",
                metadata: ["identifier": "\(identifier)"])
            return identifier
        }
        let row = PeerRow(
            identifier: identifier.uuidString, address: Data(address.bytes), addressType: address.type.storeCode,
            name: nil, lastSeen: time)
        let logger = logger
        let forgottenKey = Self.forgottenKey(address)
        _ = writer.submit("a peer's identifier", metadata: ["identifier": "\(identifier)"]) { db in
            if let evicted { try PeerRow.deleteOne(db, key: evicted.uuidString) }
            // Another process forgot the peer since this one opened the store: the identifier this one derived is
            // the forgotten one, and must not come back into the file.
            let forgotten = try Int64.fetchOne(
                db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [forgottenKey])
            if let forgotten, UInt64(bitPattern: forgotten) > epoch {
                logger.warning(
                    "another process forgot this peer: this one reports its former identifier until it restarts, and does not keep it",
                    metadata: ["identifier": "\(row.identifier)"])
                return
            }
            try row.insert(db, onConflict: .ignore)
            guard db.changesCount == 0 else { return }
            // Another process wrote the address first: under the same key it gave the same identifier, unless it
            // is a version of swift-ble that drew identifiers at random.
            let sameAddress: SQLExpression =
                PeerRow.Columns.address == row.address && PeerRow.Columns.addressType == row.addressType
            let request = PeerRow.filter(sameAddress).select(PeerRow.Columns.identifier, as: String.self)
            let other = try request.fetchOne(db)
            if let other, other != row.identifier {
                logger.warning(
                    "another process gave this peer another identifier: this one reports its own until it restarts",
                    metadata: ["identifier": "\(row.identifier)", "inTheFile": "\(other)"])
            }
        }
        return identifier
    }

    /// The identifier already given to `address`, if any (nothing is drawn). A bonded peer's identity address
    /// and the resolvable private addresses its IRK resolves give its identifier, as in `identifier(for:)`.
    public func existingIdentifier(for address: BluetoothAddress) -> UUID? {
        state.withLock { s in knownIdentifier(for: address, in: &s) }
    }

    /// The peer an identifier was given to.
    public func knownPeer(_ identifier: UUID) -> KnownPeer? {
        state.withLock { $0.byIdentifier[identifier] }
    }

    /// The address an identifier was given to.
    public func address(for identifier: UUID) -> BluetoothAddress? {
        knownPeer(identifier)?.address
    }

    /// Every peer the store knows, the most recently seen first.
    public var knownPeers: [KnownPeer] {
        state.withLock { s in
            s.byIdentifier.values.sorted {
                ($0.lastSeen, $1.identifier.uuidString) > ($1.lastSeen, $0.identifier.uuidString)
            }
        }
    }

    /// How many peers the store knows.
    public var knownPeerCount: Int { state.withLock { $0.byIdentifier.count } }

    /// Notes that the peer with `identifier` was heard now, with its name if it gave one. Written in batches.
    public func noteSeen(_ identifier: UUID, name: String?) {
        let time = now()
        let due = state.withLock { s -> Bool in
            guard var peer = s.byIdentifier[identifier] else { return false }
            let renamed = name != nil && name != peer.name
            // A last-seen time is worth a write when it moved by a minute or more.
            guard renamed || time - peer.lastSeen >= Self.batchAge else { return false }
            if let name { peer.name = name }
            peer.lastSeen = time
            s.byIdentifier[identifier] = peer
            s.unwritten.insert(identifier)
            let since = s.unwrittenSince ?? time
            s.unwrittenSince = since
            guard s.unwritten.count >= Self.batchLimit || time - since >= Self.batchAge else { return false }
            submitBatch(&s)
            return true
        }
        if due { writer.startRun() }
    }

    /// Writes the batched names, last-seen times and GATT caches, and returns once they are on disk.
    public func flush() {
        state.withLock { submitBatch(&$0) }
        writer.drain()
    }

    /// Hands the batched names, last-seen times and GATT caches to the writer (one write per peer's row and per
    /// cache, so a row another process removed meanwhile costs only itself).
    func submitBatch(_ s: inout State) {
        guard !s.unwritten.isEmpty || !s.unwrittenCaches.isEmpty, !s.closed else { return }
        let committed = writer.committed
        s.submittedCaches = s.submittedCaches.filter { $0.value.sequence > committed }
        for peer in s.unwritten.compactMap({ s.byIdentifier[$0] }) {
            _ = writer.submit("a peer's name and last-seen time", metadata: ["identifier": "\(peer.identifier)"]) {
                try PeerRow.updateSeen(peer, $0)
            }
        }
        // A cache of a peer forgotten meanwhile went with it.
        for (identifier, cache) in s.unwrittenCaches where s.byIdentifier[identifier] != nil {
            let what = cache == nil ? "the removal of a GATT cache" : "a GATT cache"
            if let sequence = writer.submit(
                what, metadata: ["identifier": "\(identifier)"],
                { db in
                    try GATTCacheRow.set(cache, for: identifier, db)
                })
            {
                s.submittedCaches[identifier] = SubmittedCache(sequence: sequence, cache: cache)
            }
        }
        s.unwritten.removeAll()
        s.unwrittenSince = nil
        s.unwrittenCaches.removeAll()
    }

    /// A GATT cache handed to the writer, under the sequence number of its write.
    struct SubmittedCache: Sendable {
        var sequence: UInt64
        var cache: GATTCache?
    }

    /// Writes at once, in a transaction, after everything handed to the writer before: what `body` wrote is on
    /// disk when this returns.
    func writeNow<T>(_ body: (Database) throws -> T) throws -> T {
        try writer.perform { db in
            var result: T?
            try db.inTransaction {
                result = try body(db)
                return .commit
            }
            return result!
        }
    }

    // MARK: GATT caches

    /// The GATT cache kept for the peer with `identifier`, if any. A row that cannot be read is logged and
    /// treated as none.
    public func gattCache(for identifier: UUID) -> GATTCache? {
        state.withLock { s in gattCache(for: identifier, in: s) }
    }

    func gattCache(for identifier: UUID, in s: State) -> GATTCache? {
        if let pending = s.unwrittenCaches[identifier] { return pending }
        if let submitted = s.submittedCaches[identifier], submitted.sequence > writer.committed {
            return submitted.cache
        }
        guard !s.closed, s.byIdentifier[identifier] != nil else { return nil }
        do {
            let row = try database.read { db in
                try Row.fetchOne(
                    db, sql: "SELECT hash, record FROM gattCache WHERE identifier = ?",
                    arguments: [identifier.uuidString]
                )
            }
            guard let row else { return nil }
            guard let hash: Data = Self.column(row, "hash"), let record: Data = Self.column(row, "record") else {
                logger.warning(
                    "a GATT cache row cannot be read and is ignored", metadata: ["identifier": "\(identifier)"])
                return nil
            }
            return GATTCache(hash: Array(hash), record: Array(record))
        } catch {
            logger.error(
                "could not read a GATT cache",
                metadata: ["error": "\(Self.words(error))", "identifier": "\(identifier)"])
            return nil
        }
    }

    /// Keeps `cache` for the peer with `identifier` (replacing what was kept), or forgets it (nil). Written in
    /// batches; an unknown identifier is ignored.
    public func setGATTCache(_ cache: GATTCache?, for identifier: UUID) {
        let time = now()
        let due = state.withLock { s -> Bool in
            guard s.byIdentifier[identifier] != nil else { return false }
            s.unwrittenCaches[identifier] = .some(cache)
            let since = s.unwrittenSince ?? time
            s.unwrittenSince = since
            guard s.unwritten.count + s.unwrittenCaches.count >= Self.batchLimit || time - since >= Self.batchAge
            else { return false }
            submitBatch(&s)
            return true
        }
        if due { writer.startRun() }
    }

    /// Writes what is batched and closes the file. Later calls find nothing new and draw nothing.
    public func close() {
        flush()
        state.withLock { $0.closed = true }
        writer.close()
        do {
            try database.close()
        } catch {
            logger.error("could not close the system store", metadata: ["error": "\(Self.words(error))"])
        }
    }

    // MARK: Deriving identifiers

    /// A new identifier for `address`: HMAC-SHA-256 under `key` of the address, how often its peer was forgotten
    /// on purpose and the attempt (another address's identifier already, 1 in 2^122), as a version 4 UUID. One
    /// key gives one identifier per address (every process of the device, every run); the address cannot be
    /// told from it without the key.
    static func derive(_ address: BluetoothAddress, epoch: UInt64, attempt: UInt64, key: SymmetricKey) -> UUID {
        let message = [address.type.rawValue] + address.bytes + octets([epoch, attempt])
        var bytes = Array(HMAC<SHA256>.authenticationCode(for: message, using: key).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// A simulation's key: from its seed, so a run repeats.
    static func identifierKeyWords(seed: UInt64) -> [UInt64] {
        (0..<UInt64(2)).map { half in SeededRandom.mix(seed ^ SeededRandom.mix(0x6964_656E_7469_6679 &+ half)) }
    }

    /// A real controller's key: from the system's generator.
    static func randomKeyWords() -> [UInt64] {
        var generator = SystemRandomNumberGenerator()
        return [generator.next(), generator.next()]
    }

    static func key(_ words: [UInt64]) -> SymmetricKey { SymmetricKey(data: octets(words)) }

    /// Each word's eight octets, least significant first.
    static func octets(_ words: [UInt64]) -> [UInt8] {
        words.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (8 * UInt64($0))) } }
    }

    /// The file's key, kept the first time (`proposed`): two processes opening a new file at once both end up
    /// with the one written first.
    private static func storedIdentifierKey(_ database: DatabaseQueue, proposed: [UInt64]) throws -> SymmetricKey {
        let names = ["identifierKey0", "identifierKey1"]
        let words = try database.write { db -> [UInt64] in
            for (name, word) in zip(names, proposed) {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                    arguments: [name, Int64(bitPattern: word)])
            }
            return try names.map { name in
                // Written as the word's bit pattern (SQLite has no unsigned integers).
                let value = try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [name])
                return UInt64(bitPattern: value ?? 0)
            }
        }
        return key(words)
    }

    /// The meta key that counts how often the peer of `address` was forgotten.
    static func forgottenKey(_ address: BluetoothAddress) -> String {
        "forgotten \(address.type.storeCode) " + address.bytes.hexString
    }

    /// The address a `forgottenKey` names; nil for a key of another shape.
    static func forgottenAddress(_ key: String) -> BluetoothAddress? {
        let parts = key.split(separator: " ")
        guard parts.count == 3, parts[0] == "forgotten", let code = Int64(parts[1]),
            let type = BluetoothAddress.AddressType(storeCode: code), let bytes = [UInt8](hex: String(parts[2])),
            bytes.count == 6
        else { return nil }
        return BluetoothAddress(bytes: bytes, type: type)
    }

    /// The least recently seen peer without a bond.
    private func oldest(_ s: State) -> UUID? {
        s.byIdentifier.values.lazy.filter { s.bonds[$0.identifier] == nil }
            .min { ($0.lastSeen, $0.identifier.uuidString) < ($1.lastSeen, $1.identifier.uuidString) }?.identifier
    }
}

extension SystemStore.State {
    /// Maps `address`, which is not the row's, to the peer with `identifier` until the process ends.
    mutating func alias(_ address: BluetoothAddress, to identifier: UUID) {
        byAddress[address] = identifier
        if byIdentifier[identifier]?.address != address { aliases[identifier, default: []].insert(address) }
    }

    /// Forgets the peer with `identifier` in memory: its addresses, what waits to be written of it, its bond.
    mutating func forget(_ identifier: UUID) {
        guard let gone = byIdentifier.removeValue(forKey: identifier) else { return }
        for address in [gone.address] + (aliases.removeValue(forKey: identifier) ?? [])
        where byAddress[address] == identifier {
            byAddress.removeValue(forKey: address)
        }
        unwritten.remove(identifier)
        unwrittenCaches.removeValue(forKey: identifier)
        submittedCaches.removeValue(forKey: identifier)
        forgetBond(identifier)
    }

    /// Forgets the bond of the peer with `identifier` in memory; the peer stays.
    mutating func forgetBond(_ identifier: UUID) {
        guard let bond = bonds.removeValue(forKey: identifier) else { return }
        let identity = bond.identityAddress.identityForm
        if byIdentity[identity] == identifier { byIdentity.removeValue(forKey: identity) }
    }
}

extension BluetoothAddress {
    /// The address with an identity type (0x02, 0x03: a controller that resolved it) written as the device type
    /// it stands for (0x00, 0x01), the form Identity Address Information carries, so one device's identity is
    /// one key whichever way it was reported.
    var identityForm: BluetoothAddress {
        BluetoothAddress(bytes: bytes, type: type.isRandom ? .randomDevice : .publicDevice)
    }
}

extension BluetoothAddress.AddressType {
    /// How the store writes an address type.
    var storeCode: Int64 { Int64(rawValue) }

    init?(storeCode: Int64) {
        guard let raw = UInt8(exactly: storeCode), raw <= 0x03 else { return nil }
        self.init(rawValue: raw)
    }
}
