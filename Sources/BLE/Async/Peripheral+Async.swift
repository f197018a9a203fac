import Foundation
import Synchronization

// The async face of `Peripheral`. Each operation issues the delegate-style request on the same peripheral and
// completes on the delegate event that reports it (which a delegate, if set, receives as well); nothing here
// talks to the host.
//
// Common rules:
// - `timeout` is in the system's time (virtual time in a simulation); nil waits as long as the stack does
//   (an unanswered ATT request fails after its 30 s transaction timeout). A timeout or a cancellation ends
//   the wait only: the request already sent cannot be withdrawn, and its late completion is discarded.
// - Completions on one object arrive in request order, and waits complete in that order, first in first out
//   per object and event: concurrent `readValue(for: c)` calls on the same characteristic each get their own
//   completion, the earliest request the earliest. Requests made through the delegate-style methods on the
//   same object at the same time share that order (a delegate-style read of `c` completes the oldest waiting
//   async read of `c`, with the same value the delegate sees), so do not mix the two styles on one object
//   while operations are outstanding.
// - Errors: the `BluetoothError` of the delegate event (ATT errors as `.att(code)`, `.notConnected`,
//   `.timeout` for the stack's ATT timeout); `.peripheralDisconnected`/`.connectionTimeout` (or
//   `.operationCancelled` when the application cancelled the connection) when the link goes down first;
//   `BluetoothError(.timeout)` when `timeout` passes first; `.invalidParameters` for an object that does not
//   belong to this connected peripheral; `CancellationError` when the task is cancelled.
// - The `timeout:` label has no default, on purpose: with one, every async operation here would shadow its
//   delegate-style namesake inside async functions (Swift prefers the async overload there).
extension Peripheral {
    /// Discovers primary services (all when `serviceUUIDs` is nil) and returns those found that match
    /// `serviceUUIDs`, as they are in `services`. Completes on `peripheral(_:didDiscoverServices:)`.
    public func discoverServices(_ serviceUUIDs: [BluetoothUUID]?, timeout: Duration?) async throws -> [Service] {
        try await perform(.services, on: nil, timeout: timeout, what: "discoverServices") { [self] _ in
            (services ?? []).filter { serviceUUIDs?.isEmpty != false || serviceUUIDs!.contains($0.uuid) }
        } issue: {
            discoverServices(serviceUUIDs)
        }
    }

    /// Discovers the services `service` includes (filtered by `includedServiceUUIDs` when given) and returns
    /// `service.includedServices`. Completes on `peripheral(_:didDiscoverIncludedServicesFor:error:)`.
    public func discoverIncludedServices(
        _ includedServiceUUIDs: [BluetoothUUID]?, for service: Service,
        timeout: Duration?
    ) async throws -> [Service] {
        try check(service.state.withLock { $0.remote } != nil && service.peripheral === self, service)
        return try await perform(.includedServices, on: service, timeout: timeout, what: "discoverIncludedServices") {
            _ in
            service.includedServices ?? []
        } issue: {
            discoverIncludedServices(includedServiceUUIDs, for: service)
        }
    }

    /// Discovers the characteristics of `service` and returns those matching `characteristicUUIDs` (all when
    /// nil), as they are in `service.characteristics`. Completes on
    /// `peripheral(_:didDiscoverCharacteristicsFor:error:)`.
    public func discoverCharacteristics(
        _ characteristicUUIDs: [BluetoothUUID]?, for service: Service,
        timeout: Duration?
    ) async throws -> [Characteristic] {
        try check(service.state.withLock { $0.remote } != nil && service.peripheral === self, service)
        return try await perform(.characteristics, on: service, timeout: timeout, what: "discoverCharacteristics") {
            _ in
            (service.characteristics ?? []).filter {
                characteristicUUIDs?.isEmpty != false || characteristicUUIDs!.contains($0.uuid)
            }
        } issue: {
            discoverCharacteristics(characteristicUUIDs, for: service)
        }
    }

    /// Discovers the descriptors of `characteristic` and returns `characteristic.descriptors`. Completes on
    /// `peripheral(_:didDiscoverDescriptorsFor:error:)`.
    public func discoverDescriptors(for characteristic: Characteristic, timeout: Duration?) async throws -> [Descriptor]
    {
        try check(owns(characteristic), characteristic)
        return try await perform(.descriptors, on: characteristic, timeout: timeout, what: "discoverDescriptors") { _ in
            characteristic.descriptors ?? []
        } issue: {
            discoverDescriptors(for: characteristic)
        }
    }

