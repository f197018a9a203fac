import BLE
import Foundation
import Synchronization
import Testing

/// One central with eight peripherals connected and streaming at once, and a ninth beyond the controller's limit
/// refused cleanly (step 7, item 6).
@Suite struct ManyDevicesTests {
    /// What the scenario saw, from the radio's executor.
    final class Outcome: Sendable {
        let received = Mutex([Int](repeating: 0, count: 9))
        let refused = Mutex<BluetoothError?>(nil)
    }

    @Test func eightPeripheralsStreamAtOnceAndANinthIsRefused() async throws {
        let radio = SimulatedRadio(seed: 21)
        let phone = BluetoothSystem.simulated(
            on: radio, name: "phone", configuration: .init(maximumConnections: 8))
        let tickers = (0..<9).map { i in
            NotifyingDevice(
                system: BluetoothSystem.simulated(
                    on: radio, name: "ticker\(i)", position: RadioPosition(x: 1 + Double(i % 3), y: Double(i / 3))),
                name: "ticker\(i)", pace: .every(.milliseconds(20)))
        }
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let outcome = Outcome()
        let scenario = Task(executorPreference: radio) {
            try await central.waitUntilPoweredOn(timeout: .seconds(5))
            var found: [String: Peripheral] = [:]
            for try await discovery in central.scan(withServices: [NotifyingDevice.service]) {
                if let name = discovery.advertisementData.localName { found[name] = discovery.peripheral }
                if found.count == 9 { break }
            }
            let peripherals = found
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<8 {
                    let peripheral = try #require(peripherals["ticker\(i)"])
                    // All eight asked at once: the host initiates them together.
                    group.addTask {
                        try await central.connect(peripheral, timeout: .seconds(30))
                        let services = try await peripheral.discoverServices(
                            [NotifyingDevice.service], timeout: .seconds(10))
                        let characteristics = try await peripheral.discoverCharacteristics(
                            nil, for: services[0], timeout: .seconds(10))
                        let values = peripheral.notifications(for: characteristics[0])
                        try await peripheral.setNotifyValue(true, for: characteristics[0], timeout: .seconds(10))
                        for try await _ in values { outcome.received.withLock { $0[i] += 1 } }
                    }
                }
                // The ninth, once the eight are up: beyond the controller's limit.
                group.addTask {
                    try await radio.sleep(for: .seconds(20))
                    do {
                        try await central.connect(try #require(peripherals["ticker8"]), timeout: .seconds(10))
                    } catch let error as BluetoothError {
                        outcome.refused.withLock { $0 = error }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await radio.run(for: .seconds(20))
        let before = outcome.received.withLock { $0 }
        try await radio.run(for: .seconds(10))
        let after = outcome.received.withLock { $0 }
        scenario.cancel()
        withExtendedLifetime(tickers) {}
        // Each of the eight streams: 50 notifications a second, all delivered.
        for i in 0..<8 {
            #expect(after[i] - before[i] >= 450, "ticker\(i): \(after[i] - before[i]) in 10 s")
        }
        let refused = outcome.refused.withLock { $0 }
        #expect(refused?.code == .connectionLimitReached, "\(String(describing: refused))")
    }
}
