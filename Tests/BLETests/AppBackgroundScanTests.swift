import BLE
import Foundation
import Synchronization
import Testing

/// Scanning by apps out of the foreground (IOSRules.md 1.1–1.5, 3.1).
@Suite struct AppBackgroundScanTests {
    typealias Launches = AppLifecycleTests.Launches

    static func temporary(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
    }

    /// A launched app (`modes`) whose recorder is ready to scan, and a sensor published but not advertising yet.
    static func setUp(_ rig: Rig, modes: Set<BluetoothSystem.App.BackgroundMode>) async throws
        -> (BluetoothSystem.App, CentralRecorder)
    {
        let (app, launches) = AppLifecycleTests.launchedApp(rig, modes: modes)
        app.launch()
        let recorder = try #require(launches.last.withLock { $0 })
        try await rig.startSensor(advertising: nil)
        try await rig.run(until: { recorder.central.state == .poweredOn }, "power on")
        return (app, recorder)
    }

    @Test func aForegroundOnlyAppDiscoversNothingOutOfTheForeground() async throws {
        let rig = Rig()
        let (app, recorder) = try await Self.setUp(rig, modes: [])
        recorder.central.scanForPeripherals(withServices: [Profile.service])
        app.moveToBackground()
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(.seconds(10))
        #expect(app.state == .suspended)
        #expect(recorder.discoveries.isEmpty)
        #expect(app.heldEvents == 0, "a discovery it cannot make is not held for later either")
        #expect(recorder.central.isScanning)
        app.moveToForeground()
        try await rig.run(
            until: { !recorder.discoveries.isEmpty }, within: .seconds(2), "a discovery in the foreground")
    }

    @Test func aBluetoothCentralAppHearsEachDeviceOnceAndOnlyWithServices() async throws {
        let rig = Rig()
        let (app, recorder) = try await Self.setUp(rig, modes: [.bluetoothCentral])
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        // Duplicates asked for: in the foreground, many reports of the one sensor.
        recorder.central.scanForPeripherals(
            withServices: [Profile.service], options: .init(allowDuplicates: true, solicitedServiceUUIDs: []))
        try await rig.run(.seconds(2))
        #expect(recorder.discoveries.count > 5)
        // In the background the option is ignored: after a new scan, the sensor is reported once (IOSRules.md 1.1).
        app.moveToBackground()
        try await rig.run(.milliseconds(10))
        recorder.clear()
        recorder.central.scanForPeripherals(
            withServices: [Profile.service], options: .init(allowDuplicates: true, solicitedServiceUUIDs: []))
        try await rig.run(.seconds(20))
        #expect(recorder.discoveries.count == 1, "\(recorder.lines.count) events")
        // A scan with no services hears nothing in the background (IOSRules.md 1.4, 1.5), and still scans.
        recorder.central.scanForPeripherals(withServices: nil)
        recorder.clear()
        try await rig.run(.seconds(10))
        #expect(recorder.discoveries.isEmpty)
        #expect(recorder.central.isScanning)
        // Back in the foreground it hears again.
        app.moveToForeground()
        try await rig.run(
            until: { !recorder.discoveries.isEmpty }, within: .seconds(2), "a discovery in the foreground")
    }

    @Test func theControllerScansLessOftenWhenEveryScanningAppIsInTheBackground() async throws {
        let snoop = Self.temporary("phone.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: snoop) }
        let rig = Rig(phone: .init(btsnoop: snoop))
        let (app, recorder) = try await Self.setUp(rig, modes: [.bluetoothCentral])
        recorder.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(.seconds(1))
        app.moveToBackground()
        try await rig.run(.seconds(1))
        app.moveToForeground()
        try await rig.run(.seconds(1))
        await rig.phoneSystem.shutDown()
        // LE Set Scan Parameters (0x200B): type, interval, window, own address type, filter policy.
        let intervals = try SnoopCommand.sent(in: snoop).filter { $0.opcode == 0x200B }.map {
            UInt16($0.parameters[1]) | UInt16($0.parameters[2]) << 8
        }
        // 60 ms, 300 ms (the default background setting), then 60 ms again, in units of 0.625 ms.
        #expect(intervals == [0x0060, 0x01E0, 0x0060])
    }

    @Test func theLastForegroundScannerStoppingLeavesTheBackgroundParameters() async throws {
        let snoop = Self.temporary("phone.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: snoop) }
        let rig = Rig(phone: .init(btsnoop: snoop))
        let (app, recorder) = try await Self.setUp(rig, modes: [.bluetoothCentral])
        try await rig.run(until: { rig.central.state == .poweredOn }, "power on")
        recorder.central.scanForPeripherals(withServices: [Profile.service])
        rig.central.scanForPeripherals(withServices: nil)
        app.moveToBackground()
        try await rig.run(.seconds(1))
        // The other app (in the foreground) stops: only a background scan is left.
        rig.central.stopScan()
        try await rig.run(.seconds(1))
        await rig.phoneSystem.shutDown()
        let intervals = try SnoopCommand.sent(in: snoop).filter { $0.opcode == 0x200B }.map {
            UInt16($0.parameters[1]) | UInt16($0.parameters[2]) << 8
        }
        #expect(intervals == [0x0060, 0x01E0])
    }
}
