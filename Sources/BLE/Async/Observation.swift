import Synchronization

// Internal observation: besides its one public delegate, every manager and peripheral keeps a list of internal
// observers that receive the same events, on the manager's queue, in the same delivery as the delegate. The
// async layer is such an observer; the delegate keeps working unchanged beside it.
//
// How it is wired: each object's `deliver` hands its event closure a *delivery target* instead of the bare
// delegate. With no observers registered the target is the delegate itself (nothing changes); otherwise it
// is a fan-out object that conforms to the delegate protocol and forwards every call to the delegate first,
// then to each observer in registration order. The event closure runs once, so the state updates it makes
// before calling the delegate (a characteristic's value, merged services) happen once and every receiver
// sees them.

/// A list of internal observers, safe to change from any thread; read on the manager's queue at each delivery.
final class ObserverList<Observer: Sendable>: Sendable {
    /// The observers and their tokens, side by side: `snapshot` hands out the observers' array itself (shared,
    /// copied on write), where a list of pairs had to be mapped into a new array for every value delivered.
    private struct Entries {
        var ids: [UInt64] = []
        var observers: [Observer] = []
    }
    private let entries = Mutex(Entries())
    private let counter = Mutex<UInt64>(0)

    /// The observers, in registration order.
    var snapshot: [Observer] { entries.withLock { $0.observers } }

    var isEmpty: Bool { entries.withLock { $0.observers.isEmpty } }

    /// Registers `observer`; the returned token removes it.
    @discardableResult
    func add(_ observer: Observer) -> UInt64 {
        let id = counter.withLock { c -> UInt64 in
            c += 1
            return c
        }
        entries.withLock {
            $0.ids.append(id)
            $0.observers.append(observer)
        }
        return id
    }

    func remove(_ token: UInt64) {
        entries.withLock { e in
            guard let index = e.ids.firstIndex(of: token) else { return }
            e.ids.remove(at: index)
            e.observers.remove(at: index)
        }
    }

    /// The first registered observer of type `T`, registering the one `make` builds if there is none. The
    /// async layer attaches its observer this way, once per object, on first use.
    func attachment<T>(_ type: T.Type, orAdd make: () -> T) -> T {
        if let found = entries.withLock({ $0.observers.lazy.compactMap { $0 as? T }.first }) { return found }
        let id = counter.withLock { c -> UInt64 in
            c += 1
            return c
        }
        return entries.withLock { list -> T in
            if let found = list.observers.lazy.compactMap({ $0 as? T }).first { return found }
            let made = make()
            // `T` is one of the observer types, so the cast succeeds; it is checked to keep the list typed.
            if let observer = made as? Observer {
                list.ids.append(id)
                list.observers.append(observer)
            }
            return made
        }
    }
}

// MARK: Observer protocols

/// An internal observer of a `CentralManager`: the delegate's events, on the manager's queue.
protocol CentralManagerObserver: CentralManagerDelegate, Sendable {}

/// An internal observer of a `Peripheral`. It receives `didUpdateValueFor characteristic` through the
/// variant that says whether the value arrived in a notification or an indication (`update`), or completes a
/// read (`update` nil); the plain delegate method is not called on observers.
protocol PeripheralObserver: PeripheralDelegate, Sendable {
    func peripheral(
        _ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?,
        update: ValueUpdate.Kind?)
}

/// An internal observer of a `PeripheralManager`: the delegate's events, on the manager's queue.
protocol PeripheralManagerObserver: PeripheralManagerDelegate, Sendable {}

// MARK: Delivery targets

extension CentralManager {
    /// What `deliver` hands its event closure: the delegate alone, or a fan-out to it and the observers.
    var deliveryTarget: (any CentralManagerDelegate)? {
        let observers = observers.snapshot
        return observers.isEmpty ? delegate : CentralManagerFanOut(delegate: delegate, observers: observers)
    }
}

