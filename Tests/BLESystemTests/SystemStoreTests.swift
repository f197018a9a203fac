import BLECore
import Foundation
import GRDB
import Synchronization
import Testing

@testable import BLESystem

/// The system store on files: identifiers that outlive the process, files that cannot be used, bounds and ages.
@Suite struct SystemStoreTests {
    /// A folder of its own for each test, removed at the end.
    final class Folder {
        let path: String
        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        func file(_ name: String = "phone.sqlite") -> String { path + "/" + name }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    /// A clock a test moves by hand.
    final class Clock: Sendable {
        private let seconds = Mutex<Int64>(1_767_225_600)
        var now: Int64 { seconds.withLock { $0 } }
        func advance(_ by: Int64) { seconds.withLock { $0 += by } }
        var read: @Sendable () -> Int64 { { self.now } }
    }

    static func address(_ n: Int, random: Bool = true) -> BluetoothAddress {
        BluetoothAddress(
            bytes: [0xC0 | UInt8(n >> 24 & 0x3F), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), 1, 2],
            type: random ? .randomDevice : .publicDevice)
    }

    @Test func identifiersOutliveAProcessThatNeverClosedItsStore() throws {
        let folder = try Folder()
        let clock = Clock()
        var first: UUID
        do {
            let store = try SystemStore(path: folder.file(), seed: 42, now: clock.read)
            first = store.identifier(for: Self.address(1))
            #expect(store.identifier(for: Self.address(1)) == first)
            // No close: the process is killed here, perhaps before the writer put the peer's row on disk. The
            // identifier is derived from the address under the file's key, so it comes back all the same.
        }
        let again = try SystemStore(path: folder.file(), seed: 42, now: clock.read)
        #expect(again.identifier(for: Self.address(1)) == first)
        #expect(again.address(for: first) == Self.address(1))
        // A new device gets an identifier of its own.
        let second = again.identifier(for: Self.address(2))
        #expect(second != first)
        again.close()
    }

    /// Two processes of one device (two `ble` commands at once) with the store open, both meeting a new device:
    /// both print the same identifier, and what each writes about it afterwards lands. Before, the second's insert
    /// failed ("UNIQUE constraint failed"), it kept an identifier of its own in memory, and its GATT cache could
    /// not be written (a foreign key to a peer that was never stored).
    @Test func twoProcessesMeetingOneDeviceGiveItOneIdentifier() throws {
        let folder = try Folder()
        let clock = Clock()
        let first = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        let second = try SystemStore(path: folder.file(), seed: 2, now: clock.read)
        let a = first.identifier(for: Self.address(1))
        let b = second.identifier(for: Self.address(1))
        #expect(a == b)
        second.setGATTCache(SystemStore.GATTCache(hash: [1, 2], record: [3]), for: b)
        second.flush()
        second.close()
        first.close()
        let later = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        #expect(later.existingIdentifier(for: Self.address(1)) == a)
        #expect(later.gattCache(for: a) == SystemStore.GATTCache(hash: [1, 2], record: [3]))
        #expect(later.knownPeerCount == 1)
        later.close()
    }

    @Test func identifiersAreRandomPerSystemAndRepeatWithTheSeed() throws {
        let clock = Clock()
        let a = try SystemStore(path: nil, seed: 1, now: clock.read)
        let b = try SystemStore(path: nil, seed: 1, now: clock.read)
        let c = try SystemStore(path: nil, seed: 2, now: clock.read)
        let d = try SystemStore(path: nil, seed: nil, now: clock.read)
        let ids = [a, b, c, d].map { $0.identifier(for: Self.address(7)) }
        #expect(ids[0] == ids[1])
        #expect(ids[0] != ids[2] && ids[0] != ids[3] && ids[2] != ids[3])
        #expect(ids.allSatisfy { $0.uuidString.dropFirst(14).first == "4" })  // version 4
    }

