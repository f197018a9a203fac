import BLE
import Foundation
import Synchronization
import Testing

/// The GATT profile the test sensor publishes.
///
/// - `service` (primary) includes `includedService` (secondary) and has: `dynamic` (read, write, write without
///   response; answered by the app), `fixed` (read-only, cached value served by the stack), `notifier` (notify,
///   read; app-served), `indicator` (indicate), and `described` (read, with a user description descriptor).
/// - `includedService` (secondary) has `includedValue` (read-only, cached).
/// - Battery (0x180F, primary) has Battery Level (read, cached).
enum Profile {
    static let service: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
    static let dynamic: BluetoothUUID = "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"
    static let fixed: BluetoothUUID = "6E400003-B5A3-F393-E0A9-E50E24DCCA9E"
    static let notifier: BluetoothUUID = "6E400004-B5A3-F393-E0A9-E50E24DCCA9E"
    static let indicator: BluetoothUUID = "6E400005-B5A3-F393-E0A9-E50E24DCCA9E"
    static let described: BluetoothUUID = "6E400006-B5A3-F393-E0A9-E50E24DCCA9E"
    static let includedService: BluetoothUUID = "6E400010-B5A3-F393-E0A9-E50E24DCCA9E"
    static let includedValue: BluetoothUUID = "6E400011-B5A3-F393-E0A9-E50E24DCCA9E"

    static let fixedValue = Data("fixed value".utf8)
    static let userDescription = "A described characteristic"
}

/// The sensor side: a recording peripheral manager and the characteristics it published.
final class Sensor: Sendable {
    let recorder: PeripheralRecorder
    let secondary: MutableService
    let primary: MutableService
    let battery: MutableService
    let dynamic = MutableCharacteristic(
        type: Profile.dynamic, properties: [.read, .write, .writeWithoutResponse],
        value: nil, permissions: [.readable, .writeable])
    let fixed = MutableCharacteristic(
        type: Profile.fixed, properties: [.read], value: Profile.fixedValue, permissions: [.readable])
    let notifier = MutableCharacteristic(
        type: Profile.notifier, properties: [.notify, .read], value: nil, permissions: [.readable])
    let indicator = MutableCharacteristic(
        type: Profile.indicator, properties: [.indicate], value: nil, permissions: [.readable])
    let described = MutableCharacteristic(
        type: Profile.described, properties: [.read], value: Data([0x2A]), permissions: [.readable])
    let includedValue = MutableCharacteristic(
        type: Profile.includedValue, properties: [.read], value: Data([7]), permissions: [.readable])
    let batteryLevel = MutableCharacteristic(
        type: .batteryLevel, properties: [.read], value: Data([88]), permissions: [.readable])

    var manager: PeripheralManager { recorder.manager }

    init(system: BluetoothSystem) {
        recorder = PeripheralRecorder(system: system)
        secondary = MutableService(type: Profile.includedService, primary: false)
        secondary.characteristics = [includedValue]
        primary = MutableService(type: Profile.service, primary: true)
        described.descriptors = [
            MutableDescriptor(type: .characteristicUserDescription, string: Profile.userDescription)
        ]
        primary.characteristics = [dynamic, fixed, notifier, indicator, described]
        primary.includedServices = [secondary]
        battery = MutableService(type: .battery, primary: true)
        battery.characteristics = [batteryLevel]
    }

    /// Publishes the three services (the included one first, as the database requires).
    func publish() {
        manager.add(secondary)
        manager.add(primary)
        manager.add(battery)
    }

    static let advertisement = AdvertisementData(localName: "sensor", serviceUUIDs: [Profile.service])
}

/// Two simulated devices on one radio: a phone (central) and a sensor (peripheral), with helpers to bring
/// them to a connected, discovered state in virtual time.
final class Rig: Sendable {
    let radio: SimulatedRadio
    /// Devices added to the room (`addAdvertiser`), kept as long as the rig.
    private let extras = Mutex<[PeripheralRecorder]>([])
    let phoneSystem: BluetoothSystem
    let sensorSystem: BluetoothSystem
    let phone: CentralRecorder
    let sensor: Sensor

