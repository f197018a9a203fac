import BLECore
import BLESystem
import Foundation
import GRDB
import Synchronization
import Testing

/// The store's preserved manager states: committed at once (a process killed right after a change finds it),
/// replaced and forgotten by key, and a damaged row is none.
@Suite struct PreservedStateStoreTests {
    typealias Folder = SystemStoreTests.Folder
    typealias Clock = SystemStoreTests.Clock

    static func manager(_ id: String, role: PreservedManager.Role = .central, record: [UInt8] = [1, 2])
        -> PreservedManager
    {
        PreservedManager(
            key: .init(app: "com.example.lock", role: role, restoreIdentifier: id),
            backgroundModes: ["bluetooth-central"], record: record)
    }

    /// Two processes of one device opening a new store at the same moment (two `ble` commands started together):
    /// both open it, whichever makes the tables. Before, the loser failed with "table peer already exists".
    @Test func manyOpeningANewStoreAtOnceAllSucceed() throws {
        for _ in 0..<10 {
            let folder = try Folder()
            let path = folder.file()
            let clock = Clock()
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { _ in
                do {
                    try SystemStore(path: path, seed: 1, now: clock.read).close()
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 } == [])
        }
    }

    @Test func aStateIsCommittedAtOnceAndReplacedOrForgottenByKey() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(store.preservedManagers.isEmpty)
        store.setPreserved(Self.manager("a"))
        store.setPreserved(Self.manager("b", role: .peripheral))
        store.setPreserved(Self.manager("a", record: [3]))
        // Another process opening the file now (this one never closes it, as a killed one does not) finds both,
        // the replaced one as replaced.
        let reader = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(reader.preservedManagers == [Self.manager("a", record: [3]), Self.manager("b", role: .peripheral)])
        reader.close()
        store.removePreserved(Self.manager("a").key)
        let later = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(later.preservedManagers == [Self.manager("b", role: .peripheral)])
        later.close()
        store.close()
    }

    @Test func aDamagedRowIsNoStateAndTheOthersAreRead() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 2, now: clock.read)
        store.setPreserved(Self.manager("good"))
        store.close()
        try DatabaseQueue(path: folder.file()).write {
            try $0.execute(
                sql: """
                    INSERT INTO preservedManager (app, role, restoreIdentifier, backgroundModes, record)
                    VALUES ('com.example.other', 'observer', 'x', '', x'00'),
                           ('com.example.other', 'central', 'y', 'bluetooth-central', 'text, not bytes')
                    """)
        }
        let again = try SystemStore(path: folder.file(), seed: 2, now: clock.read)
        #expect(again.preservedManagers == [Self.manager("good")])
        again.close()
    }
}