    @Test func namesAndLastSeenAreWrittenInBatches() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        let id = store.identifier(for: Self.address(1))
        store.noteSeen(id, name: "Lamp")
        #expect(store.knownPeer(id)?.name == "Lamp")
        // Not written yet: a process killed now loses the name (at most `batchLimit` peers or `batchAge` seconds).
        let unflushed = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        #expect(unflushed.knownPeer(id)?.name == nil)
        unflushed.close()
        store.flush()
        let flushed = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        #expect(flushed.knownPeer(id)?.name == "Lamp")
        flushed.close()
        // A full batch is written without a flush, by the store's writer: nobody waits for it but this test.
        for n in 10..<(10 + SystemStore.batchLimit) {
            store.noteSeen(store.identifier(for: Self.address(n)), name: "device \(n)")
        }
        #expect(store.writer.waitUntilWritten(timeout: .seconds(30)))
        let batched = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        #expect(batched.knownPeer(store.identifier(for: Self.address(10)))?.name == "device 10")
        batched.close()
        store.close()
    }

    /// Another process holding the file longer than the busy timeout: the writes waiting are tried again a
    /// second later, not lost, and a write asked for at once meanwhile does not overtake them.
    @Test func writesWaitingForABusyFileAreTriedAgain() throws {
        let folder = try Folder()
        let clock = Clock()
        let log = LogRecorder()
        let store = try SystemStore(path: folder.file(), seed: 5, now: clock.read, logger: log.logger)
        let holder = try DatabaseQueue(path: folder.file())
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? holder.writeWithoutTransaction { db in
                try db.inTransaction(.exclusive) {
                    holding.signal()
                    _ = release.wait(timeout: .now() + 60)
                    return .commit
                }
            }
            released.signal()
        }
        #expect(holding.wait(timeout: .now() + 60) == .success)
        let id = store.identifier(for: Self.address(1))
        // The writer's first run waits the busy timeout (2 s) and fails; the file is let go once it said so.
        let deadline = Date().addingTimeInterval(60)
        while !log.lines.contains(where: { $0.contains("tried again in a second") }), Date() < deadline {
            usleep(10_000)
        }
        #expect(log.lines.contains { $0.contains("tried again in a second") })
        release.signal()
        #expect(released.wait(timeout: .now() + 60) == .success)
        #expect(store.writer.waitUntilWritten(timeout: .seconds(60)))
        let next = try SystemStore(path: folder.file(), seed: 5, now: clock.read)
        #expect(next.existingIdentifier(for: Self.address(1)) == id)
        next.close()
        store.close()
        try holder.close()
        #expect(!log.lines.contains { $0.contains("given up") })
    }

    @Test func knownPeersAreBoundedAndAged() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 4, now: clock.read)
        // Rotating addresses: 1,500 devices heard once each, one second apart.
        var ids: [UUID] = []
        for n in 0..<1_500 {
            clock.advance(1)
            ids.append(store.identifier(for: Self.address(n)))
        }
        #expect(store.knownPeerCount == SystemStore.peerLimit)
        #expect(store.knownPeer(ids[0]) == nil, "the least recently seen go first")
        #expect(store.knownPeer(ids[1_499]) != nil)
        store.close()
        let rows = try DatabaseQueue(path: folder.file()).read {
            try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM peer")
        }
        #expect(rows == SystemStore.peerLimit)
        // 91 days later, nothing is left.
        clock.advance(91 * 24 * 3600)
        let later = try SystemStore(path: folder.file(), seed: 4, now: clock.read)
        #expect(later.knownPeerCount == 0)
        later.close()
    }

    @Test(arguments: ["garbage", "truncated", "newer"])
    func anUnusableFileIsAnErrorNamingItOrARebuild(kind: String) throws {
        let folder = try Folder()
        let clock = Clock()
        let path = folder.file()
        switch kind {
        case "garbage":
            try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        case "truncated":
            let store = try SystemStore(path: path, seed: 5, now: clock.read)
            for n in 0..<400 { _ = store.identifier(for: Self.address(n)) }
            store.close()
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            try bytes.prefix(bytes.count / 2 + 100).write(to: URL(fileURLWithPath: path))
        default:
            let store = try SystemStore(path: path, seed: 5, now: clock.read)
            store.close()
            try DatabaseQueue(path: path).write { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from the future')")
            }
        }
        #expect {
            _ = try SystemStore(path: path, seed: 5, now: clock.read)
        } throws: { error in
            "\(error)".contains(path)
        }
        let rebuilt = try SystemStore(path: path, rebuildUnusable: true, seed: 5, now: clock.read)
        #expect(rebuilt.knownPeerCount == 0)
        _ = rebuilt.identifier(for: Self.address(1))
        rebuilt.close()
        #expect(FileManager.default.fileExists(atPath: path + ".unusable"))
    }

    /// Fuzz finding (system-store): a file whose count of identifiers drawn reads as negative (the store writes
    /// the unsigned count's bit pattern; this one, -236, is what the fuzzer wrote) trapped the process that
    /// opened it, converting it to an unsigned count. It opens, and drawing goes on from that count, wrapping
    /// past the largest.
    @Test(arguments: [Int64(bitPattern: 0xFFFF_FFFF_FFFF_FF14), -1])
    func aNegativeCountOfIdentifiersDrawnOpens(drawn: Int64) throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 8, now: clock.read)
        store.close()
        try DatabaseQueue(path: folder.file()).write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('drawn', ?)", arguments: [drawn])
        }
        let reopened = try SystemStore(path: folder.file(), seed: 8, now: clock.read)
        let identifiers = (1...3).map { reopened.identifier(for: Self.address($0)) }
        #expect(Set(identifiers).count == 3)
        reopened.close()
        let again = try SystemStore(path: folder.file(), seed: 8, now: clock.read)
        #expect((1...3).map { again.identifier(for: Self.address($0)) } == identifiers)
        again.close()
    }

    @Test func anEmptyFileIsANewStoreAndAFolderIsAnError() throws {
        let folder = try Folder()
        let clock = Clock()
        #expect(FileManager.default.createFile(atPath: folder.file(), contents: Data()))
        let store = try SystemStore(path: folder.file(), seed: 6, now: clock.read)
        _ = store.identifier(for: Self.address(1))
        #expect(store.knownPeerCount == 1)
        store.close()
        #expect(throws: SystemStore.StoreError.self) {
            _ = try SystemStore(path: folder.path, seed: 6, now: clock.read)
        }
    }
}