    var central: CentralManager { phone.central }

    init(
        seed: UInt64 = 42,
        phone phoneConfiguration: BluetoothSystem.Configuration = .init(),
        sensor sensorConfiguration: BluetoothSystem.Configuration = .init(),
        sensorPosition: RadioPosition = RadioPosition(x: 2, y: 0)
    ) {
        radio = SimulatedRadio(seed: seed)
        phoneSystem = BluetoothSystem.simulated(
            on: radio, name: "phone", position: RadioPosition(x: 0, y: 0),
            configuration: phoneConfiguration)
        sensorSystem = BluetoothSystem.simulated(
            on: radio, name: "sensor", position: sensorPosition,
            configuration: sensorConfiguration)
        phone = CentralRecorder(system: phoneSystem)
        sensor = Sensor(system: sensorSystem)
    }

    /// Advances virtual time.
    func run(_ duration: Duration) async throws {
        try await radio.run(for: duration)
    }

    /// Runs the radio until `condition` holds (checked between events, once everything due has settled);
    /// records an issue and returns false if `limit` of virtual time passes first.
    @discardableResult
    func run(
        until condition: () -> Bool, within limit: Duration = .seconds(10), _ what: String = "condition",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Bool {
        try await radio.runExpecting(condition, within: limit, what, sourceLocation: sourceLocation)
    }

    /// Cancels a task that runs on the radio's executor and runs the radio until the task has ended: such a task
    /// moves only while the radio runs, so awaiting it without running the radio would wait for ever.
    func cancel<Success: Sendable, Failure: Error>(_ task: Task<Success, Failure>) async throws {
        task.cancel()
        let ended = Mutex(false)
        let watcher = Task(executorPreference: radio) {
            _ = await task.result
            ended.withLock { $0 = true }
        }
        try await run(until: { ended.withLock { $0 } }, "the end of the cancelled task")
        await watcher.value
    }

    /// Both managers powered on, the sensor's services published and advertising.
    func startSensor(advertising advertisement: AdvertisementData? = Sensor.advertisement) async throws {
        try await run(until: { central.state == .poweredOn && sensor.manager.state == .poweredOn }, "power on")
        sensor.publish()
        if let advertisement { sensor.manager.startAdvertising(advertisement) }
        try await run(
            until: { sensor.recorder.lines.contains { $0.hasPrefix("didStartAdvertising") } || advertisement == nil },
            "advertising")
    }

    /// Scans (for the profile's service), connects to the first sensor found and returns its peripheral.
    func connect() async throws -> Peripheral {
        central.scanForPeripherals(withServices: [Profile.service], options: nil)
        try await run(until: { !phone.discoveries.isEmpty }, "discovery")
        let peripheral = try #require(phone.discoveries.first?.peripheral)
        central.stopScan()
        central.connect(peripheral, options: nil)
        try await run(
            until: {
                peripheral.state == .connected
                    && phone.events.contains { if case .didConnect = $0 { true } else { false } }
            },
            "connection")
        // Let the MTU exchange and the data length update settle.
        try await run(.milliseconds(500))
        return peripheral
    }

    /// Finds the sensor with `recorder`'s manager (a scan for the profile's service, stopped once it is heard) and
    /// returns its peripheral, not connected.
    func find(with recorder: CentralRecorder) async throws -> Peripheral {
        try await run(until: { recorder.central.state == .poweredOn }, "power on")
        recorder.central.scanForPeripherals(withServices: [Profile.service])
        try await run(until: { !recorder.discoveries.isEmpty }, "discovery")
        recorder.central.stopScan()
        return try #require(recorder.discoveries.first?.peripheral)
    }

    /// Discovers every service, characteristic and descriptor of `peripheral`, whose manager `recorder` records
    /// (the phone's by default).
    func discoverAll(_ peripheral: Peripheral, recorder: CentralRecorder? = nil) async throws {
        let phone = recorder ?? self.phone
        let before = phone.events.count
        peripheral.discoverServices(nil)
        try await run(
            until: {
                phone.events.dropFirst(before).contains { if case .didDiscoverServices = $0 { true } else { false } }
            },
            "service discovery")
        for service in peripheral.services ?? [] {
            let mark = phone.events.count
            peripheral.discoverCharacteristics(nil, for: service)
            try await run(
                until: {
                    phone.events.dropFirst(mark).contains {
                        if case .didDiscoverCharacteristics(let s, _) = $0 { s === service } else { false }
                    }
                }, "characteristic discovery")
            for characteristic in service.characteristics ?? [] {
                let mark = phone.events.count
                peripheral.discoverDescriptors(for: characteristic)
                try await run(
                    until: {
                        phone.events.dropFirst(mark).contains {
                            if case .didDiscoverDescriptors(let c, _) = $0 { c === characteristic } else { false }
                        }
                    }, "descriptor discovery")
            }
        }
    }

    /// A sensor advertising, a phone connected to it, its whole GATT tree discovered; the logs cleared.
    static func connected(
        seed: UInt64 = 42,
        phone: BluetoothSystem.Configuration = .init(),
        sensor: BluetoothSystem.Configuration = .init(),
        discover: Bool = true
    ) async throws -> (Rig, Peripheral) {
        let rig = Rig(seed: seed, phone: phone, sensor: sensor)
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        if discover { try await rig.discoverAll(peripheral) }
        rig.phone.clear()
        rig.sensor.recorder.clear()
        return (rig, peripheral)
    }

    /// The discovered characteristic of type `uuid` on `peripheral`.
    func characteristic(
        _ uuid: BluetoothUUID, on peripheral: Peripheral,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Characteristic {
        let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
        return try #require(
            all.first { $0.uuid == uuid }, "characteristic \(uuid.uuidString) not discovered",
            sourceLocation: sourceLocation)
    }

    /// The discovered service of type `uuid` on `peripheral`.
    func service(_ uuid: BluetoothUUID, on peripheral: Peripheral, sourceLocation: SourceLocation = #_sourceLocation)
        throws -> Service
    {
        try #require(
            peripheral.services?.first { $0.uuid == uuid }, "service \(uuid.uuidString) not discovered",
            sourceLocation: sourceLocation)
    }
}

extension CentralEvent {
    var isDisconnect: Bool { if case .didDisconnect = self { true } else { false } }
    var isConnect: Bool { if case .didConnect = self { true } else { false } }
}

extension Rig {
    /// Another simulated device on the rig's radio that publishes nothing and advertises `advertisement`. The rig
    /// keeps it for its own lifetime: a peripheral manager that is released stops advertising.
    @discardableResult
    func addAdvertiser(name: String, position: RadioPosition, advertisement: AdvertisementData) async throws
        -> PeripheralRecorder
    {
        let system = BluetoothSystem.simulated(on: radio, name: name, position: position)
        let recorder = PeripheralRecorder(system: system, label: name)
        extras.withLock { $0.append(recorder) }
        try await run(until: { recorder.manager.state == .poweredOn }, "\(name) power on")
        recorder.manager.startAdvertising(advertisement)
        try await run(until: { recorder.manager.isAdvertising }, "\(name) advertising")
        return recorder
    }
}

/// Whether `events` has an entry matching `predicate` strictly before one matching `later`.
func happensBefore<E>(_ events: [E], _ first: (E) -> Bool, _ later: (E) -> Bool) -> Bool {
    guard let a = events.firstIndex(where: first), let b = events.firstIndex(where: later) else { return false }
    return a < b
}

extension SimulatedRadio {
    /// Runs the radio until `condition` holds (checked between events, once everything due has settled);
    /// records an issue and returns false if `limit` of virtual time passes first (the issue is the failure: a
    /// caller that goes on either way need not look at the result).
    @discardableResult
    func runExpecting(
        _ condition: () -> Bool, within limit: Duration, _ what: String, sourceLocation: SourceLocation
    ) async throws -> Bool {
        let held = try await withoutActuallyEscaping(condition) { condition in
            try await run(for: limit, until: condition)
        }
        if !held {
            Issue.record("\(what) did not happen within \(limit) of virtual time", sourceLocation: sourceLocation)
        }
        return held
    }
}
