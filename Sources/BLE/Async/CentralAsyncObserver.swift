import BLESystem
import BLETransport
import Foundation
import Synchronization

/// The async layer's observer of one `CentralManager`: it finishes the waiters of `waitUntilPoweredOn`,
/// `connect` and `disconnect`, feeds the `scan` and `disconnections` streams, and hands link losses on to the
/// peripheral's own observer. Its methods run on the manager's queue; the state is a `Mutex`, never held while
/// a waiter is resumed or a stream is fed or finished (finishing runs `onTermination`, which takes it again).
final class CentralAsyncObserver: CentralManagerObserver {
    /// Where one scan's discoveries go, on the manager's queue: a scan stream, or a consumer of the layer's own
    /// (the nearby devices' list).
    struct ScanSink: Sendable {
        var yield: @Sendable (DiscoveredPeripheral) -> Void
        /// The scan ended because the manager is not powered on any more: why.
        var finish: @Sendable (BluetoothError) -> Void
    }

    struct ScanRequest {
        var services: [BluetoothUUID]?
        var options: CentralManager.ScanOptions?
    }

    struct State {
        var poweredOn = WaiterSet<Void>()
        var connects: [ObjectIdentifier: WaiterSet<Void>] = [:]
        var disconnects: [ObjectIdentifier: WaiterSet<Void>] = [:]
        var scans: [UInt64: ScanSink] = [:]
        /// The filter and options of the most recent scan stream (the manager has one scan, as CoreBluetooth).
        var scanRequest: ScanRequest?
        var disconnections: [UInt64: AsyncStream<PeripheralDisconnection>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// Set when the manager's app was terminated: every later wait fails at once.
        var terminated: BluetoothError?
    }

    let state = Mutex(State())

    init() {}

    func nextID() -> UInt64 {
        state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
    }

    // MARK: Events

    func centralManagerDidUpdateState(_ central: CentralManager) {
        let now = central.state
        switch now {
        case .poweredOn:
            let (waiters, scan) = state.withLock { s in (s.poweredOn.takeAll(), s.scans.isEmpty ? nil : s.scanRequest) }
            for w in waiters { w.resume(.success(())) }
            // Scan streams started before the manager was on (or that outlived a reset) start scanning now.
            if let scan { central.scanForPeripherals(withServices: scan.services, options: scan.options) }
        case .unknown, .resetting:
            break
        case .poweredOff, .unsupported, .unauthorized:
            let error = BluetoothError.notPoweredOn(now, system: central.system)
            let (waiters, connects, scans) = state.withLock { s in
                defer {
                    s.connects.removeAll()
                    s.scans.removeAll()
                    s.scanRequest = nil
                }
                return (
                    s.poweredOn.takeAll(),
                    s.connects.values.flatMap {
                        var w = $0
                        return w.takeAll()
                    },
                    Array(s.scans.values)
                )
            }
            for w in waiters + connects { w.fail(error) }
            for c in scans { c.finish(error) }
        }
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int
    ) {
        let scans = state.withLock { Array($0.scans.values) }
        let found = DiscoveredPeripheral(peripheral: peripheral, advertisementData: advertisementData, rssi: rssi)
        for c in scans { c.yield(found) }
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        for w in takeConnects(peripheral) { w.resume(.success(())) }
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        let failure =
            (error as? BluetoothError)
            ?? BluetoothError(.connectionFailed, "could not connect\(error.map { ": \($0)" } ?? "")")
        for w in takeConnects(peripheral) { w.fail(failure) }
    }

    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        let lost = BluetoothError.linkLost(error)
        let ending = peripheral.disconnection
        // The peripheral's pending operations and notification streams end first, as the delegate's did.
        peripheral.existingAsyncObserver?.linkLost(lost)
        let key = ObjectIdentifier(peripheral)
        let (connects, disconnects, streams) = state.withLock { s in
            // While the system reconnects by itself, a task waiting for the connection waits on.
            var c = ending.isReconnecting ? WaiterSet() : s.connects.removeValue(forKey: key) ?? WaiterSet()
            var d = s.disconnects.removeValue(forKey: key) ?? WaiterSet()
            return (c.takeAll(), d.takeAll(), Array(s.disconnections.values))
        }
        for w in connects { w.fail(lost) }
        for w in disconnects { w.resume(.success(())) }
        let event = PeripheralDisconnection(
            peripheral: peripheral, error: error.map { _ in lost }, timestamp: ending.timestamp,
            isReconnecting: ending.isReconnecting)
        for c in streams { c.yield(event) }
    }

