import BLE
import Foundation
import Testing

/// Two apps scanning on one phone: the controller scans for both, each app sees its own filter's matches with its
/// own duplicates policy, and one app's `stopScan` leaves the other's scan alone.
@Suite struct MultiAppScanTests {
    static let lampService: BluetoothUUID = "A0A00001-0000-1000-8000-00805F9B34FB"

    /// The phone with two apps, the rig's sensor (advertising the profile's service) and a lamp (another service).
    static func room() async throws -> (Rig, sensors: CentralRecorder, everything: CentralRecorder) {
        let rig = Rig()
        try await rig.startSensor()
        try await rig.addAdvertiser(
            name: "lamp", position: RadioPosition(x: 1, y: 1),
            advertisement: AdvertisementData(localName: "lamp", serviceUUIDs: [lampService]))
        let sensors = CentralRecorder(
            system: rig.phoneSystem, label: "sensors", app: rig.phoneSystem.app(id: "com.example.sensors"))
        let everything = CentralRecorder(
            system: rig.phoneSystem, label: "everything", app: rig.phoneSystem.app(id: "com.example.scanner"))
        try await rig.run(
            until: { sensors.central.state == .poweredOn && everything.central.state == .poweredOn }, "power on")
        return (rig, sensors, everything)
    }

    static func names(_ recorder: CentralRecorder) -> [String] {
        recorder.discoveries.compactMap { $0.advertisement.localName }
    }

    @Test func eachAppSeesItsOwnFilterAndDuplicatesPolicy() async throws {
        let (rig, sensors, everything) = try await Self.room()
        sensors.central.scanForPeripherals(withServices: [Profile.service])
        everything.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        try await rig.run(.seconds(3))
        // Coalesced: the sensor once, the lamp never (it does not match).
        #expect(Self.names(sensors) == ["sensor"])
        // Every advertisement of both, many times each.
        let all = Self.names(everything)
        #expect(all.filter { $0 == "sensor" }.count > 5 && all.filter { $0 == "lamp" }.count > 5, "\(all.count)")
        // The two apps' objects for one device are distinct, with one identifier.
        let mine = try #require(sensors.discoveries.first?.peripheral)
        let theirs = try #require(everything.discoveries.first { $0.advertisement.localName == "sensor" }?.peripheral)
        #expect(mine !== theirs && mine.identifier == theirs.identifier)
    }

    @Test func oneAppsStopScanLeavesTheOthersScanRunning() async throws {
        let (rig, sensors, everything) = try await Self.room()
        sensors.central.scanForPeripherals(withServices: [Profile.service], options: .init(allowDuplicates: true))
        everything.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        try await rig.run(.seconds(1))
        sensors.central.stopScan()
        #expect(!sensors.central.isScanning && everything.central.isScanning)
        sensors.clear()
        everything.clear()
        try await rig.run(.seconds(2))
        #expect(sensors.discoveries.isEmpty)
        #expect(everything.discoveries.count > 10, "\(everything.discoveries.count)")
        // The last scanner stopping stops the controller: nothing more is heard by anyone.
        everything.central.stopScan()
        try await rig.run(.milliseconds(200))
        everything.clear()
        try await rig.run(.seconds(1))
        #expect(everything.discoveries.isEmpty)
        // And a new scan starts it again.
        sensors.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !sensors.discoveries.isEmpty }, "a discovery after a restart")
    }

    @Test func aReleasedManagerEndsOnlyItsOwnScan() async throws {
        let (rig, sensors, everything) = try await Self.room()
        everything.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        do {
            let transient = CentralRecorder(system: rig.phoneSystem, label: "transient")
            try await rig.run(until: { transient.central.state == .poweredOn }, "power on")
            transient.central.scanForPeripherals(withServices: nil)
            try await rig.run(.milliseconds(500))
        }
        everything.clear()
        try await rig.run(.seconds(1))
        #expect(everything.central.isScanning && everything.discoveries.count > 5)
        withExtendedLifetime(sensors) {}
    }
}
