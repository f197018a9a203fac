import BLECore
import BLESystem
import Foundation
import GRDB
import Testing

/// The store's GATT caches: kept under the peer, written in batches, gone with the peer, and a damaged row is
/// no cache.
@Suite struct GATTCacheStoreTests {
    typealias Folder = SystemStoreTests.Folder
    typealias Clock = SystemStoreTests.Clock

    static let cache = SystemStore.GATTCache(hash: Array(0..<16), record: [1, 2, 3])

    @Test func aCacheOutlivesTheStoreAndCanBeForgotten() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        #expect(store.gattCache(for: peer) == nil)
        store.setGATTCache(Self.cache, for: peer)
        // Before it is written, it is already what the store answers.
        #expect(store.gattCache(for: peer) == Self.cache)
        // An identifier the store does not know keeps nothing.
        let stranger = UUID()
        store.setGATTCache(Self.cache, for: stranger)
        #expect(store.gattCache(for: stranger) == nil)
        store.close()

        let again = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(again.gattCache(for: peer) == Self.cache)
        again.setGATTCache(nil, for: peer)
        #expect(again.gattCache(for: peer) == nil)
        again.close()
        let third = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(third.gattCache(for: peer) == nil)
        third.close()
    }

    @Test func aForgottenPeerTakesItsCacheWithIt() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 2, now: clock.read)
        let first = store.identifier(for: SystemStoreTests.address(0))
        store.setGATTCache(Self.cache, for: first)
        store.flush()
        // Enough new devices to push the first out.
        for n in 1...SystemStore.peerLimit {
            clock.advance(1)
            _ = store.identifier(for: SystemStoreTests.address(n))
        }
        #expect(store.knownPeer(first) == nil)
        #expect(store.gattCache(for: first) == nil)
        store.close()
        let rows = try DatabaseQueue(path: folder.file()).read {
            try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM gattCache")
        }
        #expect(rows == 0)
    }

    @Test func aDamagedRowIsNoCacheAndNoPeer() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        store.close()
        // A hand (or another program) wrote text where the store writes bytes.
        try DatabaseQueue(path: folder.file()).write {
            try $0.execute(
                sql: "INSERT INTO gattCache (identifier, hash, record) VALUES (?, 'not bytes', 42)",
                arguments: [peer.uuidString])
            try $0.execute(
                sql:
                    "INSERT INTO peer (identifier, address, addressType, name, lastSeen) VALUES (?, 'text', 0, 7, 'x')",
                arguments: [UUID().uuidString])
        }
        let again = try SystemStore(path: folder.file(), seed: 3, now: clock.read)
        #expect(again.gattCache(for: peer) == nil)
        #expect(again.knownPeers.map(\.identifier) == [peer])
        again.close()
    }
}
