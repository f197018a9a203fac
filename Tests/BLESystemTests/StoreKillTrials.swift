import BLECore
import BLESystem
import Foundation
import GRDB
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The store under kill -9: `ble-store-writer` (Tests/StoreWriter) changes a store, printing
/// each change once it is committed, and is killed with SIGKILL at a random moment: while the process starts,
/// while the store opens (on a new file: while it migrates), while it writes, while it closes (the checkpoint of
/// the write-ahead log). The store is then opened as the next process would open it, and must open without an
/// error, a warning or a file moved aside, and hold every change the writer printed: each peer's row, each name
/// and last-seen time, GATT cache, bond (field for field) and bond removal, each local identity. A change the
/// writer began but did not print may be there or not. An identifier the writer printed for an address is the
/// one the next process gives that address, whether or not its row reached the file (they are derived under
/// the file's key).
///
/// `BLE_KILL_TRIALS` trials (100 by default, about 30 s), their kill moments drawn from `BLE_KILL_SEED` (18 by
/// default), so a run repeats its schedule (the moments a kill lands on still vary with the machine's load; the
/// report it prints says where they landed); `BLE_KILL_VERBOSE=1` prints a line per trial.
/// `Scripts/kill-trials.sh --trials N --seed S` runs it alone.
@Suite(.serialized) struct StoreKillTrials {
    /// What the writer's lines claim, across the trials on one file.
    struct Model {
        /// A value committed (`claimed`), and the values tried since, any of which the file may hold instead.
        struct Accepted<Value: Equatable> {
            var committed: Value?
            var attempts: [Value] = []
            var claimed: Bool { committed != nil }
            mutating func tried(_ value: Value) { attempts.append(value) }
            mutating func committed(_ value: Value) {
                committed = value
                attempts = []
            }
            func allows(_ value: Value) -> Bool {
                guard let committed else { return true }
                return committed == value || attempts.contains(value)
            }
        }
        struct Seen: Equatable {
            var name: String?
            var lastSeen: Int64
        }

        /// Identifiers given to addresses (printed as soon as given: the next process must give the same).
        var identifiers: [String: UUID] = [:]
        /// Identifiers whose row was claimed on disk (after a flush).
        var rows: [String: UUID] = [:]
        var seen: [UUID: Accepted<Seen>] = [:]
        var caches: [UUID: Accepted<SystemStore.GATTCache?>] = [:]
        var bonds: [UUID: Accepted<StoredBond?>] = [:]
        /// Local identities by name: their IRK in hex and address token, as the writer prints them.
        var identities: [String: [String]] = [:]
        /// The latest time the writer stamped (its clock moves a second per change).
        var clock: Int64 = 1_767_225_600
        var committedLines = 0
    }

    /// Where each kill landed, and what the trials checked.
    struct Tally {
        var trials = 0
        var fresh = 0
        var beforeOpen = 0
        var inOpen = 0
        var inFirstOpenOfNewFile = 0
        var writing = 0
        var inClose = 0
        /// Files killed with 0...4 of the 5 migrations applied (and one that was empty or absent: -1).
        var migrationsAtKill: [Int: Int] = [:]
        /// Trials whose kill left frames in the write-ahead log for the next open to replay.
        var walLeft = 0
        /// Trials whose kill left a rollback journal (the switch of a new file to WAL mode).
        var journalLeft = 0
        var committedLines = 0
        var opens = 0

        var report: String {
            let migrations = migrationsAtKill.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
                .joined(separator: ", ")
            return """
                \(trials) trials (\(fresh) on a new file); killed before the store opened \(beforeOpen), while it \
                opened \(inOpen) (the first open of a new file, migrations included: \(inFirstOpenOfNewFile)), \
                while writing \(writing), while closing (checkpoint) \(inClose); migrations applied in the file \
                at a kill during a new file's first open [\(migrations)]; write-ahead log left to replay \(walLeft); \
                rollback journal left \(journalLeft); \
                \(committedLines) committed changes claimed; \(opens) opens by the writers
                """
        }
    }