    /// The manager's app was terminated: every wait ends with `error`, every stream finishes (a task that awaited
    /// the app's manager would otherwise wait for ever: nothing is delivered to it any more).
    func terminate(_ error: BluetoothError) {
        let (waiters, scans, streams) = state.withLock {
            s -> ([Waiter<Void>], [ScanSink], [AsyncStream<PeripheralDisconnection>.Continuation]) in
            var waiters = s.poweredOn.takeAll()
            for var set in s.connects.values { waiters += set.takeAll() }
            for var set in s.disconnects.values { waiters += set.takeAll() }
            defer {
                s.connects.removeAll()
                s.disconnects.removeAll()
                s.scans.removeAll()
                s.scanRequest = nil
                s.disconnections.removeAll()
            }
            return (waiters, Array(s.scans.values), Array(s.disconnections.values))
        }
        for w in waiters { w.fail(error) }
        for c in scans { c.finish(error) }
        for c in streams { c.finish() }
    }

    private func takeConnects(_ peripheral: Peripheral) -> [Waiter<Void>] {
        state.withLock { s in
            var set = s.connects.removeValue(forKey: ObjectIdentifier(peripheral)) ?? WaiterSet()
            return set.takeAll()
        }
    }

    // MARK: Registration

    func addPoweredOnWaiter(_ waiter: Waiter<Void>) {
        add(waiter) { $0.poweredOn.insert(waiter) }
    }

    func addConnectWaiter(_ waiter: Waiter<Void>, for peripheral: Peripheral) {
        add(waiter) { $0.connects[ObjectIdentifier(peripheral), default: WaiterSet()].insert(waiter) }
    }

    func addDisconnectWaiter(_ waiter: Waiter<Void>, for peripheral: Peripheral) {
        add(waiter) { $0.disconnects[ObjectIdentifier(peripheral), default: WaiterSet()].insert(waiter) }
    }

    /// Registers a wait, or fails it at once when the manager's app was terminated.
    private func add(_ waiter: Waiter<Void>, _ register: (inout State) -> Void) {
        let terminated = state.withLock { s -> BluetoothError? in
            if let error = s.terminated { return error }
            register(&s)
            return nil
        }
        if let terminated { waiter.fail(terminated) }
    }

    func addScan(
        _ id: UInt64, _ continuation: AsyncThrowingStream<DiscoveredPeripheral, any Error>.Continuation,
        request: ScanRequest
    ) {
        addScan(
            id, ScanSink(yield: { continuation.yield($0) }, finish: { continuation.finish(throwing: $0) }),
            request: request)
    }

    func addScan(_ id: UInt64, _ sink: ScanSink, request: ScanRequest) {
        let terminated = state.withLock { s -> BluetoothError? in
            if let error = s.terminated { return error }
            s.scans[id] = sink
            s.scanRequest = request
            return nil
        }
        if let terminated { sink.finish(terminated) }
    }

    /// Removes a scan stream; true when it was the last one (the scan should stop).
    func removeScan(_ id: UInt64) -> Bool {
        state.withLock { s in
            guard s.scans.removeValue(forKey: id) != nil else { return false }
            if s.scans.isEmpty { s.scanRequest = nil }
            return s.scans.isEmpty
        }
    }

    func addDisconnections(_ id: UInt64, _ continuation: AsyncStream<PeripheralDisconnection>.Continuation) {
        state.withLock { $0.disconnections[id] = continuation }
    }

    func removeDisconnections(_ id: UInt64) {
        _ = state.withLock { $0.disconnections.removeValue(forKey: id) }
    }
}

extension CentralManager {
    /// The async layer's observer of this manager, attached on first use.
    var asyncObserver: CentralAsyncObserver {
        observers.attachment(CentralAsyncObserver.self) { CentralAsyncObserver() }
    }

    /// Runs `check` on the manager's queue after every event already queued there (counted by the system's
    /// scheduler, like a delegate call): catches an event that was delivered before a waiter was registered.
    func afterQueuedEvents(_ check: @escaping @Sendable () -> Void) {
        system.core.scheduler.dispatch(on: queue, check)
    }
}