    /// Reads the characteristic's value from the peripheral and returns it (also left in
    /// `characteristic.value`). Completes on `peripheral(_:didUpdateValueFor:error:)` for the read: a
    /// notification arriving meanwhile does not complete it (see `notifications(for:)`). Concurrent reads of
    /// one characteristic complete in the order they were made, each with its own response.
    public func readValue(for characteristic: Characteristic, timeout: Duration?) async throws -> Data {
        try check(owns(characteristic), characteristic)
        return try await perform(
            .readCharacteristic, on: characteristic, timeout: timeout,
            what: "readValue(for: \(characteristic.uuid.uuidString))"
        ) { _ in
            characteristic.value ?? Data()
        } issue: {
            readValue(for: characteristic)
        }
    }

    /// Reads a descriptor's value and returns it. Completes on `peripheral(_:didUpdateValueFor:error:)` for
    /// the descriptor, in request order per descriptor.
    public func readValue(for descriptor: Descriptor, timeout: Duration?) async throws -> Data {
        try check(owns(descriptor), descriptor)
        return try await perform(
            .readDescriptor, on: descriptor, timeout: timeout,
            what: "readValue(for: \(descriptor.uuid.uuidString))"
        ) { _ in
            descriptor.value ?? Data()
        } issue: {
            readValue(for: descriptor)
        }
    }

    /// Writes a characteristic value.
    ///
    /// `.withResponse` returns when the peripheral has acknowledged the write (`didWriteValueFor`), using
    /// the long-write procedure for values longer than ATT_MTU - 3 (up to 512 bytes).
    ///
    /// `.withoutResponse` is flow-controlled: it queues the Write Command when the link has room and returns;
    /// when the link's queue is full (`canSendWriteWithoutResponse` is false) the delegate-style write is
    /// refused, and this waits for `peripheralIsReady(toSendWriteWithoutResponse:)` and tries again, so a loop
    /// of these writes sends every chunk, in order, as fast as the link allows. Returning means the command
    /// is queued, not that the peripheral received it (no write without response is acknowledged). Several
    /// tasks writing without response at once are each delivered, in no promised order among them.
    /// - Throws: for `.withoutResponse` also `.invalidParameters` when `data` is longer than
    ///   `maximumWriteValueLength(for: .withoutResponse)`, and `.notConnected`.
    public func writeValue(
        _ data: Data, for characteristic: Characteristic, type: CharacteristicWriteType,
        timeout: Duration?
    ) async throws {
        try check(owns(characteristic), characteristic)
        switch type {
        case .withResponse:
            try await perform(
                .writeCharacteristic, on: characteristic, timeout: timeout,
                what: "writeValue(for: \(characteristic.uuid.uuidString))"
            ) { _ in
                ()
            } issue: {
                writeValue(data, for: characteristic, type: .withResponse)
            }
        case .withoutResponse:
            try await writeWithoutResponse(data, for: characteristic, timeout: timeout)
        }
    }

    /// Writes a descriptor value and returns when the peripheral acknowledged it (`didWriteValueFor`
    /// descriptor). The Client Characteristic Configuration descriptor is refused (`.operationNotSupported`):
    /// use `setNotifyValue(_:for:timeout:)` or `notifications(for:)`.
    public func writeValue(_ data: Data, for descriptor: Descriptor, timeout: Duration?) async throws {
        try check(owns(descriptor), descriptor)
        try await perform(
            .writeDescriptor, on: descriptor, timeout: timeout,
            what: "writeValue(for: \(descriptor.uuid.uuidString))"
        ) { _ in
            ()
        } issue: {
            writeValue(data, for: descriptor)
        }
    }

