import Foundation
import Synchronization

/// The async layer's observer of one `Peripheral`: it feeds notification streams and wakes flow-controlled
/// writes. It matches no completions: every async request carries its own reply (see `Reply`).
///
/// A read's new value and a notification both arrive as `didUpdateValueFor` a characteristic. The event
/// (`PeripheralEvent.valueUpdated`) carries which one it is (and whether a notification or an indication), so
/// only notifications and indications reach the streams.
///
/// Every method runs on the manager's queue. The state is a `Mutex`, never held while a waiter is resumed or a
/// stream is fed or finished.
final class PeripheralAsyncObserver: PeripheralObserver {
    typealias Notifications = AsyncThrowingStream<Data, any Error>.Continuation
    typealias Updates = AsyncThrowingStream<ValueUpdate, any Error>.Continuation

    /// A stream of one characteristic's updates: of values (`notifications(for:)`) or of values with how they
    /// came (`valueUpdates(for:)`).
    enum Sink: Sendable {
        case values(Notifications)
        case updates(Updates)

        func yield(_ value: Data, _ kind: ValueUpdate.Kind) {
            switch self {
            case .values(let c): c.yield(value)
            case .updates(let c): c.yield(ValueUpdate(value: value, kind: kind))
            }
        }

        func finish(throwing error: any Error) {
            switch self {
            case .values(let c): c.finish(throwing: error)
            case .updates(let c): c.finish(throwing: error)
            }
        }
    }

    struct State {
        /// Senders waiting for room: called once on the next "ready", or with the error when the link drops.
        var readyCallbacks: [@Sendable ((any Error)?) -> Void] = []
        /// Notification streams per characteristic.
        var notifications: [ObjectIdentifier: [UInt64: Sink]] = [:]
        var nextID: UInt64 = 0
    }

    let state = Mutex(State())

    init() {}

    func nextID() -> UInt64 {
        state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
    }

    func consume(_ event: PeripheralEvent, from peripheral: Peripheral) {
        switch event {
        case .valueUpdated(let characteristic, let error, let update):
            valueUpdated(characteristic, error, update: update)
        case .readyToSendWriteWithoutResponse: readyToSend()
        case .nameUpdated, .servicesModified, .readRSSI, .discoveredServices, .discoveredIncludedServices,
            .discoveredCharacteristics, .discoveredDescriptors, .descriptorValueUpdated, .wroteValue, .wroteDescriptor,
            .notificationStateUpdated:
            break
        }
    }

    /// A notification or an indication reaches the characteristic's streams (a read's completion does not).
    private func valueUpdated(_ characteristic: Characteristic, _ error: BluetoothError?, update: ValueUpdate.Kind?) {
        guard let update, error == nil, let value = characteristic.value else { return }
        // One stream (the usual case) is taken alone: no sorting, and no array made for it.
        var only: Sink?
        var several: [Sink] = []
        state.withLock { s in
            guard let streams = s.notifications[ObjectIdentifier(characteristic)] else { return }
            if streams.count == 1 {
                only = streams.first?.value
            } else {
                several = streams.sorted { $0.key < $1.key }.map(\.value)
            }
        }
        if let only { only.yield(value, update) }
        for s in several { s.yield(value, update) }
    }

    private func readyToSend() {
        let callbacks = state.withLock { s in
            defer { s.readyCallbacks = [] }
            return s.readyCallbacks
        }
        for c in callbacks { c(nil) }
    }

    // MARK: Write without response

    /// Calls `body` once, on the manager's queue: on the next "ready to send", or with the error when the link
    /// drops first. `send` waits for room this way; it is the one place writes without response do.
    func whenReady(_ body: @escaping @Sendable ((any Error)?) -> Void) {
        state.withLock { $0.readyCallbacks.append(body) }
    }

    // MARK: Notification streams

    func addNotifications(_ id: UInt64, _ sink: Sink, for characteristic: Characteristic) {
        state.withLock { $0.notifications[ObjectIdentifier(characteristic), default: [:]][id] = sink }
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

    /// The link went down (`didDisconnectPeripheral`, relayed by the central's observer): flow-controlled writes
    /// stop waiting and notification streams finish with `error`. Requests need nothing here: the host has
    /// completed each of them with an error already.
    func linkLost(_ error: BluetoothError) {
        let (streams, callbacks) = state.withLock { s in
            defer {
                s.notifications.removeAll()
                s.readyCallbacks = []
            }
            return (s.notifications.values.flatMap { $0.values }, s.readyCallbacks)
        }
        for c in callbacks { c(error) }
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
