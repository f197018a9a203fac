import BLE
import Foundation
import Synchronization
import Testing

/// Each launch of an app: its options, and the recorder its launch handler made.
final class RecordedLaunches<Recorder: Sendable>: Sendable {
    let launches = Mutex<[(options: BluetoothSystem.App.LaunchOptions, recorder: Recorder)]>([])
    var count: Int { launches.withLock { $0.count } }
    var last: Recorder? { launches.withLock { $0.last?.recorder } }
    var lastOptions: BluetoothSystem.App.LaunchOptions? { launches.withLock { $0.last?.options } }
}

/// State preservation and restoration of central managers, in one process (IOSRules.md 5, 6.3–6.5): the system
/// keeps a terminated app's work, relaunches it when the work bears fruit, and the relaunched app's manager
/// restores what was kept.
@Suite struct StateRestorationTests {
    typealias Launches = RecordedLaunches<CentralRecorder>

    static let restoreID = "lock-central"

    /// A lock app with `bluetooth-central` whose launch handler makes a central manager with a restore identifier.
    static func lockApp(_ rig: Rig, modes: Set<BluetoothSystem.App.BackgroundMode> = [.bluetoothCentral])
        -> (BluetoothSystem.App, Launches)
    {
        let app = rig.phoneSystem.app(id: "com.example.lock", backgroundModes: modes)
        let launches = Launches()
        app.onLaunch { launch in
            let recorder = CentralRecorder(
                system: launch.app.system, label: "lock", options: .init(restoreIdentifier: restoreID), app: launch.app)
            launches.launches.withLock { $0.append((launch.options, recorder)) }
            return recorder
        }
        return (app, launches)
    }

