import BLE
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
}
