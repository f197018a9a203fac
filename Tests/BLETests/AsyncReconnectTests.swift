import BLE
import Foundation
import Synchronization
import Testing

/// The usual reconnection workflow as one call (`reconnect(to:options:)`), and keeping a device connected by a
/// policy (`connections(to:policy:options:)`), in virtual time.
@Suite struct AsyncReconnectTests {
    /// A task's outcome, kept for the test to read after the radio ran.
    final class Outcome<T: Sendable>: Sendable {
        let value = Mutex<Result<T, any Error>?>(nil)
        var result: Result<T, any Error>? { value.withLock { $0 } }
    }

    static func capture<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    /// A rig whose phone saw the sensor once (so the system knows its identifier) and is not connected.
    static func phoneThatKnowsTheSensor() async throws -> (Rig, UUID) {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { peripheral.state == .disconnected }, "disconnection")
        return (rig, peripheral.identifier)
    }

    /// The stored identifier is enough while the device advertises from the same address: connected with no
    /// scan (the first step connects, the second and third never run).
    @Test func theStoredIdentifierConnectsWithNoScan() async throws {
        let (rig, id) = try await Self.phoneThatKnowsTheSensor()
        let central = CentralManager(
            delegate: nil, queue: DispatchQueue(label: "app"), options: nil, app: rig.phoneSystem.app(id: "other"))
        let outcome = Outcome<Peripheral>()
        let start = rig.radio.now
        let task = Task(executorPreference: rig.radio) {
            let result = await Self.capture {
                try await central.reconnect(to: ReconnectTarget(identifier: id, services: [Profile.service]))
            }
            outcome.value.withLock { $0 = result }
        }
        let scanned = Mutex(false)
        try await rig.run(
            until: {
                if central.isScanning { scanned.withLock { $0 = true } }
                return outcome.result != nil
            }, "reconnection")
        await task.value
        let peripheral = try #require(try outcome.result?.get())
        #expect(peripheral.identifier == id)
        #expect(peripheral.state == .connected)
        #expect(!scanned.withLock { $0 })
        #expect(rig.radio.now - start < .seconds(1))
    }

    /// The device came back under a new address: the stored identifier's connect waits in vain for its step's
    /// time, nothing connected to the system offers the service, and the scan finds it by its name.
    @Test func aDeviceWithANewAddressIsFoundByScanning() async throws {
        let (rig, id) = try await Self.phoneThatKnowsTheSensor()
        rig.sensorSystem.vanish()
        let moved = BluetoothSystem.simulated(on: rig.radio, name: "sensor-moved", position: RadioPosition(x: 3, y: 0))
        let sensor = Sensor(system: moved)
        try await rig.run(until: { sensor.manager.state == .poweredOn }, "power on")
        sensor.publish()
        sensor.manager.startAdvertising(Sensor.advertisement)
        let central = rig.central
        let outcome = Outcome<Peripheral>()
        let start = rig.radio.now
        let options = ReconnectOptions(stepTimeout: .seconds(2), timeout: .seconds(20))
        let task = Task(executorPreference: rig.radio) {
            let target = ReconnectTarget(identifier: id, services: [Profile.service], name: "sensor")
            let result = await Self.capture { try await central.reconnect(to: target, options: options) }
            outcome.value.withLock { $0 = result }
        }
        try await rig.run(until: { outcome.result != nil }, within: .seconds(20), "reconnection")
        await task.value
        let peripheral = try #require(try outcome.result?.get())
        #expect(peripheral.identifier != id)
        #expect(peripheral.state == .connected)
        let elapsed = rig.radio.now - start
        #expect(elapsed >= .seconds(2) && elapsed < .seconds(4), "took \(elapsed)")
        // The first step's connect was called off: the old peripheral is not left pending.
        #expect(central.retrievePeripherals(withIdentifiers: [id]).first?.state == .disconnected)
    }

    /// In parallel, a device another app holds is joined at once, whatever the other steps do.
    @Test func inParallelADeviceConnectedToTheSystemIsJoinedAtOnce() async throws {
        let (rig, id) = try await Self.phoneThatKnowsTheSensor()
        let holder = CentralRecorder(system: rig.phoneSystem, label: "holder", app: rig.phoneSystem.app(id: "holder"))
        try await rig.run(until: { holder.central.state == .poweredOn }, "power on")
        let held = try #require(holder.central.retrievePeripherals(withIdentifiers: [id]).first)
        holder.central.connect(held)
        try await rig.run(until: { held.state == .connected }, "the other app's connection")
        try await rig.discoverAll(held, recorder: holder)
        let central = rig.central
        let outcome = Outcome<Peripheral>()
        let start = rig.radio.now
        let task = Task(executorPreference: rig.radio) {
            // No identifier: the name, and the service the other app discovered.
            let target = ReconnectTarget(services: [Profile.service], name: "sensor")
            let result = await Self.capture {
                try await central.reconnect(
                    to: target, options: ReconnectOptions(steps: [.scan, .connectedPeripherals], parallel: true))
            }
            outcome.value.withLock { $0 = result }
        }
        try await rig.run(until: { outcome.result != nil }, "reconnection")
        await task.value
        let peripheral = try #require(try outcome.result?.get())
        #expect(peripheral.identifier == id)
        #expect(rig.radio.now - start < .milliseconds(100))
        #expect(!central.isScanning)
    }

    /// A device that is nowhere: the call fails with `.timeout` at its overall limit, and nothing is left
    /// pending or scanning.
    @Test func aDeviceThatIsGoneTimesOutAsAWhole() async throws {
        let (rig, id) = try await Self.phoneThatKnowsTheSensor()
        rig.sensorSystem.vanish()
        let central = rig.central
        let outcome = Outcome<Peripheral>()
        let start = rig.radio.now
        let task = Task(executorPreference: rig.radio) {
            let target = ReconnectTarget(identifier: id, services: [Profile.service], name: "sensor")
            let result = await Self.capture {
                try await central.reconnect(
                    to: target, options: ReconnectOptions(stepTimeout: .seconds(4), timeout: .seconds(6)))
            }
            outcome.value.withLock { $0 = result }
        }
        try await rig.run(until: { outcome.result != nil }, within: .seconds(10), "the timeout")
        await task.value
        let error = try #require(
            outcome.result.flatMap { r -> BluetoothError? in
                if case .failure(let e) = r { return e as? BluetoothError } else { return nil }
            })
        #expect(error.code == .timeout)
        #expect(rig.radio.now - start == .seconds(6))
        try await rig.run(.milliseconds(100))
        #expect(!central.isScanning)
        #expect(central.retrievePeripherals(withIdentifiers: [id]).first?.state == .disconnected)
    }

    /// A target with nothing to recognise the device by is refused at the call.
    @Test func aTargetWithNeitherIdentifierNorNameIsRefused() async throws {
        let rig = Rig()
        await #expect(throws: BluetoothError(.invalidParameters, "")) {
            try await rig.central.reconnect(to: ReconnectTarget(services: [Profile.service]))
        }
        await #expect(throws: BluetoothError(.invalidParameters, "")) {
            try await rig.central.reconnect(to: ReconnectTarget(name: "x"), options: ReconnectOptions(timeout: .zero))
        }
    }

    /// A kept connection to a target nothing can recognise fails at once instead of retrying for ever, and a
    /// policy with no cap on its delay does not overflow.
    @Test func aKeptConnectionRefusesWhatReconnectRefuses() async throws {
        let rig = Rig()
        var iterator = rig.central.connections(to: ReconnectTarget(services: [Profile.service])).makeAsyncIterator()
        await #expect(throws: BluetoothError(.invalidParameters, "")) { _ = try await iterator.next() }
        let uncapped = ReconnectPolicy(maximumDelay: .seconds(Int64.max))
        #expect(uncapped.delay(beforeRetry: 200) == .seconds(365 * 24 * 3600))
    }

    /// The policy's pauses grow by the multiplier up to the maximum.
    @Test func thePolicysPausesGrowToTheirLimit() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(500), multiplier: 2, maximumDelay: .seconds(3))
        #expect(
            (1...5).map(policy.delay(beforeRetry:)) == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(3), .seconds(3),
            ])
        #expect(ReconnectPolicy(multiplier: 1).delay(beforeRetry: 10) == .seconds(1))
    }

    /// Kept connected: the device leaves and comes back, and the stream says connected, disconnected, a failed
    /// attempt with its pause, and connected again.
    @Test func aKeptConnectionComesBackByThePolicy() async throws {
        let (rig, id) = try await Self.phoneThatKnowsTheSensor()
        let central = rig.central
        let changes = Mutex<[String]>([])
        let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumAttempts: 10)
        let options = ReconnectOptions(steps: [.knownIdentifier], stepTimeout: .seconds(3), timeout: .seconds(4))
        let task = Task(executorPreference: rig.radio) {
            let target = ReconnectTarget(identifier: id)
            for try await change in central.connections(to: target, policy: policy, options: options) {
                let line: String
                switch change {
                case .connecting(let n): line = "connecting \(n)"
                case .connected: line = "connected"
                case .disconnected(_, let e): line = "disconnected \(e.map { "\($0.code)" } ?? "nil")"
                case .failed(let e, let pause): line = "failed \(e.code) \(pause)"
                }
                changes.withLock { $0.append(line) }
            }
        }
        try await rig.run(until: { changes.withLock { $0.contains("connected") } }, "first connection")
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(
            until: { changes.withLock { $0.contains { $0.hasPrefix("failed") } } }, within: .seconds(20), "a failure")
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(
            until: { changes.withLock { $0.filter { $0 == "connected" }.count == 2 } }, within: .seconds(20),
            "reconnection")
        try await rig.cancel(task)
        try await rig.run(.milliseconds(500))
        let lines = changes.withLock { $0 }
        #expect(
            Array(lines.prefix(4)) == ["connecting 1", "connected", "disconnected connectionTimeout", "connecting 1"])
        // The only step timed out, so no way led to the device.
        #expect(lines.contains("failed unknownDevice 1.0 seconds"))
        #expect(lines.last == "connected")
        // Ending the stream disconnected.
        #expect(central.retrievePeripherals(withIdentifiers: [id]).first?.state == .disconnected)
    }

    /// A policy's attempts run out: the stream throws the last failure.
    @Test func attemptsRunOut() async throws {
        let (rig, id) = try await Self.phoneThatKnowsTheSensor()
        rig.sensorSystem.vanish()
        let central = rig.central
        let outcome = Outcome<Int>()
        let task = Task(executorPreference: rig.radio) {
            var seen = 0
            let result = await Self.capture {
                for try await _ in central.connections(
                    to: ReconnectTarget(identifier: id),
                    policy: ReconnectPolicy(initialDelay: .seconds(1), maximumAttempts: 3),
                    options: ReconnectOptions(steps: [.knownIdentifier], stepTimeout: .seconds(2), timeout: .seconds(2))
                ) {
                    seen += 1
                }
                return seen
            }
            outcome.value.withLock { $0 = result }
        }
        try await rig.run(until: { outcome.result != nil }, within: .seconds(30), "the end")
        await task.value
        guard case .failure(let error) = try #require(outcome.result) else {
            Issue.record("the stream ended without an error")
            return
        }
        #expect((error as? BluetoothError)?.code == .timeout)
    }
}
