import BLE
import Foundation
import Synchronization
import Testing

/// A device list: the devices around keyed by identifier, with their current RSSI, and a "lost"
/// change when one stops advertising.
@Suite struct NearbyDevicesTests {
    @Test func aDeviceAppearsUpdatesItsRSSIAndIsLostWhenItStopsAdvertising() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let central = rig.central
        let changes = Mutex<[(String, Int, Duration, Int)]>([])  // kind, rssi, time, list size
        let task = Task(executorPreference: rig.radio) {
            for try await update in central.nearbyDevices(withServices: [Profile.service], lostAfter: .seconds(3)) {
                let kind: String
                switch update.change {
                case .appeared: kind = "appeared"
                case .updated: kind = "updated"
                case .lost: kind = "lost"
                }
                changes.withLock {
                    $0.append((kind, update.change.device.rssi, rig.radio.now, update.devices.count))
                }
            }
        }
        try await rig.run(until: { !changes.withLock { $0.isEmpty } }, "the sensor appears")
        let first = try #require(changes.withLock { $0.first })
        #expect(first.0 == "appeared" && first.3 == 1)
        try await rig.run(.seconds(2))
        let updatesNearby = changes.withLock { $0.count }
        // Farther away: the RSSI drops, and the list says so.
        rig.sensorSystem.move(to: RadioPosition(x: 20, y: 0))
        try await rig.run(
            until: { changes.withLock { $0.contains { $0.0 == "updated" && $0.1 < first.1 - 10 } } }, "weaker RSSI")
        // Advertising stops: lost within lostAfter (3 s) and a check (0.75 s).
        rig.sensor.manager.stopAdvertising()
        let stopped = rig.radio.now
        try await rig.run(until: { changes.withLock { $0.last?.0 == "lost" } }, "the sensor is lost")
        let lost = try #require(changes.withLock { $0.last })
        #expect(lost.3 == 0)
        let after = lost.2 - stopped
        #expect(after >= .seconds(2) && after <= .seconds(4), "lost \(after) after it stopped")
        // Nearby and still, the sensor did not flood the list with unchanged updates.
        #expect(updatesNearby < 20, "\(updatesNearby) changes in 2 s at the same place")
        try await rig.cancel(task)
        #expect(!central.isScanning)
    }
}
