import BLEHCI
import BLESystem
import BLETransport
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Devices that rotate their random addresses (as phones and trackers do) cannot grow a scanning phone's memory
/// or store without bound: only devices that match a scan get an identifier, the store keeps its most recent
/// 1,000 peers, and a `Peripheral` the app did not keep is not kept by the manager either.
@Suite struct RotatingAddressTests {
    /// A raw controller that advertises a non-connectable tag under a new random address every 100 ms.
    final class RotatingTag: Sendable {
        let controller: VirtualController
        init(radio: SimulatedRadio, name: String, position: RadioPosition) {
            controller = radio.addController(name: name, position: position)
            controller.hostTransport.setReceiver { _ in }  // answers and reports are of no interest here
        }

        func send(_ command: HCICommandPacket) { controller.hostTransport.send(.command(command)) }

        /// Rotates `count` times, 100 ms apart, from `seed`.
        func rotate(count: Int, seed: UInt64, on radio: SimulatedRadio) async throws {
            send(
                HCILESetAdvertisingParameters(
                    advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advNonconnInd,
                    ownAddressType: .randomDevice
                ).packet)
            send(HCILESetAdvertisingData(advertisingData: [2, 0x01, 0x06, 4, 0x09, 0x74, 0x61, 0x67]).packet)
            for n in 0..<UInt64(count) {
                let value = (seed &* 1_000_003 &+ n) &* 0x9E37_79B9_7F4A_7C15
                var bytes = (0..<6).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
                bytes[0] = (bytes[0] & 0x3F) | 0x40  // a resolvable-looking private address
                send(HCILESetAdvertisingEnable(enable: false).packet)
                send(HCILESetRandomAddress(randomAddress: BluetoothAddress(bytes: bytes, type: .randomDevice)).packet)
                send(HCILESetAdvertisingEnable(enable: true).packet)
                try await radio.sleep(for: .milliseconds(100))
            }
            send(HCILESetAdvertisingEnable(enable: false).packet)
        }
    }

    /// Counts discoveries without keeping the peripherals, as an app that only watches would.
    final class Watcher: CentralManagerDelegate, @unchecked Sendable {
        // @unchecked: `addresses` is touched on `queue` only, and read after the run.
        let queue = DispatchQueue(label: "watcher")
        var identifiers = Set<UUID>()
        var central: CentralManager!
        init(app: BluetoothSystem.App) {
            queue.sync { central = CentralManager(delegate: self, queue: queue, options: nil, app: app) }
        }
        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi: Int
        ) {
            identifiers.insert(peripheral.identifier)
        }
    }

    @Test func aThousandRotatingDevicesDoNotGrowThePhone() async throws {
        let radio = SimulatedRadio(seed: 12)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let tags = (0..<10).map {
            RotatingTag(radio: radio, name: "tag\($0)", position: RadioPosition(x: 1, y: Double($0)))
        }
        let picky = Watcher(app: phone.app(id: "com.example.picky"))
        let curious = Watcher(app: phone.app(id: "com.example.curious"))
        try await radio.run(for: .milliseconds(100))
        picky.central.scanForPeripherals(withServices: [Profile.service])
        curious.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        let rotations = Task(executorPreference: radio) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (i, tag) in tags.enumerated() {
                    group.addTask { try await tag.rotate(count: 130, seed: UInt64(i), on: radio) }
                }
                try await group.waitForAll()
            }
        }
        try await radio.run(for: .seconds(14))
        try await rotations.value
        let seen = curious.queue.sync { curious.identifiers.count }
        #expect(seen >= 1_200, "the curious app heard \(seen) addresses")
        #expect(picky.queue.sync { picky.identifiers.isEmpty })
        // The store keeps the most recent 1,000; the managers keep no peripheral nobody holds.
        #expect(phone.core.store.knownPeerCount == 1_000)
        let held = curious.central.locked.withLock { s in s.peripherals.values.filter { $0.peripheral != nil }.count }
        #expect(held == 0)
        let table = curious.central.locked.withLock { $0.peripherals.count }
        #expect(table <= 2_048, "the manager's table holds \(table) entries")
    }
}

extension RotatingAddressTests {
    /// A device that changed its random address cannot be reached through the old one: a connect to the
    /// peripheral known by the old address stays pending (never times out) until the old address is heard again.
    @Test func aConnectThroughAnOldAddressWaitsForIt() async throws {
        let radio = SimulatedRadio(seed: 13)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let device = radio.addController(name: "tracker", position: RadioPosition(x: 1, y: 0))
        device.hostTransport.setReceiver { _ in }
        func advertise(as low: UInt8) {
            let address = BluetoothAddress(bytes: [0x4A, 0x01, 0x02, 0x03, 0x04, low], type: .randomDevice)
            for command in [
                HCILESetAdvertisingEnable(enable: false).packet,
                HCILESetRandomAddress(randomAddress: address).packet,
                HCILESetAdvertisingParameters(
                    advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advInd,
                    ownAddressType: .randomDevice
                ).packet,
                HCILESetAdvertisingEnable(enable: true).packet,
            ] {
                device.hostTransport.send(.command(command))
            }
        }
        let app = CentralRecorder(system: phone, label: "app")
        try await radio.run(for: .milliseconds(100))
        advertise(as: 0x01)
        app.central.scanForPeripherals(withServices: nil)
        let heard = try await radio.run(for: .seconds(2), until: { !app.discoveries.isEmpty })
        #expect(heard)
        let known = try #require(app.discoveries.first?.peripheral)
        app.central.stopScan()

        advertise(as: 0x02)  // a new address: the peripheral known by the old one is not there any more
        app.central.connect(known)
        try await radio.run(for: .seconds(10))
        #expect(known.state == .connecting && !app.events.contains { $0.isConnect })

        advertise(as: 0x01)  // back: the pending connect goes through
        let connected = try await radio.run(for: .seconds(2), until: { known.state == .connected })
        #expect(connected)
    }
}
