import BLE
import Foundation
import Synchronization
import Testing

/// The system's alerts for apps out of the foreground (IOSRules.md 3.5, 3.6, 3.8), the user's Bluetooth switch
/// (6.7), and pending connections that outlive suspension (6.1, 6.2).
@Suite struct AppAlertsAndPowerTests {
    static func recorder(_ rig: Rig, _ id: String, modes: Set<BluetoothSystem.App.BackgroundMode> = [])
        -> (BluetoothSystem.App, CentralRecorder)
    {
        let app = rig.phoneSystem.app(id: id, backgroundModes: modes)
        return (app, CentralRecorder(system: rig.phoneSystem, label: id, app: app))
    }

    /// Finds the sensor with `recorder`'s manager and returns its peripheral, not connected.

    @Test func connectionOptionsShowAlertsToTheAppMostRecentlyInTheForeground() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (first, a) = Self.recorder(rig, "com.example.first")
        let (second, b) = Self.recorder(rig, "com.example.second")
        let pa = try await rig.find(with: a)
        let pb = try await rig.find(with: b)
        let options = CentralManager.ConnectOptions(notifyOnConnection: true, notifyOnDisconnection: true)
        // Both leave the foreground; the second one last.
        first.moveToBackground()
        try await rig.run(.seconds(1))
        second.moveToBackground()
        try await rig.run(.seconds(6))
        #expect(first.state == .suspended && second.state == .suspended)
        a.central.connect(pa, options: options)
        b.central.connect(pb, options: options)
        try await rig.run(.seconds(2))
        // One alert for the connection, given to the app most recently in the foreground (IOSRules.md 3.6).
        #expect(rig.phoneSystem.alerts.map(\.kind) == [.connection], "\(rig.phoneSystem.alerts)")
        #expect(rig.phoneSystem.alerts.first?.appID == "com.example.second")
        #expect(rig.phoneSystem.alerts.first?.peripheralName == "sensor")
        // The apps hear of the connection only when they run again (IOSRules.md 3.3).
        #expect(a.events.filter(\.isConnect).isEmpty && b.events.filter(\.isConnect).isEmpty)
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(.seconds(7))
        #expect(rig.phoneSystem.alerts.map(\.kind) == [.connection, .disconnection])
        let held = first.heldEvents
        first.moveToForeground()
        try await rig.run(.milliseconds(100))
        #expect(a.events.contains(where: \.isConnect) && a.events.contains(where: \.isDisconnect), "\(held) \(a.lines)")
        // An app in the foreground gets no alert: it hears the event itself.
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        a.central.connect(pa, options: options)
        try await rig.run(until: { pa.state == .connected }, "the connection in the foreground")
        #expect(rig.phoneSystem.alerts.count == 2)
    }

    @Test func notificationsShowAlertsWhileTheAppIsAway() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (app, a) = Self.recorder(rig, "com.example.app")
        _ = try await AppLifecycleTests.connectAndSubscribe(a, rig, options: .init(notifyOnNotification: true))
        _ = rig.sensor.manager.updateValue(Data([1]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        try await rig.run(.milliseconds(200))
        #expect(rig.phoneSystem.alerts.isEmpty, "in the foreground the app hears it itself")
        app.moveToBackground()
        try await rig.run(.seconds(6))
        for byte: UInt8 in [2, 3] {
            _ = rig.sensor.manager.updateValue(Data([byte]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
            try await rig.run(.milliseconds(200))
        }
        #expect(rig.phoneSystem.alerts.map(\.kind) == [.notification, .notification])
        #expect(rig.phoneSystem.alerts.allSatisfy { $0.appID == "com.example.app" })
    }

    /// A second app joining a link whose notifications already flow, asking alerts for them: its alerts follow
    /// the notifications from then on (the notification path learns of the new wish), the first app's none.
    @Test func anAppJoiningALinkUpAlreadyGetsTheNotificationAlertsItAskedFor() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (first, a) = Self.recorder(rig, "com.example.first")
        _ = try await AppLifecycleTests.connectAndSubscribe(a, rig)
        first.moveToBackground()
        AppLifecycleTests.notify(rig, 1)
        try await rig.run(.milliseconds(200))
        #expect(rig.phoneSystem.alerts.isEmpty, "the first app asked for none")
        let (second, b) = Self.recorder(rig, "com.example.second")
        _ = try await AppLifecycleTests.connectAndSubscribe(b, rig, options: .init(notifyOnNotification: true))
        second.moveToBackground()
        try await rig.run(.seconds(6))
        for byte: UInt8 in [2, 3] {
            AppLifecycleTests.notify(rig, byte)
            try await rig.run(.milliseconds(200))
        }
        #expect(rig.phoneSystem.alerts.map(\.kind) == [.notification, .notification])
        #expect(rig.phoneSystem.alerts.allSatisfy { $0.appID == "com.example.second" })
        #expect(rig.phoneSystem.alerts.first?.peripheralName == "sensor")
    }

    @Test func turningBluetoothOffDropsEverythingWithoutACallbackPerPeripheral() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(until: { notifier.isNotifying }, "subscription")
        rig.central.scanForPeripherals(withServices: nil)
        rig.phone.clear()
        let sensorLines = rig.sensor.recorder.lines.count
        rig.phoneSystem.setBluetoothEnabled(false)
        try await rig.run(.seconds(1))
        #expect(!rig.phoneSystem.isBluetoothEnabled)
        #expect(rig.central.state == .poweredOff)
        #expect(!rig.central.isScanning)
        #expect(peripheral.state == .disconnected)
        // The state callback, and nothing per peripheral (IOSRules.md 6.7).
        #expect(rig.phone.lines == ["didUpdateState poweredOff"])
        // The radio went quiet: the link is gone on the sensor's side too, which unsubscribes its central.
        #expect(rig.sensor.recorder.lines.dropFirst(sensorLines).contains { $0.hasPrefix("didUnsubscribe") })
        #expect(!notifier.isNotifying)
        // A manager made now shows the power alert (IOSRules.md 3.8), unless told not to.
        let quiet = CentralRecorder(system: rig.phoneSystem, label: "quiet", options: .init(showPowerAlert: false))
        let loud = CentralRecorder(system: rig.phoneSystem, label: "loud")
        #expect(rig.phoneSystem.alerts.map(\.kind) == [.powerOff])
        // Back on: managers are powered on again, and nothing resumes by itself.
        rig.phoneSystem.setBluetoothEnabled(true)
        try await rig.run(until: { rig.central.state == .poweredOn }, "power on")
        #expect(peripheral.state == .disconnected)
        #expect(!rig.central.isScanning)
        rig.central.connect(peripheral)
        try await rig.run(until: { peripheral.state == .connected }, "a new connection")
        withExtendedLifetime((quiet, loud)) {}
    }

    /// Bluetooth turned off on a device whose service a central subscribed to: the link ends with the radio, and
    /// the characteristic has no subscriber any more (the app hears the state, not a `didUnsubscribe`).
    @Test func turningBluetoothOffLeavesAPeripheralManagerNoSubscribers() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        peripheral.setNotifyValue(true, for: try rig.characteristic(Profile.notifier, on: peripheral))
        try await rig.run(until: { rig.sensor.notifier.subscribedCentrals?.count == 1 }, "the subscription")
        rig.sensorSystem.setBluetoothEnabled(false)
        try await rig.run(.seconds(1))
        #expect(rig.sensor.manager.state == .poweredOff)
        #expect(rig.sensor.notifier.subscribedCentrals?.isEmpty == true)
        #expect(!rig.sensor.recorder.lines.contains { $0.hasPrefix("didUnsubscribe") })
    }

    @Test func aPendingConnectionOutlivesSuspensionAndWakesTheApp() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let (app, a) = Self.recorder(rig, "com.example.lock", modes: [.bluetoothCentral])
        let peripheral = try await rig.find(with: a)
        // The user walks away; the app asks to connect and is suspended.
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(.seconds(1))
        a.central.connect(peripheral)
        app.moveToBackground()
        try await rig.run(.seconds(3600))
        #expect(app.state == .suspended)
        #expect(peripheral.state == .connecting, "a connection request never times out (IOSRules.md 6.1)")
        // An hour later the user comes back: the connection completes and wakes the app (IOSRules.md 6.2).
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(until: { a.events.contains(where: \.isConnect) }, within: .seconds(5), "the wake")
        #expect(app.state == .background)
        #expect(peripheral.state == .connected)
    }
}
