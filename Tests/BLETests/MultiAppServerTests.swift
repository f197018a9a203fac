import BLE
import Foundation
import Synchronization
import Testing

/// Two apps publishing services on one device: each attribute belongs to the manager that added it, requests
/// reach only that manager, and a manager that goes away takes its services with it.
@Suite struct MultiAppServerTests {
    static let secondService: BluetoothUUID = "B0B00001-0000-1000-8000-00805F9B34FB"
    static let secondValue: BluetoothUUID = "B0B00002-0000-1000-8000-00805F9B34FB"

    /// The rig's sensor, plus a second app on the sensor's device with a service of its own, both discovered.
    static func twoServers() async throws -> (Rig, Peripheral, second: PeripheralRecorder) {
        let rig = Rig()
        try await rig.startSensor()
        let second = PeripheralRecorder(
            system: rig.sensorSystem, label: "second", app: rig.sensorSystem.app(id: "com.example.second"))
        try await rig.run(until: { second.manager.state == .poweredOn }, "power on")
        let service = MutableService(type: secondService, primary: true)
        service.characteristics = [
            MutableCharacteristic(
                type: secondValue, properties: [.read, .write], value: nil, permissions: [.readable, .writeable])
        ]
        second.manager.add(service)
        second[secondValue] = Data("second".utf8)
        rig.sensor.recorder[Profile.dynamic] = Data("first".utf8)
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        return (rig, peripheral, second)
    }

    @Test func eachRequestReachesTheAppThatPublishedTheAttribute() async throws {
        let (rig, peripheral, second) = try await Self.twoServers()
        let first = try rig.characteristic(Profile.dynamic, on: peripheral)
        let other = try rig.characteristic(Self.secondValue, on: peripheral)
        let values = Mutex<[Data]>([])
        let written = Mutex(false)
        Task(executorPreference: rig.radio) {
            let a = try await peripheral.readValue(for: first, timeout: .seconds(5))
            let b = try await peripheral.readValue(for: other, timeout: .seconds(5))
            values.withLock { $0 = [a, b] }
            try await peripheral.writeValue(Data("changed".utf8), for: other, type: .withResponse, timeout: .seconds(5))
            written.withLock { $0 = true }
        }
        try await rig.run(until: { written.withLock { $0 } }, "the reads and the write")
        #expect(values.withLock { $0 } == [Data("first".utf8), Data("second".utf8)])
        #expect(second[Self.secondValue] == Data("changed".utf8))
        // Each app heard only its own requests.
        #expect(rig.sensor.recorder.reads.map(\.characteristic.uuid) == [Profile.dynamic])
        #expect(rig.sensor.recorder.writeBatches.isEmpty)
        #expect(second.reads.map(\.characteristic.uuid) == [Self.secondValue])
        #expect(second.writeBatches.map { $0.map(\.characteristic.uuid) } == [[Self.secondValue]])
    }

    @Test func aManagerThatGoesAwayTakesItsServicesWithIt() async throws {
        var (rig, peripheral, second): (Rig, Peripheral, PeripheralRecorder?) = try await Self.twoServers()
        let first = try rig.characteristic(Profile.dynamic, on: peripheral)
        rig.phone.clear()
        second = nil
        try await rig.run(
            until: { rig.phone.events.contains { if case .didModifyServices = $0 { true } else { false } } },
            "Service Changed")
        let gone = rig.phone.events.compactMap { event -> [BluetoothUUID]? in
            if case .didModifyServices(let services) = event { services.map(\.uuid) } else { nil }
        }
        #expect(gone.first == [Self.secondService])
        // The first app's service kept its handles: the characteristic discovered before still reads.
        let value = Mutex<Data?>(nil)
        Task(executorPreference: rig.radio) {
            let read = try await peripheral.readValue(for: first, timeout: .seconds(5))
            value.withLock { $0 = read }
        }
        try await rig.run(until: { value.withLock { $0 } != nil }, "the read")
        #expect(value.withLock { $0 } == Data("first".utf8))
        #expect(second == nil)
    }

    /// An app that publishes while a central is already connected answers that central's requests.
    @Test func aLateAppAnswersACentralAlreadyConnected() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let late = PeripheralRecorder(
            system: rig.sensorSystem, label: "late", app: rig.sensorSystem.app(id: "com.example.late"))
        try await rig.run(until: { late.manager.state == .poweredOn }, "power on")
        let service = MutableService(type: Self.secondService, primary: true)
        service.characteristics = [
            MutableCharacteristic(type: Self.secondValue, properties: [.read], value: nil, permissions: [.readable])
        ]
        late.manager.add(service)
        late[Self.secondValue] = Data("late".utf8)
        // The phone hears of the new service (Service Changed) before it looks for it.
        try await rig.run(
            until: { rig.phone.events.contains { if case .didModifyServices = $0 { true } else { false } } },
            "Service Changed")
        let value = Mutex<Data?>(nil)
        Task(executorPreference: rig.radio) {
            let services = try await peripheral.discoverServices([Self.secondService], timeout: .seconds(5))
            let found = try await peripheral.discoverCharacteristics(
                nil, for: try #require(services.first), timeout: .seconds(5))
            let read = try await peripheral.readValue(for: try #require(found.first), timeout: .seconds(5))
            value.withLock { $0 = read }
        }
        try await rig.run(until: { value.withLock { $0 } != nil }, "the read")
        #expect(value.withLock { $0 } == Data("late".utf8))
        #expect(late.reads.count == 1)
    }
}
