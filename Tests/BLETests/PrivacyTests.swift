import BLEHost
import BLESMP
import BLEVirtualController
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// LE privacy through the public API (`BluetoothSystem.Configuration.privacy`): a lock that hides behind
/// resolvable private addresses it renews every period stays one `Peripheral`, with one identifier, for the
/// phone that bonded with it: found again by scanning, and reconnected by identifier after its address changed,
/// its link encrypted with the kept key.
@Suite struct PrivacyTests {
    typealias Room = PairingTests.Room

    static func privateRoom() -> Room {
        var privacy = BluetoothSystem.Configuration()
        privacy.privacy = PrivacyConfiguration(rotationPeriod: .seconds(30))
        return Room(phoneConfiguration: privacy, lockConfiguration: privacy)
    }

    @Test func aBondedLockThatChangesItsAddressIsTheSamePeripheralAndReconnectsByIdentifier() async throws {
        let room = Self.privateRoom()
        try await room.run { try await room.publish() }
        let firstAddress = try #require(room.lock.core.host.controllerInfo?.address)
        #expect(firstAddress.randomKind == .resolvablePrivate)
        let (lock, first) = try await room.run { try await room.connectAndRead() }
        #expect(try first.get() == Data([0x01]))
        let identifier = lock.identifier
        let bond = try #require(room.phone.core.store.bond(for: identifier))

        // A minute later the lock advertises from another address...
        try await room.radio.run(for: .seconds(65))
        let laterAddress = try #require(room.lock.core.host.controllerInfo?.address)
        #expect(laterAddress != firstAddress)
        #expect(laterAddress.randomKind == .resolvablePrivate)

        // ... and a scan finds the same peripheral,
        let found: UUID? = try await room.run {
            for try await discovery in room.central.scan(withServices: [PairingTests.service]) {
                return discovery.peripheral.identifier
            }
            return nil
        }
        #expect(found == identifier)

        // ... and it reconnects by identifier, its link encrypted with the kept key: the read needs no pairing.
        try await room.radio.run(for: .seconds(35))
        #expect(room.lock.core.host.controllerInfo?.address != laterAddress)
        let again = try await room.run {
            let retrieved = try #require(room.central.retrievePeripherals(withIdentifiers: [identifier]).first)
            try await room.central.connect(retrieved, timeout: .seconds(10))
            let services = try await retrieved.discoverServices([PairingTests.service], timeout: .seconds(5))
            let characteristics = try await retrieved.discoverCharacteristics(
                nil, for: try #require(services.first), timeout: .seconds(5))
            let state = try #require(characteristics.first { $0.uuid == PairingTests.state })
            return try await retrieved.readValue(for: state, timeout: .seconds(10))
        }
        #expect(again == Data([0x01]))
        // One bond on each side, made the first time (not paired again).
        #expect(room.phone.core.store.bond(for: identifier) == bond)
        #expect(room.phone.core.store.bonds.count == 1)
        #expect(room.lock.core.store.bonds.count == 1)
    }
}
