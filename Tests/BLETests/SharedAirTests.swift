import BLE
import Foundation
import Synchronization
import Testing

/// One controller, one radio: its links share the air, and a peripheral uses its latency.
@Suite struct SharedAirTests {
    /// Two sensors streaming notifications to one phone at once: together they get what one link's model gives
    /// (the phone's radio serves one at a time), each a fair part of it.
    /// Seeds place the second link's anchors differently against the first's, colliding ones included (then
    /// the two take turns rather than one starving).
    @Test(arguments: [31, 32, 33, 34, 35] as [UInt64])
    func twoLinksOfOneCentralShareItsAir(seed: UInt64) async throws {
        let radio = SimulatedRadio(seed: seed)
        let link = BluetoothSystem.Configuration(preferredMTU: 247)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", configuration: link)
        let sensors = (0..<2).map { i in
            BluetoothSystem.simulated(
                on: radio, name: "sensor\(i)", position: RadioPosition(x: 1, y: Double(i)), configuration: link)
        }
        let devices = sensors.enumerated().map { i, system in
            NotifyingDevice(system: system, name: "streamer\(i)", pace: .stream)
        }
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let received = Counts()
        let scenario = Task(executorPreference: radio) {
            try await central.waitUntilPoweredOn(timeout: .seconds(5))
            var found: [String: Peripheral] = [:]
            for try await discovery in central.scan(withServices: [NotifyingDevice.service]) {
                if let name = discovery.advertisementData.localName { found[name] = discovery.peripheral }
                if found.count == 2 { break }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<2 {
                    let peripheral = try #require(found["streamer\(i)"])
                    try await central.connect(peripheral, timeout: .seconds(10))
                    let services = try await peripheral.discoverServices(
                        [NotifyingDevice.service], timeout: .seconds(5))
                    let characteristics = try await peripheral.discoverCharacteristics(
                        nil, for: services[0], timeout: .seconds(5))
                    let values = peripheral.notifications(for: characteristics[0])
                    try await peripheral.setNotifyValue(true, for: characteristics[0], timeout: .seconds(5))
                    group.addTask {
                        for try await value in values { received.add(value.count, to: i) }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await radio.run(for: .seconds(5))
        let before = received.values
        #expect(before.allSatisfy { $0 > 0 }, "both links stream: \(before)")
        try await radio.run(for: .seconds(10))
        let after = received.values
        scenario.cancel()
        withExtendedLifetime(devices) {}
        let kbits = (0..<2).map { Double((after[$0] - before[$0]) * 8) / 10 / 1000 }
        let model = Double(12 * 244 * 8) / 30.0  // one link's model at 30 ms, LE 1M, 251-byte payloads
        #expect(kbits[0] + kbits[1] <= model * 1.0001, "\(kbits) together exceed one radio's \(model)")
        #expect(kbits[0] + kbits[1] >= model * 0.9, "\(kbits) together use too little of \(model)")
        #expect(kbits.allSatisfy { $0 >= model * 0.3 }, "an unfair share: \(kbits)")
    }

    /// A connected sensor that keeps advertising (as a peripheral manager does) shares its one radio between the
    /// two: while it streams notifications that would fill every connection event, a third device still hears
    /// its advertising (each advertising event ends the connection event under way, or at worst takes the place
    /// of one), and the stream keeps most of its rate. The air capture shows the radio doing one thing at a time,
    /// with the records in time order.
    @Test func advertisingAndAStreamShareTheSensorsRadio() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 247))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("air-\(UUID().uuidString).pcap").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let listenerSystem = BluetoothSystem.simulated(
            on: rig.radio, name: "listener", position: RadioPosition(x: 0, y: 2))
        let listener = CentralRecorder(system: listenerSystem, label: "listener")
        try await rig.run(.milliseconds(100))
        listener.central.scanForPeripherals(withServices: [Profile.service], options: .init(allowDuplicates: true))
        try await rig.run(.seconds(3))
        let idle = listener.discoveries.count
        #expect(idle > 10, "the sensor advertises while connected: \(idle) reports")

        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.milliseconds(500))
        let pump: @Sendable () -> Void = {
            while rig.sensor.manager.updateValue(
                Data(repeating: 1, count: 244), for: rig.sensor.notifier, onSubscribedCentrals: nil)
            {}
        }
        rig.sensor.recorder.onEvent { _, event in
            if case .readyToUpdateSubscribers = event { pump() }
        }
        rig.sensorSystem.schedule(after: .zero, on: rig.sensor.recorder.queue) { pump() }
        try await rig.run(.milliseconds(500))
        listener.clear()
        rig.phone.clear()
        try rig.radio.startAirCapture(to: path)
        try await rig.run(.seconds(3))
        rig.radio.stopAirCapture()
        let streaming = listener.discoveries.count
        let bytes = rig.phone.valueUpdates.reduce(0) { $0 + ($1.value?.count ?? 0) }
        #expect(streaming * 2 >= idle, "\(streaming) reports while streaming, \(idle) while idle")
        let kbits = Double(bytes * 8) / 3 / 1000
        let model = Double(12 * 244 * 8) / 30.0  // one link's model at 30 ms, LE 1M, 251-byte payloads
        #expect(kbits >= model * 0.6 && kbits <= model * 1.0001, "\(kbits) kbit/s against \(model)")

        // Every packet of this capture is sent or heard by the sensor: none may overlap the next.
        let records = try AirRecord.read(path)
        #expect(records.contains { $0.isAdvertising && $0.advertisingType == 0 }, "no advertising captured")
        #expect(records.contains { !$0.isAdvertising }, "no data captured")
        for (a, b) in zip(records, records.dropFirst()) where a.time + a.duration > b.time {
            Issue.record("a packet at \(b.time) ns starts before the one at \(a.time) ns ends (\(a.duration) ns)")
            break
        }
        withExtendedLifetime(listenerSystem) {}
    }

