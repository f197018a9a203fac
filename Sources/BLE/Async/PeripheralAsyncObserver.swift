import Foundation
import Synchronization

/// The async layer's observer of one `Peripheral`: it matches completion events to the async operations
/// waiting for them, feeds notification streams, and wakes flow-controlled writes.
///
/// ## Matching completions to requests
/// CoreBluetooth reports a completion per object, not per request, so the observer keeps a FIFO of pending
/// operations per (event kind, object) — see `CompletionQueues`. Requests are issued under `issueLock`, right
/// after their entry is queued, so the queue order is the request order, and the stack completes requests on
/// one object in request order.
///
/// ## Reads and notifications
/// A read completion and a notification both arrive as `didUpdateValueFor` a characteristic. The peripheral's
/// `deliver` knows which one it is delivering (notifications come from `handleValueUpdate`, everything else is
/// a read's completion) and passes the flag to observers. A notification therefore never completes a read: it
/// is yielded to the characteristic's notification streams, and a read completion is not yielded there.
///
/// Every method runs on the manager's queue. The state is a `Mutex`, never held while a waiter is resumed or
/// a stream is fed or finished.
final class PeripheralAsyncObserver: PeripheralObserver {
    typealias Notifications = AsyncThrowingStream<Data, any Error>.Continuation

    struct State {
        var completions = CompletionQueues()
        /// Flow-controlled writes waiting for `peripheralIsReady(toSendWriteWithoutResponse:)`.
        var ready = WaiterSet<Void>()
        /// Notification streams per characteristic.
        var notifications: [ObjectIdentifier: [UInt64: Notifications]] = [:]
        var nextID: UInt64 = 0
    }

    let state = Mutex(State())
    /// Held while an operation's completion entry is queued and its request issued, so that the order of
    /// entries is the order of requests even when several tasks issue at once.
    let issueLock = Mutex(())
    /// Held around one write without response and the refusal check after it.
    let writeCommandLock = Mutex(())

    init() {}

    func nextID() -> UInt64 {
        state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
    }

    // MARK: Completions

    private func complete(_ kind: CompletionQueues.Kind, _ object: AnyObject?, error: (any Error)?, number: Int = 0) {
        let key = CompletionQueues.Key(kind: kind, object: object.map(ObjectIdentifier.init))
        let entry = state.withLock { $0.completions.popFirst(key) }
        entry?.finish(error, number)
    }

    /// Queues a completion entry for a request about to be issued.
    func enqueue(_ entry: CompletionQueues.Entry, kind: CompletionQueues.Kind, object: AnyObject?) {
        let key = CompletionQueues.Key(kind: kind, object: object.map(ObjectIdentifier.init))
        state.withLock { $0.completions.append(entry, for: key) }
    }

    /// Pending operations of `kind` on `object` (tests use it to know requests were issued).
    func pendingCount(_ kind: CompletionQueues.Kind, _ object: AnyObject?) -> Int {
        let key = CompletionQueues.Key(kind: kind, object: object.map(ObjectIdentifier.init))
        return state.withLock { $0.completions.count(key) }
    }

    // swift-format-ignore: AlwaysUseLowerCamelCase
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {
        complete(.rssi, nil, error: error, number: RSSI)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        complete(.services, nil, error: error)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?) {
        complete(.includedServices, service, error: error)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        complete(.characteristics, service, error: error)
    }

    func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?
    ) {
        complete(.descriptors, characteristic, error: error)
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?,
        isNotification: Bool
    ) {
        guard isNotification else {
            complete(.readCharacteristic, characteristic, error: error)
            return
        }
        guard error == nil, let value = characteristic.value else { return }
        let streams = state.withLock {
            Array(($0.notifications[ObjectIdentifier(characteristic)] ?? [:]).sorted { $0.key < $1.key }.map(\.value))
        }
        for s in streams { s.yield(value) }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?) {
        complete(.readDescriptor, descriptor, error: error)
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        complete(.writeCharacteristic, characteristic, error: error)
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?) {
        complete(.writeDescriptor, descriptor, error: error)
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        complete(.notificationState, characteristic, error: error)
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        let waiters = state.withLock { $0.ready.takeAll() }
        for w in waiters { w.resume(.success(())) }
    }

    // MARK: Write without response

    func addReadyWaiter(_ waiter: Waiter<Void>) { state.withLock { $0.ready.insert(waiter) } }
    func removeReadyWaiter(_ waiter: Waiter<Void>) { state.withLock { $0.ready.remove(waiter) } }

    // MARK: Notification streams

    func addNotifications(_ id: UInt64, _ continuation: Notifications, for characteristic: Characteristic) {
        state.withLock { $0.notifications[ObjectIdentifier(characteristic), default: [:]][id] = continuation }
    }

    /// Removes a notification stream; true when it was the characteristic's last one.
    func removeNotifications(_ id: UInt64, for characteristic: Characteristic) -> Bool {
        state.withLock { s in
            let key = ObjectIdentifier(characteristic)
            guard s.notifications[key]?.removeValue(forKey: id) != nil else { return false }
            if s.notifications[key]?.isEmpty == true {
                s.notifications[key] = nil
                return true
            }
            return false
        }
    }

    // MARK: Link loss

    /// The link went down (`didDisconnectPeripheral`, relayed by the central's observer): whatever is still
    /// pending fails with `error`, flow-controlled writes stop waiting, notification streams finish with it.
    /// The stack has already failed every outstanding request through its own completion event, so what is
    /// left here are entries whose waiters have given up, or requests issued as the link went down.
    func linkLost(_ error: BluetoothError) {
        let (entries, ready, streams) = state.withLock { s in
            defer { s.notifications.removeAll() }
            return (s.completions.removeAll(), s.ready.takeAll(), s.notifications.values.flatMap { $0.values })
        }
        for e in entries { e.waiter.fail(error) }
        for w in ready { w.fail(error) }
        for c in streams { c.finish(throwing: error) }
    }
}

extension Peripheral {
    /// The async layer's observer of this peripheral, attached on first use (with the manager's, which
    /// relays link losses to it).
    var asyncObserver: PeripheralAsyncObserver {
        _ = manager?.asyncObserver
        return observers.attachment(PeripheralAsyncObserver.self) { PeripheralAsyncObserver() }
    }

    /// The async observer if the async layer was used on this peripheral.
    var existingAsyncObserver: PeripheralAsyncObserver? {
        observers.snapshot.lazy.compactMap { $0 as? PeripheralAsyncObserver }.first
    }
}
