import BLE
import Foundation
import Synchronization
import Testing

/// State restoration across a restart of the phone (IOS-RULES 5e: from iOS 11 it survives a reboot): the work a
/// manager with a restore identifier leaves in the store is carried on by a system made again on that store,
/// which relaunches the app when it bears fruit. The first phone is dropped without `shutDown`, as a process
/// killed with SIGKILL is (the CLI tests kill a real one); it is kept alive, never run again, so that nothing of
/// it ends in good order either.
@Suite struct PhoneRestartTests {
    typealias Launches = StateRestorationTests.Launches
    static let restoreID = StateRestorationTests.restoreID
    static let away = RadioPosition(x: 1000, y: 0)
    static let home = RadioPosition(x: 2, y: 0)

    /// The phone made again on `store`, on a new radio with the same seed (so the same addresses), the lock
    /// published and advertising at `sensorPosition`; the lock app installed again (its launch handler set).
    static func restarted(store: String, sensorPosition: RadioPosition = away, setHandler: Bool = true)
        async throws -> (Rig, BluetoothSystem.App, Launches)
    {
        let rig = Rig(phone: .init(storePath: store), sensorPosition: sensorPosition)
        try await rig.startSensor()
        let app = rig.phoneSystem.app(id: "com.example.lock")
        let launches = Launches()
        if setHandler { Self.install(app, launches) }
        return (rig, app, launches)
    }

    static func install(_ app: BluetoothSystem.App, _ launches: Launches) {
        app.onLaunch { launch in
            let recorder = CentralRecorder(
                system: launch.app.system, label: "lock", options: .init(restoreIdentifier: restoreID), app: launch.app)
            launches.launches.withLock { $0.append((launch.options, recorder)) }
            return recorder
        }
    }

    /// A first phone whose lock app (running, in the background) asked to connect to the lock, which is away.
    static func phoneWithAPendingConnection(store: String) async throws -> (
        Rig, BluetoothSystem.App, UUID, CentralRecorder, Peripheral
    ) {
        let rig = Rig(phone: .init(storePath: store))
        try await rig.startSensor()
        let (app, launches) = StateRestorationTests.lockApp(rig)
        app.launch()
        let first = try #require(launches.last)
        let lock = try await rig.find(with: first)
        rig.sensorSystem.move(to: away)
        try await rig.run(.seconds(1))
        first.central.connect(lock, options: .init(notifyOnDisconnection: true))
        app.moveToBackground()
        try await rig.run(.seconds(10))
        #expect(app.state == .suspended)
        return (rig, app, lock.identifier, first, lock)
    }

