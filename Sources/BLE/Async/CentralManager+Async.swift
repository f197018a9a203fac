import Foundation
import Synchronization

// The async face of `CentralManager`. Every function here makes the same request as its delegate-style namesake
// and awaits that request's own end: a connect's wait joins the attempt it made (or found under way) and is
// finished where the attempt's end is told, just after the delegate hears it; a disconnect's, where the
// peripheral turns `.disconnected`; `waitUntilPoweredOn`'s, where the state's change is told. Nothing here
// talks to the host, and a delegate set on the manager keeps receiving every event while these are used.
//
// Timeouts run in the system's time (`BluetoothSystem.schedule(after:on:_:)`: virtual time in a simulation),
// so a simulated run stays deterministic. Task cancellation ends a wait at once with `CancellationError`.
//
// Overloads: `connect(_:options:timeout:)` takes `timeout:` without a default, on purpose. Swift prefers an
// async overload inside async functions, so with a default `central.connect(p)` in async code would silently
// turn into the async call (and stop compiling without `try await`). With the label required, `connect(p)` is
// always the delegate-style request and `try await connect(p, timeout: nil)` the async one.
extension CentralManager {
    /// Returns once the manager is `.poweredOn` (at once if it already is).
    ///
    /// Completes on `centralManagerDidUpdateState` reporting `.poweredOn`; waits through `.unknown` and
    /// `.resetting`.
    /// - Throws: `BluetoothError` `.transportClosed` when the state is or becomes `.poweredOff`,
    ///   `.operationNotSupported` for `.unsupported` or `.unauthorized`; `.timeout` when `timeout` passes
    ///   first; `CancellationError` when the task is cancelled.
    public func waitUntilPoweredOn(timeout: Duration? = nil) async throws {
        try await Waiter<Void>.untilPoweredOn(
            register: awaitPoweredOn, system: system, queue: queue, timeout: timeout)
    }

    /// Scans for peripherals advertising any of `serviceUUIDs` (all when nil) and yields each discovery,
    /// exactly as `centralManager(_:didDiscover:advertisementData:rssi:)` reports it (coalesced per
    /// peripheral unless `options.allowDuplicates`).
    ///
    /// The scan starts when the stream is created, or, while the manager's state is still `.unknown` or
    /// `.resetting`, as soon as it is powered on; it stops when the consumer stops iterating, the iterating task
    /// is cancelled, or the stream is dropped. The stream throws the state's `BluetoothError` (the reason the
    /// system gave) when the manager is, or later turns, powered off, unsupported or unauthorized, and the
    /// controller's refusal (its status in `hciStatus`) when it will not scan: a scan never ends in silence.
    /// (The delegate-style `scanForPeripherals` keeps CoreBluetooth's behaviour: ignored, and logged, before
    /// `.poweredOn`, and no callback for a refused scan, only `isScanning` false.) The manager has one scan, as in
    /// CoreBluetooth: while several scan streams run, the filter and options of the most recent apply to
    /// all of them, and the scan stops when the last one ends; stopping it also stops a scan the delegate code
    /// started with `scanForPeripherals`.
    public func scan(withServices serviceUUIDs: [BluetoothUUID]?, options: ScanOptions? = nil)
        -> AsyncThrowingStream<DiscoveredPeripheral, any Error>
    {
        let observer = asyncObserver
        return AsyncThrowingStream { continuation in
            let id = observer.nextID()
            continuation.onTermination = { [weak self] _ in
                if observer.removeScan(id) { self?.stopScan() }
            }
            observer.addScan(id, continuation, request: .init(services: serviceUUIDs, options: options))
            switch state {
            case .poweredOn: scanForPeripherals(withServices: serviceUUIDs, options: options)
            case .poweredOff, .unsupported, .unauthorized:
                continuation.finish(throwing: BluetoothError.notPoweredOn(state, system: system))
            case .unknown, .resetting: break  // the observer starts the scan on `.poweredOn`
            }
        }
    }

    /// Connects to `peripheral` and returns once it is connected (at once if it already is).
    ///
    /// Completes on `centralManager(_:didConnect:)`. Like the delegate-style `connect`, the request itself
    /// never times out (pass `timeout: nil` for that); with a `timeout`, the connection attempt is cancelled
    /// (`cancelPeripheralConnection`) when it passes, and so it is when the task is cancelled. Either way the
    /// delegate then sees `didDisconnectPeripheral` with a nil error, as for any cancelled attempt; a
    /// cancellation also ends other tasks' waits for the same peripheral.
    /// - Throws: `BluetoothError` `.timeout` when `timeout` passes first; the error of
    ///   `didFailToConnect` (`.connectionFailed`); `.operationCancelled` when the attempt is cancelled by
    ///   `cancelPeripheralConnection`/`disconnect`; `.transportClosed` (or the power state's error) when the
    ///   manager is not or no longer powered on; `.invalidParameters` while the peripheral is still
    ///   disconnecting; `CancellationError` when the task is cancelled.
    public func connect(_ peripheral: Peripheral, options: ConnectOptions? = nil, timeout: Duration?) async throws {
        try Task.checkCancellation()
        let waiter = Waiter<Void>()
        waiter.onAbandon { [weak self] _ in self?.cancelPeripheralConnection(peripheral) }
        connect(peripheral, options: options, wait: waiter)
        // Armed once the wait is the attempt's: a timeout that fires cancels that attempt.
        waiter.arm(timeout: timeout, system: system, queue: queue, what: "connect(\(peripheral.identifier))")
        try await waiter.value()
    }

    /// Disconnects `peripheral` (or withdraws a pending connection request) and returns once
    /// `centralManager(_:didDisconnectPeripheral:error:)` (or, for a link that dropped as it came up,
    /// `didFailToConnect`) has been delivered; at once if it is disconnected.
    ///
    /// Every operation pending on the peripheral fails with `.operationCancelled`, as
    /// `cancelPeripheralConnection` makes it.
    /// - Throws: `CancellationError` when the task is cancelled (the disconnection goes on).
    public func disconnect(_ peripheral: Peripheral) async throws {
        try Task.checkCancellation()
        let waiter = Waiter<Void>()
        if awaitDisconnection(peripheral, waiter) { cancelPeripheralConnection(peripheral) }
        try await waiter.value()
    }

    /// Every link of this manager that goes down from now on, as `didDisconnectPeripheral` reports it, with
    /// the error (nil when the application cancelled the connection). Each access is a new stream; it ends
    /// when the consumer stops iterating.
    public var disconnections: AsyncStream<PeripheralDisconnection> {
        let observer = asyncObserver
        return AsyncStream { continuation in
            let id = observer.nextID()
            continuation.onTermination = { _ in observer.removeDisconnections(id) }
            observer.addDisconnections(id, continuation)
        }
    }
}