    /// Enables or disables notifications (indications when the characteristic only indicates) and returns
    /// once the peripheral accepted it (`didUpdateNotificationStateFor`); `isNotifying` is then updated.
    /// Values arrive through the delegate and through `notifications(for:)` streams.
    public func setNotifyValue(_ enabled: Bool, for characteristic: Characteristic, timeout: Duration?) async throws {
        try check(owns(characteristic), characteristic)
        try await perform(
            .notificationState, on: characteristic, timeout: timeout,
            what: "setNotifyValue(for: \(characteristic.uuid.uuidString))"
        ) { _ in
            ()
        } issue: {
            setNotifyValue(enabled, for: characteristic)
        }
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
        let observer = asyncObserver
        return AsyncThrowingStream { continuation in
            let id = observer.nextID()
            continuation.onTermination = { [weak self] _ in
                guard observer.removeNotifications(id, for: characteristic), let self, self.state == .connected else {
                    return
                }
                _ = try? self.issue(Void.self, .notificationState, on: characteristic) { _ in
                    ()
                } issue: {
                    self.setNotifyValue(false, for: characteristic)
                }
            }
            observer.addNotifications(id, continuation, for: characteristic)
            do {
                try check(owns(characteristic), characteristic)
                let subscribed = try issue(Void.self, .notificationState, on: characteristic) { _ in
                    ()
                } issue: {
                    setNotifyValue(true, for: characteristic)
                }
                Task {
                    do { try await subscribed.value() } catch { continuation.finish(throwing: error) }
                }
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }

    /// Reads the link's RSSI (dBm). Completes on `peripheral(_:didReadRSSI:error:)`.
    public func readRSSI(timeout: Duration?) async throws -> Int {
        try await perform(.rssi, on: nil, timeout: timeout, what: "readRSSI") { rssi in
            rssi
        } issue: {
            readRSSI()
        }
    }

    // MARK: Internals

    /// Issues one request and waits for the completion event queued for it.
    private func perform<T: Sendable>(
        _ kind: CompletionQueues.Kind, on object: AnyObject?, timeout: Duration?, what: String,
        result: @escaping @Sendable (Int) -> T, issue request: () -> Void
    ) async throws -> T {
        try Task.checkCancellation()
        let waiter = try issue(T.self, kind, on: object, result: result, issue: request)
        if let manager { waiter.arm(timeout: timeout, system: manager.system, queue: manager.queue, what: what) }
        return try await waiter.value()
    }

    /// Queues a completion entry for `kind` on `object` and issues the request, atomically with respect to
    /// other async requests; returns the waiter the completion event will finish with `result` (given the
    /// event's number: the RSSI for `didReadRSSI`) or with the event's error.
    private func issue<T: Sendable>(
        _ type: T.Type, _ kind: CompletionQueues.Kind, on object: AnyObject?,
        result: @escaping @Sendable (Int) -> T, issue request: () -> Void
    ) throws -> Waiter<T> {
        guard manager != nil else {
            throw BluetoothError(.invalidParameters, "the peripheral's central manager no longer exists")
        }
        let observer = asyncObserver
        let waiter = Waiter<T>()
        let entry = CompletionQueues.Entry(waiter: waiter) { error, number in
            if let error { waiter.fail(error) } else { waiter.resume(.success(result(number))) }
        }
        observer.issueLock.withLock { _ in
            observer.enqueue(entry, kind: kind, object: object)
            request()
        }
        return waiter
    }

    /// Flow-controlled write without response: write; if refused, wait for "ready" and write again.
    private func writeWithoutResponse(_ data: Data, for characteristic: Characteristic, timeout: Duration?) async throws
    {
        guard let manager else {
            throw BluetoothError(.invalidParameters, "the peripheral's central manager no longer exists")
        }
        let observer = asyncObserver
        let deadline = timeout.map { manager.system.now + $0 }
        while true {
            try Task.checkCancellation()
            guard state == .connected else { throw BluetoothError(.notConnected, "the peripheral is not connected") }
            let limit = maximumWriteValueLength(for: .withoutResponse)
            guard data.count <= limit else {
                throw BluetoothError(
                    .invalidParameters,
                    "a write without response carries at most \(limit) bytes here; this one has \(data.count)")
            }
            // Registered before writing, so a "ready" that follows the refusal at once is not missed.
            let ready = Waiter<Void>()
            observer.addReadyWaiter(ready)
            let refused = observer.writeCommandLock.withLock { _ -> Bool in
                let before = locked.withLock { $0.writeWithoutResponseRefusals }
                writeValue(data, for: characteristic, type: .withoutResponse)
                return locked.withLock { $0.writeWithoutResponseRefusals } != before
            }
            if !refused {
                observer.removeReadyWaiter(ready)
                return
            }
            if let deadline {
                ready.arm(
                    timeout: deadline - manager.system.now, system: manager.system, queue: manager.queue,
                    what: "writeValue(for: \(characteristic.uuid.uuidString), type: .withoutResponse)")
            }
            try await ready.value()
        }
    }

    /// Whether `attribute` is a discovered attribute of this peripheral.
    private func owns(_ characteristic: Characteristic) -> Bool {
        characteristic.state.withLock { $0.remote } != nil && characteristic.service?.peripheral === self
    }

    private func owns(_ descriptor: Descriptor) -> Bool {
        guard descriptor.state.withLock({ $0.remote }) != nil, let c = descriptor.characteristic else { return false }
        return owns(c)
    }

    private func check(_ condition: Bool, _ attribute: Attribute) throws {
        guard condition else {
            throw BluetoothError(.invalidParameters, "\(attribute) is not a discovered attribute of \(self)")
        }
    }
}
