import BLE
import Foundation
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
        let task = Task(executorPreference: radio) { () -> BluetoothError? in
            do {
                try await central.waitUntilPoweredOn(timeout: .seconds(5))
                return nil
            } catch let error as BluetoothError {
                return error
            }
        }
        try await radio.run(for: .seconds(10))  // past the 5 s timeout: the task has ended either way
        let error = try #require(await task.value)
        #expect(error.code == .operationNotSupported)
        #expect(error.message == "the application is not authorized to use Bluetooth")
    }

    @Test func aSystemOnItsOwnIsAllowed() {
        #expect(CentralManager.authorization == .allowedAlways)
        #expect(PeripheralManager.authorization == .allowedAlways)
    }
}
