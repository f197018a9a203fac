import BLEVirtualController
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Async code under the radio's clock: a scenario started as a task that prefers the radio as its executor, and
/// driven by one plain `radio.run(for:)`, with no stepping and no wall-clock polling.
@Suite struct AsyncUnderTheRadioTests {
    static let service = BluetoothUUID(string: "7A6E0001-0000-1000-8000-00805F9B34FB")!
    static let value = BluetoothUUID(string: "7A6E0002-0000-1000-8000-00805F9B34FB")!

    /// One run of the scenario: what the central saw, whether it finished within the run, and the HCI trace.
    struct Outcome: Equatable {
        var lines: [String]
        var finished: Bool
        var trace: [String]
    }

    static func runScenario(seed: UInt64) async throws -> Outcome {
        let radio = SimulatedRadio(seed: seed)
        let trace = AsyncLocked<[String]>([])
        radio.setTraceHandler { time, device, direction, packet in
            trace.mutate { $0.append("\(time) \(device) \(direction) \(packet)") }
        }
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let sensorSystem = BluetoothSystem.simulated(on: radio, name: "sensor", position: RadioPosition(x: 2, y: 0))
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let sensor = PeripheralManager(
            delegate: nil, queue: DispatchQueue(label: "sensor"), options: nil, system: sensorSystem)
        let lines = AsyncLocked<[String]>([])
        let finished = AsyncLocked(false)

        let server = Task(executorPreference: radio) {
            try await sensor.waitUntilPoweredOn(timeout: .seconds(1))
            let service = MutableService(type: Self.service, primary: true)
            service.characteristics = [
                MutableCharacteristic(
                    type: Self.value, properties: [.read], value: Data([42]), permissions: [.readable])
            ]
            try await sensor.add(service, timeout: .seconds(1))
            try await sensor.startAdvertising(
                AdvertisementData(localName: "sensor", serviceUUIDs: [Self.service]), timeout: .seconds(1))
        }
        let scenario = Task(executorPreference: radio) {
            try await server.value
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            var found: Peripheral?
            for try await discovery in central.scan(withServices: [Self.service]) {
                found = discovery.peripheral
                lines.mutate { $0.append("discovered \(discovery.advertisementData.localName ?? "?") at \(radio.now)") }
                break
            }
            let peripheral = try #require(found)
            try await central.connect(peripheral, timeout: .seconds(5))
            lines.mutate { $0.append("connected at \(radio.now)") }
            let services = try await peripheral.discoverServices([Self.service], timeout: .seconds(5))
            let characteristics = try await peripheral.discoverCharacteristics(
                nil, for: try #require(services.first), timeout: .seconds(5))
            let characteristic = try #require(characteristics.first { $0.uuid == Self.value })
            let value = try await peripheral.readValue(for: characteristic, timeout: .seconds(5))
            lines.mutate { $0.append("read \(value.map { String($0) }) at \(radio.now)") }
            central.cancelPeripheralConnection(peripheral)
            for await gone in central.disconnections where gone.peripheral === peripheral { break }
            lines.mutate { $0.append("disconnected at \(radio.now)") }
            finished.mutate { $0 = true }
        }
        // One plain run: the scenario's every step happens inside it.
        try await radio.run(for: .seconds(10))
        let outcome = Outcome(lines: lines.value, finished: finished.value, trace: trace.value)
        scenario.cancel()
        _ = await scenario.result
        radio.setTraceHandler(nil)
        return outcome
    }

    @Test func aScenarioOnTheRadioFinishesWithinOnePlainRunAndRepeatsTraceForTrace() async throws {
        var outcomes: [Outcome] = []
        for _ in 0..<4 { outcomes.append(try await Self.runScenario(seed: 7)) }
        let first = try #require(outcomes.first)
        #expect(first.finished, "the scenario did not finish within the run: \(first.lines)")
        #expect(first.lines.count == 4)
        #expect(first.lines.contains { $0.hasPrefix("read [\"42\"]") })
        #expect(first.trace.count > 50)
        for (n, outcome) in outcomes.enumerated().dropFirst() {
            #expect(outcome.lines == first.lines, "run \(n + 1) saw other events")
            #expect(outcome.trace == first.trace, "run \(n + 1) put other packets on the wire")
        }
    }

    @Test func sleepingInTheSystemsTimeOnTheRadioTakesExactlyThatVirtualTime() async throws {
        let radio = SimulatedRadio(seed: 3)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let times = AsyncLocked<[Duration]>([])
        let sleeper = Task(executorPreference: radio) {
            let start = radio.now
            try await phone.sleep(for: .milliseconds(1500))
            times.mutate { $0.append(radio.now - start) }
            try await radio.sleep(for: .milliseconds(250))
            times.mutate { $0.append(radio.now - start) }
        }
        try await radio.run(for: .seconds(2))
        try await sleeper.value
        #expect(times.value == [.milliseconds(1500), .milliseconds(1750)])

        // A cancelled sleep ends at once, with CancellationError, without waiting for its time.
        let cancelled = Task(executorPreference: radio) { try await phone.sleep(for: .seconds(3600)) }
        cancelled.cancel()
        try await radio.run(for: .milliseconds(10))
        await #expect(throws: CancellationError.self) { try await cancelled.value }
    }
}
