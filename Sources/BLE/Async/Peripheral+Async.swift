import Foundation
import Synchronization

// The async face of `Peripheral`. Each operation makes the same request as its delegate-style namesake, with
// the awaiting task as its reply (see `Reply`): the host completes it once, and the answer goes to this task
// alone. So async and delegate-style requests can be mixed on one object, and concurrent async requests on one
// peripheral each get their own answer. The delegate is still told of every new value a read brings
// (`didUpdateValueFor`), whoever asked for it, as CoreBluetooth's delegate is.
//
// Common rules:
// - `timeout` is in the system's time (virtual time in a simulation); nil waits as long as the stack does
//   (an unanswered ATT request fails after its 30 s transaction timeout).
// - A timeout or a task cancellation abandons the operation: the task gets `BluetoothError(.timeout)` or
//   `CancellationError` at once, and the operation's answer, when it comes, is dropped. ATT cannot withdraw a
//   request already sent: a read or write still reaches the peripheral, and its effect stays (a write is
//   written, a subscription made); requests queued behind it wait for it as usual.
// - Errors: the `BluetoothError` of the operation (ATT errors as `.att(code)`, `.notConnected`,
//   `.transactionTimeout` when the peer does not answer within ATT's 30 s, `.controllerTimeout` when the controller
//   does not answer, `.peripheralDisconnected` when the link goes down first); `.timeout` when the caller's own
//   `timeout` passes first; `.invalidParameters`
//   for an object that does not belong to this connected peripheral; `CancellationError` when the task is
//   cancelled.
// - The `timeout:` label has no default, on purpose: with one, every async operation here would shadow its
//   delegate-style namesake inside async functions (Swift prefers the async overload there).
extension Peripheral {
    /// Discovers primary services (all when `serviceUUIDs` is nil) and returns those found that match
    /// `serviceUUIDs`, as they are in `services`. Completes on `peripheral(_:didDiscoverServices:)`.
    public func discoverServices(_ serviceUUIDs: [BluetoothUUID]?, timeout: Duration?) async throws -> [Service] {
        try await perform(timeout: timeout, what: "discoverServices") { discoverServices(serviceUUIDs, reply: $0) }
    }

    /// Discovers the services `service` includes (filtered by `includedServiceUUIDs` when given) and returns
    /// `service.includedServices`. Completes on `peripheral(_:didDiscoverIncludedServicesFor:error:)`.
    public func discoverIncludedServices(
        _ includedServiceUUIDs: [BluetoothUUID]?, for service: Service,
        timeout: Duration?
    ) async throws -> [Service] {
        try await perform(timeout: timeout, what: "discoverIncludedServices") {
            discoverIncludedServices(includedServiceUUIDs, for: service, reply: $0)
        }
    }

    /// Discovers the characteristics of `service` and returns those matching `characteristicUUIDs` (all when
    /// nil), as they are in `service.characteristics`. Completes on
    /// `peripheral(_:didDiscoverCharacteristicsFor:error:)`.
    public func discoverCharacteristics(
        _ characteristicUUIDs: [BluetoothUUID]?, for service: Service,
        timeout: Duration?
    ) async throws -> [Characteristic] {
        try await perform(timeout: timeout, what: "discoverCharacteristics") {
            discoverCharacteristics(characteristicUUIDs, for: service, reply: $0)
        }
    }

    /// Discovers the descriptors of `characteristic` and returns `characteristic.descriptors`. Completes on
    /// `peripheral(_:didDiscoverDescriptorsFor:error:)`.
    public func discoverDescriptors(for characteristic: Characteristic, timeout: Duration?) async throws -> [Descriptor]
    {
        try await perform(timeout: timeout, what: "discoverDescriptors") {
            discoverDescriptors(for: characteristic, reply: $0)
        }
    }

    /// Reads the characteristic's value from the peripheral and returns it (also left in
    /// `characteristic.value`). Completes on `peripheral(_:didUpdateValueFor:error:)` for the read: a
    /// notification arriving meanwhile does not complete it (see `notifications(for:)`). Concurrent reads of
    /// one characteristic complete in the order they were made, each with its own response.
    public func readValue(for characteristic: Characteristic, timeout: Duration?) async throws -> Data {
        try await perform(timeout: timeout, what: "readValue(for: \(characteristic.uuid.uuidString))") {
            readValue(for: characteristic, reply: $0)
        }
    }