extension Peripheral {
    /// What `deliver` hands its event closure: the delegate alone, or a fan-out to it and the observers.
    func deliveryTarget(update: ValueUpdate.Kind?) -> (any PeripheralDelegate)? {
        let observers = observers.snapshot
        return observers.isEmpty
            ? delegate
            : PeripheralFanOut(delegate: delegate, observers: observers, update: update)
    }
}

extension PeripheralManager {
    /// What `deliver` hands its event closure: the delegate alone, or a fan-out to it and the observers.
    var deliveryTarget: (any PeripheralManagerDelegate)? {
        let observers = observers.snapshot
        return observers.isEmpty ? delegate : PeripheralManagerFanOut(delegate: delegate, observers: observers)
    }
}

/// Forwards one delivered central-manager event to the delegate, then to each observer. Built per delivery,
/// on the manager's queue, and dropped after it.
final class CentralManagerFanOut: CentralManagerDelegate {
    let delegate: (any CentralManagerDelegate)?
    let observers: [any CentralManagerObserver]

    init(delegate: (any CentralManagerDelegate)?, observers: [any CentralManagerObserver]) {
        self.delegate = delegate
        self.observers = observers
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        delegate?.centralManagerDidUpdateState(central)
        for o in observers { o.centralManagerDidUpdateState(central) }
    }

    func centralManager(_ central: CentralManager, willRestoreState state: CentralManager.RestoredState) {
        delegate?.centralManager(central, willRestoreState: state)
        for o in observers { o.centralManager(central, willRestoreState: state) }
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int
    ) {
        delegate?.announceDiscovery(central, peripheral, advertisementData, rssi)
        for o in observers {
            o.centralManager(central, didDiscover: peripheral, advertisementData: advertisementData, rssi: rssi)
        }
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        delegate?.centralManager(central, didConnect: peripheral)
        for o in observers { o.centralManager(central, didConnect: peripheral) }
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        delegate?.centralManager(central, didFailToConnect: peripheral, error: error)
        for o in observers { o.centralManager(central, didFailToConnect: peripheral, error: error) }
    }

    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        delegate?.centralManager(central, didDisconnectPeripheral: peripheral, error: error)
        for o in observers { o.centralManager(central, didDisconnectPeripheral: peripheral, error: error) }
    }

    func centralManager(
        _ central: CentralManager, connectionEventDidOccur event: ConnectionEvent, for peripheral: Peripheral
    ) {
        delegate?.centralManager(central, connectionEventDidOccur: event, for: peripheral)
        for o in observers { o.centralManager(central, connectionEventDidOccur: event, for: peripheral) }
    }
}

/// Forwards one delivered peripheral event to the delegate, then to each observer.
final class PeripheralFanOut: PeripheralDelegate {
    let delegate: (any PeripheralDelegate)?
    let observers: [any PeripheralObserver]
    /// How the value of a `didUpdateValueFor characteristic` came (nil: it completes a read).
    let update: ValueUpdate.Kind?

    init(delegate: (any PeripheralDelegate)?, observers: [any PeripheralObserver], update: ValueUpdate.Kind?) {
        self.delegate = delegate
        self.observers = observers
        self.update = update
    }

    func peripheralDidUpdateName(_ peripheral: Peripheral) {
        delegate?.peripheralDidUpdateName(peripheral)
        for o in observers { o.peripheralDidUpdateName(peripheral) }
    }

    func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {
        delegate?.peripheral(peripheral, didModifyServices: invalidatedServices)
        for o in observers { o.peripheral(peripheral, didModifyServices: invalidatedServices) }
    }

