import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// A bonded peer's GATT cache is trusted across connections (Core Spec 5.4, Vol 3, Part G, 2.5.2): a lock older
/// than Core 5.1, with no Database Hash, is discovered once; once bonded, the next connection answers every
/// discovery from the cache and sends no discovery request. A peer that is not bonded is discovered again on
/// every link, as before.
@Suite struct BondedGATTCacheTests {
    static func setup(encrypted: Bool) -> (PairingTests.Room, String) {
        let snoop = GATTCacheTests.temporary("phone.btsnoop")
        var phone = BluetoothSystem.Configuration()
        phone.btsnoop = snoop
        var lock = BluetoothSystem.Configuration()
        lock.servesDatabaseHash = false
        return (PairingTests.Room(phoneConfiguration: phone, lockConfiguration: lock, encrypted: encrypted), snoop)
    }

    /// Connects, discovers everything (services, characteristics, descriptors), reads the state; disconnects.
    static func visit(_ room: PairingTests.Room) async throws -> [String] {
        let (lock, failure) = try await LostBondTests.connect(room)
        #expect(failure == nil)
        let services = try await lock.discoverServices(nil, timeout: .seconds(5))
        for service in services {
            let characteristics = try await lock.discoverCharacteristics(nil, for: service, timeout: .seconds(5))
            for characteristic in characteristics {
                _ = try await lock.discoverDescriptors(for: characteristic, timeout: .seconds(5))
            }
        }
        let state = try #require(
            lock.services?.flatMap { $0.characteristics ?? [] }.first { $0.uuid == PairingTests.state })
        #expect(try await lock.readValue(for: state, timeout: .seconds(40)) == Data([0x01]))
        let tree = GATTCacheTests.tree(lock)
        room.central.cancelPeripheralConnection(lock)
        for await gone in room.central.disconnections where gone.peripheral === lock { break }
        return tree
    }

    @Test func aBondedPeerWithoutAHashIsNotDiscoveredAgain() async throws {
        let (room, snoop) = Self.setup(encrypted: true)
        defer { GATTCacheTests.remove(snoop) }
        try await room.run { try await room.publish() }
        let first = try await room.run { try await Self.visit(room) }
        let second = try await room.run { try await Self.visit(room) }
        #expect(second == first)
        #expect(first.contains { $0.hasPrefix(PairingTests.service.uuidString) })
        await room.phone.shutDown()
        let sent = try SnoopATT.sent(in: snoop)
        #expect(sent.filter { $0.connection == 1 }.contains { $0.isDiscovery })
        let again = sent.filter { $0.connection == 2 }
        #expect(!again.contains { $0.isDiscovery }, "\(again)")
        #expect(again.filter(\.isHashRead).count == 1)
    }

    @Test func aPeerWithoutAHashOrABondIsDiscoveredOnEveryLink() async throws {
        let (room, snoop) = Self.setup(encrypted: false)
        defer { GATTCacheTests.remove(snoop) }
        try await room.run { try await room.publish() }
        let first = try await room.run { try await Self.visit(room) }
        let second = try await room.run { try await Self.visit(room) }
        #expect(second == first)
        #expect(room.phone.core.store.bonds.isEmpty)
        await room.phone.shutDown()
        let sent = try SnoopATT.sent(in: snoop)
        #expect(sent.filter { $0.connection == 1 }.contains { $0.isDiscovery })
        #expect(sent.filter { $0.connection == 2 }.contains { $0.isDiscovery })
    }
}