    @Test func aPendingConnectionSurvivesARestartAndRelaunchesTheAppWhenItCompletes() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, identifier, _, _) = try await Self.phoneWithAPendingConnection(store: store)
        defer { withExtendedLifetime(before) {} }
        do {
            // The phone restarts; the app has not run since. The system carries its pending connection on.
            let (rig, app, launches) = try await Self.restarted(store: store)
            #expect(app.state == .notRunning)
            #expect(app.backgroundModes == [.bluetoothCentral], "as the app declared before the restart")
            #expect(app.keptCentralManagers == [Self.restoreID])
            try await rig.run(.seconds(2 * 3600))
            #expect(launches.count == 0, "nothing relaunches it while the lock is away")

            // The user comes home: the connection completes, and the app is relaunched in the background.
            rig.sensorSystem.move(to: Self.home)
            try await rig.run(until: { launches.count == 1 }, within: .seconds(5), "the relaunch")
            #expect(launches.lastOptions?.bluetoothCentrals == [Self.restoreID])
            #expect(app.state == .background)
            let second = try #require(launches.last)
            try await rig.run(until: { second.events.contains(where: \.isConnect) }, within: .seconds(1), "didConnect")
            // The same identifier as before the restart; willRestoreState, the state, then the connection.
            let lines = second.lines
            #expect(lines.count == 3, "\(lines)")
            #expect(lines.first?.hasPrefix("willRestoreState peripherals=[\"\(identifier) connected\"]") == true)
            #expect(lines.dropFirst().first == "didUpdateState poweredOn")
            #expect(lines.last == "didConnect \(identifier)")
            // The restored link works: its services are discovered anew (nothing of the old link is carried).
            let restored = try #require(second.central.retrievePeripherals(withIdentifiers: [identifier]).first)
            #expect(restored.services == nil)
            try await rig.discoverAll(restored, recorder: second)
            let fixed = try rig.characteristic(Profile.fixed, on: restored)
            restored.readValue(for: fixed)
            try await rig.run(until: { fixed.value == Profile.fixedValue }, within: .seconds(2), "the read")
            #expect(app.keptCentralManagers.isEmpty)
        }
    }

    @Test func anAppOpenedBeforeTheDeviceIsSeenRestoresAConnectingPeripheral() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, identifier, _, _) = try await Self.phoneWithAPendingConnection(store: store)
        defer { withExtendedLifetime(before) {} }
        do {
            let (rig, app, launches) = try await Self.restarted(store: store)
            // The user opens the app while the lock is away: its manager takes the pending connection over.
            app.launch()
            let opened = try #require(launches.last)
            try await rig.run(.seconds(1))
            #expect(launches.lastOptions == BluetoothSystem.App.LaunchOptions(), "a launch by the user")
            #expect(
                opened.lines.first?.hasPrefix("willRestoreState peripherals=[\"\(identifier) connecting\"]") == true)
            #expect(app.keptCentralManagers.isEmpty)
            rig.sensorSystem.move(to: Self.home)
            try await rig.run(until: { opened.events.contains(where: \.isConnect) }, within: .seconds(5), "didConnect")
            #expect(opened.lines.last == "didConnect \(identifier)")
            #expect(launches.count == 1)
        }
    }

    @Test func aDeviceFoundBeforeTheAppIsInstalledAgainRelaunchesItWhenItIs() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, identifier, _, _) = try await Self.phoneWithAPendingConnection(store: store)
        defer { withExtendedLifetime(before) {} }
        do {
            // The lock is home as the phone starts, before the app's launch handler is set.
            let (rig, app, launches) = try await Self.restarted(
                store: store, sensorPosition: Self.home, setHandler: false)
            try await rig.run(.seconds(2))
            #expect(app.state == .notRunning)
            Self.install(app, launches)
            try await rig.run(until: { launches.count == 1 }, within: .seconds(1), "the relaunch")
            let second = try #require(launches.last)
            try await rig.run(until: { second.events.contains(where: \.isConnect) }, within: .seconds(1), "didConnect")
            #expect(second.lines.first?.hasPrefix("willRestoreState peripherals=[\"\(identifier) connected\"]") == true)
        }
    }

    @Test func aScanForServicesSurvivesARestart() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let before = Rig(phone: .init(storePath: store))
        try await before.startSensor(advertising: nil)
        let (app, launches) = StateRestorationTests.lockApp(before)
        app.launch()
        let first = try #require(launches.last)
        try await before.run(until: { first.central.state == .poweredOn }, "power on")
        first.central.scanForPeripherals(withServices: [Profile.service], options: .init(allowDuplicates: true))
        try await before.run(.seconds(1))
        defer { withExtendedLifetime(before) {} }
        do {
            let (rig, restartedApp, relaunches) = try await Self.restarted(store: store, sensorPosition: Self.home)
            try await rig.run(until: { relaunches.count == 1 }, within: .seconds(5), "the relaunch")
            let second = try #require(relaunches.last)
            try await rig.run(until: { !second.discoveries.isEmpty }, within: .seconds(1), "the discovery")
            #expect(
                second.lines.first == "willRestoreState peripherals=[] scan=[\"\(Profile.service.uuidString)\"]")
            #expect(second.central.isScanning)
            #expect(restartedApp.state == .background)
        }
    }

    @Test(arguments: ["force quit", "Bluetooth off", "cancelled"])
    func whatEndsRestorationEndsItAcrossARestart(_ ending: String) async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, app, identifier, first, lock) = try await Self.phoneWithAPendingConnection(store: store)
        switch ending {
        case "force quit": app.terminate(.byUser)
        case "Bluetooth off": before.phoneSystem.setBluetoothEnabled(false)
        default:
            // The app, back on screen, cancels its connection: nothing is left to carry on.
            app.moveToForeground()
            first.central.cancelPeripheralConnection(lock)
        }
        try await before.run(.seconds(1))
        defer { withExtendedLifetime(before) {} }
        do {
            let (rig, restartedApp, launches) = try await Self.restarted(store: store, sensorPosition: Self.home)
            #expect(restartedApp.keptCentralManagers.isEmpty, "\(ending)")
            try await rig.run(.seconds(5))
            #expect(launches.count == 0, "\(ending)")
            #expect(
                rig.phoneSystem.knownPeripherals.contains { $0.identifier == identifier }, "the peer is still known")
        }
    }
}
