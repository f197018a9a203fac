import BLE
import Foundation
import Synchronization
import Testing

/// Two apps advertising on one device: the system gives each app's advertisement the air in turn, an app that
/// stops leaves the rotation, and a central connecting does not leave one app's advertisement in place of the
/// others'.
@Suite struct MultiAppAdvertisingTests {
    static let lampService: BluetoothUUID = "A0A00001-0000-1000-8000-00805F9B34FB"

    /// Counts of the two names heard by a scanning phone over `duration`.
    static func heard(_ rig: Rig, listener: CentralRecorder, for duration: Duration) async throws -> [String: Int] {
        listener.clear()
        try await rig.run(duration)
        var counts: [String: Int] = [:]
        for discovery in listener.discoveries {
            counts[discovery.advertisement.localName ?? "?", default: 0] += 1
        }
        return counts
    }

    @Test func appsAdvertiseInTurnAndLeaveOnTheirOwn() async throws {
        let rig = Rig()
        try await rig.startSensor()  // the first app: "sensor", with the profile's service
        let lamp = PeripheralRecorder(
            system: rig.sensorSystem, label: "lamp", app: rig.sensorSystem.app(id: "com.example.lamp"))
        try await rig.run(until: { lamp.manager.state == .poweredOn }, "power on")
        lamp.manager.startAdvertising(AdvertisementData(localName: "lamp", serviceUUIDs: [Self.lampService]))
        try await rig.run(until: { lamp.manager.isAdvertising }, "the lamp advertising")
        let listener = rig.phone
        listener.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))

        let both = try await Self.heard(rig, listener: listener, for: .seconds(10))
        let sensor = both["sensor"] ?? 0
        let lampCount = both["lamp"] ?? 0
        #expect(sensor > 20 && lampCount > 20, "\(both)")
        #expect(Double(min(sensor, lampCount)) >= 0.6 * Double(max(sensor, lampCount)), "an unfair turn: \(both)")
        // Each report carries one app's advertisement whole, never a mix.
        for discovery in listener.discoveries {
            let services = discovery.advertisement.serviceUUIDs ?? []
            if discovery.advertisement.localName == "lamp" { #expect(services == [Self.lampService]) }
            if discovery.advertisement.localName == "sensor" { #expect(services == [Profile.service]) }
        }

        // The lamp stops: only the sensor is heard from then on.
        lamp.manager.stopAdvertising()
        try await rig.run(.seconds(1))
        let after = try await Self.heard(rig, listener: listener, for: .seconds(3))
        #expect(after["lamp"] == nil && (after["sensor"] ?? 0) > 10, "\(after)")
        withExtendedLifetime(lamp) {}
    }

    @Test func aConnectionLeavesEveryAppAdvertising() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let lamp = PeripheralRecorder(
            system: rig.sensorSystem, label: "lamp", app: rig.sensorSystem.app(id: "com.example.lamp"))
        try await rig.run(until: { lamp.manager.state == .poweredOn }, "power on")
        lamp.manager.startAdvertising(AdvertisementData(localName: "lamp", serviceUUIDs: [Self.lampService]))
        try await rig.run(until: { lamp.manager.isAdvertising }, "the lamp advertising")
        _ = try await rig.connect()  // a central connects: legacy advertising stops, the system starts it again
        let listenerSystem = BluetoothSystem.simulated(
            on: rig.radio, name: "listener", position: RadioPosition(x: 0, y: 3))
        let listener = CentralRecorder(system: listenerSystem, label: "listener")
        try await rig.run(until: { listener.central.state == .poweredOn }, "power on")
        listener.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        let heard = try await Self.heard(rig, listener: listener, for: .seconds(10))
        #expect((heard["sensor"] ?? 0) > 10 && (heard["lamp"] ?? 0) > 10, "\(heard)")
        withExtendedLifetime(lamp) {}
    }

    /// A start overtaken by a stop before the controller confirmed it still ends: the app hears it was cancelled.
    @Test func aStartStoppedBeforeItTookEffectEnds() async throws {
        let rig = Rig()
        try await rig.run(until: { rig.sensor.manager.state == .poweredOn }, "power on")
        let outcome = Mutex<BluetoothError?>(nil)
        let finished = Mutex(false)
        Task(executorPreference: rig.radio) {
            do {
                try await rig.sensor.manager.startAdvertising(Sensor.advertisement, timeout: nil)
            } catch let error as BluetoothError {
                outcome.withLock { $0 = error }
            }
            finished.withLock { $0 = true }
        }
        rig.sensorSystem.schedule(after: .zero, on: rig.sensor.recorder.queue) {
            rig.sensor.manager.stopAdvertising()
        }
        try await rig.run(until: { finished.withLock { $0 } }, within: .seconds(1), "the start's end")
        #expect(outcome.withLock { $0 }?.code == .operationCancelled)
        #expect(!rig.sensor.manager.isAdvertising)
    }
}
