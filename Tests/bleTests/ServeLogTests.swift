import BLE
import BLEProfiles
import Foundation
import Synchronization
import Testing

@testable import ble

/// `ble serve`'s log as a user reads it: a write is logged before the notification it causes.
@Suite(.timeLimit(.minutes(1))) struct ServeLogTests {
    @Test func aWriteIsLoggedBeforeTheNotificationItCauses() async throws {
        let radio = SimulatedRadio(seed: 11)
        let lockSystem = BluetoothSystem.simulated(on: radio, name: "lock")
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 2, y: 0))
        let lines = Mutex<[String]>([])
        let served = ServedDevice(
            system: lockSystem, profile: DoorLockProfile.make(name: "DoorLock"),
            log: { line in lines.withLock { $0.append(line) } })
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)

        let outcome = Mutex<Result<[Data], any Error>?>(nil)
        let scenario = Task(executorPreference: radio) { () -> [Data] in
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            for try await found in central.scan(withServices: [DoorLockProfile.service]) {
                let lock = found.peripheral
                try await central.connect(lock, timeout: .seconds(10))
                let services = try await lock.discoverServices([DoorLockProfile.service], timeout: .seconds(5))
                let characteristics = try await lock.discoverCharacteristics(
                    [DoorLockProfile.lockState, DoorLockProfile.lockCommand], for: services[0], timeout: .seconds(5))
                let state = try #require(characteristics.first { $0.uuid == DoorLockProfile.lockState })
                let command = try #require(characteristics.first { $0.uuid == DoorLockProfile.lockCommand })
                var values: [Data] = []
                let states = lock.notifications(for: state)
                try await lock.setNotifyValue(true, for: state, timeout: .seconds(5))
                try await lock.writeValue(Data([0x00]), for: command, type: .withResponse, timeout: .seconds(5))
                for try await value in states {
                    values.append(value)
                    break
                }
                try await central.disconnect(lock)
                return values
            }
            return []
        }
        Task(executorPreference: radio) {
            let result = await scenario.result
            outcome.withLock { $0 = result }
        }
        try await radio.run(for: .seconds(30))
        scenario.cancel()  // a scenario stuck in a wait ends the test with a failure, not a hang
        let values = try #require(outcome.withLock { $0 }).get()
        #expect(values == [Data([0x00])])  // unlocked
        let log = lines.withLock { $0 }
        let write = try #require(log.firstIndex { $0.contains("write \(DoorLockProfile.lockCommand.uuidString) 00") })
        let notify = try #require(log.firstIndex { $0.hasPrefix("* notify \(DoorLockProfile.lockState.uuidString)") })
        #expect(write < notify, "\(log)")
        withExtendedLifetime(served) {}
    }

    /// A profile with one notifying and one indicating characteristic, values set only from the device's side.
    static let pushProfile = Profile(
        name: "Pusher",
        services: [
            ProfileService(
                uuid: BluetoothUUID(0xFFF0),
                characteristics: [
                    ProfileCharacteristic(
                        uuid: BluetoothUUID(0xFFF1), properties: [.read, .notify], permissions: [.readable]),
                    ProfileCharacteristic(uuid: BluetoothUUID(0xFFF2), properties: [.indicate], permissions: []),
                ])
        ])

    /// `ble serve`'s device driven from its own side (`--updates`): it logs the central's connection, MTU,
    /// subscriptions and disconnection; pushed values reach the subscriber, each by the way its characteristic
    /// offers (told apart by `valueUpdates(for:)`), and a burst that fills the transmit queue waits for room and
    /// arrives whole and in order.
    @Test func pushedUpdatesReachTheSubscriberAndTheLinkIsLogged() async throws {
        let radio = SimulatedRadio(seed: 12)
        let deviceSystem = BluetoothSystem.simulated(on: radio, name: "pusher")
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 2, y: 0))
        let lines = Mutex<[String]>([])
        let served = ServedDevice(
            system: deviceSystem, profile: Self.pushProfile, log: { line in lines.withLock { $0.append(line) } },
            onStarted: { _ in })
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let burst = (0..<64).map { Data([UInt8($0)] + [UInt8](repeating: 0xAB, count: 199)) }

        let outcome = Mutex<Result<([ValueUpdate], [ValueUpdate]), any Error>?>(nil)
        let scenario = Task(executorPreference: radio) { () -> ([ValueUpdate], [ValueUpdate]) in
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            for try await found in central.scan(withServices: [BluetoothUUID(0xFFF0)]) {
                let device = found.peripheral
                try await central.connect(device, timeout: .seconds(10))
                let services = try await device.discoverServices(nil, timeout: .seconds(5))
                let service = try #require(services.first { $0.uuid == BluetoothUUID(0xFFF0) })
                let characteristics = try await device.discoverCharacteristics(
                    nil, for: service, timeout: .seconds(5))
                let notifying = try #require(characteristics.first { $0.uuid == BluetoothUUID(0xFFF1) })
                let indicating = try #require(characteristics.first { $0.uuid == BluetoothUUID(0xFFF2) })
                var notified: [ValueUpdate] = []
                var indicated: [ValueUpdate] = []
                let notifications = device.valueUpdates(for: notifying)
                let indications = device.valueUpdates(for: indicating)
                // Subscribed once both subscriptions reached the device.
                while !(served.queue.sync {
                    served.isSubscribed(BluetoothUUID(0xFFF1)) && served.isSubscribed(BluetoothUUID(0xFFF2))
                }) {
                    try await phone.sleep(for: .milliseconds(10))
                }
                #expect(served.queue.sync { served.push(BluetoothUUID(0xFFF2), Data([0x07])) } == nil)
                for try await update in indications {
                    indicated.append(update)
                    break
                }
                served.queue.sync {
                    for value in burst { _ = served.push(BluetoothUUID(0xFFF1), value) }
                }
                for try await update in notifications {
                    notified.append(update)
                    if notified.count == burst.count { break }
                }
                try await central.disconnect(device)
                return (notified, indicated)
            }
            return ([], [])
        }
        Task(executorPreference: radio) {
            let result = await scenario.result
            outcome.withLock { $0 = result }
        }
        try await radio.run(for: .seconds(30))
        scenario.cancel()
        let (notified, indicated) = try #require(outcome.withLock { $0 }).get()
        #expect(indicated == [ValueUpdate(value: Data([0x07]), kind: .indication)])
        #expect(notified.map(\.value) == burst, "every value, in order")
        #expect(notified.allSatisfy { $0.kind == .notification })
        // What a read sees from now on: the last value pushed.
        #expect(served.queue.sync { served.behaviour.values[BluetoothUUID(0xFFF1)] } == burst.last)

        let log = lines.withLock { $0 }
        // The central by its identifier and its address.
        let connected = try #require(log.firstIndex { $0.contains(" connected from ") })
        #expect(log[connected].hasSuffix("(random)"), "\(log)")
        let mtu = try #require(log.firstIndex { $0.contains(" mtu ") })
        let subscribed = try #require(log.firstIndex { $0.hasSuffix(" subscribe FFF1 notifications") })
        let full = try #require(log.firstIndex { $0 == "* transmit queue full: waiting for room to send" })
        let disconnected = try #require(log.firstIndex { $0.contains(" disconnected (") })
        #expect(connected < mtu && mtu < subscribed && subscribed < full && full < disconnected, "\(log)")
        #expect(log[mtu].hasSuffix("mtu 517 (updates carry up to 512 bytes)"), "\(log)")
        #expect(log.contains { $0.hasPrefix("* room again: sent ") })
        #expect(log.filter { $0.hasPrefix("* notify FFF1 ") }.count == burst.count)
        #expect(log.contains("* indicate FFF2 07"))
        #expect(log[disconnected].hasSuffix("disconnected (Remote User Terminated Connection (0x13))"), "\(log)")
        withExtendedLifetime(served) {}
    }
}