    // swift-format-ignore: AlwaysUseLowerCamelCase
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {
        delegate?.announceRSSI(peripheral, RSSI, error)
        for o in observers { o.peripheral(peripheral, didReadRSSI: RSSI, error: error) }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        delegate?.peripheral(peripheral, didDiscoverServices: error)
        for o in observers { o.peripheral(peripheral, didDiscoverServices: error) }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?) {
        delegate?.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error)
        for o in observers { o.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error) }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        delegate?.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
        for o in observers { o.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error) }
    }

    func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?
    ) {
        delegate?.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error)
        for o in observers { o.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error) }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        delegate?.peripheral(peripheral, didUpdateValueFor: characteristic, error: error)
        for o in observers {
            o.peripheral(peripheral, didUpdateValueFor: characteristic, error: error, update: update)
        }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?) {
        delegate?.peripheral(peripheral, didUpdateValueFor: descriptor, error: error)
        for o in observers { o.peripheral(peripheral, didUpdateValueFor: descriptor, error: error) }
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        delegate?.peripheral(peripheral, didWriteValueFor: characteristic, error: error)
        for o in observers { o.peripheral(peripheral, didWriteValueFor: characteristic, error: error) }
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?) {
        delegate?.peripheral(peripheral, didWriteValueFor: descriptor, error: error)
        for o in observers { o.peripheral(peripheral, didWriteValueFor: descriptor, error: error) }
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        delegate?.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
        for o in observers { o.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error) }
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        delegate?.peripheralIsReady(toSendWriteWithoutResponse: peripheral)
        for o in observers { o.peripheralIsReady(toSendWriteWithoutResponse: peripheral) }
    }
}

/// Forwards one delivered peripheral-manager event to the delegate, then to each observer.
final class PeripheralManagerFanOut: PeripheralManagerDelegate {
    let delegate: (any PeripheralManagerDelegate)?
    let observers: [any PeripheralManagerObserver]

    init(delegate: (any PeripheralManagerDelegate)?, observers: [any PeripheralManagerObserver]) {
        self.delegate = delegate
        self.observers = observers
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        delegate?.peripheralManagerDidUpdateState(peripheral)
        for o in observers { o.peripheralManagerDidUpdateState(peripheral) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, willRestoreState state: PeripheralManager.RestoredState) {
        delegate?.peripheralManager(peripheral, willRestoreState: state)
        for o in observers { o.peripheralManager(peripheral, willRestoreState: state) }
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        delegate?.peripheralManagerDidStartAdvertising(peripheral, error: error)
        for o in observers { o.peripheralManagerDidStartAdvertising(peripheral, error: error) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
        delegate?.peripheralManager(peripheral, didAdd: service, error: error)
        for o in observers { o.peripheralManager(peripheral, didAdd: service, error: error) }
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        delegate?.peripheralManager(peripheral, central: central, didSubscribeTo: characteristic)
        for o in observers { o.peripheralManager(peripheral, central: central, didSubscribeTo: characteristic) }
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        delegate?.peripheralManager(peripheral, central: central, didUnsubscribeFrom: characteristic)
        for o in observers { o.peripheralManager(peripheral, central: central, didUnsubscribeFrom: characteristic) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        delegate?.peripheralManager(peripheral, didReceiveRead: request)
        for o in observers { o.peripheralManager(peripheral, didReceiveRead: request) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        delegate?.peripheralManager(peripheral, didReceiveWrite: requests)
        for o in observers { o.peripheralManager(peripheral, didReceiveWrite: requests) }
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        delegate?.peripheralManagerIsReady(toUpdateSubscribers: peripheral)
        for o in observers { o.peripheralManagerIsReady(toUpdateSubscribers: peripheral) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didConnect central: Central) {
        delegate?.peripheralManager(peripheral, didConnect: central)
        for o in observers { o.peripheralManager(peripheral, didConnect: central) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didDisconnect central: Central, error: (any Error)?) {
        delegate?.peripheralManager(peripheral, didDisconnect: central, error: error)
        for o in observers { o.peripheralManager(peripheral, didDisconnect: central, error: error) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, central: Central, didUpdateMTU mtu: Int) {
        delegate?.peripheralManager(peripheral, central: central, didUpdateMTU: mtu)
        for o in observers { o.peripheralManager(peripheral, central: central, didUpdateMTU: mtu) }
    }
}
