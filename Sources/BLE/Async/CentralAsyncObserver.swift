import BLESystem
import BLETransport
import Foundation
import Synchronization

/// The async layer's observer of one `CentralManager`: it feeds the `scan` and `disconnections` streams and
/// hands link losses on to the peripheral's own observer. (The waits of `waitUntilPoweredOn`, `connect` and
/// `disconnect` are kept with the manager's and the peripheral's state, and finished where the change is told.)
/// Its methods run on the manager's queue; the state is a `Mutex`, never held while a stream is fed or finished
/// (finishing runs `onTermination`, which takes it again).
final class CentralAsyncObserver: CentralManagerObserver {
    /// Where one scan's discoveries go, on the manager's queue: a scan stream, or a consumer of the layer's own
    /// (the nearby devices' list).
    struct ScanSink: Sendable {
        var yield: @Sendable (DiscoveredPeripheral) -> Void
        /// The scan ended (the manager is not powered on any more, or the controller refused to scan): why.
        var finish: @Sendable (BluetoothError) -> Void
    }

    struct ScanRequest {
        var services: [BluetoothUUID]?
        var options: CentralManager.ScanOptions?
    }

    struct State {
        var scans: [UInt64: ScanSink] = [:]
        /// The filter and options of the most recent scan stream (the manager has one scan, as CoreBluetooth).
        var scanRequest: ScanRequest?
        var disconnections: [UInt64: AsyncStream<PeripheralDisconnection>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// Set when the manager's app was terminated: every later stream finishes at once.
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

    func consume(_ event: CentralManagerEvent, from central: CentralManager) {
        switch event {
        case .stateUpdated: stateUpdated(central)
        case .discovered(let peripheral, let advertisement, let rssi):
            let scans = state.withLock { Array($0.scans.values) }
            let found = DiscoveredPeripheral(peripheral: peripheral, advertisementData: advertisement, rssi: rssi)
            for c in scans { c.yield(found) }
        case .disconnected(let peripheral, let error): disconnected(peripheral, error)
        case .willRestore, .connected, .failedToConnect, .connectionEvent: break
        }
    }

    private func stateUpdated(_ central: CentralManager) {
        let now = central.state
        switch now {
        case .poweredOn:
            let scan = state.withLock { s in s.scans.isEmpty ? nil : s.scanRequest }
            // Scan streams started before the manager was on (or that outlived a reset) start scanning now.
            if let scan { central.scanForPeripherals(withServices: scan.services, options: scan.options) }
        case .unknown, .resetting:
            break
        case .poweredOff, .unsupported, .unauthorized:
            let error = BluetoothError.notPoweredOn(now, system: central.system)
            let scans = state.withLock { s in
                defer {
                    s.scans.removeAll()
                    s.scanRequest = nil
                }
                return Array(s.scans.values)
            }
            for c in scans { c.finish(error) }
        }
    }

    private func disconnected(_ peripheral: Peripheral, _ error: BluetoothError?) {
        let lost = BluetoothError.linkLost(error)
        let ending = peripheral.disconnection
        // The peripheral's pending operations and notification streams end first, as the delegate's did.
        peripheral.existingAsyncObserver?.linkLost(lost)
        let streams = state.withLock { Array($0.disconnections.values) }
        let event = PeripheralDisconnection(
            peripheral: peripheral, error: error.map { _ in lost }, timestamp: ending.timestamp,
            isReconnecting: ending.isReconnecting)
        for c in streams { c.yield(event) }
    }

    /// The manager's scan ended by itself (the controller refused it): every scan stream ends with `error`, and
    /// a new stream starts the scan again.
    func scanEnded(_ error: BluetoothError) {
        let scans = state.withLock { s in
            defer {
                s.scans.removeAll()
                s.scanRequest = nil
            }
            return Array(s.scans.values)
        }
        for c in scans { c.finish(error) }
    }

    /// The manager's app was terminated: every stream finishes, a scan with `error` (a task iterating the app's
    /// manager would otherwise wait for ever: nothing is delivered to it any more), and a stream asked later
    /// finishes at once.
    func terminate(_ error: BluetoothError) {
        let (scans, streams) = state.withLock {
            s -> ([ScanSink], [AsyncStream<PeripheralDisconnection>.Continuation]) in
            s.terminated = error
            defer {
                s.scans.removeAll()
                s.scanRequest = nil
                s.disconnections.removeAll()
            }
            return (Array(s.scans.values), Array(s.disconnections.values))
        }
        for c in scans { c.finish(error) }
        for c in streams { c.finish() }
    }

    // MARK: Registration

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
        let terminated = state.withLock { s -> Bool in
            if s.terminated != nil { return true }
            s.disconnections[id] = continuation
            return false
        }
        if terminated { continuation.finish() }
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

    /// The async layer's observer, if one was attached.
    var existingAsyncObserver: CentralAsyncObserver? {
        observers.snapshot.lazy.compactMap { $0 as? CentralAsyncObserver }.first
    }
}
