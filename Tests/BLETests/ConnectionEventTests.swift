import BLE
import Foundation
import Synchronization
import Testing

/// iOS 13's additions a port meets: connection events, the feature query, and a peripheral's wish for a
/// connection latency.
@Suite struct ConnectionEventTests {
    /// Records connection events, nothing else.
    final class Watcher: CentralManagerDelegate, @unchecked Sendable {
        let events = Mutex<[String]>([])
        var central: CentralManager!

        init(system: BluetoothSystem) {
            central = CentralManager(
                delegate: self, queue: DispatchQueue(label: "watcher"), options: nil, system: system)
        }

        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(
            _ central: CentralManager, connectionEventDidOccur event: ConnectionEvent, for peripheral: Peripheral
        ) {
            events.withLock { $0.append("\(event) \(peripheral.identifier)") }
        }
    }

    /// A second manager on the phone hears of the link the first one makes, matched by the service the sensor
    /// advertised, and of its end; one registered for another identifier hears nothing.
    @Test func anotherManagerHearsOfMatchingConnectionsAndTheirEnd() async throws {
        let rig = Rig()
        let byService = Watcher(system: rig.phoneSystem)
        let byOtherIdentifier = Watcher(system: rig.phoneSystem)
        let unregistered = Watcher(system: rig.phoneSystem)
        byService.central.registerForConnectionEvents(options: [.serviceUUIDs: [Profile.service]])
        byOtherIdentifier.central.registerForConnectionEvents(
            options: ConnectionEventMatchingOptions(peripheralUUIDs: [UUID()]))
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(
            byService.events.withLock { $0 }
                == ["peerConnected \(peripheral.identifier)", "peerDisconnected \(peripheral.identifier)"])
        #expect(byOtherIdentifier.events.withLock { $0 }.isEmpty)
        #expect(unregistered.events.withLock { $0 }.isEmpty)
    }

    /// A manager that registers while a link is up hears of its end (it registered for every connection event
    /// from then on), and of nothing before.
    @Test func aManagerRegisteredWhileALinkIsUpHearsOfItsEnd() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        let late = Watcher(system: rig.phoneSystem)
        late.central.registerForConnectionEvents()
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(late.events.withLock { $0 } == ["peerDisconnected \(peripheral.identifier)"])
    }

    @Test func extendedScanningIsNotClaimed() {
        #expect(!CentralManager.supports(.extendedScanAndConnect))
        #expect(CentralManager.supports([]))
    }

    /// `setDesiredConnectionLatency(.high, for:)` reaches the central as a parameters request, and the link
    /// moves to the 90-120 ms interval asked for.
    @Test func aPeripheralsLatencyWishChangesTheInterval() async throws {
        let rig = Rig()
        let intervals = Mutex<[Int]>([])
        rig.radio.setTraceHandler { _, name, direction, packet in
            // LE Connection Update Complete (LE Meta 0x3E, subevent 0x03) reaching the phone's host.
            guard name == "phone", direction == .controllerToHost, case .event(let event) = packet,
                event.code.rawValue == 0x3E, event.parameters.first == 0x03, event.parameters.count >= 6,
                event.parameters[1] == 0
            else { return }
            intervals.withLock { $0.append(Int(event.parameters[4]) | Int(event.parameters[5]) << 8) }
        }
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        peripheral.setNotifyValue(true, for: try rig.characteristic(Profile.notifier, on: peripheral))
        try await rig.run(.milliseconds(500))
        let central = try #require(
            rig.sensor.recorder.subscribers.first)
        #expect(intervals.withLock { $0 }.isEmpty)
        rig.sensor.manager.setDesiredConnectionLatency(.high, for: central)
        try await rig.run(.seconds(5))
        let seen = intervals.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.allSatisfy { (72...96).contains($0) }, "intervals \(seen)")
    }
}
