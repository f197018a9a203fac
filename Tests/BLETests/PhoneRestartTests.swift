import BLE
import Foundation
import Synchronization
import Testing

/// State restoration across a restart of the phone (IOSRules.md 5e: from iOS 11 it survives a reboot): the work a
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

    @Test func anAppOpenedAsThePhoneStartsTakesTheWorkOverBeforeTheControllerIsOn() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, identifier, _, _) = try await Self.phoneWithAPendingConnection(store: store)
        defer { withExtendedLifetime(before) {} }
        // Opened at once, before the restarted controller is on: the manager takes the work not yet started.
        let rig = Rig(phone: .init(storePath: store))
        let app = rig.phoneSystem.app(id: "com.example.lock")
        let launches = Launches()
        Self.install(app, launches)
        app.launch()
        let opened = try #require(launches.last)
        try await rig.run(until: { !opened.events.isEmpty }, "the first callback")
        #expect(opened.lines.first?.hasPrefix("willRestoreState peripherals=[\"\(identifier) connecting\"]") == true)
        #expect(app.keptCentralManagers.isEmpty)
        try await rig.startSensor()
        try await rig.run(until: { opened.events.contains(where: \.isConnect) }, within: .seconds(5), "didConnect")
        #expect(opened.lines.last == "didConnect \(identifier)")
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

/// A peripheral manager's published services and advertisement across a restart of the device (IOSRules.md 5.6,
/// 5e): the restarted system publishes them again and advertises in the background form; a central's request for
/// a value the app gives relaunches it, and its restored manager hears the services (rebuilt from the store) and
/// the advertisement.
@Suite struct PeripheralPhoneRestartTests {
    typealias Launches = RecordedLaunches<PeripheralRecorder>
    static let restoreID = "sensor-peripheral"

    static func install(_ app: BluetoothSystem.App, _ launches: Launches) {
        app.onLaunch { launch in
            let recorder = PeripheralRecorder(
                system: launch.app.system, label: "app sensor", app: launch.app,
                options: .init(restoreIdentifier: restoreID), values: [Profile.dynamic: Data([0x2A])])
            launches.launches.withLock { $0.append((launch.options, recorder)) }
            return recorder
        }
    }

    /// The sensor app launched on a device whose store is `store`: it publishes the profile's included and
    /// primary services (an included service, static and dynamic values, a descriptor) and, unless not,
    /// advertises.
    static func publishingApp(store: String, advertising: Bool = true) async throws -> (
        Rig, BluetoothSystem.App, PeripheralRecorder
    ) {
        let rig = Rig(sensor: .init(storePath: store))
        let app = rig.sensorSystem.app(id: "com.example.sensor", backgroundModes: [.bluetoothPeripheral])
        let launches = Launches()
        install(app, launches)
        app.launch()
        let first = try #require(launches.last)
        try await rig.run(until: { first.manager.state == .poweredOn }, "power")
        first.manager.add(rig.sensor.secondary)
        first.manager.add(rig.sensor.primary)
        if advertising {
            first.manager.startAdvertising(Sensor.advertisement)
            try await rig.run(until: { first.manager.isAdvertising }, "advertising")
        }
        return (rig, app, first)
    }

    /// The sensor app opened by the user on the device restarted on `store`, at once (before its controller is
    /// on): its recorder, its launches, and the state its restored manager heard first (nil, and an issue, if
    /// not `willRestoreState`).
    static func openedAtOnce(store: String) async throws -> (
        Rig, PeripheralRecorder, Launches, PeripheralManager.RestoredState?
    ) {
        let rig = Rig(sensor: .init(storePath: store))
        let app = rig.sensorSystem.app(id: "com.example.sensor")
        #expect(app.keptPeripheralManagers == [restoreID])
        let opened = Launches()
        install(app, opened)
        app.launch()
        let recorder = try #require(opened.last)
        try await rig.run(until: { !recorder.events.isEmpty }, "the first callback")
        guard case .willRestoreState(let state) = recorder.events.first else {
            Issue.record("willRestoreState first: \(recorder.lines)")
            return (rig, recorder, opened, nil)
        }
        return (rig, recorder, opened, state)
    }

