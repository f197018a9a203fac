import BLE
import Foundation
import Synchronization
import Testing

/// Advertising by apps out of the foreground (IOSRules.md 2.3–2.5, 2.7, 2.8, 2.11, 2.13, 1.8).
@Suite struct AppBackgroundAdvertisingTests {
    static let other: BluetoothUUID = "6E40FFFF-B5A3-F393-E0A9-E50E24DCCA9E"

    /// A sensor app (`modes`) on the rig's sensor system, advertising the profile's service and name.
    static func advertisingApp(_ rig: Rig, modes: Set<BluetoothSystem.App.BackgroundMode>) async throws
        -> (BluetoothSystem.App, PeripheralRecorder)
    {
        let app = rig.sensorSystem.app(id: "com.example.sensor", backgroundModes: modes)
        let sensor = PeripheralRecorder(system: rig.sensorSystem, label: "app sensor", app: app)
        try await rig.run(until: { sensor.manager.state == .poweredOn && rig.central.state == .poweredOn }, "power")
        sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(until: { sensor.lines.contains { $0.hasPrefix("didStartAdvertising") } }, "advertising")
        return (app, sensor)
    }

    /// What the phone hears of the sensor within `window`, scanning for `services` (nil: everything).
    static func heard(_ rig: Rig, services: [BluetoothUUID]?, within window: Duration = .seconds(3)) async throws
        -> [AdvertisementData]
    {
        rig.phone.clear()
        rig.central.scanForPeripherals(
            withServices: services, options: .init(allowDuplicates: true, solicitedServiceUUIDs: []))
        try await rig.run(window)
        rig.central.stopScan()
        // The sensor system is the only advertiser in the room.
        return rig.phone.discoveries.map(\.advertisement)
    }

    @Test func aForegroundOnlyAppIsOffTheAirOutOfTheForeground() async throws {
        let rig = Rig()
        let (app, sensor) = try await Self.advertisingApp(rig, modes: [])
        let first = try await Self.heard(rig, services: nil)
        #expect(!first.isEmpty, "\(rig.phone.lines) \(sensor.lines)")
        app.moveToBackground()
        try await rig.run(.milliseconds(10))
        #expect(try await Self.heard(rig, services: nil).isEmpty)
        app.moveToForeground()
        try await rig.run(.milliseconds(10))
        let back = try await Self.heard(rig, services: nil)
        #expect(back.first?.localName == "sensor")
        withExtendedLifetime(sensor) {}
    }

    @Test func aBluetoothPeripheralAppIsFoundOnlyByAScanForItsService() async throws {
        let rig = Rig()
        let (app, sensor) = try await Self.advertisingApp(rig, modes: [.bluetoothPeripheral])
        app.moveToBackground()
        // A new advertisement cannot start out of the foreground (IOSRules.md 2.11), even while the app still runs.
        let other = PeripheralRecorder(system: rig.sensorSystem, label: "second manager", app: app)
        try await rig.run(until: { other.manager.state == .poweredOn }, "power")
        other.manager.startAdvertising(AdvertisementData(localName: "other"))
        try await rig.run(until: { !other.lines.filter { $0.hasPrefix("didStartAdvertising") }.isEmpty }, "the refusal")
        #expect(other.lines.contains { $0.hasPrefix("didStartAdvertising") && $0.contains("operationNotSupported") })
        try await rig.run(.seconds(6))
        #expect(app.state == .suspended)
        // A scan for everything hears a device with no name and no services, only Apple's overflow area.
        let anything = try #require(try await Self.heard(rig, services: nil).first)
        #expect(anything.localName == nil)
        #expect(anything.serviceUUIDs == nil)
        #expect(anything.manufacturerData?.prefix(3) == Data([0x4C, 0x00, 0x01]))
        #expect(anything.overflowServiceUUIDs == nil)
        // A scan for its service finds it, with the service under the overflow key (IOSRules.md 1.8, 2.8).
        let found = try #require(try await Self.heard(rig, services: [Profile.service]).first)
        #expect(found.overflowServiceUUIDs == [Profile.service])
        #expect(found.localName == nil)
        // A scan for another service does not (unless the hash happens to put it on the same bit).
        if AppleOverflowArea.bit(for: Self.other) != AppleOverflowArea.bit(for: Profile.service) {
            #expect(try await Self.heard(rig, services: [Self.other]).isEmpty)
        }
        // Back in the foreground, it advertises as asked once more.
        app.moveToForeground()
        try await rig.run(.milliseconds(100))
        #expect(try await Self.heard(rig, services: nil).first?.localName == "sensor")
        #expect(sensor.manager.isAdvertising)
    }

    @Test func theBackgroundFormGoesOutLessOften() async throws {
        let snoop = FileManager.default.temporaryDirectory.appendingPathComponent("sensor-\(UUID()).btsnoop").path
        defer { try? FileManager.default.removeItem(atPath: snoop) }
        let rig = Rig(sensor: .init(btsnoop: snoop))
        let (app, sensor) = try await Self.advertisingApp(rig, modes: [.bluetoothPeripheral])
        app.moveToBackground()
        try await rig.run(.seconds(1))
        await rig.sensorSystem.shutDown()
        withExtendedLifetime(sensor) {}
        // LE Set Advertising Parameters (0x2006): interval min, interval max, ...
        let intervals = try SnoopCommand.sent(in: snoop).filter { $0.opcode == 0x2006 }.map {
            UInt16($0.parameters[0]) | UInt16($0.parameters[1]) << 8
        }
        // 100 ms in the foreground, then 200 ms (the default background setting), in units of 0.625 ms.
        #expect(intervals.first == 0x00A0)
        #expect(intervals.last == 0x0140, "\(intervals)")
    }
}
