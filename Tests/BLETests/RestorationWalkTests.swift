import BLE
import Foundation
import Testing

/// State restoration of a central manager walked over every combination (IOSRules.md 5, 6.2–6.5): the lock app
/// is ended, by each cause, while it has each kind of work; then what it waited for happens, or not; then the user
/// opens it, force-quits it, or turns Bluetooth off. Expected from the rules alone: what is kept, whether and how
/// often the app is relaunched, what its restored manager hears and in what order, and that a force-quit or
/// Bluetooth off ends it all.
@Suite struct RestorationWalkTests {
    /// The work the app has when it is ended.
    enum Work: String, CaseIterable, CustomTestStringConvertible {
        case scanForServices, scanForAll, pendingConnection, subscribed
        var testDescription: String { rawValue }
    }

    /// What happens while it is not running.
    enum Happening: String, CaseIterable, CustomTestStringConvertible {
        /// Nothing, for a minute.
        case nothing
        /// The lock comes into range: a scan hears it, a pending connection completes.
        case comesNear
        /// The lock notifies a value.
        case notifies
        /// The lock goes out of range: a link is lost.
        case goesAway
        var testDescription: String { rawValue }
    }

    enum Ending: CaseIterable {
        case userOpensIt, forceQuit, bluetoothOff
    }

    static let near = RadioPosition(x: 2, y: 0)
    static let away = RadioPosition(x: 1000, y: 0)

    /// What the rules say: kept when the system ended it with work it carries on (not a scan for every device);
    /// relaunched once when that work bears fruit (a device its scan was for, the connection made, a value it
    /// subscribed to, its link lost).
    static func expected(_ work: Work, _ cause: BluetoothSystem.App.Termination, _ happening: Happening)
        -> (kept: Bool, wakes: Bool)
    {
        let kept = cause != .byUser && work != .scanForAll
        let fruit: Bool =
            switch (work, happening) {
            case (.scanForServices, .comesNear), (.pendingConnection, .comesNear), (.subscribed, .notifies),
                (.subscribed, .goesAway):
                true
            default: false
            }
        return (kept, kept && fruit)
    }

    /// Whether `event` is the one the app was relaunched for.
    static func isFruit(_ event: CentralEvent, of happening: Happening) -> Bool {
        switch (event, happening) {
        case (.didDiscover, .comesNear), (.didConnect, .comesNear), (.didUpdateCharacteristicValue, .notifies),
            (.didDisconnect, .goesAway):
            true
        default: false
        }
    }

    @Test(arguments: Work.allCases, Happening.allCases)
    func everyEndingOfEveryKeptWork(_ work: Work, _ happening: Happening) async throws {
        for cause in [BluetoothSystem.App.Termination.bySystem, .crash, .byUser] {
            for ending in Ending.allCases {
                try await walk(work, cause, happening, ending)
            }
        }
    }

    func walk(
        _ work: Work, _ cause: BluetoothSystem.App.Termination, _ happening: Happening, _ ending: Ending
    ) async throws {
        let path = "\(work) \(cause) \(happening) \(ending)"
        let rig = Rig(sensorPosition: work == .subscribed ? Self.near : Self.away)
        try await rig.startSensor()
        let (app, launches) = StateRestorationTests.lockApp(rig)
        app.launch()
        let first = try #require(launches.last)
        try await rig.run(until: { first.central.state == .poweredOn }, "power")
        switch work {
        case .scanForServices: first.central.scanForPeripherals(withServices: [Profile.service])
        case .scanForAll: first.central.scanForPeripherals(withServices: nil)
        case .pendingConnection:
            rig.sensorSystem.move(to: Self.near)
            let lock = try await rig.find(with: first)
            rig.sensorSystem.move(to: Self.away)
            try await rig.run(.seconds(1))
            first.central.connect(lock)
        case .subscribed:
            _ = try await AppLifecycleTests.connectAndSubscribe(first, rig)
        }
        app.moveToBackground()
        try await rig.run(.seconds(10))
        app.terminate(cause)
        let (kept, wakes) = Self.expected(work, cause, happening)
        #expect(app.keptCentralManagers == (kept ? [StateRestorationTests.restoreID] : []), "\(path)")

        switch happening {
        case .nothing: break
        case .comesNear: rig.sensorSystem.move(to: Self.near)
        case .notifies: AppLifecycleTests.notify(rig, 7)
        case .goesAway: rig.sensorSystem.move(to: Self.away)
        }
        try await rig.run(.seconds(60))
        #expect(launches.count == (wakes ? 2 : 1), "relaunched once when, and only when, the work bore fruit: \(path)")
        if wakes {
            // willRestoreState first, the state second, then what it was relaunched for, once.
            try #require(launches.count == 2, "\(path)")
            let restorer = try #require(launches.last)
            let events = restorer.events
            #expect(events.first.map { if case .willRestoreState = $0 { true } else { false } } == true, "\(path)")
            #expect(events.dropFirst().first?.description == "didUpdateState poweredOn", "\(path)")
            #expect(events.filter { Self.isFruit($0, of: happening) }.count == 1, "\(path): \(restorer.lines)")
            #expect(app.keptCentralManagers.isEmpty, "taken over: \(path)")
        }

        let ended = Ended(app: app, rig: rig, path: path) { app.keptCentralManagers }
        switch ending {
        case .userOpensIt:
            try await ended.userOpensIt(launches, kept: kept) { $0.lines }
        case .forceQuit, .bluetoothOff:
            try await ended.letGo(ending, system: rig.phoneSystem) { rig.central.state == .poweredOn }
            // Whatever comes later, with the radio on, relaunches nothing.
            let count = launches.count
            rig.sensorSystem.move(to: Self.near)
            try await rig.run(.seconds(5))
            AppLifecycleTests.notify(rig, 9)
            rig.sensorSystem.move(to: Self.away)
            try await rig.run(.seconds(60))
            #expect(launches.count == count, "\(path)")
            try await ended.nextLaunchRestoresNothing(launches) { $0.lines }
        }
    }

