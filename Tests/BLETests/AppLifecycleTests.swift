import BLE
import Foundation
import Synchronization
import Testing

/// Apps with a lifecycle: launched through a handler, moved to the background and suspended, woken by their
/// background modes, and terminated, as iOS applies it (IOSRules.md 1.0, 3.1–3.4, 4.1).
@Suite struct AppLifecycleTests {
    /// What a launch handler made, and what a test still sees of it after a termination.
    final class Launches: Sendable {
        let count = Mutex(0)
        let last = Mutex<CentralRecorder?>(nil)
        let weakLast = Mutex<WeakBox?>(nil)
    }

    final class WeakBox: Sendable {
        nonisolated(unsafe) weak var object: CentralRecorder?
        init(_ object: CentralRecorder) { self.object = object }
    }

    /// A rig whose phone app `id` is launched through a handler that makes a recording central manager.
    static func launchedApp(_ rig: Rig, modes: Set<BluetoothSystem.App.BackgroundMode> = [], rules: AppRules? = nil)
        -> (BluetoothSystem.App, Launches)
    {
        let app = rig.phoneSystem.app(id: "com.example.app", backgroundModes: modes)
        let launches = Launches()
        app.onLaunch { launch in
            let recorder = CentralRecorder(system: launch.app.system, label: "app", app: launch.app)
            launches.count.withLock { $0 += 1 }
            launches.last.withLock { $0 = recorder }
            launches.weakLast.withLock { $0 = WeakBox(recorder) }
            return recorder
        }
        return (app, launches)
    }

    /// Connects `recorder` to the rig's sensor, discovers everything and subscribes to the notifier.
    static func connectAndSubscribe(
        _ recorder: CentralRecorder, _ rig: Rig, options: CentralManager.ConnectOptions? = nil
    ) async throws -> Peripheral {
        let peripheral = try await rig.find(with: recorder)
        recorder.central.connect(peripheral, options: options)
        try await rig.run(until: { peripheral.state == .connected }, "connection")
        try await rig.discoverAll(peripheral, recorder: recorder)
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(until: { notifier.isNotifying }, "subscription")
        recorder.clear()
        return peripheral
    }

    static func notify(_ rig: Rig, _ byte: UInt8) {
        _ = rig.sensor.manager.updateValue(Data([byte]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
    }

    @Test func eachLaunchRunsTheHandlerAndATerminationLetsGoOfItsObjects() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (app, launches) = Self.launchedApp(rig)
        #expect(app.state == .foreground)
        app.launch()
        #expect(launches.count.withLock { $0 } == 1)
        #expect(app.state == .foreground)
        // Launching a running app only brings it to the foreground.
        app.launch()
        #expect(launches.count.withLock { $0 } == 1)

        let first = try #require(launches.last.withLock { $0 })
        launches.last.withLock { $0 = nil }
        _ = try await Self.connectAndSubscribe(first, rig)
        let sensorLines = rig.sensor.recorder.lines.count
        app.terminate(.byUser)
        #expect(app.state == .notRunning)
        #expect(app.lastTermination == .byUser)
        // The sensor hears its central go: the app's link was let go of.
        try await rig.run(
            until: { rig.sensor.recorder.lines.dropFirst(sensorLines).contains { $0.hasPrefix("didUnsubscribe") } },
            "the sensor hearing the central leave")
        // A manager something still holds hears nothing more, and what it asks for is refused.
        Self.notify(rig, 1)
        first.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(2))
        #expect(first.events.isEmpty, "\(first.lines)")
        // The handler's object was let go of by the system.
        _ = consume first
        #expect(launches.weakLast.withLock { $0?.object } == nil)

        app.launch()
        #expect(launches.count.withLock { $0 } == 2)
        #expect(app.state == .foreground)
        let second = try #require(launches.last.withLock { $0 })
        try await rig.run(until: { second.central.state == .poweredOn }, "the new manager powered on")
        #expect(second.lines.first == "didUpdateState poweredOn")
    }

