import BLECore
import BLEGATT
import BLESystem
import Foundation
import GRDB
import Logging

extension FuzzTarget {
    /// A system store file whose rows a hand, another version or a damaged disk wrote: an empty store with
    /// rows added from the input (peers, GATT caches, preserved managers, the identifier count, a migration it
    /// does not know), each column any SQLite value or a plausible one. The store opens or refuses the file;
    /// then its peers, caches (decoded as a GATT cache record) and preserved managers are read, each peer seen
    /// again, a new peer given an identifier, and the store flushed and closed. A peer read from the file is
    /// found again by its address.
    static let systemStore = FuzzTarget("system-store", "fuzzed rows in a store file, opened by SystemStore") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        let flags = reader.byte()
        let now: Int64 = 1_767_225_600 + Int64(reader.uint32())
        let path = StoreScratch.freshStore()
        do {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = false
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.write { db in
                var rows = StoreRows(reader: reader, now: now)
                while !rows.reader.isEmpty {
                    let (sql, values) = rows.next()
                    // A row the schema refuses (a NULL where it says NOT NULL, a key twice) is not written.
                    try? db.execute(sql: sql, arguments: StatementArguments(values))
                }
            }
            try queue.close()
        } catch {
            throw Violation("could not write the rows: \(error)")
        }
        guard
            let store = try? SystemStore(
                path: path, rebuildUnusable: flags & 1 != 0, seed: 7, ageing: flags & 2 != 0, now: { now },
                logger: StoreScratch.silent)
        else { return }
        for peer in store.knownPeers {
            try expect(
                store.existingIdentifier(for: peer.address) == peer.identifier,
                "the peer \(peer.identifier) is not found again by its address \(peer.address)")
            if let cache = store.gattCache(for: peer.identifier) {
                _ = GATTCacheRecord(decoding: cache.record)
            }
            store.noteSeen(peer.identifier, name: "seen again")
        }
        for manager in store.preservedManagers {
            _ = manager.key.description
        }
        let newcomer = BluetoothAddress(bytes: [0xC0, 0, 0, 0, 0, flags], type: .randomDevice)
        let identifier = store.identifier(for: newcomer)
        try expect(store.address(for: identifier) == newcomer, "a new peer's identifier does not lead back to it")
        store.flush()
        store.close()
    }
}

/// The store file each input starts from, in a folder of this process's own (in memory where there is
/// /dev/shm), removed when the process exits: an empty store (every migration applied), made once and copied
/// for each input.
enum StoreScratch {
    static let folder: URL = {
        let shared = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        let base =
            FileManager.default.fileExists(atPath: shared.path) ? shared : FileManager.default.temporaryDirectory
        let folder = base.appendingPathComponent("ble-fuzz-store-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        atexit {
            try? FileManager.default.removeItem(at: StoreScratch.folder)
        }
        return folder
    }()

    /// The store's own log (a file moved aside, rows it cannot read) would be written for most inputs.
    static let silent = Logger(label: "swift-ble.fuzz.store") { _ in SwiftLogNoOpLogHandler() }

    /// Bytes, not `Data`: LeakSanitizer does not see through `Data`'s representation and would call the template
    /// a leak.
    static let template: [UInt8] = {
        let path = folder.appendingPathComponent("template.sqlite").path
        guard let store = try? SystemStore(path: path, now: { 0 }) else {
            fatalError("could not make an empty store at \(path)")
        }
        store.close()
        guard let bytes = FileManager.default.contents(atPath: path) else {
            fatalError("could not read the empty store at \(path)")
        }
        return [UInt8](bytes)
    }()

    /// A fresh copy of the empty store; returns its path. What the last input left (the file, its log, files
    /// the store moved aside) is removed.
    static func freshStore() -> String {
        let path = folder.appendingPathComponent("store.sqlite").path
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for file in files where file.hasPrefix("store.sqlite") {
            try? FileManager.default.removeItem(atPath: folder.appendingPathComponent(file).path)
        }
        _ = FileManager.default.createFile(atPath: path, contents: Data(template))
        return path
    }
}