    /// A rig whose sensor is published (and advertising, unless not), and the lock app launched: its launches and
    /// the first launch's recorder.
    static func launchedLockApp(
        modes: Set<BluetoothSystem.App.BackgroundMode> = [.bluetoothCentral], advertising: Bool = true
    ) async throws -> (Rig, BluetoothSystem.App, Launches, CentralRecorder) {
        let rig = Rig()
        try await rig.startSensor(advertising: advertising ? Sensor.advertisement : nil)
        let (app, launches) = lockApp(rig, modes: modes)
        app.launch()
        return (rig, app, launches, try #require(launches.last))
    }

    @Test func aPendingConnectionRelaunchesTheAppWhenItCompletes() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp()
        let lock = try await rig.find(with: first)
        let identifier = lock.identifier
        // The user leaves: the lock is out of range; the app asks to connect and goes to the background.
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(.seconds(1))
        first.central.connect(lock)
        app.moveToBackground()
        try await rig.run(.seconds(10))
        // The system ends the app to free memory: it keeps the pending connection.
        app.terminate(.bySystem)
        #expect(app.keptCentralManagers == [Self.restoreID])
        #expect(app.state == .notRunning)
        // The ended app's own code cannot undo what the system keeps for it.
        first.central.cancelPeripheralConnection(lock)
        #expect(lock.state == .connecting)
        try await rig.run(.seconds(2 * 3600))
        #expect(launches.count == 1, "nothing relaunches it while the lock is away")

        // Hours later the user comes home: the connection completes and the app is relaunched in the background.
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(until: { launches.count == 2 }, within: .seconds(5), "the relaunch")
        #expect(launches.lastOptions?.bluetoothCentrals == [Self.restoreID])
        #expect(app.state == .background)
        let second = try #require(launches.last)
        try await rig.run(until: { second.events.contains(where: \.isConnect) }, within: .seconds(1), "didConnect")
        // willRestoreState first, then the state, then the connection (IOSRules.md 5.8, 5.10).
        let lines = second.lines
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.hasPrefix("willRestoreState peripherals=[\"\(identifier) connected\"]") == true)
        #expect(lines.dropFirst().first == "didUpdateState poweredOn")
        #expect(lines.last == "didConnect \(identifier)")
        // Within its wake budget it works the lock through the restored peripheral.
        let restored = try #require(
            second.events.compactMap { e -> Peripheral? in
                if case .didConnect(let p) = e { p } else { nil }
            }.first)
        #expect(restored.state == .connected)
        try await rig.discoverAll(restored, recorder: second)
        let fixed = try rig.characteristic(Profile.fixed, on: restored)
        restored.readValue(for: fixed)
        try await rig.run(until: { fixed.value == Profile.fixedValue }, within: .seconds(2), "the read")
        #expect(app.keptCentralManagers.isEmpty)
    }

    @Test func aNotificationRelaunchesTheAppWithItsSubscriptionsRestored() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp()
        let sensor = try await AppLifecycleTests.connectAndSubscribe(first, rig)
        let servicesBefore = (sensor.services ?? []).map(\.uuid)
        app.terminate(.crash)
        #expect(app.keptCentralManagers == [Self.restoreID])
        try await rig.run(.seconds(60))
        #expect(rig.sensor.notifier.subscribedCentrals?.count == 1, "the system keeps the subscription")

        _ = rig.sensor.manager.updateValue(Data([5]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        try await rig.run(until: { launches.count == 2 }, within: .seconds(2), "the relaunch")
        let second = try #require(launches.last)
        try await rig.run(until: { !second.valueUpdates.isEmpty }, within: .seconds(1), "the notification")
        guard case .willRestoreState(let state) = second.events.first else {
            Issue.record("willRestoreState should come first: \(second.lines)")
            return
        }
        let restored = try #require(state.peripherals?.first)
        #expect(restored.identifier == sensor.identifier)
        #expect(restored.state == .connected)
        #expect((restored.services ?? []).map(\.uuid) == servicesBefore)
        let restoredNotifier = try rig.characteristic(Profile.notifier, on: restored)
        #expect(restoredNotifier.isNotifying)
        #expect(second.valueUpdates.first?.value == Data([5]))
        #expect(second.valueUpdates.first?.characteristic === restoredNotifier)
        // Later values reach the relaunched app as usual.
        _ = rig.sensor.manager.updateValue(Data([6]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        try await rig.run(until: { second.valueUpdates.count == 2 }, within: .seconds(1), "the next notification")
    }

    @Test func aLinkLostWhileKeptRelaunchesTheAppToHearIt() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp()
        let sensor = try await AppLifecycleTests.connectAndSubscribe(first, rig)
        app.terminate(.bySystem)
        #expect(app.keptCentralManagers == [Self.restoreID])
        // The sensor goes away: the link times out while the app is not running (IOSRules.md 6.2: torn down).
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { launches.count == 2 }, within: .seconds(10), "the relaunch")
        let second = try #require(launches.last)
        try await rig.run(until: { second.events.contains(where: \.isDisconnect) }, within: .seconds(1), "the loss")
        #expect(second.lines.first == "willRestoreState peripherals=[] scan=[]")
        #expect(second.lines.dropFirst().first == "didUpdateState poweredOn")
        #expect(second.lines.last?.hasPrefix("didDisconnect \(sensor.identifier)") == true, "\(second.lines)")
        #expect(second.disconnections.first?.error?.code == .connectionTimeout)
    }

    /// The app connects to the lost peripheral again as soon as it is powered on (before the loss that relaunched
    /// it is told): the loss is told, and the new attempt goes on (it was marked disconnected, and its wait failed).
    @Test func aPeripheralConnectedAgainBeforeItsLossIsToldKeepsItsNewAttempt() async throws {
        let rig = Rig()
        try await rig.startSensor(advertising: Sensor.advertisement)
        let app = rig.phoneSystem.app(id: "com.example.lock", backgroundModes: [.bluetoothCentral])
        let launches = Launches()
        let reconnected = Mutex<Peripheral?>(nil)
        let identifier = Mutex<UUID?>(nil)
        app.onLaunch { launch in
            let recorder = CentralRecorder(
                system: launch.app.system, label: "lock", options: .init(restoreIdentifier: Self.restoreID),
                app: launch.app)
            recorder.onEvent { recorder, event in
                guard case .didUpdateState(.poweredOn) = event, let id = identifier.withLock({ $0 }) else { return }
                for p in recorder.central.retrievePeripherals(withIdentifiers: [id]) where p.state == .disconnected {
                    recorder.central.connect(p)
                    reconnected.withLock { $0 = p }
                }
            }
            launches.launches.withLock { $0.append((launch.options, recorder)) }
            return recorder
        }
        app.launch()
        let first = try #require(launches.last)
        let sensor = try await AppLifecycleTests.connectAndSubscribe(first, rig)
        identifier.withLock { $0 = sensor.identifier }
        app.terminate(.bySystem)
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { launches.count == 2 }, within: .seconds(10), "the relaunch")
        let second = try #require(launches.last)
        try await rig.run(until: { second.events.contains(where: \.isDisconnect) }, within: .seconds(1), "the loss")
        let again = try #require(reconnected.withLock { $0 }, "the app connected again: \(second.lines)")
        #expect(second.lines.last?.hasPrefix("didDisconnect \(sensor.identifier)") == true, "\(second.lines)")
        #expect(again.state == .connecting, "the new attempt goes on")
        // The sensor comes back: the new attempt connects.
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(until: { again.state == .connected }, within: .seconds(5), "the new connection")
    }

    @Test func aScanForEveryDeviceIsNotCarriedOnNorRestored() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp()
        let sensor = try await AppLifecycleTests.connectAndSubscribe(first, rig)
        first.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(1))
        #expect(first.central.isScanning)
        app.terminate(.bySystem)
        #expect(app.keptCentralManagers == [Self.restoreID], "kept for its link")
        // A device that only a scan for everything would find relaunches nothing.
        _ = try await rig.addAdvertiser(
            name: "stranger", position: RadioPosition(x: 3, y: 0),
            advertisement: AdvertisementData(localName: "stranger"))
        try await rig.run(.seconds(5))
        #expect(launches.count == 1)
        // The link's loss relaunches it: the scan is not restored.
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { launches.count == 2 }, within: .seconds(10), "the relaunch")
        let second = try #require(launches.last)
        try await rig.run(until: { second.events.contains(where: \.isDisconnect) }, within: .seconds(1), "the loss")
        #expect(second.lines.first == "willRestoreState peripherals=[] scan=[]")
        #expect(!second.central.isScanning)
        #expect(second.discoveries.isEmpty)
        withExtendedLifetime(sensor) {}
    }

    @Test func aRestoredPeripheralKeepsItsAutoReconnect() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp()
        _ = try await AppLifecycleTests.connectAndSubscribe(first, rig, options: .init(enableAutoReconnect: true))
        app.terminate(.bySystem)
        _ = rig.sensor.manager.updateValue(Data([1]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        try await rig.run(until: { launches.count == 2 }, within: .seconds(2), "the relaunch")
        let second = try #require(launches.last)
        try await rig.run(until: { !second.valueUpdates.isEmpty }, within: .seconds(1), "the notification")
        let restored = try #require(second.valueUpdates.first?.characteristic.service?.peripheral)
        #expect(restored.state == .connected)
        // The link is lost: the restored peripheral reconnects by itself, as the connection asked.
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { second.events.contains(where: \.isDisconnect) }, within: .seconds(10), "the loss")
        #expect(restored.state == .connecting)
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(until: { restored.state == .connected }, within: .seconds(10), "the reconnection")
    }

    @Test func aScanForServicesRelaunchesTheAppWhenADeviceIsFound() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp(advertising: false)
        try await rig.run(until: { first.central.state == .poweredOn }, "power on")
        first.central.scanForPeripherals(withServices: [Profile.service])
        app.terminate(.bySystem)
        #expect(app.keptCentralManagers == [Self.restoreID])
        try await rig.run(.seconds(30))
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(until: { launches.count == 2 }, within: .seconds(5), "the relaunch")
        let second = try #require(launches.last)
        try await rig.run(until: { !second.discoveries.isEmpty }, within: .seconds(1), "the discovery")
        #expect(second.lines.first == "willRestoreState peripherals=[] scan=[\"\(Profile.service.uuidString)\"]")
        #expect(second.central.isScanning)
    }

    @Test(arguments: [BluetoothSystem.App.Termination.byUser])
    func aUserQuitKeepsNothing(_ cause: BluetoothSystem.App.Termination) async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp()
        _ = try await AppLifecycleTests.connectAndSubscribe(first, rig)
        app.terminate(cause)
        #expect(app.keptCentralManagers.isEmpty)
        // The link goes with the app (IOSRules.md 6.4), so nothing can relaunch it.
        try await rig.run(until: { rig.sensor.notifier.subscribedCentrals?.isEmpty ?? true }, "the link's end")
        _ = rig.sensor.manager.updateValue(Data([5]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        try await rig.run(.seconds(5))
        #expect(launches.count == 1)
    }

    @Test func aForceQuitBluetoothOffOrALaunchThatTakesNothingLetsGoOfWhatWasKept() async throws {
        for ending in ["force quit", "Bluetooth off", "a launch that makes no manager"] {
            let rig = Rig()
            try await rig.startSensor()
            let app = rig.phoneSystem.app(id: "com.example.lock", backgroundModes: [.bluetoothCentral])
            let launches = RecordedLaunches<CentralRecorder>()
            // Only the first launch makes a manager: nothing will take over what the system keeps.
            app.onLaunch { launch in
                guard launches.count == 0 else { return 0 }
                let recorder = CentralRecorder(
                    system: launch.app.system, label: "lock", options: .init(restoreIdentifier: Self.restoreID),
                    app: launch.app)
                launches.launches.withLock { $0.append((launch.options, recorder)) }
                return recorder
            }
            app.launch()
            let first = try #require(launches.last)
            let lock = try await rig.find(with: first)
            rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
            first.central.connect(lock)
            app.terminate(.bySystem)
            #expect(app.keptCentralManagers == [Self.restoreID])
            if ending == "force quit" {
                // Swiped away from the app switcher while not running.
                app.terminate(.byUser)
            } else if ending == "a launch that makes no manager" {
                app.launch()
                try await rig.run(.milliseconds(10))
                app.terminate(.byUser)
            } else {
                rig.phoneSystem.setBluetoothEnabled(false)
                try await rig.run(.seconds(1))
                rig.phoneSystem.setBluetoothEnabled(true)
            }
            #expect(app.keptCentralManagers.isEmpty, "\(ending)")
            // The pending connection went with it: the lock coming back relaunches nothing.
            rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
            try await rig.run(.seconds(5))
            #expect(app.state == .notRunning, "\(ending)")
        }
    }

    @Test func anAppWithoutBluetoothCentralKeepsNothing() async throws {
        let (rig, app, launches, first) = try await Self.launchedLockApp(modes: [])
        let sensor = try await rig.find(with: first)
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        first.central.connect(sensor)
        app.terminate(.bySystem)
        #expect(app.keptCentralManagers.isEmpty)
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(.seconds(10))
        #expect(launches.count == 1)
    }
}

