import Foundation
import Synchronization

/// The async layer's observer of one `PeripheralManager`: it finishes the waiters of flow-controlled
/// `updateValue` (`waitUntilPoweredOn`'s are kept with the manager's state), and feeds the `requests` and `subscriptions`
/// streams. Its methods run on the manager's queue; the state is a `Mutex`, never held while a waiter is
/// resumed or a stream is fed.
final class PeripheralManagerAsyncObserver: PeripheralManagerObserver {
    struct State {
        /// Flow-controlled updates waiting for `peripheralManagerIsReady(toUpdateSubscribers:)`.
        var ready = WaiterSet<Void>()
        var requests: [UInt64: AsyncStream<PeripheralManagerRequest>.Continuation] = [:]
        var subscriptions: [UInt64: AsyncStream<SubscriptionEvent>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// Set when the manager's app was terminated: every later wait fails and every later stream ends at once.
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

    /// The manager's app was terminated: every wait ends with `error`, every stream finishes.
    func terminate(_ error: BluetoothError) {
        let (waiters, requests, subscriptions) = state.withLock { s in
            s.terminated = error
            defer {
                s.requests.removeAll()
                s.subscriptions.removeAll()
            }
            return (s.ready.takeAll(), Array(s.requests.values), Array(s.subscriptions.values))
        }
        for w in waiters { w.fail(error) }
        for c in requests { c.finish() }
        for c in subscriptions { c.finish() }
    }

    // MARK: Events

    func consume(_ event: PeripheralManagerEvent, from manager: PeripheralManager) {
        switch event {
        case .stateUpdated: stateUpdated(manager)
        case .subscribed(let central, let characteristic): publish(.subscribed(central, characteristic))
        case .unsubscribed(let central, let characteristic): publish(.unsubscribed(central, characteristic))
        case .read(let request): publish(.read(request))
        case .write(let requests): publish(.write(requests))
        case .readyToUpdateSubscribers:
            for w in state.withLock({ $0.ready.takeAll() }) { w.resume(.success(())) }
        case .willRestore, .startedAdvertising, .added, .connected, .disconnected, .mtuUpdated, .securityUpdated:
            break
        }
    }

    private func stateUpdated(_ peripheral: PeripheralManager) {
        let now = peripheral.state
        switch now {
        case .poweredOn, .unknown, .resetting:
            break
        case .poweredOff, .unsupported, .unauthorized:
            let error = BluetoothError.notPoweredOn(now, system: peripheral.system)
            let waiters = state.withLock { $0.ready.takeAll() }
            for w in waiters { w.fail(error) }
        }
    }

    private func publish(_ event: SubscriptionEvent) {
        let streams = state.withLock { $0.subscriptions.sorted { $0.key < $1.key }.map(\.value) }
        for s in streams { s.yield(event) }
    }

    private func publish(_ request: PeripheralManagerRequest) {
        let streams = state.withLock { $0.requests.sorted { $0.key < $1.key }.map(\.value) }
        for s in streams { s.yield(request) }
    }

    // MARK: Registration

    func addReadyWaiter(_ waiter: Waiter<Void>) {
        let terminated = state.withLock { s -> BluetoothError? in
            if let error = s.terminated { return error }
            s.ready.insert(waiter)
            return nil
        }
        if let terminated { waiter.fail(terminated) }
    }
    func removeReadyWaiter(_ waiter: Waiter<Void>) { state.withLock { $0.ready.remove(waiter) } }

    func addRequests(_ id: UInt64, _ c: AsyncStream<PeripheralManagerRequest>.Continuation) {
        let terminated = state.withLock { s -> Bool in
            if s.terminated != nil { return true }
            s.requests[id] = c
            return false
        }
        if terminated { c.finish() }
    }

    func removeRequests(_ id: UInt64) { _ = state.withLock { $0.requests.removeValue(forKey: id) } }

    func addSubscriptions(_ id: UInt64, _ c: AsyncStream<SubscriptionEvent>.Continuation) {
        let terminated = state.withLock { s -> Bool in
            if s.terminated != nil { return true }
            s.subscriptions[id] = c
            return false
        }
        if terminated { c.finish() }
    }

    func removeSubscriptions(_ id: UInt64) { _ = state.withLock { $0.subscriptions.removeValue(forKey: id) } }
}

extension PeripheralManager {
    /// The async layer's observer of this manager, attached on first use.
    var asyncObserver: PeripheralManagerAsyncObserver {
        observers.attachment(PeripheralManagerAsyncObserver.self) { PeripheralManagerAsyncObserver() }
    }
}