    /// Reads a descriptor's value and returns it. Completes on `peripheral(_:didUpdateValueFor:error:)` for
    /// the descriptor, in request order per descriptor.
    public func readValue(for descriptor: Descriptor, timeout: Duration?) async throws -> Data {
        try await perform(timeout: timeout, what: "readValue(for: \(descriptor.uuid.uuidString))") {
            readValue(for: descriptor, reply: $0)
        }
    }

    /// Writes a characteristic value.
    ///
    /// `.withResponse` returns when the peripheral has acknowledged the write (`didWriteValueFor`), using
    /// the long-write procedure for values longer than ATT_MTU - 3 (up to 512 bytes).
    ///
    /// `.withoutResponse` is flow-controlled: it queues the Write Command when the link has room; when the link's
    /// queue is full (`canSendWriteWithoutResponse` is false) it waits for
    /// `peripheralIsReady(toSendWriteWithoutResponse:)` and tries again. It returns once the command is delivered:
    /// the controller reported its last packet completed, which means the peer's link layer acknowledged it (no
    /// ATT response exists for it; whether the peer's application used it is not known). A loop of these writes
    /// therefore sends every chunk, in order, each delivered before the next is queued; several tasks writing at
    /// once share the link's queue, in no promised order among them.
    /// - Throws: for `.withoutResponse` also `.invalidParameters` when `data` is longer than
    ///   `maximumWriteValueLength(for: .withoutResponse)`, and `.notConnected`.
    public func writeValue(
        _ data: Data, for characteristic: Characteristic, type: CharacteristicWriteType,
        timeout: Duration?
    ) async throws {
        switch type {
        case .withResponse:
            try await perform(timeout: timeout, what: "writeValue(for: \(characteristic.uuid.uuidString))") {
                writeValue(data, for: characteristic, reply: $0)
            }
        case .withoutResponse:
            try await writeWithoutResponse(data, for: characteristic, timeout: timeout)
        }
    }

    /// Writes a descriptor value and returns when the peripheral acknowledged it (`didWriteValueFor`
    /// descriptor). The Client Characteristic Configuration descriptor is refused (`.operationNotSupported`):
    /// use `setNotifyValue(_:for:timeout:)` or `notifications(for:)`.
    public func writeValue(_ data: Data, for descriptor: Descriptor, timeout: Duration?) async throws {
        try await perform(timeout: timeout, what: "writeValue(for: \(descriptor.uuid.uuidString))") {
            writeValue(data, for: descriptor, reply: $0)
        }
    }

    /// Enables or disables notifications (indications when the characteristic only indicates) and returns
    /// once the peripheral accepted it (`didUpdateNotificationStateFor`); `isNotifying` is then updated.
    /// Values arrive through the delegate and through `notifications(for:)` streams.
    public func setNotifyValue(_ enabled: Bool, for characteristic: Characteristic, timeout: Duration?) async throws {
        try await perform(timeout: timeout, what: "setNotifyValue(for: \(characteristic.uuid.uuidString))") {
            setNotifyValue(enabled, for: characteristic, reply: $0)
        }
    }

    /// As ``setNotifyValue(_:for:timeout:)``, choosing the way values come when the characteristic offers both:
    /// `.indication` subscribes to its indications (each confirmed by the stack) instead of its notifications.
    ///
    /// Not part of CoreBluetooth, which always prefers notifications: a swift-ble extension for tools. The choice
    /// stays with the characteristic, so the streams (`notifications(for:)`, `valueUpdates(for:)`) and a later
    /// `setNotifyValue(true, ...)` keep it; asking for `.notification` goes back to the default. A kind the
    /// characteristic does not offer is `.operationNotSupported`.
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.3.3.3 (Client Characteristic Configuration: bit 0 notifications,
    ///   bit 1 indications).
    public func setNotifyValue(
        _ enabled: Bool, for characteristic: Characteristic, preferring kind: ValueUpdate.Kind, timeout: Duration?
    ) async throws {
        let wanted: CharacteristicProperties = kind == .indication ? .indicate : .notify
        guard characteristic.properties.contains(wanted) else {
            throw BluetoothError(
                .operationNotSupported,
                "\(characteristic.uuid.uuidString) does not \(kind == .indication ? "indicate" : "notify")")
        }
        characteristic.state.withLock { $0.prefersIndications = kind == .indication }
        try await setNotifyValue(enabled, for: characteristic, timeout: timeout)
    }

    /// The characteristic's notifications (or indications), as a stream of values.
    ///
    /// Creating the stream registers it and subscribes (`setNotifyValue(true, ...)`); values notified from
    /// then on are yielded in arrival order (read responses are not: they complete reads). When the consumer
    /// stops iterating (or its task is cancelled, or the stream is dropped) and no other stream of this
    /// characteristic remains, it unsubscribes — also ending a subscription the delegate code made. The
    /// stream finishes with an error when subscribing fails and when the link goes down (the disconnection's
    /// error, or `.operationCancelled` after `cancelPeripheralConnection`).
    public func notifications(for characteristic: Characteristic) -> AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream { continuation in
            subscribe(.values(continuation), for: characteristic) { continuation.onTermination = $0 }
        }
    }