/// A characteristic that both notifies and indicates: notifications by default, as CoreBluetooth subscribes,
/// and its indications when the central asks for them (`setNotifyValue(_:for:preferring:timeout:)`, what `ble
/// subscribe --indicate` uses); the choice stays for the streams that follow.
@Suite struct IndicationChoiceTests {
    static let profile = Profile(
        name: "Both",
        services: [
            ProfileService(
                uuid: BluetoothUUID(0xFFF0),
                characteristics: [
                    ProfileCharacteristic(
                        uuid: BluetoothUUID(0xFFF3), properties: [.read, .notify, .indicate], permissions: [.readable])
                ])
        ])

    @Test func aCentralMayChooseIndicationsWhenBothAreOffered() async throws {
        let radio = SimulatedRadio(seed: 13)
        let deviceSystem = BluetoothSystem.simulated(on: radio, name: "both")
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 2, y: 0))
        let lines = Mutex<[String]>([])
        let served = ServedDevice(
            system: deviceSystem, profile: Self.profile, log: { line in lines.withLock { $0.append(line) } },
            onStarted: { _ in })
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let uuid = BluetoothUUID(0xFFF3)

        let outcome = Mutex<Result<[ValueUpdate.Kind], any Error>?>(nil)
        let scenario = Task(executorPreference: radio) { () -> [ValueUpdate.Kind] in
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            for try await found in central.scan(withServices: [BluetoothUUID(0xFFF0)]) {
                let device = found.peripheral
                try await central.connect(device, timeout: .seconds(10))
                let services = try await device.discoverServices(nil, timeout: .seconds(5))
                let service = try #require(services.first { $0.uuid == BluetoothUUID(0xFFF0) })
                let c = try #require(
                    try await device.discoverCharacteristics(nil, for: service, timeout: .seconds(5)).first)
                var kinds: [ValueUpdate.Kind] = []
                for preferred in [ValueUpdate.Kind.notification, .indication] {
                    try await device.setNotifyValue(true, for: c, preferring: preferred, timeout: .seconds(5))
                    let updates = device.valueUpdates(for: c)
                    #expect(served.queue.sync { served.push(uuid, Data([0x01])) } == nil)
                    for try await update in updates {
                        kinds.append(update.kind)
                        break
                    }
                    try await device.setNotifyValue(false, for: c, timeout: .seconds(5))
                }
                try await central.disconnect(device)
                return kinds
            }
            return []
        }
        Task(executorPreference: radio) {
            let result = await scenario.result
            outcome.withLock { $0 = result }
        }
        try await radio.run(for: .seconds(30))
        scenario.cancel()
        let kinds = try #require(outcome.withLock { $0 }).get()
        #expect(kinds == [.notification, .indication])
        // The device heard both subscriptions (its log cannot tell which kind: the delegate does not say).
        let log = lines.withLock { $0 }
        #expect(log.filter { $0.contains(" subscribe FFF3 ") }.count == 2, "\(log)")
        withExtendedLifetime(served) {}
    }
}
