import BLE
import Foundation
import Testing

/// Stores written by an earlier swift-ble restore with this one: the preserved records' format (version 1 of
/// `PreservedCentralRecord` and `PreservedPeripheralRecord`) is a promise to a phone that restarts into a newer
/// version. The fixtures under `Fixtures/` were made at 2c6c6136 (after step 11 of the system machine's plan,
/// before restoration moved into the machine) by the "before" halves of `PhoneRestartTests` and
/// `PeripheralPhoneRestartTests` (`Fixtures/README.md` says how); each test here runs the "after" half on a copy.
@Suite struct PreservedFixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// A copy of the fixture store `name`, to be changed by the test (and removed after it).
    static func copy(_ name: String) throws -> String {
        let path = SystemStoreAndShutdownTests.storePath()
        try FileManager.default.copyItem(atPath: fixtures.appendingPathComponent(name).path, toPath: path)
        return path
    }

    /// The lock app's pending connection, written by the earlier version with the lock away: carried on, and the
    /// app relaunched when the lock comes home, with the identifier it had then.
    @Test func anEarlierVersionsPendingConnectionIsCarriedOn() async throws {
        let store = try Self.copy("central-pending-connection.sqlite")
        defer { SystemStoreAndShutdownTests.remove(store) }
        let written = try String(
            contentsOf: Self.fixtures.appendingPathComponent("central-pending-connection.identifier"), encoding: .utf8)
        let identifier = try #require(UUID(uuidString: written.trimmingCharacters(in: .whitespacesAndNewlines)))
        let (rig, app, launches) = try await PhoneRestartTests.restarted(store: store)
        #expect(app.state == .notRunning)
        #expect(app.backgroundModes == [.bluetoothCentral])
        #expect(app.keptCentralManagers == [PhoneRestartTests.restoreID])
        try await rig.run(.seconds(60))
        #expect(launches.count == 0)
        rig.sensorSystem.move(to: PhoneRestartTests.home)
        try await rig.run(until: { launches.count == 1 }, within: .seconds(5), "the relaunch")
        #expect(launches.lastOptions?.bluetoothCentrals == [PhoneRestartTests.restoreID])
        let second = try #require(launches.last)
        try await rig.run(until: { second.events.contains(where: \.isConnect) }, within: .seconds(1), "didConnect")
        #expect(second.lines.first?.hasPrefix("willRestoreState peripherals=[\"\(identifier) connected\"]") == true)
        #expect(second.lines.dropFirst().first == "didUpdateState poweredOn")
        #expect(second.lines.last == "didConnect \(identifier)")
    }

    /// The sensor app's published services and advertisement, written by the earlier version: published and
    /// advertised again (in the background form), and a read of a value the app gives relaunches it, restored
    /// with the services rebuilt from the record.
    @Test func anEarlierVersionsPublishedServicesAreServedAgain() async throws {
        let store = try Self.copy("peripheral-published.sqlite")
        defer { SystemStoreAndShutdownTests.remove(store) }
        let rig = Rig(sensor: .init(storePath: store))
        let app = rig.sensorSystem.app(id: "com.example.sensor")
        #expect(app.state == .notRunning)
        #expect(app.keptPeripheralManagers == [PeripheralPhoneRestartTests.restoreID])
        let relaunches = PeripheralPhoneRestartTests.Launches()
        PeripheralPhoneRestartTests.install(app, relaunches)
        let found = try await PeripheralPhoneRestartTests.findRestarted(rig)
        let fixed = try rig.characteristic(Profile.fixed, on: found)
        found.readValue(for: fixed)
        try await rig.run(until: { fixed.value == Profile.fixedValue }, within: .seconds(2), "the static read")
        #expect(relaunches.count == 0)
        let dynamic = try rig.characteristic(Profile.dynamic, on: found)
        found.readValue(for: dynamic)
        try await rig.run(until: { dynamic.value == Data([0x2A]) }, within: .seconds(2), "the app's answer")
        #expect(relaunches.count == 1)
        let second = try #require(relaunches.last)
        guard case .willRestoreState(let state) = second.events.first else {
            Issue.record("willRestoreState first: \(second.lines)")
            return
        }
        #expect(state.services?.map(\.uuid) == [Profile.includedService, Profile.service])
        #expect(state.advertisementData == Sensor.advertisement)
    }
}
