import Foundation
import Synchronization

// The async face of `PeripheralManager`: each operation makes the same request as its delegate-style namesake,
// with the awaiting task as its reply (see `Reply`); the delegate does not hear it.
//
// Timeouts run in the system's time (virtual time in a simulation). Task cancellation ends a wait at once
// with `CancellationError` (an advertising or add request already made is not withdrawn).
//
// Overloads: `add(_:timeout:)`, `startAdvertising(_:timeout:)` and `updateValue(_:for:onSubscribedCentrals:timeout:)`
// take `timeout:` without a default, on purpose: they share every other label with the delegate-style
// methods, and Swift prefers an async overload inside async functions, so with a default `manager.add(s)` in
// async code would silently become the async call. Pass `timeout: nil` to wait as long as it takes.
extension PeripheralManager {
    /// Returns once the manager is `.poweredOn` (at once if it already is); waits through `.unknown` and
    /// `.resetting`. Completes on `peripheralManagerDidUpdateState`.
    /// - Throws: `BluetoothError` `.transportClosed` when the state is or becomes `.poweredOff`,
    ///   `.operationNotSupported` for `.unsupported`/`.unauthorized`; `.timeout`; `CancellationError`.
    public func waitUntilPoweredOn(timeout: Duration? = nil) async throws {
        try await Waiter<Void>.untilPoweredOn(
            register: awaitPoweredOn, system: system, queue: queue, timeout: timeout)
    }

    /// Publishes `service` and returns once `peripheralManager(_:didAdd:error:)` reported success.
    /// - Throws: the error `didAdd` reports (`.invalidParameters`, `.uuidNotAllowed`, ...); `.timeout`;
    ///   `CancellationError`.
    public func add(_ service: MutableService, timeout: Duration?) async throws {
        try await perform(timeout: timeout, what: "add(\(service.uuid.uuidString))") { add(service, reply: $0) }
    }

    /// Starts advertising and returns once `peripheralManagerDidStartAdvertising(_:error:)` reported success.
    /// - Throws: its error (`.alreadyAdvertising`, `.invalidParameters` when not powered on, ...); `.timeout`;
    ///   `CancellationError`.
    public func startAdvertising(_ advertisementData: AdvertisementData?, timeout: Duration?) async throws {
        try await perform(timeout: timeout, what: "startAdvertising") { startAdvertising(advertisementData, reply: $0) }
    }

    /// Sends `value` to the subscribed centrals (all, or those in `centrals`), waiting for room: where the
    /// delegate-style `updateValue` returns false because the transmit queue is full, this waits for
    /// `peripheralManagerIsReady(toUpdateSubscribers:)` and sends again, so a loop of updates delivers every
    /// value in order. Returns once every target received it: each notification acknowledged by the central's
    /// link layer (Number Of Completed Packets), each indication confirmed by the central; with no subscriber,
    /// at once.
    /// - Throws: `BluetoothError` `.invalidParameters` when `characteristic` is not published by this manager;
    ///   the power state's error when the manager powers off while waiting; `.timeout`; `CancellationError`.
    public func updateValue(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]?,
        timeout: Duration?
    ) async throws {
        let observer = asyncObserver
        let deadline = timeout.map { system.now + $0 }
        while true {
            try Task.checkCancellation()
            guard isPublished(characteristic) else {
                throw BluetoothError(.invalidParameters, "\(characteristic) is not published by this manager")
            }
            guard state == .poweredOn else { throw BluetoothError.notPoweredOn(state, system: system) }
            // Registered before sending, so a "ready" that follows the refusal at once is not missed.
            let ready = Waiter<Void>()
            observer.addReadyWaiter(ready)
            let delivered = Waiter<Void>()
            let reply = Reply<Void>.task { delivered.resume($0.mapError { $0 }) }
            if updateValue(value, for: characteristic, onSubscribedCentrals: centrals, delivered: reply) {
                observer.removeReadyWaiter(ready)
                if let deadline {
                    delivered.arm(
                        timeout: deadline - system.now, system: system, queue: queue,
                        what: "updateValue(for: \(characteristic.uuid.uuidString))")
                }
                return try await delivered.value()
            }
            if let deadline {
                ready.arm(
                    timeout: deadline - system.now, system: system, queue: queue,
                    what: "updateValue(for: \(characteristic.uuid.uuidString))")
            }
            try await ready.value()
        }
    }

    /// Answers a read or write request (as `respond(to:withResult:)` does) and returns once the response was
    /// handed to the central's ATT bearer. ATT does not acknowledge a response, so that is as far as it can be
    /// followed.
    /// - Throws: `.invalidParameters` when the request was already answered or is not this manager's;
    ///   `.notConnected` (or the link-loss error) when the central's link is gone; `.timeout`; `CancellationError`.
    public func respond(to request: ATTRequest, withResult result: ATTErrorCode, timeout: Duration?) async throws {
        try await perform(timeout: timeout, what: "respond") { respond(to: request, withResult: result, reply: $0) }
    }

    /// Read and write requests from remote centrals, as `didReceiveRead` and `didReceiveWrite` deliver them.
    /// Answer each with `respond(to:withResult:)` (a request nobody answers holds the central's ATT bearer
    /// until its 30 s transaction timeout). Each access is a new stream; every stream (and the delegate) sees
    /// every request, so let one party answer. The stream ends when the consumer stops iterating.
    public var requests: AsyncStream<PeripheralManagerRequest> {
        let observer = asyncObserver
        return AsyncStream { continuation in
            let id = observer.nextID()
            continuation.onTermination = { _ in observer.removeRequests(id) }
            observer.addRequests(id, continuation)
        }
    }

    /// Subscriptions and unsubscriptions of remote centrals, as `didSubscribeTo` and `didUnsubscribeFrom`
    /// deliver them (a central that disconnects is unsubscribed from everything). Each access is a new
    /// stream; it ends when the consumer stops iterating.
    public var subscriptions: AsyncStream<SubscriptionEvent> {
        let observer = asyncObserver
        return AsyncStream { continuation in
            let id = observer.nextID()
            continuation.onTermination = { _ in observer.removeSubscriptions(id) }
            observer.addSubscriptions(id, continuation)
        }
    }

    // MARK: Internals

    /// Makes one request with this task as its reply, and waits for its answer, the timeout or the task's
    /// cancellation, whichever comes first.
    private func perform(timeout: Duration?, what: String, _ request: (Reply<Void>) -> Void) async throws {
        try Task.checkCancellation()
        let waiter = Waiter<Void>()
        request(.task { result in waiter.resume(result.mapError { $0 }) })
        waiter.arm(timeout: timeout, system: system, queue: queue, what: what)
        try await waiter.value()
    }

    private func isPublished(_ characteristic: MutableCharacteristic) -> Bool {
        locked.withLock { s in s.published.contains { $0.characteristics.values.contains { $0 === characteristic } } }
    }
}
