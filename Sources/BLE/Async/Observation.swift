import Synchronization

// One event stream for the delegate and the async layer: what a manager or a peripheral tells is a value (one
// enum per role: `CentralManagerEvent`, `PeripheralEvent`, `PeripheralManagerEvent`), made on the manager's queue
// in a delivery after the objects changed, and told once by `tell(_:)`: to the delegate through the method that
// names it (`send(to:from:)`, the one table of the role's delegate methods: the compiler checks that every event
// has its call), then to each internal observer (the async layer) in registration order through
// `consume(_:from:)`. Nothing calls a delegate method but `send(to:from:)`, so the observers hear all the
// delegate does. The delegate keeps working unchanged beside the observers.

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

// MARK: Events

/// One event a central manager tells (`CBCentralManagerDelegate`'s calls, as values).
enum CentralManagerEvent: Sendable {
    case stateUpdated
    case willRestore(CentralManager.RestoredState)
    case discovered(Peripheral, AdvertisementData, rssi: Int)
    case connected(Peripheral)
    case failedToConnect(Peripheral, BluetoothError)
    /// A link ended (nil: the application cancelled it); the peripheral's `disconnection` says when, and whether
    /// the system reconnects.
    case disconnected(Peripheral, BluetoothError?)
    case connectionEvent(ConnectionEvent, Peripheral)

    /// Calls the delegate's method for this event.
    func send(to delegate: any CentralManagerDelegate, from manager: CentralManager) {
        switch self {
        case .stateUpdated: delegate.centralManagerDidUpdateState(manager)
        case .willRestore(let state): delegate.centralManager(manager, willRestoreState: state)
        case .discovered(let peripheral, let advertisement, let rssi):
            delegate.announceDiscovery(manager, peripheral, advertisement, rssi)
        case .connected(let peripheral): delegate.centralManager(manager, didConnect: peripheral)
        case .failedToConnect(let peripheral, let error):
            delegate.centralManager(manager, didFailToConnect: peripheral, error: error)
        case .disconnected(let peripheral, let error):
            delegate.centralManager(manager, didDisconnectPeripheral: peripheral, error: error)
        case .connectionEvent(let event, let peripheral):
            delegate.centralManager(manager, connectionEventDidOccur: event, for: peripheral)
        }
    }
}

/// One event a peripheral tells (`CBPeripheralDelegate`'s calls, as values).
enum PeripheralEvent: Sendable {
    case nameUpdated
    case servicesModified([Service])
    case readRSSI(Int, BluetoothError?)
    case discoveredServices(BluetoothError?)
    case discoveredIncludedServices(Service, BluetoothError?)
    case discoveredCharacteristics(Service, BluetoothError?)
    case discoveredDescriptors(Characteristic, BluetoothError?)
    /// A characteristic's value: the completion of a read (`update` nil), or what a notification or an
    /// indication brought (the delegate cannot tell them apart, as in CoreBluetooth; the observers can).
    case valueUpdated(Characteristic, BluetoothError?, update: ValueUpdate.Kind?)
    case descriptorValueUpdated(Descriptor, BluetoothError?)
    case wroteValue(Characteristic, BluetoothError?)
    case wroteDescriptor(Descriptor, BluetoothError?)
    case notificationStateUpdated(Characteristic, BluetoothError?)
    case readyToSendWriteWithoutResponse

    /// Calls the delegate's method for this event.
    func send(to delegate: any PeripheralDelegate, from peripheral: Peripheral) {
        switch self {
        case .nameUpdated: delegate.peripheralDidUpdateName(peripheral)
        case .servicesModified(let services): delegate.peripheral(peripheral, didModifyServices: services)
        case .readRSSI(let rssi, let error): delegate.announceRSSI(peripheral, rssi, error)
        case .discoveredServices(let error): delegate.peripheral(peripheral, didDiscoverServices: error)
        case .discoveredIncludedServices(let service, let error):
            delegate.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error)
        case .discoveredCharacteristics(let service, let error):
            delegate.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
        case .discoveredDescriptors(let characteristic, let error):
            delegate.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error)
        case .valueUpdated(let characteristic, let error, _):
            delegate.peripheral(peripheral, didUpdateValueFor: characteristic, error: error)
        case .descriptorValueUpdated(let descriptor, let error):
            delegate.peripheral(peripheral, didUpdateValueFor: descriptor, error: error)
        case .wroteValue(let characteristic, let error):
            delegate.peripheral(peripheral, didWriteValueFor: characteristic, error: error)
        case .wroteDescriptor(let descriptor, let error):
            delegate.peripheral(peripheral, didWriteValueFor: descriptor, error: error)
        case .notificationStateUpdated(let characteristic, let error):
            delegate.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
        case .readyToSendWriteWithoutResponse: delegate.peripheralIsReady(toSendWriteWithoutResponse: peripheral)
        }
    }
}

