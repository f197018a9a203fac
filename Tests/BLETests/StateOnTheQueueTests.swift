import BLEHCI
import BLEHost
import BLESystem
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Objects change on the manager's queue, just before the callback that announces the change, never earlier on
/// the host's thread. Each test holds the manager's queue shut with a gate, feeds host events to the system from
/// the test's own thread (as a real controller's thread would), looks at the objects while the callbacks wait behind the gate,
/// then opens it.
@Suite struct StateOnTheQueueTests {
    static let peer = BluetoothAddress(bytes: [0xC1, 0x22, 0x33, 0x44, 0x55, 0x66], type: .randomDevice)

    /// A central on a simulated phone, powered on; the radio does not run again, so only the test feeds events.
    final class Setup: CentralManagerDelegate, @unchecked Sendable {
        // @unchecked Sendable: `seen` is guarded by its Mutex; the rest is set once in `init`.
        let radio = SimulatedRadio(seed: 5)
        let queue = DispatchQueue(label: "test.app")
        let system: BluetoothSystem
        private(set) var central: CentralManager!
        let seen = Mutex<[String]>([])

        init() async throws {
            system = BluetoothSystem.simulated(on: radio, name: "phone")
            central = CentralManager(delegate: self, queue: queue, options: nil, system: system)
            try await radio.run(for: .milliseconds(100))
            #expect(central.state == .poweredOn)
        }

        /// Shuts the queue until the returned semaphore is signalled.
        func closeQueue() -> DispatchSemaphore {
            let gate = DispatchSemaphore(value: 0)
            queue.async { gate.wait() }
            return gate
        }

        /// Waits until every block queued so far has run.
        func drain() { queue.sync {} }

        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            seen.withLock { $0.append("didConnect: \(peripheral.state)") }
        }
        func centralManager(
            _ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?
        ) {
            seen.withLock { $0.append("didFailToConnect: \(peripheral.state)") }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
        ) {
            seen.withLock { $0.append("didDisconnect: \(peripheral.state)") }
        }
        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi: Int
        ) {
            seen.withLock { $0.append("didDiscover") }
        }
    }

    static func link(_ handle: UInt16) -> LinkInfo {
        LinkInfo(
            handle: ConnectionHandle(handle), role: .central, peer: peer, interval: 24, latency: 0,
            supervisionTimeout: 200)
    }

    @Test func aPeripheralBecomesConnectedOnTheQueueJustBeforeDidConnect() async throws {
        let setup = try await Setup()
        let peripheral = setup.central.peripheral(for: Self.peer)
        setup.central.connect(peripheral)
        #expect(peripheral.state == .connecting)  // the call's own effect

        let gate = setup.closeQueue()
        setup.system.core.handle(.connected(Self.link(7)))
        // The host has the link; the callback waits behind the gate: not connected yet.
        #expect(peripheral.state == .connecting)
        gate.signal()
        setup.drain()
        #expect(setup.seen.withLock { $0 } == ["didConnect: connected"])

        let again = setup.closeQueue()
        setup.system.core.handle(.disconnected(ConnectionHandle(7), reason: .remoteUserTerminatedConnection))
        #expect(peripheral.state == .connected)
        again.signal()
        setup.drain()
        #expect(setup.seen.withLock { $0 } == ["didConnect: connected", "didDisconnect: disconnected"])
    }

    @Test func cancellingBeforeDidConnectWasDeliveredDisconnectsWithoutDidConnect() async throws {
        let setup = try await Setup()
        let peripheral = setup.central.peripheral(for: Self.peer)
        setup.central.connect(peripheral)
        let gate = setup.closeQueue()
        // The application cancels on its queue, behind the gate; meanwhile the link comes up at the host, so
        // didConnect is queued after the cancel.
        setup.queue.async { setup.central.cancelPeripheralConnection(peripheral) }
        setup.system.core.handle(.connected(Self.link(9)))
        gate.signal()
        setup.drain()
        #expect(peripheral.state == .disconnecting)
        setup.system.core.handle(.disconnected(ConnectionHandle(9), reason: .connectionTerminatedByLocalHost))
        setup.drain()
        #expect(setup.seen.withLock { $0 } == ["didDisconnect: disconnected"])
    }

    @Test func aLinkThatDropsBeforeDidConnectWasDeliveredIsAFailedConnection() async throws {
        let setup = try await Setup()
        let peripheral = setup.central.peripheral(for: Self.peer)
        setup.central.connect(peripheral)
        let gate = setup.closeQueue()
        setup.system.core.handle(.connected(Self.link(11)))
        setup.system.core.handle(.disconnected(ConnectionHandle(11), reason: .connectionFailedToBeEstablished))
        gate.signal()
        setup.drain()
        #expect(setup.seen.withLock { $0 } == ["didFailToConnect: disconnected"])
        #expect(peripheral.state == .disconnected)
    }

    @Test func noDiscoveryIsDeliveredAfterStopScanReturnedOnTheQueue() async throws {
        let setup = try await Setup()
        setup.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        let gate = setup.closeQueue()
        // On the queue, behind the gate: stop the scan.
        setup.queue.async { setup.central.stopScan() }
        // Meanwhile the host reports two advertisements, while the manager is still scanning.
        let advertisement = AdvertisingReport(
            kind: .nonConnectableUndirected, address: Self.peer, rssi: -40, data: [0x02, 0x01, 0x06])
        setup.system.core.handle(.advertisingReport(advertisement))
        setup.system.core.handle(.advertisingReport(advertisement))
        gate.signal()
        setup.drain()
        #expect(!setup.central.isScanning)
        #expect(setup.seen.withLock { $0 }.isEmpty)
    }
}