    /// A phone asked to send more than its one radio carries falls behind visibly: two bulk writes without
    /// response to two sensors at once each wait for room again and again, and together they take as long as the
    /// bytes take at one radio's rate, not half of it.
    @Test func anOverloadedRadioFallsBehindVisibly() async throws {
        let radio = SimulatedRadio(seed: 41)
        let link = BluetoothSystem.Configuration(preferredMTU: 247)
        let phoneSystem = BluetoothSystem.simulated(on: radio, name: "phone", configuration: link)
        let sensors = (0..<2).map { i in
            Sensor(
                system: BluetoothSystem.simulated(
                    on: radio, name: "sensor\(i)", position: RadioPosition(x: 1, y: Double(i)), configuration: link))
        }
        let central = CentralManager(
            delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phoneSystem)
        let outcome = Mutex<[(waits: Int, finished: Duration)]?>(nil)
        let bytes = 244 * 400
        Task(executorPreference: radio) {
            for (i, sensor) in sensors.enumerated() {
                try await sensor.manager.waitUntilPoweredOn(timeout: .seconds(1))
                sensor.publish()
                try await sensor.manager.startAdvertising(
                    AdvertisementData(localName: "sensor\(i)", serviceUUIDs: [Profile.service]), timeout: nil)
            }
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            var found: [String: Peripheral] = [:]
            for try await discovery in central.scan(withServices: [Profile.service]) {
                if let name = discovery.advertisementData.localName { found[name] = discovery.peripheral }
                if found.count == 2 { break }
            }
            var targets: [(Peripheral, Characteristic)] = []
            for i in 0..<2 {
                let peripheral = try #require(found["sensor\(i)"])
                try await central.connect(peripheral, timeout: .seconds(10))
                let services = try await peripheral.discoverServices([Profile.service], timeout: .seconds(5))
                let characteristics = try await peripheral.discoverCharacteristics(
                    [Profile.dynamic], for: services[0], timeout: .seconds(5))
                targets.append((peripheral, characteristics[0]))
            }
            try await radio.sleep(for: .seconds(1))
            let start = radio.now
            let results = try await withThrowingTaskGroup(of: (Int, Int, Duration).self) { group in
                for (i, (peripheral, characteristic)) in targets.enumerated() {
                    group.addTask {
                        var waits = 0
                        for try await progress in peripheral.send(
                            Data(repeating: UInt8(i), count: bytes), to: characteristic, type: .withoutResponse,
                            chunkSize: 244)
                        {
                            waits = progress.timesWaitedForRoom
                        }
                        return (i, waits, radio.now - start)
                    }
                }
                var all: [(Int, Int, Duration)] = []
                for try await result in group { all.append(result) }
                return all.sorted { $0.0 < $1.0 }.map { (waits: $0.1, finished: $0.2) }
            }
            outcome.withLock { $0 = results }
        }
        try await radio.run(for: .seconds(60))
        let results = try #require(outcome.withLock { $0 }, "the sends did not finish")
        // One radio carries 781 kbit/s of payload: the 2 × 97,600 bytes take at least 2 s.
        let oneRadio = Duration.milliseconds(Int64(Double(2 * bytes * 8) / 780.8))
        let last = results.map(\.finished).max() ?? .zero
        #expect(last >= oneRadio * 0.98, "finished after \(last), one radio needs \(oneRadio)")
        #expect(results.allSatisfy { $0.waits > 10 }, "each sender waited for room: \(results.map(\.waits))")
        withExtendedLifetime(sensors) {}
    }

    /// With peripheral latency 4 the sensor listens at every fifth event while it has nothing to send, so a read
    /// from the phone waits longer than with latency 0.
    @Test func aPeripheralUsesItsLatency() async throws {
        func meanReadTime(latency: Int) async throws -> Duration {
            let (rig, peripheral) = try await Rig.connected(phone: .init(peripheralLatency: latency))
            #expect(peripheral.link?.peripheralLatency == latency)
            let fixed = try rig.characteristic(Profile.fixed, on: peripheral)
            var total = Duration.zero
            for i in 0..<10 {
                try await rig.run(.milliseconds(200 + 17 * i))  // idle, then a read at an arbitrary moment
                rig.phone.clear()
                let asked = rig.radio.now
                peripheral.readValue(for: fixed)
                try await rig.run(until: { !rig.phone.valueUpdates.isEmpty }, within: .seconds(2), "the read")
                total += rig.radio.now - asked
            }
            return total / 10
        }
        let eager = try await meanReadTime(latency: 0)
        let lazy = try await meanReadTime(latency: 4)
        #expect(lazy > eager + .milliseconds(30), "latency 4: \(lazy), latency 0: \(eager)")
        #expect(lazy < eager + .milliseconds(5 * 30), "latency 4: \(lazy), latency 0: \(eager)")
    }
}

/// Bytes received per link, from the tasks that receive them.
private final class Counts: Sendable {
    private let counts = Mutex([0, 0])
    func add(_ count: Int, to link: Int) { counts.withLock { $0[link] += count } }
    var values: [Int] { counts.withLock { $0 } }
}