    static var writer: String {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ble-store-writer").path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/ble-store-writer").path
    }

    static func environment(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? fallback
    }

    @Test func aStoreKilledAtAnyMomentOpensCleanlyWithEveryCommittedChange() throws {
        let trials = Self.environment("BLE_KILL_TRIALS", 100)
        let seed = UInt64(Self.environment("BLE_KILL_SEED", 18))
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.writer),
            "ble-store-writer is not built (swift build --build-tests builds it): \(Self.writer)")
        let folder = try SystemStoreTests.Folder()
        let path = folder.file()
        // The trials' own draws (kill moments, new files, the writers' seeds).
        var random = SeededRandom(seed: seed)
        var model = Model()
        var tally = Tally()
        let started = ContinuousClock.now
        // When a writer on a new file prints `open 1` and `opened 1` (its first open, the migrations included):
        // the median of what the trials on new files saw so far (the first one waits for `opened 1`), so the aim
        // follows the machine's load.
        var starts: [Duration] = []
        var ends: [Duration] = []
        var window: (start: Duration, end: Duration) {
            guard !ends.isEmpty else { return (.milliseconds(30), .milliseconds(60)) }
            return (starts.sorted()[starts.count / 2], ends.sorted()[ends.count / 2])
        }
        let verbose = ProcessInfo.processInfo.environment["BLE_KILL_VERBOSE"] == "1"
        for trial in 0..<trials {
            let fresh = trial == 0 || Int.random(in: 0..<10, using: &random) < 4
            if fresh {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    try? FileManager.default.removeItem(atPath: path + suffix)
                }
                model = Model(clock: model.clock)
                tally.fresh += 1
            }
            // On a new file, two kills in three aimed at the first open, between `open 1` and `opened 1` as the
            // first trial saw them, mostly at its end, where the migrations run (a writer's start varies by a few
            // milliseconds); on a file in use, one in five at the start and the open; the rest at the writing that
            // follows (a close, with its checkpoint, every 50 changes or so).
            let early = Int.random(in: 0..<(fresh ? 3 : 5), using: &random) < (fresh ? 2 : 1)
            let delay: Duration? =
                trial == 0
                ? nil
                : early
                    ? window.start + (window.end - window.start) * Double.random(in: 0.2...1.1, using: &random)
                    : window.end + .milliseconds(Int.random(in: 0...500, using: &random))
            let outcome = try Self.runAndKill(
                path: path, folder: folder.path, trial: trial, seed: random.next() >> 1, clock: model.clock + 10_000,
                after: delay)
            if fresh, let start = outcome.opening, let end = outcome.opened {
                starts.append(start)
                ends.append(end)
            }
            let lines = outcome.lines
            // Where the kill landed.
            let phases = lines.filter { ["open", "opened", "close", "closed"].contains($0.first) }
            tally.opens += lines.filter { $0.first == "opened" }.count
            switch phases.last?.first {
            case nil: tally.beforeOpen += 1
            case "open":
                tally.inOpen += 1
                if fresh && phases.count == 1 {
                    tally.inFirstOpenOfNewFile += 1
                    tally.migrationsAtKill[outcome.migrations, default: 0] += 1
                }
            case "close": tally.inClose += 1
            default: tally.writing += 1
            }
            if outcome.walFrames { tally.walLeft += 1 }
            if outcome.journal { tally.journalLeft += 1 }
            if verbose {
                let after = delay.map { "\($0)" } ?? "opened 1 (open window \(window))"
                let phase = phases.last?.joined(separator: " ") ?? "none"
                print(
                    "trial \(trial): \(fresh ? "new file" : "file in use"), killed after \(after), last phase \(phase), "
                        + "\(lines.count) lines, migrations \(outcome.migrations), WAL frames left \(outcome.walFrames), "
                        + "rollback journal left \(outcome.journal)")
            }
            for line in lines {
                try Self.apply(line, to: &model, trial: trial)
            }
            let committed: Set = ["id", "peer", "seen", "cache", "uncache", "bond", "unbond", "identity"]
            tally.committedLines += lines.filter { committed.contains($0[0]) }.count
            try Self.verify(path: path, folder: folder.path, model: &model, trial: trial, lines: lines)
            tally.trials += 1
        }
        let elapsed = ContinuousClock.now - started
        print("store kill trials (seed \(seed)): \(tally.report); \(elapsed) in all")
        #expect(tally.trials == trials)
    }

    // MARK: One trial

    struct Outcome {
        var lines: [[String]]
        /// When the writer printed `open 1` and `opened 1`, if it did before the kill.
        var opening: Duration?
        var opened: Duration?
        /// Migrations applied in the file as the kill left it (-1: no database yet).
        var migrations: Int
        /// Whether the kill left frames in the write-ahead log.
        var walFrames: Bool
        /// Whether the kill left a rollback journal (SQLite uses one while it turns a new file to WAL mode).
        var journal: Bool
    }

    /// Starts the writer on `path`, kills it with SIGKILL after `delay` (nil: as soon as it prints `opened 1`),
    /// and returns its whole lines, when it printed `open 1` and `opened 1`, and a look at a copy of the file as
    /// the kill left it.
    static func runAndKill(
        path: String, folder: String, trial: Int, seed: UInt64, clock: Int64, after delay: Duration?
    ) throws -> Outcome {
        let output = folder + "/writer-\(trial).out"
        let errors = folder + "/writer-\(trial).err"
        for file in [output, errors] { _ = FileManager.default.createFile(atPath: file, contents: nil) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: writer)
        process.arguments = [path, "--seed", "\(seed)", "--clock", "\(clock)", "--seconds", "20"]
        let handles = [FileHandle(forWritingAtPath: output), FileHandle(forWritingAtPath: errors)]
        process.standardOutput = handles[0]
        process.standardError = handles[1]
        let start = ContinuousClock.now
        defer { for handle in handles { try? handle?.close() } }
        try process.run()
        // Whatever happens below, the writer does not outlive the trial.
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        // Until the kill, or until `opened 1` when there is no delay: when `open 1` and `opened 1` appear, which aims
        // the later trials' kills (looked at every 0.2 ms while the output is a line or two, then no more).
        var opened: Duration?
        var opening: Duration?
        let killAt = start + (delay ?? .seconds(10))
        while ContinuousClock.now < killAt {
            guard opened == nil else {
                let left = killAt - ContinuousClock.now
                Thread.sleep(
                    forTimeInterval: Double(left.components.attoseconds) / 1e18 + Double(left.components.seconds))
                break
            }
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if opening == nil, text.contains("open 1\n") { opening = ContinuousClock.now - start }
            if text.contains("opened 1\n") {
                opened = ContinuousClock.now - start
                if delay == nil { break }
            }
            usleep(200)
        }
        if delay == nil {
            try #require(opened != nil, "trial \(trial): the writer never opened its store within 10 s")
        }
        let alreadyGone = !process.isRunning
        kill(process.processIdentifier, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning && ContinuousClock.now < deadline { usleep(1_000) }
        try #require(!process.isRunning, "trial \(trial): the writer outlived SIGKILL by 10 s")
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        if alreadyGone {
            let stderr = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            Issue.record(
                """
                trial \(trial): the writer ended before it was killed (status \(process.terminationStatus)): \
                \(text.split(separator: "\n").suffix(3)) \(stderr.suffix(2_000))
                """)
        }
        // Only whole lines: a line cut by the kill claims nothing.
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true).map {
            $0.split(separator: " ").map(String.init)
        }
        if !text.hasSuffix("\n"), !lines.isEmpty { lines.removeLast() }
        let look = try lookAtCopy(path, in: folder)
        try? FileManager.default.removeItem(atPath: output)
        try? FileManager.default.removeItem(atPath: errors)
        return Outcome(
            lines: lines, opening: opening, opened: opened, migrations: look.migrations, walFrames: look.walFrames,
            journal: look.journal)
    }

    /// How many migrations a copy of the killed file holds, and whether it has a write-ahead log to replay. The
    /// copy is looked at, so the store itself is next opened by `SystemStore`, as the next process would.
    static func lookAtCopy(_ path: String, in folder: String) throws -> (
        migrations: Int, walFrames: Bool, journal: Bool
    ) {
        let files = FileManager.default
        let copy = folder + "/copy.sqlite"
        let suffixes = ["", "-wal", "-shm", "-journal"]
        for suffix in suffixes {
            try? files.removeItem(atPath: copy + suffix)
            if files.fileExists(atPath: path + suffix) {
                try files.copyItem(atPath: path + suffix, toPath: copy + suffix)
            }
        }
        defer { for suffix in suffixes { try? files.removeItem(atPath: copy + suffix) } }
        func size(_ file: String) -> Int {
            ((try? files.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.intValue ?? 0
        }
        // A WAL file holds its 32-octet header and, per frame, 24 octets and a page.
        let walFrames = size(copy + "-wal") > 32
        // A rollback journal with content: the kill came while SQLite turned the new file to WAL mode.
        let journal = size(copy + "-journal") > 0
        guard size(copy) > 0 || walFrames else {
            return (-1, walFrames, journal)
        }
        let migrations = try DatabaseQueue(path: copy).read { db -> Int in
            guard try db.tableExists("grdb_migrations") else { return 0 }
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM grdb_migrations") ?? 0
        }
        return (migrations, walFrames, journal)
    }

    // MARK: The writer's lines

    static func address(_ token: String) throws -> BluetoothAddress {
        let parts = token.split(separator: "-")
        let type = try #require(parts.count == 2 ? UInt8(parts[0]).flatMap(BluetoothAddress.AddressType.init) : nil)
        return BluetoothAddress(bytes: try bytes(String(parts[1])), type: type)
    }

    static func bytes(_ hex: String) throws -> [UInt8] {
        var octets: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = try #require(hex.index(index, offsetBy: 2, limitedBy: hex.endIndex))
            octets.append(try #require(UInt8(hex[index..<next], radix: 16)))
            index = next
        }
        return octets
    }

    static func key(_ token: String) throws -> StoredLongTermKey? {
        guard token != "-" else { return nil }
        let parts = token.split(separator: ":").map(String.init)
        try #require(parts.count == 3)
        return StoredLongTermKey(
            key: try bytes(parts[0]), ediv: try #require(UInt16(parts[1])), rand: try #require(UInt64(parts[2])))
    }

    /// A bond from its fields (from the second word of the line).
    static func bond(_ fields: ArraySlice<String>) throws -> StoredBond {
        let f = Array(fields)
        try #require(f.count == 9)
        return StoredBond(
            identifier: try #require(UUID(uuidString: f[0])), identityAddress: try address(f[1]),
            resolvingKey: f[2] == "-" ? nil : try bytes(f[2]), centralKey: try key(f[3]), peripheralKey: try key(f[4]),
            keySize: try #require(UInt8(f[5])), authenticated: f[6] == "1", secureConnections: f[7] == "1",
            created: try #require(Int64(f[8])))
    }

    static func apply(_ line: [String], to model: inout Model, trial: Int) throws {
        func id(_ index: Int) throws -> UUID { try #require(UUID(uuidString: line[index])) }
        switch line[0] {
        case "id":
            let identifier = try id(2)
            if let known = model.identifiers[line[1]] {
                #expect(
                    known == identifier,
                    "trial \(trial): \(line[1]) has identifier \(identifier), but \(known) was committed for it")
            }
            model.identifiers[line[1]] = identifier
        case "peer":
            model.rows[line[1]] = try id(2)
        case "try-seen", "seen":
            let time = try #require(Int64(line[3]))
            model.clock = max(model.clock, time)
            let seen = Model.Seen(name: line[2], lastSeen: time)
            if line[0] == "seen" {
                model.seen[try id(1), default: .init()].committed(seen)
            } else {
                model.seen[try id(1), default: .init()].tried(seen)
            }
        case "try-cache", "cache":
            let cache = SystemStore.GATTCache(hash: try bytes(line[2]), record: try bytes(line[3]))
            if line[0] == "cache" {
                model.caches[try id(1), default: .init()].committed(cache)
            } else {
                model.caches[try id(1), default: .init()].tried(cache)
            }
        case "try-uncache": model.caches[try id(1), default: .init()].tried(nil)
        case "uncache": model.caches[try id(1), default: .init()].committed(nil)
        case "try-bond", "bond":
            let bond = try bond(line[1...])
            model.clock = max(model.clock, bond.created)
            if line[0] == "bond" {
                model.bonds[bond.identifier, default: .init()].committed(bond)
            } else {
                model.bonds[bond.identifier, default: .init()].tried(bond)
            }
        case "try-unbond": model.bonds[try id(1), default: .init()].tried(nil)
        case "unbond": model.bonds[try id(1), default: .init()].committed(nil)
        case "identity":
            let identity = Array(line[2...3])
            if let known = model.identities[line[1]] {
                #expect(known == identity, "trial \(trial): the identity \(line[1]) changed after it was kept")
            }
            model.identities[line[1]] = identity
        case "error":
            Issue.record("trial \(trial): the writer's store logged: \(line.dropFirst().joined(separator: " "))")
        default: break
        }
    }

    // MARK: The next process

    /// Opens the store as the next process would, checks it against what was claimed, and takes what it holds as
    /// the claims from now on (a file that changes between two looks without a writer is caught the next time).
    static func verify(path: String, folder: String, model: inout Model, trial: Int, lines: [[String]]) throws {
        let log = LogRecorder()
        let clock = model.clock + 10_000
        let store: SystemStore
        do {
            store = try SystemStore(path: path, now: { clock }, logger: log.logger)
        } catch {
            Issue.record("trial \(trial): the store does not open after the kill: \(error)")
            throw error
        }
        defer { store.close() }
        let context = "trial \(trial) (last lines: \(lines.suffix(3).map { $0.joined(separator: " ") }))"
        #expect(
            log.lines.filter { $0.hasPrefix("warning") || $0.hasPrefix("error") || $0.hasPrefix("critical") }
                .isEmpty, "\(context): the store complained as it opened: \(log.lines)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains("unusable") }
        #expect(aside.isEmpty, "\(context): the store moved its file aside: \(aside)")

        for (token, identifier) in model.rows {
            let address = try address(token)
            #expect(
                store.existingIdentifier(for: address) == identifier,
                "\(context): \(token) lost its identifier \(identifier)")
            #expect(store.knownPeer(identifier)?.address == address, "\(context): \(identifier) lost its peer")
        }
        // An identifier whose row was not written yet is given again (and its row written now).
        for (token, identifier) in model.identifiers where model.rows[token] == nil {
            let address = try address(token)
            #expect(
                store.identifier(for: address) == identifier,
                "\(context): \(token) was given \(identifier), but the next process gives it another")
        }
        for (identifier, accepted) in model.seen where accepted.claimed {
            let peer = store.knownPeer(identifier)
            let seen = peer.map { Model.Seen(name: $0.name, lastSeen: $0.lastSeen) }
            #expect(
                seen.map(accepted.allows) == true,
                "\(context): \(identifier) is \(String(describing: seen)), committed \(accepted.committed!)")
        }
        for (identifier, accepted) in model.caches where accepted.claimed {
            let cache = store.gattCache(for: identifier)
            #expect(accepted.allows(cache), "\(context): the GATT cache of \(identifier) is not the committed one")
        }
        for (identifier, accepted) in model.bonds where accepted.claimed {
            let bond = store.bond(for: identifier)
            #expect(
                accepted.allows(bond),
                "\(context): the bond of \(identifier) is \(String(describing: bond)), committed \(accepted.committed!)"
            )
        }
        for (name, identity) in model.identities {
            let kept = store.localIdentity(named: name)
            #expect(
                [Self.hex(kept.resolvingKey), token(kept.address)] == identity,
                "\(context): the identity \(name) changed")
        }

        // What the file holds is what the next trial starts from.
        for peer in store.knownPeers {
            model.clock = max(model.clock, peer.lastSeen)
            if let known = model.identifiers[token(peer.address)] {
                #expect(known == peer.identifier, "\(context): \(peer.address) changed identifier")
            }
            model.identifiers[token(peer.address)] = peer.identifier
            model.rows[token(peer.address)] = peer.identifier
            model.seen[peer.identifier, default: .init()].committed(.init(name: peer.name, lastSeen: peer.lastSeen))
            model.caches[peer.identifier, default: .init()].committed(store.gattCache(for: peer.identifier))
            model.bonds[peer.identifier, default: .init()].committed(store.bond(for: peer.identifier))
        }
        #expect(
            store.bonds.allSatisfy { store.knownPeer($0.identifier) != nil },
            "\(context): a bond names no known peer")
    }

    static func token(_ address: BluetoothAddress) -> String { "\(address.type.rawValue)-" + hex(address.bytes) }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
