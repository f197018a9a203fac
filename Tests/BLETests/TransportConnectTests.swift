import BLE
import BLETransport
import Dispatch
import Foundation
import Synchronization
import Testing

/// `BluetoothSystem.connect(transport:)`: spec errors, unregistered kinds, and a registered opener reaching a
/// controller (here a virtual one on a radio running in real time, standing in for a socket), with btsnoop.
// The time limit stops a hang; it is no measure of speed (the thread-sanitized run is several times slower).
@Suite(.serialized, .timeLimit(.minutes(3))) struct TransportConnectTests {
    @Test func aMalformedSpecIsRefusedWithTheAcceptedForms() async throws {
        let error = await #expect(throws: BluetoothError.self) {
            _ = try await BluetoothSystem.connect(transport: "tcp-client:nohostport")
        }
        #expect(error?.code == .invalidParameters)
        #expect(error?.message.contains("tcp-client:HOST:PORT") == true)
    }

    @Test func anUnregisteredKindIsNotSupported() async throws {
        TransportRegistry.shared.unregister(.serial)
        let error = await #expect(throws: BluetoothError.self) {
            _ = try await BluetoothSystem.connect(transport: "serial:/dev/ttyUSB0")
        }
        #expect(error?.code == .operationNotSupported)
    }

    @Test func aRegisteredOpenerReachesItsControllerAndIsRecorded() async throws {
        let room = RemoteBeacon(seed: 7)
        defer { room.close() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("connect-\(UUID()).btsnoop").path
        defer { try? FileManager.default.removeItem(atPath: path) }

        let system = try await BluetoothSystem.connect(transport: "tcp-client:127.0.0.1:9", btsnoop: path)
        let queue = DispatchQueue(label: "central")
        let central = queue.sync { CentralManager(delegate: nil, queue: queue, options: nil, system: system) }
        try await central.waitUntilPoweredOn(timeout: .seconds(5))
        var found: String?
        for try await discovered in central.scan(withServices: nil) {
            found = discovered.advertisementData.localName
            break
        }
        #expect(found == "beacon")
        let capture = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(capture.starts(with: Array("btsnoop\0".utf8)))
        #expect(capture.count > 16 + 24 * 10)  // the header and the start-up exchange at least
    }
}

extension TransportConnectTests {
    /// The link preferences of a configuration apply to a controller reached through a transport as they do to
    /// a simulated one: the central asks for them when it connects.
    @Test func aConfigurationReachesTheLinksOfATransportsController() async throws {
        let room = RemoteBeacon(seed: 8)
        defer { room.close() }

        let preferences = BluetoothSystem.Configuration(
            preferredMTU: 100, preferredPHY: .le2M, connectionInterval: .milliseconds(15) ... .milliseconds(15),
            peripheralLatency: 2, supervisionTimeout: .seconds(2))
        let system = try await BluetoothSystem.connect(
            transport: "tcp-client:127.0.0.1:9", configuration: preferences)
        let queue = DispatchQueue(label: "central")
        let central = queue.sync { CentralManager(delegate: nil, queue: queue, options: nil, system: system) }
        try await central.waitUntilPoweredOn(timeout: .seconds(5))
        var found: Peripheral?
        for try await discovered in central.scan(withServices: nil) {
            found = discovered.peripheral
            break
        }
        let peripheral = try #require(found)
        try await central.connect(peripheral, timeout: .seconds(5))
        // The PHY update and the MTU exchange follow the connection: wait for them, within a bound.
        let deadline = ContinuousClock.now + .seconds(5)
        while peripheral.link?.txPHY != .le2M || peripheral.attMTU != 100, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let link = try #require(peripheral.link)
        #expect(link.interval == .milliseconds(15))
        #expect(link.peripheralLatency == 2)
        #expect(link.supervisionTimeout == .seconds(2))
        #expect(link.txPHY == .le2M && link.rxPHY == .le2M)
        #expect(peripheral.attMTU == 100)
    }
}

private final class Advertiser: PeripheralManagerDelegate, @unchecked Sendable {
    var manager: PeripheralManager!
    init(system: BluetoothSystem, queue: DispatchQueue) {
        manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system)
    }
    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        if peripheral.state == .poweredOn { peripheral.startAdvertising(AdvertisementData(localName: "beacon")) }
    }
}