/// One event a peripheral manager tells (`CBPeripheralManagerDelegate`'s calls and swift-ble's own, as values).
enum PeripheralManagerEvent: Sendable {
    case stateUpdated
    case willRestore(PeripheralManager.RestoredState)
    case startedAdvertising(BluetoothError?)
    case added(Service, BluetoothError?)
    case subscribed(Central, Characteristic)
    case unsubscribed(Central, Characteristic)
    case read(ATTRequest)
    case write([ATTRequest])
    case readyToUpdateSubscribers
    case connected(Central)
    case disconnected(Central, BluetoothError?)
    case mtuUpdated(Central, Int)
    case securityUpdated(Central, CentralSecurityEvent)

    /// Calls the delegate's method for this event.
    func send(to delegate: any PeripheralManagerDelegate, from manager: PeripheralManager) {
        switch self {
        case .stateUpdated: delegate.peripheralManagerDidUpdateState(manager)
        case .willRestore(let state): delegate.peripheralManager(manager, willRestoreState: state)
        case .startedAdvertising(let error): delegate.peripheralManagerDidStartAdvertising(manager, error: error)
        case .added(let service, let error): delegate.peripheralManager(manager, didAdd: service, error: error)
        case .subscribed(let central, let characteristic):
            delegate.peripheralManager(manager, central: central, didSubscribeTo: characteristic)
        case .unsubscribed(let central, let characteristic):
            delegate.peripheralManager(manager, central: central, didUnsubscribeFrom: characteristic)
        case .read(let request): delegate.peripheralManager(manager, didReceiveRead: request)
        case .write(let requests): delegate.peripheralManager(manager, didReceiveWrite: requests)
        case .readyToUpdateSubscribers: delegate.peripheralManagerIsReady(toUpdateSubscribers: manager)
        case .connected(let central): delegate.peripheralManager(manager, didConnect: central)
        case .disconnected(let central, let error):
            delegate.peripheralManager(manager, didDisconnect: central, error: error)
        case .mtuUpdated(let central, let mtu): delegate.peripheralManager(manager, central: central, didUpdateMTU: mtu)
        case .securityUpdated(let central, let event):
            delegate.peripheralManager(manager, central: central, didUpdateSecurity: event)
        }
    }
}

// MARK: Observer protocols

/// An internal observer of a `CentralManager`: its events, on the manager's queue, after the delegate's call.
protocol CentralManagerObserver: Sendable {
    func consume(_ event: CentralManagerEvent, from manager: CentralManager)
}

/// An internal observer of a `Peripheral`: its events, on the manager's queue, after the delegate's call.
protocol PeripheralObserver: Sendable {
    func consume(_ event: PeripheralEvent, from peripheral: Peripheral)
}

/// An internal observer of a `PeripheralManager`: its events, on the manager's queue, after the delegate's call.
protocol PeripheralManagerObserver: Sendable {
    func consume(_ event: PeripheralManagerEvent, from manager: PeripheralManager)
}

// MARK: Telling

extension CentralManager {
    /// Tells `event` to the delegate, then to each observer; on the manager's queue, in a delivery.
    func tell(_ event: CentralManagerEvent) {
        // The observers as the event comes: one attached by the delegate's own call (a stream it opens there)
        // does not also hear the event the delegate is handling.
        let observers = observers.snapshot
        if let delegate { event.send(to: delegate, from: self) }
        for o in observers { o.consume(event, from: self) }
    }

    /// Tells `event` to the observers only (a drop below `.poweredOn`, where the delegate hears no disconnection
    /// per peripheral, but the async layer's streams must end).
    func tellObservers(_ event: CentralManagerEvent) {
        for o in observers.snapshot { o.consume(event, from: self) }
    }
}

extension Peripheral {
    /// Tells `event` to the delegate, then to each observer; on the manager's queue, in a delivery.
    func tell(_ event: PeripheralEvent) {
        let observers = observers.snapshot  // as the event comes (see `CentralManager.tell`)
        if let delegate { event.send(to: delegate, from: self) }
        for o in observers { o.consume(event, from: self) }
    }
}

extension PeripheralManager {
    /// Tells `event` to the delegate, then to each observer; on the manager's queue, in a delivery.
    func tell(_ event: PeripheralManagerEvent) {
        let observers = observers.snapshot  // as the event comes (see `CentralManager.tell`)
        if let delegate { event.send(to: delegate, from: self) }
        for o in observers { o.consume(event, from: self) }
    }
}
