import Foundation
import Synchronization

/// The async layer's observer of one `PeripheralManager`: it finishes the waiters of `waitUntilPoweredOn` and
/// flow-controlled `updateValue`, and feeds the `requests` and `subscriptions`
/// streams. Its methods run on the manager's queue; the state is a `Mutex`, never held while a waiter is
/// resumed or a stream is fed.
final class PeripheralManagerAsyncObserver: PeripheralManagerObserver {
    struct State {
        var poweredOn = WaiterSet<Void>()
        /// Flow-controlled updates waiting for `peripheralManagerIsReady(toUpdateSubscribers:)`.
        var ready = WaiterSet<Void>()
        var requests: [UInt64: AsyncStream<PeripheralManagerRequest>.Continuation] = [:]
        var subscriptions: [UInt64: AsyncStream<SubscriptionEvent>.Continuation] = [:]
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

    /// The manager's app was terminated: every wait ends with `error`, every stream finishes.
    func terminate(_ error: BluetoothError) {
        let (waiters, requests, subscriptions) = state.withLock { s in
            defer {
                s.requests.removeAll()
                s.subscriptions.removeAll()
            }
            return (s.poweredOn.takeAll() + s.ready.takeAll(), Array(s.requests.values), Array(s.subscriptions.values))
        }
        for w in waiters { w.fail(error) }
        for c in requests { c.finish() }
        for c in subscriptions { c.finish() }
    }

    // MARK: Events

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        let now = peripheral.state
        switch now {
        case .poweredOn:
            for w in state.withLock({ $0.poweredOn.takeAll() }) { w.resume(.success(())) }
        case .unknown, .resetting:
            break
        case .poweredOff, .unsupported, .unauthorized:
            let error = BluetoothError.notPoweredOn(now, system: peripheral.system)
            let waiters = state.withLock { $0.poweredOn.takeAll() + $0.ready.takeAll() }
            for w in waiters { w.fail(error) }
        }
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        publish(.subscribed(central, characteristic))
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        publish(.unsubscribed(central, characteristic))
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        publish(.read(request))
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        publish(.write(requests))
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        for w in state.withLock({ $0.ready.takeAll() }) { w.resume(.success(())) }
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

    func addPoweredOnWaiter(_ waiter: Waiter<Void>) { state.withLock { $0.poweredOn.insert(waiter) } }
    func addReadyWaiter(_ waiter: Waiter<Void>) { state.withLock { $0.ready.insert(waiter) } }
    func removeReadyWaiter(_ waiter: Waiter<Void>) { state.withLock { $0.ready.remove(waiter) } }

    func addRequests(_ id: UInt64, _ c: AsyncStream<PeripheralManagerRequest>.Continuation) {
        state.withLock { $0.requests[id] = c }
    }

    func removeRequests(_ id: UInt64) { _ = state.withLock { $0.requests.removeValue(forKey: id) } }

    func addSubscriptions(_ id: UInt64, _ c: AsyncStream<SubscriptionEvent>.Continuation) {
        state.withLock { $0.subscriptions[id] = c }
    }

    func removeSubscriptions(_ id: UInt64) { _ = state.withLock { $0.subscriptions.removeValue(forKey: id) } }
}

extension PeripheralManager {
    /// The async layer's observer of this manager, attached on first use.
    var asyncObserver: PeripheralManagerAsyncObserver {
        observers.attachment(PeripheralManagerAsyncObserver.self) { PeripheralManagerAsyncObserver() }
    }
}