/// State restoration of peripheral managers, in one process (IOSRules.md 5.6, 5c).
@Suite struct PeripheralStateRestorationTests {
    typealias Launches = RecordedLaunches<PeripheralRecorder>

    static let restoreID = "sensor-peripheral"

    @Test func aCentralsReadRelaunchesTheAppWithItsServicesAndAdvertisement() async throws {
        let rig = Rig()
        let app = rig.sensorSystem.app(id: "com.example.sensor", backgroundModes: [.bluetoothPeripheral])
        let launches = Launches()
        app.onLaunch { launch in
            let recorder = PeripheralRecorder(
                system: launch.app.system, label: "app sensor", app: launch.app,
                options: .init(restoreIdentifier: Self.restoreID), values: [Profile.dynamic: Data([0x2A])])
            launches.launches.withLock { $0.append((launch.options, recorder)) }
            return recorder
        }
        app.launch()
        let first = try #require(launches.last)
        try await rig.run(until: { first.manager.state == .poweredOn && rig.central.state == .poweredOn }, "power")
        let dynamic = MutableCharacteristic(
            type: Profile.dynamic, properties: [.read, .notify], value: nil, permissions: [.readable])
        let service = MutableService(type: Profile.service, primary: true)
        service.characteristics = [dynamic]
        first.manager.add(service)
        first.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(until: { first.manager.isAdvertising }, "advertising")
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        let remote = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.setNotifyValue(true, for: remote)
        try await rig.run(until: { remote.isNotifying }, "subscription")
        // The app changes its objects after publishing (its list emptied, the service made to include itself):
        // what is restored is what was published.
        service.characteristics = []
        service.includedServices = [service]

        app.terminate(.bySystem)
        #expect(app.keptPeripheralManagers == [Self.restoreID])
        try await rig.run(.seconds(30))
        // The system keeps the service answering... through the restored app: a read relaunches it.
        rig.phone.clear()
        peripheral.readValue(for: remote)
        try await rig.run(until: { launches.count == 2 }, within: .seconds(2), "the relaunch")
        #expect(launches.lastOptions?.bluetoothPeripherals == [Self.restoreID])
        let second = try #require(launches.last)
        try await rig.run(until: { !rig.phone.valueUpdates.isEmpty }, within: .seconds(2), "the read's answer")
        #expect(rig.phone.valueUpdates.first?.value == Data([0x2A]), "answered by the restored app")
        // willRestoreState first, with the services and their subscribed centrals, and the advertisement.
        #expect(second.lines.first?.hasPrefix("willRestoreState") == true, "\(second.lines)")
        guard case .willRestoreState(let state) = second.events.first else { return }
        let restored = try #require(state.services?.first)
        #expect(restored.uuid == Profile.service)
        let restoredCharacteristic = try #require(restored.characteristics?.first as? MutableCharacteristic)
        #expect(restoredCharacteristic.subscribedCentrals?.count == 1)
        // New objects with the ended app's values, as a restart makes them: the ended app's are its own.
        #expect(restored !== service && restoredCharacteristic !== dynamic)
        #expect(restoredCharacteristic.service === restored)
        #expect(restoredCharacteristic.properties == dynamic.properties)
        #expect(restored.includedServices?.first === restored, "its include, of the copy")
        #expect(restoredCharacteristic.subscribedCentrals?.first !== dynamic.subscribedCentrals?.first)
        #expect(state.advertisementData?.localName == "sensor")
        #expect(second.manager.isAdvertising)
        // The restored manager notifies its subscriber.
        _ = second.manager.updateValue(Data([7]), for: restoredCharacteristic, onSubscribedCentrals: nil)
        try await rig.run(until: { rig.phone.valueUpdates.count == 2 }, within: .seconds(1), "the notification")
        withExtendedLifetime(first) {}
    }
}
