import BLE
import BLETransport
import Dispatch
import Foundation
import Synchronization
import Testing

/// `BluetoothSystem.connect(transport:)`: spec errors, unregistered kinds, and a registered opener reaching a
/// controller (here a virtual one on a radio running in real time, standing in for a socket), with btsnoop.
@Suite(.serialized, .timeLimit(.minutes(1))) struct TransportConnectTests {
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
        let radio = SimulatedRadio(seed: 7)
        let controller = radio.addController(name: "remote")
        let beacon = BluetoothSystem.simulated(on: radio, name: "beacon", position: RadioPosition(x: 1, y: 0))
        let beaconQueue = DispatchQueue(label: "beacon")
        let advertiser = beaconQueue.sync { Advertiser(system: beacon, queue: beaconQueue) }
        let driver = Task { try await radio.run(for: .seconds(60), pacing: .realtime) }
        defer { driver.cancel() }
        TransportRegistry.shared.register(.tcpClient) { _ in controller.hostTransport }
        defer { TransportRegistry.shared.unregister(.tcpClient) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("connect-\(UUID()).btsnoop").path
        defer { try? FileManager.default.removeItem(atPath: path) }

        let system = try await BluetoothSystem.connect(transport: "tcp-client:127.0.0.1:9", btsnoop: path)
        let queue = DispatchQueue(label: "central")
        let central = queue.sync { CentralManager(delegate: nil, queue: queue, options: nil, system: system) }
        try await central.waitUntilPoweredOn(timeout: .seconds(5))
        var found: String?
        for await discovered in central.scan(withServices: nil) {
            found = discovered.advertisementData.localName
            break
        }
        #expect(found == "beacon")
        let capture = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(capture.starts(with: Array("btsnoop\0".utf8)))
        #expect(capture.count > 16 + 24 * 10)  // the header and the start-up exchange at least
        withExtendedLifetime(advertiser) {}
    }
}

extension TransportConnectTests {
    /// The link preferences of a configuration apply to a controller reached through a transport as they do to
    /// a simulated one: the central asks for them when it connects.
    @Test func aConfigurationReachesTheLinksOfATransportsController() async throws {
        let radio = SimulatedRadio(seed: 8)
        let controller = radio.addController(name: "remote")
        let beacon = BluetoothSystem.simulated(on: radio, name: "beacon", position: RadioPosition(x: 1, y: 0))
        let beaconQueue = DispatchQueue(label: "beacon")
        let advertiser = beaconQueue.sync { Advertiser(system: beacon, queue: beaconQueue) }
        let driver = Task { try await radio.run(for: .seconds(60), pacing: .realtime) }
        defer { driver.cancel() }
        TransportRegistry.shared.register(.tcpClient) { _ in controller.hostTransport }
        defer { TransportRegistry.shared.unregister(.tcpClient) }

        let preferences = BluetoothSystem.Configuration(
            preferredMTU: 100, preferredPHY: .le2M, connectionInterval: .milliseconds(15) ... .milliseconds(15),
            peripheralLatency: 2, supervisionTimeout: .seconds(2))
        let system = try await BluetoothSystem.connect(
            transport: "tcp-client:127.0.0.1:9", configuration: preferences)
        let queue = DispatchQueue(label: "central")
        let central = queue.sync { CentralManager(delegate: nil, queue: queue, options: nil, system: system) }
        try await central.waitUntilPoweredOn(timeout: .seconds(5))
        var found: Peripheral?
        for await discovered in central.scan(withServices: nil) {
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
        withExtendedLifetime(advertiser) {}
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
