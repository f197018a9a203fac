import BLE
import BLESystem
import Foundation
import Synchronization
import Testing

/// What keeps, rewrites and forgets a preserved record, seen from the next start on the store (IOSRules.md 5e):
/// a power-off keeps it, a force-quit forgets it even if the ended app's code calls on afterwards, and a record
/// that cannot be used, or that another version wrote, does not stop the system from starting.
@Suite struct PreservedRecordTests {
    typealias Launches = StateRestorationTests.Launches

    /// The records in the store at `path`, read by a store of its own (as the next process would).
    static func records(_ path: String) throws -> [PreservedManager] {
        let store = try SystemStore(path: path, ageing: false, now: { 0 })
        defer { store.close() }
        return store.preservedManagers
    }

    @Test(arguments: ["the controller vanishes", "the phone shuts down"])
    func aPowerOffKeepsAScanAndItsOptions(_ ending: String) async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let before = Rig(phone: .init(storePath: store))
        try await before.startSensor(advertising: nil)
        let (app, launches) = StateRestorationTests.lockApp(before)
        app.launch()
        let first = try #require(launches.last)
        try await before.run(until: { first.central.state == .poweredOn }, "power on")
        first.central.scanForPeripherals(
            withServices: [Profile.service],
            options: .init(allowDuplicates: true, solicitedServiceUUIDs: [Profile.fixed]))
        try await before.run(.seconds(1))
        if ending == "the controller vanishes" {
            before.phoneSystem.virtualController?.vanish()
            try await before.run(until: { first.central.state == .poweredOff }, "the power-off")
        } else {
            await before.phoneSystem.shutDown()
        }
        #expect(!first.central.isScanning)
        #expect(try Self.records(store).map(\.key.restoreIdentifier) == [StateRestorationTests.restoreID])
        defer { withExtendedLifetime(before) {} }

        let (rig, _, relaunches) = try await PhoneRestartTests.restarted(
            store: store, sensorPosition: PhoneRestartTests.home)
        try await rig.run(until: { relaunches.count == 1 }, within: .seconds(5), "the relaunch")
        let second = try #require(relaunches.last)
        try await rig.run(until: { !second.events.isEmpty }, "the first callback")
        guard case .willRestoreState(let state) = second.events.first else {
            Issue.record("willRestoreState first: \(second.lines)")
            return
        }
        #expect(state.scanServices == [Profile.service])
        #expect(state.scanOptions?.allowDuplicates == true)
        #expect(state.scanOptions?.solicitedServiceUUIDs == [Profile.fixed])
    }

    @Test func aForceQuitForgetsEvenIfTheEndedAppCallsOn() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (rig, app, first) = try await PeripheralPhoneRestartTests.publishingApp(store: store)
        #expect(try Self.records(store).map(\.key.role) == [.peripheral])
        app.terminate(.byUser)
        #expect(try Self.records(store).isEmpty)
        // The ended app's code goes on calling its manager: refused, and nothing is written again.
        first.manager.remove(rig.sensor.primary)
        first.manager.stopAdvertising()
        try await rig.run(.seconds(1))
        #expect(try Self.records(store).isEmpty)
    }

    @Test func aRecordOfAnotherVersionIsLeftAndAnUnusableOneForgotten() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let future = PreservedManager(
            key: .init(app: "com.example.future", role: .central, restoreIdentifier: "x"),
            backgroundModes: ["bluetooth-central"], record: Array(#"{"version":2,"peers":"later"}"#.utf8))
        let broken = PreservedManager(
            key: .init(app: "com.example.broken", role: .peripheral, restoreIdentifier: "y"),
            backgroundModes: ["bluetooth-peripheral"], record: Array("not a record".utf8))
        let withoutMode = PreservedManager(
            key: .init(app: "com.example.modeless", role: .central, restoreIdentifier: "z"),
            backgroundModes: [], record: Array(#"{"version":1,"peers":[]}"#.utf8))
        do {
            let writer = try SystemStore(path: store, now: { 0 })
            for record in [future, broken, withoutMode] { writer.setPreserved(record) }
            writer.close()
        }
        let rig = Rig(phone: .init(storePath: store))
        try await rig.startSensor()
        for id in ["com.example.future", "com.example.broken", "com.example.modeless"] {
            let app = rig.phoneSystem.app(id: id)
            #expect(app.state == .foreground, "\(id) is not kept from running")
            #expect(app.keptCentralManagers.isEmpty && app.keptPeripheralManagers.isEmpty, "\(id)")
        }
        #expect(try Self.records(store) == [future], "the other version's record is left for it")
    }

    @Test func servicesAreRecordedIncludesFirstWhateverTheOrderTheyWereAddedIn() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, first) = try await PeripheralPhoneRestartTests.publishingApp(store: store, advertising: false)
        // The included service removed and added again: published after the one that includes it.
        first.manager.remove(before.sensor.secondary)
        first.manager.add(before.sensor.secondary)
        try await before.run(.milliseconds(100))
        defer { withExtendedLifetime(before) {} }

        let (rig, _, _, restored) = try await PeripheralPhoneRestartTests.openedAtOnce(store: store)
        defer { withExtendedLifetime(rig) {} }
        guard let state = restored else { return }
        #expect(state.services?.map(\.uuid) == [Profile.includedService, Profile.service])
        #expect(state.services?.last?.includedServices?.first === state.services?.first)
    }
}
