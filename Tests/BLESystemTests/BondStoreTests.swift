import BLECore
import BLESMP
import BLESystem
import Foundation
import GRDB
import Logging
import Synchronization
import Testing

/// The store's bonds: committed at once, read back key for key, found by EDIV and Rand and by a resolvable
/// private address, removed, kept from ageing and eviction, one identifier per identity, and a damaged row is no
/// bond.
@Suite struct BondStoreTests {
    typealias Folder = SystemStoreTests.Folder
    typealias Clock = SystemStoreTests.Clock

    static let irk: [UInt8] = Array(0x10..<0x20)
    static let otherIRK: [UInt8] = Array(0x30..<0x40)
    static let identity = BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x07, 0x32, 0xEF], type: .publicDevice)

    /// A bond with every field set, both keys different, EDIV and Rand with their high bits set (Rand is kept as a
    /// signed integer in the file).
    static func bond(_ identifier: UUID, ediv: UInt16 = 0xBEEF, rand: UInt64 = 0xF123_4567_89AB_CDEF) -> StoredBond {
        StoredBond(
            identifier: identifier, identityAddress: identity, resolvingKey: irk,
            centralKey: StoredLongTermKey(key: Array(0x40..<0x50), ediv: 0x8001, rand: 0x8000_0000_0000_0001),
            peripheralKey: StoredLongTermKey(key: Array(0x50..<0x60), ediv: ediv, rand: rand), keySize: 16,
            authenticated: true, secureConnections: false, created: 1_767_225_700)
    }

    /// A resolvable private address made from `irk` with the spec's `ah` (Vol 6, Part B, 1.3.2.2).
    static func privateAddress(_ irk: [UInt8], _ random: [UInt8] = [0x12, 0x34, 0x56]) -> BluetoothAddress {
        SMPCrypto.resolvablePrivateAddress(irk: irk, randomBits: random)!
    }

    static func count(_ table: String, in path: String) throws -> Int? {
        try DatabaseQueue(path: path).read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM \(table)") }
    }

    @Test func aBondSurvivesAProcessThatNeverClosedItsStoreWithBothKeysAndTheIRK() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        #expect(store.bond(for: peer) == nil)
        store.setBond(Self.bond(peer))
        #expect(store.bond(for: peer) == Self.bond(peer))
        // No close: the process is killed here. Another one opening the file finds the bond, field for field.
        let again = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(again.bond(for: peer) == Self.bond(peer))
        #expect(again.bonds == [Self.bond(peer)])
        // A Secure Connections bond: one key in each role with zero EDIV and Rand, no IRK.
        let other = again.identifier(for: SystemStoreTests.address(2))
        let secure = StoredBond(
            identifier: other, identityAddress: SystemStoreTests.address(2),
            centralKey: StoredLongTermKey(key: Array(repeating: 0xA5, count: 16)),
            peripheralKey: StoredLongTermKey(key: Array(repeating: 0xA5, count: 16)), keySize: 7,
            authenticated: false, secureConnections: true, created: 1_767_225_800)
        again.setBond(secure)
        again.close()
        let third = try SystemStore(path: folder.file(), seed: 1, now: clock.read)
        #expect(third.bonds == [Self.bond(peer), secure])
        third.close()
        store.close()
    }

    @Test func aBondForAnUnknownPeerOrWithWrongLengthsIsNotKept() throws {
        let clock = Clock()
        let store = try SystemStore(path: nil, seed: 2, now: clock.read)
        store.setBond(Self.bond(UUID()))
        #expect(store.bonds.isEmpty)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        var short = Self.bond(peer)
        short.resolvingKey = Array(short.resolvingKey!.prefix(15))
        store.setBond(short)
        var long = Self.bond(peer)
        long.centralKey?.key.append(0)
        store.setBond(long)
        var size = Self.bond(peer)
        size.keySize = 17
        store.setBond(size)
        #expect(store.bonds.isEmpty)
        store.close()
    }

    @Test func aLegacyBondIsFoundByItsEDIVAndRandAndZeroFindsNothing() throws {
        let clock = Clock()
        let store = try SystemStore(path: nil, seed: 3, now: clock.read)
        let first = store.identifier(for: SystemStoreTests.address(1))
        let second = store.identifier(for: SystemStoreTests.address(2))
        let third = store.identifier(for: SystemStoreTests.address(3))
        store.setBond(Self.bond(first, ediv: 1, rand: 2))
        var other = Self.bond(second, ediv: 1, rand: 3)
        other.identityAddress = SystemStoreTests.address(2)
        store.setBond(other)
        var secure = Self.bond(third, ediv: 0, rand: 0)
        secure.identityAddress = SystemStoreTests.address(3)
        store.setBond(secure)
        #expect(store.bondAnswering(ediv: 1, rand: 2)?.identifier == first)
        #expect(store.bondAnswering(ediv: 1, rand: 3)?.identifier == second)
        #expect(store.bondAnswering(ediv: 2, rand: 2) == nil)
        // The central-role key's EDIV and Rand name the key the peer answers with, not this device's.
        #expect(store.bondAnswering(ediv: 0x8001, rand: 0x8000_0000_0000_0001) == nil)
        // Zero and zero cannot tell Secure Connections bonds apart, though one has them.
        #expect(store.bondAnswering(ediv: 0, rand: 0) == nil)
        store.close()
    }

    @Test func aBondIsRemovedAndGoesWithItsPeer() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 4, now: clock.read)
        let kept = store.identifier(for: SystemStoreTests.address(1))
        let removed = store.identifier(for: SystemStoreTests.address(2))
        store.setBond(Self.bond(kept))
        var other = Self.bond(removed)
        other.identityAddress = SystemStoreTests.address(2)
        store.setBond(other)
        store.removeBond(removed)
        #expect(store.bonds == [Self.bond(kept)])
        // The peer stays, with its identifier.
        #expect(store.knownPeer(removed) != nil)
        let reader = try SystemStore(path: folder.file(), seed: 4, now: clock.read)
        #expect(reader.bonds == [Self.bond(kept)])
        reader.close()
        store.close()
        // A peer row deleted (by another program here) takes its bond with it.
        try DatabaseQueue(path: folder.file()).write {
            try $0.execute(sql: "DELETE FROM peer WHERE identifier = ?", arguments: [kept.uuidString])
        }
        #expect(try Self.count("bond", in: folder.file()) == 0)
        let later = try SystemStore(path: folder.file(), seed: 4, now: clock.read)
        #expect(later.bonds.isEmpty)
        later.close()
    }

    /// What a tool's "remove this bond" needs to say: whether there was one. A bond another process made after this
    /// store opened (so only in the file) counts, and goes; a second removal, or one of a peer without a bond, finds
    /// nothing.
    @Test func removingABondSaysWhetherThereWasOne() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 6, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        let other = store.identifier(for: SystemStoreTests.address(2))
        store.setBond(Self.bond(peer))
        #expect(store.removeBond(peer))
        #expect(!store.removeBond(peer))
        #expect(!store.removeBond(other))
        #expect(!store.removeBond(UUID()))
        // Another process bonds after this store opened: the file has it, this store's memory does not.
        let writer = try SystemStore(path: folder.file(), seed: 6, now: clock.read)
        var late = Self.bond(other)
        late.identityAddress = SystemStoreTests.address(2)
        writer.setBond(late)
        writer.close()
        #expect(store.bond(for: other) == nil)
        #expect(store.removeBond(other))
        #expect(try Self.count("bond", in: folder.file()) == 0)
        store.close()
    }

    /// What a tool's "forget this device" needs: the peer's row goes with its bond and GATT cache, the next
    /// report of its address gives a new identifier, and whether there was such a peer is said.
    @Test func removingAPeerTakesItsBondAndGivesItANewIdentifier() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 8, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        let other = store.identifier(for: SystemStoreTests.address(2))
        store.setBond(Self.bond(peer))
        #expect(store.removePeer(peer))
        #expect(!store.removePeer(peer))
        #expect(store.bond(for: peer) == nil)
        #expect(try Self.count("bond", in: folder.file()) == 0)
        #expect(store.knownPeer(peer) == nil)
        #expect(store.knownPeer(other) != nil)
        #expect(store.identifier(for: SystemStoreTests.address(1)) != peer)
        store.close()
    }

    /// A process that opened the store before another forgot a peer derives the forgotten identifier when it
    /// meets the peer: it reports it (it cannot know better until it restarts), but does not put it back in the
    /// file, so later processes give the peer a new one.
    @Test func aPeerForgottenByAnotherProcessDoesNotComeBackIntoTheFile() throws {
        let folder = try Folder()
        let clock = Clock()
        let early = try SystemStore(path: folder.file(), now: clock.read)
        let other = try SystemStore(path: folder.file(), now: clock.read)
        let peer = other.identifier(for: SystemStoreTests.address(1))
        #expect(other.removePeer(peer))
        other.close()
        #expect(early.identifier(for: SystemStoreTests.address(1)) == peer)
        early.close()
        let later = try SystemStore(path: folder.file(), now: clock.read)
        #expect(later.existingIdentifier(for: SystemStoreTests.address(1)) == nil)
        #expect(later.identifier(for: SystemStoreTests.address(1)) != peer)
        later.close()
    }

    /// Identifiers are derived from the address under the store's key: that a peer was forgotten is kept too,
    /// so a later process does not give the forgotten identifier back.
    @Test func aForgottenPeerStaysForgottenInTheNextProcess() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 8, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        #expect(store.removePeer(peer))
        store.close()
        let next = try SystemStore(path: folder.file(), seed: 8, now: clock.read)
        let renewed = next.identifier(for: SystemStoreTests.address(1))
        #expect(renewed != peer)
        next.close()
        // A fresh file under the same seed derives the forgotten one: the difference is the kept forgetting.
        let other = try Folder()
        let fresh = try SystemStore(path: other.file(), seed: 8, now: clock.read)
        #expect(fresh.identifier(for: SystemStoreTests.address(1)) == peer)
        fresh.close()
    }

    @Test func aBondedPeerKeepsItsIdentifierAcrossPrivateAddresses() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 5, now: clock.read)
        let first = Self.privateAddress(Self.irk)
        let peer = store.identifier(for: first)
        store.setBond(Self.bond(peer))
        let next = Self.privateAddress(Self.irk, [0x9A, 0xBC, 0x1E])
        #expect(next != first)
        #expect(store.identifier(resolving: next) == peer)
        // A scan reporting the new address gives the bonded identifier, with no new peer.
        #expect(store.existingIdentifier(for: next) == peer)
        #expect(store.identifier(for: next) == peer)
        #expect(store.knownPeerCount == 1)
        // Another IRK's address, a non-resolvable one and a public one resolve to nobody.
        #expect(store.identifier(resolving: Self.privateAddress(Self.otherIRK)) == nil)
        #expect(store.identifier(resolving: SystemStoreTests.address(9)) == nil)
        #expect(store.identifier(resolving: BluetoothAddress(bytes: next.bytes, type: .publicDevice)) == nil)
        #expect(store.identifier(for: Self.privateAddress(Self.otherIRK)) != peer)
        // The identity address is the peer too.
        #expect(store.identifier(for: Self.identity) == peer)
        store.close()
        // After a restart, the next address resolves with the IRK in the file.
        let again = try SystemStore(path: folder.file(), seed: 5, now: clock.read)
        let third = Self.privateAddress(Self.irk, [0x01, 0x02, 0x03])
        #expect(again.identifier(for: third) == peer)
        again.close()
    }

    /// A bond made without `identifierAfterPairing` while the identity address had a row of its own: the device
    /// seen with that address is the bonded peer.
    @Test func aBondsIdentityAddressGivesTheBondedPeerBeforeAnOlderRow() throws {
        let clock = Clock()
        let store = try SystemStore(path: nil, seed: 13, now: clock.read)
        let older = store.identifier(for: Self.identity)
        let peer = store.identifier(for: Self.privateAddress(Self.irk))
        store.setBond(Self.bond(peer))
        #expect(store.identifier(for: Self.identity) == peer)
        #expect(store.existingIdentifier(for: Self.identity) == peer)
        #expect(store.identifierAfterPairing(peerAddress: Self.identity, identityAddress: Self.identity) == peer)
        #expect(store.knownPeer(older) != nil)
        store.close()
    }

    @Test func anAllZeroIRKResolvesNothing() throws {
        let clock = Clock()
        let store = try SystemStore(path: nil, seed: 6, now: clock.read)
        let zero = [UInt8](repeating: 0, count: 16)
        let peer = store.identifier(for: Self.privateAddress(zero))
        var bond = Self.bond(peer)
        bond.resolvingKey = zero
        store.setBond(bond)
        #expect(store.identifier(resolving: Self.privateAddress(zero, [0x44, 0x55, 0x26])) == nil)
        store.close()
    }

    /// A device seen with its public address, then connecting from a private address (a second identifier) and
    /// telling its identity in pairing: it has the first identifier from then on, and the GATT cache discovered
    /// under the second comes with it.
    @Test func aPeerThatTellsItsIdentityKeepsOneIdentifierAndItsCache() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 7, now: clock.read)
        let seen = store.identifier(for: Self.identity)
        store.noteSeen(seen, name: "Lock")
        let rpa = Self.privateAddress(Self.irk)
        let connected = store.identifier(for: rpa)
        #expect(connected != seen)
        let cache = SystemStore.GATTCache(hash: Array(0..<16), record: [7, 7])
        store.setGATTCache(cache, for: connected)
        clock.advance(10)
        let kept = store.identifierAfterPairing(peerAddress: rpa, identityAddress: Self.identity)
        #expect(kept == seen)
        #expect(store.knownPeer(connected) == nil)
        #expect(store.knownPeerCount == 1)
        #expect(store.knownPeer(kept)?.name == "Lock")
        #expect(store.knownPeer(kept)?.address == Self.identity)
        #expect(store.gattCache(for: kept) == cache)
        #expect(store.identifier(for: rpa) == kept)
        store.setBond(Self.bond(kept))
        // Another process (this one never closes) finds one peer, its cache and its bond.
        let reader = try SystemStore(path: folder.file(), seed: 7, now: clock.read)
        #expect(reader.knownPeers.map(\.identifier) == [kept])
        #expect(reader.gattCache(for: kept) == cache)
        #expect(reader.bond(for: kept)?.identityAddress == Self.identity)
        #expect(reader.identifier(for: Self.privateAddress(Self.irk, [0x77, 0x66, 0x15])) == kept)
        reader.close()
        #expect(try Self.count("gattCache", in: folder.file()) == 1)
        store.close()
    }

    /// The identity's own cache wins over the duplicate's.
    @Test func aMergeKeepsTheIdentitysCacheWhenBothHaveOne() throws {
        let clock = Clock()
        let store = try SystemStore(path: nil, seed: 8, now: clock.read)
        let seen = store.identifier(for: Self.identity)
        let mine = SystemStore.GATTCache(hash: [1], record: [1])
        store.setGATTCache(mine, for: seen)
        store.flush()
        let rpa = Self.privateAddress(Self.irk)
        let connected = store.identifier(for: rpa)
        store.setGATTCache(SystemStore.GATTCache(hash: [2], record: [2]), for: connected)
        #expect(store.identifierAfterPairing(peerAddress: rpa, identityAddress: Self.identity) == seen)
        #expect(store.gattCache(for: seen) == mine)
        store.close()
    }

    /// A peer new to the store keeps the identifier it connected with, and its row takes the identity address.
    @Test func aNewPeerThatTellsItsIdentityKeepsItsIdentifier() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 9, now: clock.read)
        let rpa = Self.privateAddress(Self.irk)
        let connected = store.identifier(for: rpa)
        #expect(store.identifierAfterPairing(peerAddress: rpa, identityAddress: Self.identity) == connected)
        #expect(store.knownPeer(connected)?.address == Self.identity)
        #expect(store.identifier(for: rpa) == connected)
        #expect(store.identifier(for: Self.identity) == connected)
        #expect(store.knownPeerCount == 1)
        // Without a bond too, the identity address gives the identifier after a restart.
        let reader = try SystemStore(path: folder.file(), seed: 9, now: clock.read)
        #expect(reader.existingIdentifier(for: Self.identity) == connected)
        reader.close()
        // A peer that connected with its identity address keeps its identifier.
        let public2 = SystemStoreTests.address(2, random: false)
        let direct = store.identifier(for: public2)
        #expect(store.identifierAfterPairing(peerAddress: public2, identityAddress: public2) == direct)
        #expect(store.knownPeerCount == 2)
        store.close()
    }

    @Test func bondedPeersAreNeitherEvictedNorAged() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 10, now: clock.read)
        let bonded = store.identifier(for: SystemStoreTests.address(0))
        var bond = Self.bond(bonded)
        bond.identityAddress = SystemStoreTests.address(0)
        store.setBond(bond)
        let plain = store.identifier(for: SystemStoreTests.address(1))
        // The least recently seen of all, then 1,000 newer devices: the limit counts the peers without a bond.
        for n in 2...(SystemStore.peerLimit + 1) {
            clock.advance(1)
            _ = store.identifier(for: SystemStoreTests.address(n))
        }
        #expect(store.knownPeer(bonded) != nil)
        #expect(store.knownPeer(plain) == nil, "the least recently seen peer without a bond goes first")
        #expect(store.knownPeerCount == SystemStore.peerLimit + 1)
        store.close()
        #expect(try Self.count("peer", in: folder.file()) == SystemStore.peerLimit + 1)
        // 91 days later, only the bonded peer is left, with its bond.
        clock.advance(91 * 24 * 3600)
        let later = try SystemStore(path: folder.file(), seed: 10, now: clock.read)
        #expect(later.knownPeers.map(\.identifier) == [bonded])
        #expect(later.bond(for: bonded) == bond)
        // With its bond removed it ages again.
        later.removeBond(bonded)
        later.close()
        let after = try SystemStore(path: folder.file(), seed: 10, now: clock.read)
        #expect(after.knownPeerCount == 0)
        after.close()
    }

    @Test func aDamagedBondRowIsSkippedAndLogged() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 11, now: clock.read)
        let good = store.identifier(for: SystemStoreTests.address(0))
        store.setBond(Self.bond(good))
        let damaged = (1...6).map { store.identifier(for: SystemStoreTests.address($0)) }
        store.close()
        try DatabaseQueue(path: folder.file()).write { db in
            // What a hand or another program might write: each row wrong in one way.
            let rows: [String] = [
                // An LTK of 15 octets.
                "x'0000000000AA', 0, NULL, x'\(String(repeating: "11", count: 15))', 1, 2, NULL, NULL, NULL, 16, 1, 0, 0",
                // Text where the IRK's bytes belong.
                "x'0000000000AB', 0, 'an IRK', NULL, NULL, NULL, NULL, NULL, NULL, 16, 1, 0, 0",
                // A key with its EDIV but no Rand.
                "x'0000000000AC', 0, NULL, x'\(String(repeating: "22", count: 16))', 1, NULL, NULL, NULL, NULL, 16, 0, 1, 0",
                // A key size of 40 octets, and EDIV beyond 16 bits.
                "x'0000000000AD', 0, NULL, NULL, NULL, NULL, x'\(String(repeating: "33", count: 16))', 70000, 1, 40, 0, 1, 0",
                // An address of 5 octets, and an address type of 9.
                "x'00000000AE', 9, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 16, 0, 0, 0",
                // "yes" for a flag.
                "x'0000000000AF', 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 16, 'yes', 0, 'soon'",
            ]
            for (identifier, values) in zip(damaged, rows) {
                try db.execute(
                    sql: """
                        INSERT INTO bond (identifier, identityAddress, identityAddressType, resolvingKey,
                            centralKey, centralEDIV, centralRand, peripheralKey, peripheralEDIV, peripheralRand,
                            keySize, authenticated, secureConnections, created)
                        VALUES ('\(identifier.uuidString)', \(values))
                        """)
            }
        }
        let log = LogRecorder()
        let again = try SystemStore(path: folder.file(), seed: 11, now: clock.read, logger: log.logger)
        #expect(again.bonds == [Self.bond(good)])
        #expect(again.knownPeerCount == 7)
        #expect(
            log.lines.contains("warning bond rows that cannot be read are ignored: those peers are not bonded rows=6"))
        again.close()
    }

    /// A file written before bonds (at "v3: preserved state") opens with no bonds and everything else kept.
    @Test func aStoreWithoutBondsIsMigrated() throws {
        let folder = try Folder()
        let clock = Clock()
        let store = try SystemStore(path: folder.file(), seed: 12, now: clock.read)
        let peer = store.identifier(for: SystemStoreTests.address(1))
        store.noteSeen(peer, name: "Scale")
        let cache = SystemStore.GATTCache(hash: [9], record: [9, 9])
        store.setGATTCache(cache, for: peer)
        let manager = PreservedStateStoreTests.manager("kept")
        store.setPreserved(manager)
        store.close()
        // Undo "v4: bonds": the file is then as the previous version left it (v1 to v3 are unchanged).
        try DatabaseQueue(path: folder.file()).write { db in
            try db.execute(sql: "DROP TABLE bond")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4: bonds'")
        }
        let migrated = try SystemStore(path: folder.file(), seed: 12, now: clock.read)
        #expect(migrated.bonds.isEmpty)
        #expect(migrated.knownPeers.map(\.identifier) == [peer])
        #expect(migrated.knownPeer(peer)?.name == "Scale")
        #expect(migrated.gattCache(for: peer) == cache)
        #expect(migrated.preservedManagers == [manager])
        migrated.setBond(Self.bond(peer))
        migrated.close()
        let later = try SystemStore(path: folder.file(), seed: 12, now: clock.read)
        #expect(later.bonds == [Self.bond(peer)])
        later.close()
    }
}

/// Collects what a logger is told, one line per message ("level message key=value ...").
final class LogRecorder: Sendable {
    private let recorded = Mutex<[String]>([])
    var lines: [String] { recorded.withLock { $0 } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(recorder: self) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).filter { $0.key != "path" }.sorted { $0.key < $1.key }
                .map { "\($0.key)=\($0.value)" }
            let line = (["\(event.level)", "\(event.message)"] + fields).joined(separator: " ")
            recorder.recorded.withLock { $0.append(line) }
        }
    }
}
