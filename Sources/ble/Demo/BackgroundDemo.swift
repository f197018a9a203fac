import BLE
import Dispatch
import Foundation
import Synchronization

/// `ble demo background`: the rules iOS applies to apps out of the foreground, on a simulated phone.
///
/// Two apps on one phone follow the same heart-rate sensor: "heart" declares `bluetooth-central`, "notes" is
/// foreground-only. Both leave the foreground: heart is suspended, then woken by each measurement; notes hears
/// nothing until it returns, and then only the latest value. A tag app on a second phone advertises a service
/// with `bluetooth-peripheral` and goes to the background: a scan for its service still finds it, through the
/// overflow area, and a scan for its name no longer does.
enum BackgroundDemo {
    static let tagService = BluetoothUUID(string: "7A6E0001-0000-1000-8000-00805F9B34FB")!

    /// One app following the sensor's measurements with the async API.
    final class Follower: Sendable {
        let app: BluetoothSystem.App
        let central: CentralManager
        let name: String
        let log: DemoLog
        let received = Mutex(0)

        init(app: BluetoothSystem.App, name: String, log: DemoLog) {
            self.app = app
            self.name = name
            self.log = log
            central = CentralManager(delegate: nil, queue: DispatchQueue(label: "demo.\(name)"), app: app)
        }

        /// Finds the sensor, connects, subscribes, and logs every measurement with the app's state.
        func follow() async throws {
            try await central.waitUntilPoweredOn(timeout: .seconds(5))
            var found: Peripheral?
            for try await discovery in central.scan(withServices: [.heartRate]) {
                found = discovery.peripheral
                break
            }
            guard let sensor = found else { return }
            try await central.connect(sensor, timeout: .seconds(10))
            let services = try await sensor.discoverServices([.heartRate], timeout: .seconds(10))
            let characteristics = try await sensor.discoverCharacteristics(
                [.heartRateMeasurement], for: services[0], timeout: .seconds(10))
            log(name, "subscribed to the heart rate of \(sensor.name ?? "?")")
            for try await value in sensor.notifications(for: characteristics[0]) {
                received.withLock { $0 += 1 }
                let bpm = value.count > 1 ? Int(value[1]) : 0
                log(name, "heard \(bpm) bpm while \(app.state)")
            }
        }
    }

    static func run(radio: SimulatedRadio, log: DemoLog, seed: UInt64, pacing: SimulationPacing) async throws {
        let sensorSystem = BluetoothSystem.simulated(on: radio, name: "HRM-Demo", position: RadioPosition(x: 2, y: 1))
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 0, y: 0))
        let other = BluetoothSystem.simulated(on: radio, name: "friend", position: RadioPosition(x: -2, y: 1))
        let sensor = HeartRateSensor(system: sensorSystem, log: log, seed: seed)
        let heart = Follower(
            app: phone.app(id: "com.example.heart", backgroundModes: [.bluetoothCentral]), name: "heart", log: log)
        let notes = Follower(app: phone.app(id: "com.example.notes", backgroundModes: []), name: "notes", log: log)
        func run(_ duration: Duration) async throws { try await radio.run(for: duration, pacing: pacing) }
        func run(until condition: () -> Bool, within limit: Duration) async throws {
            let end = radio.now + limit
            while !condition() {
                guard radio.now < end else { throw ToolError(.failure, "the background demo stalled") }
                try await run(.milliseconds(100))
            }
        }

        // One after the other, so that every run is the same.
        var flows = [Task(executorPreference: radio) { try? await heart.follow() }]
        try await run(until: { heart.received.withLock { $0 } >= 1 }, within: .seconds(30))
        flows.append(Task(executorPreference: radio) { try? await notes.follow() })
        try await run(until: { notes.received.withLock { $0 } >= 2 }, within: .seconds(30))
        log("user", "sends both apps to the background")
        heart.app.moveToBackground()
        notes.app.moveToBackground()
        try await run(until: { heart.app.state == .suspended && notes.app.state == .suspended }, within: .seconds(10))
        log("phone", "suspended heart and notes \(AppRules().suspendAfter) after they left the foreground")
        let notesBefore = notes.received.withLock { $0 }
        try await run(.seconds(4))
        log(
            "phone",
            "held \(notes.app.heldEvents) event(s) for notes, which heard \(notes.received.withLock { $0 } - notesBefore) meanwhile"
        )
        log("user", "opens notes again")
        notes.app.moveToForeground()
        try await run(.milliseconds(500))
        // Both stop following: each unsubscribes as its stream ends.
        for flow in flows { flow.cancel() }
        try await run(.milliseconds(500))

        // The tag: advertised by an app that then goes to the background.
        let tagApp = other.app(id: "com.example.tag", backgroundModes: [.bluetoothPeripheral])
        let tag = PeripheralManager(delegate: nil, queue: DispatchQueue(label: "demo.tag"), app: tagApp)
        let finder = CentralManager(delegate: nil, queue: DispatchQueue(label: "demo.finder"), system: phone)
        let found = Mutex<[String]>([])
        let tagFlow = Task(executorPreference: radio) {
            try await tag.waitUntilPoweredOn(timeout: .seconds(5))
            try await tag.startAdvertising(
                AdvertisementData(localName: "Tag", serviceUUIDs: [tagService]), timeout: .seconds(5))
            log("tag", "advertising \"Tag\" with service \(tagService.uuidString.prefix(8))")
        }
        try await run(until: { tag.isAdvertising }, within: .seconds(10))
        _ = await tagFlow.result
        tagApp.moveToBackground()
        log("user", "sends the tag app to the background")
        try await run(.seconds(6))
        let scans = Task(executorPreference: radio) {
            try await finder.waitUntilPoweredOn(timeout: .seconds(5))
            for (label, services) in [("by name", nil), ("for its service", [tagService])]
                as [(String, [BluetoothUUID]?)]
            {
                let heard: AdvertisementData? = try await withThrowingTaskGroup(of: AdvertisementData?.self) { group in
                    group.addTask {
                        for try await discovery in finder.scan(withServices: services)
                        where discovery.advertisementData.localName == "Tag"
                            || discovery.advertisementData.overflowServiceUUIDs?.contains(tagService) == true
                        {
                            return discovery.advertisementData
                        }
                        return nil
                    }
                    group.addTask {
                        try await phone.sleep(for: .seconds(3))
                        return nil
                    }
                    defer { group.cancelAll() }
                    return try await group.next() ?? nil
                }
                if let heard {
                    let overflow = (heard.overflowServiceUUIDs ?? []).map { String($0.uuidString.prefix(8)) }
                    found.withLock {
                        $0.append(
                            "scan \(label): found it, name \(heard.localName ?? "none"), overflow \(overflow)")
                    }
                } else {
                    found.withLock { $0.append("scan \(label): nothing in 3 s") }
                }
            }
        }
        try await run(until: { found.withLock { $0.count } == 2 }, within: .seconds(20))
        _ = await scans.result
        for line in found.withLock({ $0 }) { log("phone", line) }
        log.flush()
        withExtendedLifetime((sensor, tag, finder)) {}
    }
}