    /// The end of a walk, for either role: the app, and what is kept for it (`keptIdentifiers`).
    struct Ended {
        let app: BluetoothSystem.App
        let rig: Rig
        let path: String
        let keptIdentifiers: () -> [String]

        /// The user opens the app: a launch that takes the kept work over (the app not running) tells its
        /// restoration first, then the state; one with nothing kept tells the state first; nothing is kept after.
        func userOpensIt<Recorder: Sendable>(
            _ launches: RecordedLaunches<Recorder>, kept: Bool, lines: (Recorder) -> [String]
        ) async throws {
            let running = app.state != .notRunning
            app.launch()
            try await rig.run(.seconds(5))
            let opened = lines(try #require(launches.last))
            // Relaunched already, it comes to the foreground; else it is launched once more.
            #expect(launches.count == 2, "\(path)")
            if kept && !running {
                #expect(opened.first?.hasPrefix("willRestoreState") == true, "\(path): \(opened)")
                #expect(opened.dropFirst().first == "didUpdateState poweredOn", "\(path)")
            } else if !kept {
                #expect(opened.first == "didUpdateState poweredOn", "nothing to restore: \(path)")
            }
            #expect(keptIdentifiers().isEmpty, "\(path)")
        }

        /// A force-quit, or Bluetooth turned off on `system` and on again (until `on` holds): nothing is kept
        /// after either.
        func letGo(_ ending: Ending, system: BluetoothSystem, until on: () -> Bool) async throws {
            if ending == .forceQuit {
                app.terminate(.byUser)
            } else {
                system.setBluetoothEnabled(false)
                try await rig.run(.seconds(1))
                #expect(keptIdentifiers().isEmpty, "nothing is kept after it: \(path)")
                system.setBluetoothEnabled(true)
                try await rig.run(until: on, "Bluetooth on again: \(path)")
            }
            #expect(keptIdentifiers().isEmpty, "nothing is kept after it: \(path)")
        }

        /// The user's next launch, if the app is not running, restores nothing: the state comes first.
        func nextLaunchRestoresNothing<Recorder: Sendable>(
            _ launches: RecordedLaunches<Recorder>, lines: (Recorder) -> [String]
        ) async throws {
            guard app.state == .notRunning else { return }
            app.launch()
            try await rig.run(.seconds(1))
            let opened = lines(try #require(launches.last))
            #expect(opened.first == "didUpdateState poweredOn", "nothing to restore: \(path)")
        }
    }
}

/// The same walk for a peripheral manager (IOSRules.md 5.6): the sensor app publishes its service and advertises,
/// is ended by each cause, then a central reads a value the app gives, subscribes, or nothing happens; then the
/// user opens it, force-quits it, or turns Bluetooth off.
@Suite struct PeripheralRestorationWalkTests {
    enum Happening: String, CaseIterable, CustomTestStringConvertible {
        case nothing, centralReads, centralSubscribes
        var testDescription: String { rawValue }
    }