    @Test(arguments: [AppRules.Queueing.latestValuePerCharacteristic, .everyEvent])
    func aSuspendedForegroundOnlyAppGetsItsEventsInOrderWhenItReturns(_ queueing: AppRules.Queueing) async throws {
        var phone = BluetoothSystem.Configuration()
        phone.appRules = AppRules(queueing: queueing)
        let rig = Rig(phone: phone)
        try await rig.startSensor()
        let (app, launches) = Self.launchedApp(rig)
        app.launch()
        let recorder = try #require(launches.last.withLock { $0 })
        let peripheral = try await Self.connectAndSubscribe(recorder, rig)

        app.moveToBackground()
        #expect(app.state == .background)
        try await rig.run(.seconds(4.9))
        #expect(app.state == .background)
        try await rig.run(.seconds(0.2))
        #expect(app.state == .suspended)
        // While suspended: three values, then the link is lost. The app hears none of it.
        for byte: UInt8 in [1, 2, 3] {
            Self.notify(rig, byte)
            try await rig.run(.milliseconds(200))
        }
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(.seconds(7))
        #expect(peripheral.state == .connected, "the app has not run since: it has not seen the loss")
        #expect(recorder.events.isEmpty, "\(recorder.lines)")
        #expect(app.state == .suspended)

        app.moveToForeground()
        try await rig.run(.milliseconds(100))
        let values = recorder.valueUpdates.map { $0.value.map(Array.init) ?? [] }
        switch queueing {
        case .latestValuePerCharacteristic: #expect(values == [[3]])
        case .everyEvent: #expect(values == [[1], [2], [3]])
        }
        #expect(recorder.events.last?.isDisconnect == true, "\(recorder.lines)")
        #expect(recorder.disconnections.first?.error?.code == .connectionTimeout)
        #expect(peripheral.state == .disconnected)
    }

    @Test func aBluetoothCentralAppIsWokenForEachEventForItsBudget() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (app, launches) = Self.launchedApp(rig, modes: [.bluetoothCentral])
        app.launch()
        let recorder = try #require(launches.last.withLock { $0 })
        _ = try await Self.connectAndSubscribe(recorder, rig)
        app.moveToBackground()
        try await rig.run(.seconds(6))
        #expect(app.state == .suspended)

        // A notification wakes it at once, and it hears it.
        Self.notify(rig, 7)
        try await rig.run(until: { !recorder.valueUpdates.isEmpty }, within: .seconds(1), "the woken app's value")
        let woken = rig.radio.now
        #expect(app.state == .background)
        // Around 10 s later it is suspended again (IOSRules.md 4.1).
        try await rig.run(.seconds(9.5))
        #expect(app.state == .background)
        try await rig.run(until: { app.state == .suspended }, within: .seconds(1), "the end of the wake budget")
        #expect(rig.radio.now - woken >= .seconds(10))
        // And the next event wakes it again.
        Self.notify(rig, 8)
        try await rig.run(until: { recorder.valueUpdates.count == 2 }, within: .seconds(1), "a second wake")
        #expect(app.state == .background)
    }

    @Test(arguments: [false, true])
    func aSuspendedPeripheralAppAnswersCentralsOnlyWithItsBackgroundMode(_ backgroundMode: Bool) async throws {
        let rig = Rig()
        let sensorApp = rig.sensorSystem.app(
            id: "com.example.sensor", backgroundModes: backgroundMode ? [.bluetoothPeripheral] : [])
        let sensor = PeripheralRecorder(system: rig.sensorSystem, label: "app sensor", app: sensorApp)
        try await rig.run(until: { sensor.manager.state == .poweredOn && rig.central.state == .poweredOn }, "power")
        let dynamic = MutableCharacteristic(
            type: Profile.dynamic, properties: [.read], value: nil, permissions: [.readable])
        let service = MutableService(type: Profile.service, primary: true)
        service.characteristics = [dynamic]
        sensor.manager.add(service)
        sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(until: { sensor.lines.contains { $0.hasPrefix("didStartAdvertising") } }, "advertising")
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        let remote = try rig.characteristic(Profile.dynamic, on: peripheral)

        sensorApp.moveToBackground()
        // A foreground-only app stops advertising when it leaves the foreground; the link stays.
        try await rig.run(.seconds(6))
        #expect(sensorApp.state == .suspended)
        rig.phone.clear()
        peripheral.readValue(for: remote)
        try await rig.run(until: { !rig.phone.valueUpdates.isEmpty }, within: .seconds(2), "the read's answer")
        let answer = try #require(rig.phone.valueUpdates.first)
        if backgroundMode {
            // Woken for the read: its app answers.
            #expect(answer.error == nil)
            #expect(sensorApp.state == .background)
        } else {
            // IOSRules.md 3.2: the central gets an error at once; the app is not woken.
            #expect(answer.error?.code == .att(.unlikelyError))
            #expect(sensorApp.state == .suspended)
        }
        withExtendedLifetime(sensor) {}
    }
}

