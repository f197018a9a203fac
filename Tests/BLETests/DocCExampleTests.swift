import BLE
import Foundation
import Testing

/// The async example of BLE's DocC catalogue (AsyncAwait.md, "Async code in simulation"), as written there
/// (only `print` becomes a returned line): if it stops compiling, finishing within its one run, or repeating
/// itself, this fails.
@Suite struct DocCExampleTests {
    static func runExample() async throws -> String {
        let radio = SimulatedRadio(seed: 7)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let sensor = BluetoothSystem.simulated(on: radio, name: "sensor", position: RadioPosition(x: 2, y: 0))
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let server = PeripheralManager(
            delegate: nil, queue: DispatchQueue(label: "sensor"), options: nil, system: sensor)

        let scenario = Task(executorPreference: radio) {
            // The sensor: a Battery service with a fixed level, advertised.
            try await server.waitUntilPoweredOn(timeout: .seconds(1))
            let battery = MutableService(type: .battery, primary: true)
            battery.characteristics = [
                MutableCharacteristic(
                    type: .batteryLevel, properties: [.read], value: Data([87]), permissions: [.readable])
            ]
            try await server.add(battery, timeout: .seconds(1))
            try await server.startAdvertising(
                AdvertisementData(localName: "sensor", serviceUUIDs: [.battery]), timeout: nil)

            // The phone: find it, connect, read the level, disconnect.
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            for try await found in central.scan(withServices: [.battery]) {
                let peripheral = found.peripheral
                try await central.connect(peripheral, timeout: .seconds(10))
                let services = try await peripheral.discoverServices([.battery], timeout: .seconds(5))
                let levels = try await peripheral.discoverCharacteristics(
                    [.batteryLevel], for: services[0], timeout: .seconds(5))
                let level = try await peripheral.readValue(for: levels[0], timeout: .seconds(5))
                try await central.disconnect(peripheral)
                return Int(level[0])
            }
            return -1
        }
        try await radio.run(for: .seconds(30))  // the scenario runs inside this, to its end
        return "battery \(try await scenario.value) % at \(radio.now)"
    }

    @Test func theAsyncExampleRunsToItsEndWithinOneRunAndRepeats() async throws {
        let first = try await Self.runExample()
        #expect(first == "battery 87 % at 30.0 seconds")
        #expect(try await Self.runExample() == first)
    }
}