extension TransportConnectTests {
    /// An app whose queue is stuck while a sensor streams notifications at full rate: the system keeps at most
    /// 4,096 of its events waiting, drops (and counts) the notifications beyond, and everything else still
    /// reaches the app once its queue runs. Over a real-time scheduler (a transport), since a simulation waits
    /// for every dispatched event before its time moves on.
    @Test func aStuckAppHasABoundedQueue() async throws {
        let radio = SimulatedRadio(seed: 9)
        let controller = radio.addController(name: "phone controller")
        let sensorSystem = BluetoothSystem.simulated(
            on: radio, name: "sensor", position: RadioPosition(x: 1, y: 0),
            configuration: .init(connectionInterval: .microseconds(7500) ... .microseconds(7500)))
        let sensor = Sensor(system: sensorSystem)
        let driver = Task { try await radio.run(for: .seconds(60), pacing: .realtime) }
        defer { driver.cancel() }
        TransportRegistry.shared.register(.tcpClient) { _ in controller.hostTransport }
        defer { TransportRegistry.shared.unregister(.tcpClient) }
        let phone = try await BluetoothSystem.connect(
            transport: "tcp-client:127.0.0.1:9",
            configuration: .init(connectionInterval: .microseconds(7500) ... .microseconds(7500)))
        let app = phone.app(id: "com.example.slow")
        let queue = DispatchQueue(label: "slow app")
        let central = CentralManager(delegate: nil, queue: queue, options: nil, app: app)
        try await central.waitUntilPoweredOn(timeout: .seconds(5))
        try await sensor.manager.waitUntilPoweredOn(timeout: .seconds(5))
        sensor.publish()
        sensor.manager.startAdvertising(Sensor.advertisement)

        var found: Peripheral?
        for try await discovery in central.scan(withServices: [Profile.service]) {
            found = discovery.peripheral
            break
        }
        let peripheral = try #require(found)
        try await central.connect(peripheral, timeout: .seconds(10))
        let services = try await peripheral.discoverServices([Profile.service], timeout: .seconds(10))
        let characteristics = try await peripheral.discoverCharacteristics(
            [Profile.notifier, Profile.fixed], for: services[0], timeout: .seconds(10))
        let notifier = try #require(characteristics.first { $0.uuid == Profile.notifier })
        let fixed = try #require(characteristics.first { $0.uuid == Profile.fixed })
        let counter = NotificationCounter()
        peripheral.delegate = counter
        try await peripheral.setNotifyValue(true, for: notifier, timeout: .seconds(10))

        // The app's queue is stuck; the sensor notifies as fast as its queue takes values.
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let pumping = Mutex(true)
        let pump: @Sendable () -> Void = {
            while pumping.withLock({ $0 }),
                sensor.manager.updateValue(Data([7]), for: sensor.notifier, onSubscribedCentrals: nil)
            {}
        }
        sensor.recorder.onEvent { _, event in if case .readyToUpdateSubscribers = event { pump() } }
        sensorSystem.schedule(after: .zero, on: sensor.recorder.queue) { pump() }
        // Polled, within a bound: the radio runs on its own task, in real time, so a loaded machine (where 30 s
        // gave 37 and 79 drops) needs more wall time to overflow the queue; the loop ends as soon as it does.
        let deadline = ContinuousClock.now + .seconds(120)
        while app.droppedEvents < 100, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        pumping.withLock { $0 = false }
        #expect(app.droppedEvents >= 100, "dropped \(app.droppedEvents)")

        // The queue runs again: at most the bound was waiting (and the few notifications still in the
        // controllers' buffers when the pump stopped), and the app's requests still get their answers.
        gate.signal()
        let read = try await peripheral.readValue(for: fixed, timeout: .seconds(10))
        #expect(read == Profile.fixedValue)
        let delivered = queue.sync { counter.count }
        #expect(delivered > 0 && delivered <= 4_096 + 32, "delivered \(delivered)")
        withExtendedLifetime((sensor, central)) {}
    }
}

/// Counts notifications on the app's queue.
private final class NotificationCounter: PeripheralDelegate, @unchecked Sendable {
    // @unchecked: `count` is touched on the manager's queue only.
    var count = 0
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        count += 1
    }
}

/// A virtual controller reachable as `tcp-client:127.0.0.1:9` (a registered opener standing in for a socket), on a
/// radio running in real time with a connectable beacon on it. `close` stops the radio and the opener.
private final class RemoteBeacon: Sendable {
    let radio: SimulatedRadio
    private let advertiser: Advertiser
    private let driver: Task<Void, any Error>

    init(seed: UInt64) {
        radio = SimulatedRadio(seed: seed)
        let controller = radio.addController(name: "remote")
        let beacon = BluetoothSystem.simulated(on: radio, name: "beacon", position: RadioPosition(x: 1, y: 0))
        let beaconQueue = DispatchQueue(label: "beacon")
        advertiser = beaconQueue.sync { Advertiser(system: beacon, queue: beaconQueue) }
        let radio = radio
        driver = Task { _ = try await radio.run(for: .seconds(60), pacing: .realtime) }
        TransportRegistry.shared.register(.tcpClient) { _ in controller.hostTransport }
    }

    func close() {
        driver.cancel()
        TransportRegistry.shared.unregister(.tcpClient)
    }
}
