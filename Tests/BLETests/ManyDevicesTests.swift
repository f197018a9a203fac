import BLE
import Foundation
import Synchronization
import Testing

/// One central with eight peripherals connected and streaming at once, and a ninth beyond the controller's limit
/// refused cleanly (step 7, item 6).
@Suite struct ManyDevicesTests {
    /// A sensor that notifies a small value every 20 ms while subscribed.
    final class Ticker: PeripheralManagerDelegate, @unchecked Sendable {
        // @unchecked: `manager` and `subscribed` are touched on `queue` only.
        static let service: BluetoothUUID = "7A7A0001-0000-1000-8000-00805F9B34FB"
        let queue = DispatchQueue(label: "ticker")
        let system: BluetoothSystem
        let name: String
        let characteristic = MutableCharacteristic(
            type: "7A7A0002-0000-1000-8000-00805F9B34FB", properties: [.notify], value: nil, permissions: [.readable])
        var manager: PeripheralManager!
        var subscribed = false
        var count: UInt32 = 0

        init(system: BluetoothSystem, name: String) {
            self.system = system
            self.name = name
            queue.sync { manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system) }
        }

        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
            guard peripheral.state == .poweredOn else { return }
            let service = MutableService(type: Self.service, primary: true)
            service.characteristics = [characteristic]
            peripheral.add(service)
            peripheral.startAdvertising(AdvertisementData(localName: name, serviceUUIDs: [Self.service]))
        }

        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
        ) {
            subscribed = true
            tick()
        }

        private func tick() {
            guard subscribed else { return }
            count &+= 1
            _ = manager.updateValue(
                withUnsafeBytes(of: count.littleEndian) { Data($0) }, for: characteristic, onSubscribedCentrals: nil)
            system.schedule(after: .milliseconds(20), on: queue) { [self] in tick() }
        }
    }

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
            Ticker(
                system: BluetoothSystem.simulated(
                    on: radio, name: "ticker\(i)", position: RadioPosition(x: 1 + Double(i % 3), y: Double(i / 3))),
                name: "ticker\(i)")
        }
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let outcome = Outcome()
        let scenario = Task(executorPreference: radio) {
            try await central.waitUntilPoweredOn(timeout: .seconds(5))
            var found: [String: Peripheral] = [:]
            for await discovery in central.scan(withServices: [Ticker.service]) {
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
                        let services = try await peripheral.discoverServices([Ticker.service], timeout: .seconds(10))
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