    /// The restarted sensor, advertising in its background form for its kept app (found by a scan for its
    /// service, in the overflow area, without its name), connected by the phone and its database discovered.
    static func findRestarted(_ rig: Rig) async throws -> Peripheral {
        try await rig.run(until: { rig.central.state == .poweredOn }, "power")
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !rig.phone.discoveries.isEmpty }, within: .seconds(5), "the discovery")
        let found = try #require(rig.phone.discoveries.first)
        #expect(found.advertisement.localName == nil)
        #expect(found.advertisement.overflowServiceUUIDs == [Profile.service])
        rig.central.stopScan()
        rig.central.connect(found.peripheral)
        try await rig.run(until: { found.peripheral.state == .connected }, "the connection")
        try await rig.discoverAll(found.peripheral)
        return found.peripheral
    }

    /// The restarted sensor, its app opened (in the foreground: advertising its name), found by that name,
    /// connected by the phone and its database discovered.
    static func findByName(_ rig: Rig) async throws -> Peripheral {
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(
            until: { rig.phone.discoveries.contains { $0.advertisement.localName == "sensor" } }, within: .seconds(5),
            "the discovery by name")
        let found = try #require(rig.phone.discoveries.first { $0.advertisement.localName == "sensor" })
        rig.central.stopScan()
        rig.central.connect(found.peripheral)
        try await rig.run(until: { found.peripheral.state == .connected }, "the connection")
        try await rig.discoverAll(found.peripheral)
        return found.peripheral
    }

    @Test func publishedServicesAndTheAdvertisementSurviveARestart() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        // Before: the sensor app publishes the profile and advertises, then leaves the foreground.
        let (before, app, _) = try await Self.publishingApp(store: store)
        app.moveToBackground()
        try await before.run(.seconds(10))
        #expect(app.state == .suspended)
        defer { withExtendedLifetime(before) {} }

        // The device restarts: the system publishes and advertises for the app, which does not run.
        let rig = Rig(sensor: .init(storePath: store))
        let restartedApp = rig.sensorSystem.app(id: "com.example.sensor")
        #expect(restartedApp.state == .notRunning)
        #expect(restartedApp.keptPeripheralManagers == [Self.restoreID])
        let relaunches = Launches()
        Self.install(restartedApp, relaunches)
        // In the background form: found by a scan for its service (in the overflow area), without its name.
        let found = try await Self.findRestarted(rig)
        // Static values and descriptors are answered by the system: no relaunch for them.
        let fixed = try rig.characteristic(Profile.fixed, on: found)
        found.readValue(for: fixed)
        try await rig.run(until: { fixed.value == Profile.fixedValue }, within: .seconds(2), "the static read")
        let described = try rig.characteristic(Profile.described, on: found)
        #expect(described.descriptors?.map(\.uuid) == [.characteristicUserDescription])
        let remotePrimary = try #require(found.services?.first { $0.uuid == Profile.service })
        found.discoverIncludedServices(nil, for: remotePrimary)
        try await rig.run(
            until: { rig.phone.lines.contains("didDiscoverIncludedServices \(Profile.service.uuidString)") },
            "included services")
        #expect(remotePrimary.includedServices?.map(\.uuid) == [Profile.includedService])
        #expect(relaunches.count == 0)

        // A value the app gives: the read relaunches it, and its restored manager answers.
        let dynamic = try rig.characteristic(Profile.dynamic, on: found)
        found.readValue(for: dynamic)
        try await rig.run(until: { dynamic.value == Data([0x2A]) }, within: .seconds(2), "the app's answer")
        #expect(relaunches.count == 1)
        #expect(relaunches.lastOptions?.bluetoothPeripherals == [Self.restoreID])
        let second = try #require(relaunches.last)
        #expect(second.lines.first?.hasPrefix("willRestoreState") == true, "\(second.lines)")
        guard case .willRestoreState(let state) = second.events.first else { return }
        #expect(state.services?.map(\.uuid) == [Profile.includedService, Profile.service])
        let primary = try #require(state.services?.last)
        #expect(primary.includedServices?.map(\.uuid) == [Profile.includedService])
        let characteristics = (primary.characteristics ?? []).compactMap { $0 as? MutableCharacteristic }
        #expect(characteristics.map(\.uuid) == before.sensor.primary.characteristics?.map(\.uuid))
        #expect(characteristics.first { $0.uuid == Profile.fixed }?.value == Profile.fixedValue)
        #expect(characteristics.first { $0.uuid == Profile.dynamic }?.permissions == [.readable, .writeable])
        #expect(state.advertisementData == Sensor.advertisement)
        #expect(second.manager.isAdvertising)
    }
}

extension PeripheralPhoneRestartTests {
    @Test func anAppOpenedAsTheDeviceStartsPublishesAndAdvertisesWhatWasPreserved() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, _) = try await Self.publishingApp(store: store)
        defer { withExtendedLifetime(before) {} }

        // Opened at once, before the restarted controller is on: the restored manager publishes and advertises.
        let (rig, second, opened, restored) = try await Self.openedAtOnce(store: store)
        guard let state = restored else { return }
        #expect(state.services?.map(\.uuid) == [Profile.includedService, Profile.service])
        #expect(state.advertisementData == Sensor.advertisement)
        try await rig.run(until: { second.manager.isAdvertising }, within: .seconds(2), "advertising")
        #expect(!second.lines.contains { $0.hasPrefix("didAdd") }, "published by the system, not the app")
        let found = try await Self.findByName(rig)
        let dynamic = try rig.characteristic(Profile.dynamic, on: found)
        found.readValue(for: dynamic)
        try await rig.run(until: { dynamic.value == Data([0x2A]) }, within: .seconds(2), "the app's answer")
        #expect(opened.count == 1)
    }
}

extension PeripheralPhoneRestartTests {
    /// The app opened as the device starts takes one restored service out before the controller is on: the
    /// system publishes what the record named, the manager takes that one out again as it hears so, and the
    /// phone finds only the other.
    @Test func aRestoredServiceTheAppTakesOutBeforeTheControllerIsOnIsNotLeftPublished() async throws {
        let store = SystemStoreAndShutdownTests.storePath()
        defer { SystemStoreAndShutdownTests.remove(store) }
        let (before, _, _) = try await Self.publishingApp(store: store)
        defer { withExtendedLifetime(before) {} }

        let (rig, second, _, restored) = try await Self.openedAtOnce(store: store)
        guard let state = restored else { return }
        try #require(second.manager.state != .poweredOn, "taken out before the controller is on")
        let primary = try #require(state.services?.first { $0.uuid == Profile.service })
        second.manager.remove(primary)
        try await rig.run(until: { second.manager.isAdvertising }, within: .seconds(2), "advertising")
        let found = try await Self.findByName(rig)
        // The primary service is gone; the included one (secondary, so not among the primaries) is not.
        let primaries = found.services?.map(\.uuid) ?? []
        #expect(primaries.contains(.genericAccess) && !primaries.contains(Profile.service), "\(primaries)")
        #expect(!second.lines.contains { $0.hasPrefix("didAdd") })
    }
}
