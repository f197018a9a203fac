import BLE
import BLEATT
import Foundation
import Synchronization
import Testing

/// A phone (our stack, through the public API: a recording central) and a ``HostilePeripheral`` on one radio.
final class HostileRoom: Sendable {
    typealias Peer = HostilePeripheral

    let radio: SimulatedRadio
    let phoneSystem: BluetoothSystem
    let phone: CentralRecorder
    let peer: HostilePeripheral

    var central: CentralManager { phone.central }
    var handles: HostilePeripheral.Handles { peer.handles }

    init(
        seed: UInt64 = 18, mtu: UInt16 = 247, phone configuration: BluetoothSystem.Configuration = .init(),
        script: HostilePeripheral.Script = []
    ) {
        radio = SimulatedRadio(seed: seed)
        phoneSystem = BluetoothSystem.simulated(on: radio, name: "phone", configuration: configuration)
        phone = CentralRecorder(system: phoneSystem)
        peer = HostilePeripheral(on: radio, mtu: mtu, script: script)
    }

    func run(_ duration: Duration) async throws { try await radio.run(for: duration) }

    /// Runs the radio until `condition` holds; records an issue if `limit` of virtual time passes first.
    @discardableResult
    func run(
        until condition: () -> Bool, within limit: Duration = .seconds(10), _ what: String = "condition",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Bool {
        try await radio.runExpecting(condition, within: limit, what, sourceLocation: sourceLocation)
    }

    /// Scans for the hostile service, connects, and (with `settle`) lets the link's start (the MTU exchange, the
    /// Database Hash read, the system's discovery of Service Changed) finish.
    func connect(settle: Bool = true) async throws -> Peripheral {
        try await run(until: { central.state == .poweredOn }, "power on")
        central.scanForPeripherals(withServices: [Peer.service])
        try await run(until: { !phone.discoveries.isEmpty }, "discovery of the hostile peer")
        let peripheral = try #require(phone.discoveries.first?.peripheral)
        central.stopScan()
        central.connect(peripheral)
        try await run(until: { phone.events.contains(where: \.isConnect) }, "connection")
        if settle { try await run(.seconds(1)) }
        return peripheral
    }

    /// Discovers the hostile service, its characteristics and the described one's descriptors.
    func discover(_ peripheral: Peripheral) async throws -> Service {
        let mark = phone.events.count
        peripheral.discoverServices([Peer.service])
        try await run(until: { self.since(mark).contains { $0.isServiceDiscovery } }, "service discovery")
        let service = try #require(peripheral.services?.first { $0.uuid == Peer.service })
        let next = phone.events.count
        peripheral.discoverCharacteristics(nil, for: service)
        try await run(until: { self.since(next).contains { $0.isCharacteristicDiscovery } }, "characteristics")
        let described = try characteristic(Peer.described, on: peripheral)
        let last = phone.events.count
        peripheral.discoverDescriptors(for: described)
        try await run(until: { self.since(last).contains { $0.isDescriptorDiscovery } }, "descriptors")
        return service
    }

    /// A room connected to the hostile peer (honest so far), its service discovered, the log cleared; then
    /// `script` is what the peer does.
    static func discovered(
        mtu: UInt16 = 247, phone configuration: BluetoothSystem.Configuration = .init(),
        script: HostilePeripheral.Script
    ) async throws -> (HostileRoom, Peripheral) {
        let room = HostileRoom(mtu: mtu, phone: configuration)
        let peripheral = try await room.connect()
        _ = try await room.discover(peripheral)
        room.phone.clear()
        room.peer.setScript(script)
        return (room, peripheral)
    }

    func characteristic(
        _ uuid: BluetoothUUID, on peripheral: Peripheral, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Characteristic {
        let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
        return try #require(all.first { $0.uuid == uuid }, sourceLocation: sourceLocation)
    }

    func since(_ mark: Int) -> [CentralEvent] { Array(phone.events.dropFirst(mark)) }

    /// The indications our stack sent to the peer (the peer's log of what it received).
    func received(indications peer: HostilePeripheral) -> [HostilePeripheral.Request] {
        peer.received(.handleValueIndication)
    }

    /// Reads the value characteristic and returns its outcome (the link is expected to be usable).
    func readsHonestly(_ peripheral: Peripheral, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> Bool
    {
        let value = try characteristic(Peer.value, on: peripheral)
        let mark = phone.events.count
        peripheral.readValue(for: value)
        try await run(
            until: { self.since(mark).contains { $0.isValueUpdate } }, "a read", sourceLocation: sourceLocation)
        guard case .didUpdateCharacteristicValue(_, let data, let error) = since(mark).first(where: \.isValueUpdate)
        else { return false }
        return error == nil && data == Data([0x01, 0x02, 0x03])
    }
}

extension CentralEvent {
    var isServiceDiscovery: Bool { if case .didDiscoverServices = self { true } else { false } }
    var isCharacteristicDiscovery: Bool { if case .didDiscoverCharacteristics = self { true } else { false } }
    var isDescriptorDiscovery: Bool { if case .didDiscoverDescriptors = self { true } else { false } }
    var isIncludedDiscovery: Bool { if case .didDiscoverIncludedServices = self { true } else { false } }
    var isValueUpdate: Bool { if case .didUpdateCharacteristicValue = self { true } else { false } }
    var isWrite: Bool { if case .didWriteCharacteristic = self { true } else { false } }
    var isNotificationState: Bool { if case .didUpdateNotificationState = self { true } else { false } }

    /// The error a completion carries (nil for an event that is not a completion, or a success).
    var error: BluetoothError? {
        switch self {
        case .didFailToConnect(_, let e), .didDisconnect(_, let e), .didReadRSSI(_, let e),
            .didDiscoverServices(let e), .didDiscoverIncludedServices(_, let e), .didDiscoverCharacteristics(_, let e),
            .didDiscoverDescriptors(_, let e), .didUpdateCharacteristicValue(_, _, let e),
            .didUpdateDescriptorValue(_, _, let e), .didWriteCharacteristic(_, let e), .didWriteDescriptor(_, let e),
            .didUpdateNotificationState(_, _, let e):
            return e
        default:
            return nil
        }
    }
}