/// Tasks that awaited a terminated app's managers end (nothing is delivered to those managers any more).
@Suite struct AppTerminationEndsTasksTests {
    final class Ends: Sendable {
        let errors = Mutex<[String: BluetoothError]>([:])
        func record(_ what: String, _ error: any Error) {
            errors.withLock { $0[what] = error as? BluetoothError ?? BluetoothError(.unknown, "\(error)") }
        }
    }

    @Test(arguments: [BluetoothSystem.App.Termination.byUser, .bySystem])
    func everyAwaitEndsWithTheTermination(_ cause: BluetoothSystem.App.Termination) async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (app, launches) = AppLifecycleTests.launchedApp(rig, modes: [.bluetoothCentral])
        app.launch()
        let recorder = try #require(launches.last.withLock { $0 })
        launches.last.withLock { $0 = nil }
        let peripheral = try await AppLifecycleTests.connectAndSubscribe(recorder, rig)
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        let central = recorder.central!
        let ends = Ends()
        let tasks = [
            Task(executorPreference: rig.radio) {
                do { _ = try await peripheral.readValue(for: dynamic, timeout: nil) } catch {
                    ends.record("read", error)
                }
            },
            Task(executorPreference: rig.radio) {
                do { for try await _ in central.scan(withServices: [Self.other]) {} } catch {
                    ends.record("scan", error)
                }
            },
            Task(executorPreference: rig.radio) {
                do { for try await _ in peripheral.notifications(for: notifier) {} } catch {
                    ends.record("notifications", error)
                }
            },
        ]
        try await rig.run(.milliseconds(500))
        #expect(ends.errors.withLock { $0.isEmpty })
        app.terminate(cause)
        try await rig.run(until: { ends.errors.withLock { $0.count } == 3 }, within: .seconds(2), "every task's end")
        for (what, error) in ends.errors.withLock({ $0 }) {
            #expect(error.code == .operationCancelled, "\(what): \(error)")
            #expect(error.message == "the application was terminated", "\(what): \(error)")
        }
        for task in tasks { await task.value }

        // Asked of the ended app's objects afterwards, a wait fails at once: nothing would ever finish it.
        let late = Ends()
        let streamEnded = Mutex(false)
        let lateTasks = [
            Task(executorPreference: rig.radio) {
                do { try await central.waitUntilPoweredOn() } catch { late.record("waitUntilPoweredOn", error) }
            },
            Task(executorPreference: rig.radio) {
                do { try await central.connect(peripheral, timeout: nil) } catch { late.record("connect", error) }
            },
            Task(executorPreference: rig.radio) {
                do { try await central.disconnect(peripheral) } catch { late.record("disconnect", error) }
            },
            Task(executorPreference: rig.radio) {
                do { for try await _ in central.scan(withServices: nil) {} } catch { late.record("scan", error) }
            },
            Task(executorPreference: rig.radio) {
                for await _ in central.disconnections {}
                streamEnded.withLock { $0 = true }
            },
        ]
        try await rig.run(
            until: { late.errors.withLock { $0.count } == 4 && streamEnded.withLock { $0 } }, within: .seconds(1),
            "every late wait and stream")
        for (what, error) in late.errors.withLock({ $0 }) {
            #expect(error.code == .operationCancelled, "\(what): \(error)")
            #expect(error.message == "the application was terminated", "\(what): \(error)")
        }
        for task in lateTasks { await task.value }
    }

    static let other: BluetoothUUID = "6E40EEEE-B5A3-F393-E0A9-E50E24DCCA9E"
}