    static func isFruit(_ event: PeripheralManagerEvent, of happening: Happening) -> Bool {
        switch (event, happening) {
        case (.didReceiveRead, .centralReads), (.didSubscribe, .centralSubscribes): true
        default: false
        }
    }

    static func isRestoration(_ event: PeripheralManagerEvent?) -> Bool {
        if case .willRestoreState = event { true } else { false }
    }

    @Test(arguments: Happening.allCases)
    func everyEndingOfAPublishedService(_ happening: Happening) async throws {
        for cause in [BluetoothSystem.App.Termination.bySystem, .crash, .byUser] {
            for ending in RestorationWalkTests.Ending.allCases {
                try await walk(cause, happening, ending)
            }
        }
    }

    func walk(
        _ cause: BluetoothSystem.App.Termination, _ happening: Happening, _ ending: RestorationWalkTests.Ending
    ) async throws {
        let path = "\(cause) \(happening) \(ending)"
        let rig = Rig()
        let app = rig.sensorSystem.app(id: "com.example.sensor", backgroundModes: [.bluetoothPeripheral])
        let launches = PeripheralPhoneRestartTests.Launches()
        PeripheralPhoneRestartTests.install(app, launches)
        app.launch()
        let first = try #require(launches.last)
        try await rig.run(until: { first.manager.state == .poweredOn && rig.central.state == .poweredOn }, "power")
        first.manager.add(rig.sensor.secondary)
        first.manager.add(rig.sensor.primary)
        first.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(until: { first.manager.isAdvertising }, "advertising")
        app.moveToBackground()
        try await rig.run(.seconds(10))
        app.terminate(cause)
        let kept = cause != .byUser
        #expect(app.keptPeripheralManagers == (kept ? [PeripheralPhoneRestartTests.restoreID] : []), "\(path)")

        // A central finds the device (kept: it still advertises, in the background form) and asks.
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(.seconds(5))
        rig.central.stopScan()
        #expect(!rig.phone.discoveries.isEmpty == kept, "advertising while kept, and only then: \(path)")
        if kept, happening != .nothing, let found = rig.phone.discoveries.first?.peripheral {
            rig.central.connect(found)
            try await rig.run(until: { found.state == .connected }, "the connection: \(path)")
            try await rig.discoverAll(found)
            switch happening {
            case .nothing: break
            case .centralReads:
                found.readValue(for: try rig.characteristic(Profile.dynamic, on: found))
            case .centralSubscribes:
                found.setNotifyValue(true, for: try rig.characteristic(Profile.notifier, on: found))
            }
        }
        try await rig.run(.seconds(30))
        let wakes = kept && happening != .nothing
        #expect(launches.count == (wakes ? 2 : 1), "relaunched once when, and only when, a central asked: \(path)")
        if wakes {
            try #require(launches.count == 2, "\(path)")
            let restorer = try #require(launches.last)
            let events = restorer.events
            #expect(Self.isRestoration(events.first), "\(path): \(restorer.lines)")
            #expect(events.dropFirst().first?.description == "didUpdateState poweredOn", "\(path)")
            #expect(events.filter { Self.isFruit($0, of: happening) }.count == 1, "\(path): \(restorer.lines)")
            #expect(app.keptPeripheralManagers.isEmpty, "taken over: \(path)")
        }
        if happening == .centralReads, wakes {
            let dynamic = try #require(rig.phone.valueUpdates.last)
            #expect(dynamic.value == Data([0x2A]), "answered by the restored app: \(path)")
        }

        let ended = RestorationWalkTests.Ended(app: app, rig: rig, path: path) { app.keptPeripheralManagers }
        switch ending {
        case .userOpensIt:
            try await ended.userOpensIt(launches, kept: kept) { $0.lines }
        case .forceQuit, .bluetoothOff:
            try await ended.letGo(ending, system: rig.sensorSystem) { rig.sensor.manager.state == .poweredOn }
            // With the radio on, a central that looks for the service finds nobody to ask, and nothing relaunches
            // the app.
            let count = launches.count
            let running = app.state != .notRunning
            rig.phone.clear()
            rig.central.scanForPeripherals(withServices: [Profile.service])
            try await rig.run(.seconds(5))
            rig.central.stopScan()
            #expect(rig.phone.discoveries.isEmpty || running, "nothing advertises for it: \(path)")
            try await rig.run(.seconds(30))
            #expect(launches.count == count, "\(path)")
            try await ended.nextLaunchRestoresNothing(launches) { $0.lines }
        }
    }
}
