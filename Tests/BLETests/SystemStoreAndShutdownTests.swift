import BLE
import Foundation
import Synchronization
import Testing

/// A system with a store that outlives it: shut down, made again on the same radio and file, it is the same phone
/// after a restart.
@Suite struct SystemStoreAndShutdownTests {
    static func storePath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("phone-\(UUID().uuidString).sqlite").path
    }

    static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm", ".unusable"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test func aRestartedPhoneKnowsItsDevicesByTheSameIdentifiers() async throws {
        let path = Self.storePath()
        defer { Self.remove(path) }
        let rig = Rig(phone: .init(storePath: path))
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        let identifier = peripheral.identifier
        let phoneAddress = rig.phoneSystem.address

        await rig.phoneSystem.shutDown()
        // The phone's app hears the power go, and its link with it (no `didDisconnectPeripheral`: IOSRules.md 6.7);
        // the sensor hears the phone power off.
        try await rig.run(until: { rig.central.state == .poweredOff }, "the power off")
        try await rig.run(.milliseconds(10))
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.disconnections.isEmpty)
        #expect(rig.phone.lines.last == "didUpdateState poweredOff")

        let restarted = try BluetoothSystem.makeSimulated(
            on: rig.radio, name: "phone", configuration: .init(storePath: path))
        let app = CentralRecorder(system: restarted, label: "restarted")
        try await rig.run(until: { app.central.state == .poweredOn }, "power on")
        #expect(restarted.address == phoneAddress)
        // Retrieved by its stored identifier, with its last name, before any scan.
        let retrieved = app.central.retrievePeripherals(withIdentifiers: [identifier, UUID()])
        #expect(retrieved.map(\.identifier) == [identifier])
        #expect(retrieved.first?.name == "sensor")
        // Connected with no scan by the app, while the sensor advertises (it does again once the link is gone).
        let again = try #require(retrieved.first)
        app.central.connect(again)
        try await rig.run(until: { app.events.contains { $0.isConnect } }, "the connection with no scan")
        #expect(again.state == .connected)
        app.central.cancelPeripheralConnection(again)
        try await rig.run(until: { app.events.contains { $0.isDisconnect } }, "the disconnection")
        // And heard again under the same identifier.
        app.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !app.discoveries.isEmpty }, "discovery")
        #expect(app.discoveries.first?.peripheral.identifier == identifier)
        await restarted.shutDown()
    }

    @Test func aShutDownFailsWhatIsPendingWithSystemShutDown() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let fixed = try rig.characteristic(Profile.fixed, on: peripheral)
        let outcome = Mutex<BluetoothError?>(nil)
        rig.sensorSystem.move(to: RadioPosition(x: 10_000, y: 0))
        let ghost = rig.central.retrievePeripherals(withIdentifiers: [UUID()])
        #expect(ghost.isEmpty)
        Task(executorPreference: rig.radio) {
            do {
                _ = try await peripheral.readValue(for: fixed, timeout: .seconds(5))
            } catch let error as BluetoothError {
                outcome.withLock { $0 = error }
            }
        }
        // The sensor is out of range, so the read is still pending (until a supervision timeout 5 s away) when
        // the system goes down.
        try await rig.run(.milliseconds(100))
        #expect(outcome.withLock { $0 } == nil)
        await rig.phoneSystem.shutDown()
        try await rig.run(until: { outcome.withLock { $0 } != nil }, within: .seconds(1), "the read's end")
        #expect(outcome.withLock { $0 }?.code == .systemShutDown)
        // After the shutdown, nothing the app asks reaches the controller, and a second shutdown does nothing.
        rig.central.scanForPeripherals(withServices: nil)
        #expect(!rig.central.isScanning)
        await rig.phoneSystem.shutDown()
    }

    @Test func anUnusableStoreIsAnErrorNamingItOrARebuild() async throws {
        let path = Self.storePath()
        defer { Self.remove(path) }
        try Data(repeating: 0x42, count: 4096).write(to: URL(fileURLWithPath: path))
        let radio = SimulatedRadio(seed: 3)
        #expect {
            _ = try BluetoothSystem.makeSimulated(on: radio, name: "phone", configuration: .init(storePath: path))
        } throws: { error in
            (error as? BluetoothError)?.code == .storeUnavailable && "\(error)".contains(path)
        }
        // `simulated` cannot throw: it runs with a store in memory, and leaves the file alone.
        let fallback = BluetoothSystem.simulated(on: radio, name: "phone", configuration: .init(storePath: path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(repeating: 0x42, count: 4096))
        await fallback.shutDown()
        let rebuilt = try BluetoothSystem.makeSimulated(
            on: radio, name: "phone2", configuration: .init(storePath: path, rebuildUnusableStore: true))
        #expect(FileManager.default.fileExists(atPath: path + ".unusable"))
        await rebuilt.shutDown()
    }

    @Test func appsAreNamedAndManagersBelongToThem() {
        let radio = SimulatedRadio(seed: 4)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let lock = phone.app(id: "com.example.lock")
        #expect(lock == phone.app(id: "com.example.lock"))
        #expect(lock != phone.app(id: "com.example.other"))
        #expect(lock.id == "com.example.lock" && lock.system === phone)
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "lock"), options: nil, app: lock)
        let server = PeripheralManager(delegate: nil, queue: DispatchQueue(label: "lock"), options: nil, app: lock)
        #expect(central.app == lock && server.app == lock)
        let plain = CentralManager(delegate: nil, queue: DispatchQueue(label: "plain"), options: nil, system: phone)
        #expect(plain.app == phone.defaultApp && plain.app.id == "default")
    }
}