/// Rows for the store's tables, each column from the input: any SQLite value (NULL, an integer, a real, text,
/// a blob) or, more often, one of the shape the store writes.
struct StoreRows {
    var reader: FuzzInput
    let now: Int64
    /// Identifiers the rows share, so caches find their peers.
    let identifiers = (0..<4).map { n in
        UUID(uuid: (0x10, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, UInt8(n))).uuidString
    }

    init(reader: FuzzInput, now: Int64) {
        self.reader = reader
        self.now = now
    }

    mutating func next() -> (String, [DatabaseValue]) {
        switch reader.below(12) {
        case 0...3:
            let identifier = column { $0.identifier() }
            let address = column { Data($0.reader.padded(6)).databaseValue }
            let type = column { Int64($0.reader.below(6)).databaseValue }
            let name = column { String(decoding: $0.reader.chunk(), as: UTF8.self).databaseValue }
            let lastSeen = column { $0.time() }
            return (
                "INSERT INTO peer (identifier, address, addressType, name, lastSeen) VALUES (?, ?, ?, ?, ?)",
                [identifier, address, type, name, lastSeen]
            )
        case 4...6:
            let identifier = column { $0.identifier() }
            let hash = column { Data($0.reader.padded(16)).databaseValue }
            let record = column { Data($0.reader.chunk()).databaseValue }
            return ("INSERT INTO gattCache (identifier, hash, record) VALUES (?, ?, ?)", [identifier, hash, record])
        case 7...9:
            let app = column { ["app", "com.example.door", ""][$0.reader.below(3)].databaseValue }
            let role = column { ["central", "peripheral", "Central"][$0.reader.below(3)].databaseValue }
            let restore = column { String(decoding: $0.reader.chunk(), as: UTF8.self).databaseValue }
            let modes = column {
                ["bluetooth-central", "bluetooth-peripheral bluetooth-central", "", "  x  "][$0.reader.below(4)]
                    .databaseValue
            }
            let record = column { Data($0.reader.chunk()).databaseValue }
            return (
                """
                INSERT INTO preservedManager (app, role, restoreIdentifier, backgroundModes, record)
                VALUES (?, ?, ?, ?, ?)
                """,
                [app, role, restore, modes, record]
            )
        case 10:
            let key = column { ["drawn", "other"][$0.reader.below(2)].databaseValue }
            let value = column { Int64(bitPattern: $0.reader.uint64()).databaseValue }
            return ("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [key, value])
        default:
            // A migration this version does not know: the file comes from a newer one.
            let identifier = column { _ in "v9: from the future".databaseValue }
            return ("INSERT INTO grdb_migrations (identifier) VALUES (?)", [identifier])
        }
    }

    /// One column: usually `plausible`, else any value SQLite holds.
    private mutating func column(_ plausible: (inout StoreRows) -> DatabaseValue) -> DatabaseValue {
        switch reader.below(8) {
        case 0: return .null
        case 1: return Int64(bitPattern: reader.uint64()).databaseValue
        case 2: return Double(bitPattern: reader.uint64()).databaseValue
        case 3: return String(decoding: reader.chunk(), as: UTF8.self).databaseValue
        case 4: return Data(reader.chunk()).databaseValue
        default: return plausible(&self)
        }
    }

    private mutating func identifier() -> DatabaseValue {
        identifiers[reader.below(identifiers.count)].databaseValue
    }

    /// A last-seen time: recent, older than the store keeps, in the future, or at an extreme.
    private mutating func time() -> DatabaseValue {
        let times = [
            now - Int64(reader.uint16()), now - SystemStore.maximumAge - 1, now + 86_400, Int64.min, Int64.max,
        ]
        return times[reader.below(times.count)].databaseValue
    }
}
