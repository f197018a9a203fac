import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Subscribing to a characteristic whose notifications need encryption, through the public API: the lock's CCCD
/// write is refused for want of security, the phone's system pairs (Just Works) and writes it again, as iOS
/// does for a read, and the notifications arrive. A CCCD needs encryption to be written when the value needs it
/// to be read (a notification carries the value), or with CoreBluetooth's `notifyEncryptionRequired`.
@Suite struct EncryptedSubscriptionTests {
    static let alarm = BluetoothUUID(string: "8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B")!

    enum Protection: String, CaseIterable, Sendable {
        /// `readEncryptionRequired` on a notifying characteristic.
        case valueNeedsEncryption
        /// `notifyEncryptionRequired` ("trusted devices only") on a readable one.
        case notifyEncryptionRequired
    }

    @Test(arguments: Protection.allCases)
    func subscribingPairsThenNotificationsArrive(_ protection: Protection) async throws {
        let room = PairingTests.Room()
        let alarm: MutableCharacteristic =
            switch protection {
            case .valueNeedsEncryption:
                MutableCharacteristic(
                    type: Self.alarm, properties: [.notify], value: nil, permissions: [.readEncryptionRequired])
            case .notifyEncryptionRequired:
                MutableCharacteristic(
                    type: Self.alarm, properties: [.read, .notifyEncryptionRequired], value: nil,
                    permissions: [.readable])
            }
        try await room.run {
            try await room.peripheral.waitUntilPoweredOn(timeout: .seconds(1))
            let service = MutableService(type: PairingTests.service, primary: true)
            service.characteristics = [alarm]
            try await room.peripheral.add(service, timeout: .seconds(1))
            try await room.peripheral.startAdvertising(
                AdvertisementData(localName: "lock", serviceUUIDs: [PairingTests.service]), timeout: .seconds(1))
        }
        let (lock, received) = try await room.run { () async throws -> (Peripheral, Data?) in
            let (lock, failure) = try await LostBondTests.connect(room)
            #expect(failure == nil)
            let services = try await lock.discoverServices([PairingTests.service], timeout: .seconds(5))
            let characteristics = try await lock.discoverCharacteristics(
                [Self.alarm], for: try #require(services.first), timeout: .seconds(5))
            let characteristic = try #require(characteristics.first)
            #expect(characteristic.properties.contains(.notify))
            let subscriptions = room.peripheral.subscriptions
            // Refused at first (Insufficient Authentication); the system pairs and writes the CCCD again.
            try await lock.setNotifyValue(true, for: characteristic, timeout: .seconds(40))
            #expect(characteristic.isNotifying)
            for await event in subscriptions {
                if case .subscribed = event { break }
            }
            var values = lock.notifications(for: characteristic).makeAsyncIterator()
            try await room.peripheral.updateValue(
                Data([0xA1]), for: alarm, onSubscribedCentrals: nil, timeout: .seconds(5))
            return (lock, try await values.next())
        }
        #expect(received == Data([0xA1]))
        #expect(room.phone.core.store.bond(for: lock.identifier) != nil)
        #expect(room.lock.core.store.bonds.count == 1)
    }
}
