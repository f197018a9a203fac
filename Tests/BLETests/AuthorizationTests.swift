import BLE
import Foundation
import Synchronization
import Testing

/// The permission flow of an app, played on a simulated system: not asked, denied, then allowed.
@Suite struct AuthorizationTests {
    @Test func aManagerFollowsWhatTheUserAllows() async throws {
        let radio = SimulatedRadio(seed: 9)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        phone.authorization = .notDetermined
        let app = CentralRecorder(system: phone)
        let server = PeripheralRecorder(system: phone, label: "server")
        try await radio.run(for: .seconds(1))
        // Until the user answers, the managers are .unknown and hear nothing.
        #expect(app.central.authorization == .notDetermined)
        #expect(server.manager.authorization == .notDetermined)
        #expect(app.central.state == .unknown)
        #expect(app.lines.isEmpty)

        phone.authorization = .denied
        try await radio.run(for: .milliseconds(10))
        #expect(app.central.state == .unauthorized)
        #expect(server.manager.state == .unauthorized)
        #expect(app.lines == ["didUpdateState unauthorized"])
        #expect(server.lines == ["didUpdateState unauthorized"])
        // A denied app cannot scan: the call does nothing, as CoreBluetooth's.
        app.central.scanForPeripherals(withServices: nil)
        #expect(!app.central.isScanning)

        phone.authorization = .allowedAlways
        try await radio.run(for: .milliseconds(10))
        #expect(app.central.authorization == .allowedAlways)
        #expect(app.central.state == .poweredOn)
        #expect(app.lines == ["didUpdateState unauthorized", "didUpdateState poweredOn"])
    }

    @Test func theAsyncWaitForPowerFailsForADeniedApp() async throws {
        let radio = SimulatedRadio(seed: 10)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        phone.authorization = .restricted
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let outcome = Mutex<BluetoothError??>(nil)
        Task(executorPreference: radio) {
            do {
                try await central.waitUntilPoweredOn(timeout: .seconds(5))
                outcome.withLock { $0 = .some(nil) }
            } catch let error as BluetoothError {
                outcome.withLock { $0 = .some(error) }
            }
        }
        try await radio.run(for: .seconds(10))  // past the 5 s timeout: the task has ended either way
        let waited = try #require(outcome.withLock { $0 }, "the wait did not end")
        let error = try #require(waited, "the wait succeeded")
        #expect(error.code == .operationNotSupported)
        #expect(error.message == "the application is not authorized to use Bluetooth")
    }

    @Test func aSystemOnItsOwnIsAllowed() {
        #expect(CentralManager.authorization == .allowedAlways)
        #expect(PeripheralManager.authorization == .allowedAlways)
    }

    /// Denied while connected and scanning: the link ends on the controller too (the sensor advertises again),
    /// the scan stops, and the app hears it through the state alone (no `didDisconnectPeripheral`, IOSRules.md
    /// 6.7); allowed again, it finds the sensor.
    @Test func aDenialEndsTheAppsLinksAndScan() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.central.scanForPeripherals(withServices: nil)
        rig.phoneSystem.authorization = .denied
        try await rig.run(.seconds(1))
        #expect(peripheral.state == .disconnected)
        #expect(!rig.central.isScanning)
        #expect(rig.phone.lines.contains("didUpdateState unauthorized"))
        #expect(rig.phone.disconnections.isEmpty)

        rig.phoneSystem.authorization = .allowedAlways
        try await rig.run(.milliseconds(100))
        // No link of the phone's is up any more (one left up would be listed here).
        #expect(rig.central.retrieveConnectedPeripherals(withServices: [Profile.service]).isEmpty)
        rig.phone.clear()
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(
            until: { !rig.phone.discoveries.isEmpty }, within: .seconds(5), "the sensor advertising again")
    }

    /// A peripheral app denied while advertising stops advertising.
    @Test func aDeniedPeripheralAppStopsAdvertising() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        try await rig.run(.seconds(1))
        #expect(!rig.phone.discoveries.isEmpty)
        rig.sensorSystem.authorization = .denied
        try await rig.run(.milliseconds(100))
        rig.phone.clear()
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.isEmpty)
        #expect(rig.sensor.manager.state == .unauthorized)
        #expect(!rig.sensor.manager.isAdvertising)
    }
}