    /// As ``notifications(for:)``, with each value's way of coming: by notification or by indication.
    ///
    /// Not part of CoreBluetooth (its delegate cannot tell the two apart): a swift-ble extension for tools that
    /// show it. The same rules as `notifications(for:)` apply; both kinds of stream of one characteristic can be
    /// used at once, and the last of either kind to end unsubscribes.
    public func valueUpdates(for characteristic: Characteristic) -> AsyncThrowingStream<ValueUpdate, any Error> {
        AsyncThrowingStream { continuation in
            subscribe(.updates(continuation), for: characteristic) { continuation.onTermination = $0 }
        }
    }

    /// Registers `sink` for the characteristic's updates and subscribes; `onTermination` installs the stream's
    /// ending, which unsubscribes when it was the characteristic's last stream.
    private func subscribe<Element>(
        _ sink: PeripheralAsyncObserver.Sink, for characteristic: Characteristic,
        onTermination: (@escaping @Sendable (AsyncThrowingStream<Element, any Error>.Continuation.Termination) -> Void)
            -> Void
    ) {
        let observer = asyncObserver
        let id = observer.nextID()
        onTermination { [weak self] _ in
            // The last stream of a characteristic still subscribed (by the stream or by delegate code, and not
            // unsubscribed meanwhile) unsubscribes.
            guard observer.removeNotifications(id, for: characteristic), let self, self.state == .connected,
                characteristic.isNotifying
            else { return }
            self.setNotifyValue(false, for: characteristic, reply: .task { _ in })
        }
        observer.addNotifications(id, sink, for: characteristic)
        setNotifyValue(
            true, for: characteristic,
            reply: .task { result in
                if case .failure(let error) = result { sink.finish(throwing: error) }
            })
    }

    /// Reads the link's RSSI (dBm). Completes on `peripheral(_:didReadRSSI:error:)`.
    public func readRSSI(timeout: Duration?) async throws -> Int {
        try await perform(timeout: timeout, what: "readRSSI") { readRSSI(reply: $0) }
    }

    // MARK: Internals

    /// Makes one request with this task as its reply, and waits for the answer (or the timeout, or the task's
    /// cancellation, whichever comes first).
    func perform<T: Sendable>(
        timeout: Duration?, what: String, _ request: (Reply<T>) -> Void
    ) async throws -> T {
        try Task.checkCancellation()
        guard let manager else {
            throw BluetoothError(.invalidParameters, "the peripheral's central manager no longer exists")
        }
        let waiter = Waiter<T>()
        request(.task { result in waiter.resume(result.mapError { $0 }) })
        waiter.arm(timeout: timeout, system: manager.system, queue: manager.queue, what: what)
        return try await waiter.value()
    }

    /// A write without response is a `send` of one chunk: the one place where writes wait for room. `timeout`
    /// bounds the whole wait, room and delivery.
    private func writeWithoutResponse(_ data: Data, for characteristic: Characteristic, timeout: Duration?) async throws
    {
        guard let manager else { throw Self.managerGone }
        try Task.checkCancellation()
        guard state == .connected else { throw BluetoothError(.notConnected, "the peripheral is not connected") }
        let limit = maximumWriteValueLength(for: .withoutResponse)
        guard data.count <= limit else {
            throw BluetoothError(
                .invalidParameters,
                "a write without response carries at most \(limit) bytes here; this one has \(data.count)")
        }
        let stream = send(data, to: characteristic, type: .withoutResponse, chunkSize: max(1, data.count))
        // A stream's iteration ends quietly when the task is cancelled: only the acknowledgement means delivered.
        let delivered: @Sendable () async throws -> Void = {
            for try await progress in stream where progress.bytesAcknowledged == progress.totalBytes { return }
            throw CancellationError()
        }
        guard let timeout else { return try await delivered() }
        let what = "writeValue(for: \(characteristic.uuid.uuidString), type: .withoutResponse)"
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await delivered()
                return true
            }
            group.addTask {
                try await manager.system.sleep(for: timeout)
                return false
            }
            defer { group.cancelAll() }
            guard try await group.next() == true else {
                throw BluetoothError(.timeout, "\(what) did not complete within \(timeout)")
            }
        }
    }
}
