import BLECore
import BLESystem
import Foundation
import GRDB
import Testing

/// This device's identities in the store ("v5: local identities"): made on first use, kept across processes, and a
/// row that cannot be read is replaced, never a trap.
@Suite struct LocalIdentityStoreTests {
    typealias Folder = SystemStoreTests.Folder
    typealias Clock = SystemStoreTests.Clock

    @Test func anIdentityIsKeptForTheNextProcessEvenWithoutAClose() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), now: clock.read)
        let identity = store.localIdentity(named: "lock")
        #expect(identity.resolvingKey.count == 16)
        #expect(identity.address.bytes[0] & 0xC0 == 0xC0)
        #expect(store.localIdentity(named: "lock") == identity)
        #expect(store.localIdentity() != identity)
        // No close: the process is killed here.
        let next = try SystemStore(path: folder.file(), now: clock.read)
        #expect(next.localIdentity(named: "lock") == identity)
        next.close()
        store.close()
    }

    /// Found reading the rows the kill -9 trials (StoreKillTrials) check: the identity reader took its columns
    /// with GRDB's typed subscript, which traps when a column holds another kind of value (an integer where the
    /// key's bytes belong), where every other reader of the store checks the kind and skips the row.
    @Test(arguments: [
        "UPDATE localIdentity SET resolvingKey = 42",
        "UPDATE localIdentity SET address = 1.5",
        "UPDATE localIdentity SET resolvingKey = 'sixteen octets!!'",
        "UPDATE localIdentity SET address = x'C1020304'",
    ])
    func aLocalIdentityRowOfAnotherKindIsReplacedNotATrap(damage: String) throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), now: clock.read)
        let first = store.localIdentity(named: "lock")
        store.close()
        try DatabaseQueue(path: folder.file()).write { db in try db.execute(sql: damage) }
        let next = try SystemStore(path: folder.file(), now: clock.read)
        let replaced = next.localIdentity(named: "lock")
        #expect(replaced != first)
        #expect(replaced.resolvingKey.count == 16)
        #expect(replaced.address.bytes.count == 6 && replaced.address.bytes[0] & 0xC0 == 0xC0)
        // The replacement is what is kept from now on.
        #expect(next.localIdentity(named: "lock") == replaced)
        next.close()
        let third = try SystemStore(path: folder.file(), now: clock.read)
        #expect(third.localIdentity(named: "lock") == replaced)
        third.close()
    }
}
