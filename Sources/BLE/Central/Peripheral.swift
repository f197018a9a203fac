import BLEATT
import BLECore
import BLEGATT
import BLEHost
import BLESystem
import BLETransport
import Dispatch
import Foundation
import Logging
import Synchronization

/// A remote peripheral seen or connected by a `CentralManager` (`CBPeripheral`).
///
/// Operations report through the delegate on the manager's queue. An operation asked for while the
/// peripheral is not connected reports at once with a `.notConnected` error (CoreBluetooth only logs API
/// misuse; an error the caller can see is more useful). When the link goes down, every pending operation
/// reports with an error before `didDisconnectPeripheral`.
public final class Peripheral: Sendable, Hashable, CustomStringConvertible {
    /// Stable for this peripheral's address on this system (`CBPeer.identifier`).
    public let identifier: UUID
    /// The peripheral's device address and its type. CoreBluetooth hides it; tools (and Linux gateways)
    /// need it, so it is public here. For a bonded peripheral that gave its identity (LE privacy), its identity
    /// address once known, whatever private address it uses on the air.
    public var address: BluetoothAddress { locked.withLock { $0.address } }
    weak let manager: CentralManager?

    struct State {
        var address: BluetoothAddress
        var name: String?
        var state: PeripheralState = .disconnected
        var handle: ConnectionHandle?
        var services: [Service]?
        /// Set when the application cancelled, so the disconnect that follows reports no error.
        var cancelled = false
        /// Value handle -> characteristic, for routing notifications and reads.
        var characteristicsByValue: [AttributeHandle: Characteristic] = [:]
        /// Whether a write without response was refused, or filled the queue, since the last "ready" callback.
        var writeWithoutResponseRefused = false
        /// The last `connect` asked for `enableAutoReconnect`.
        var autoReconnect = false
        /// The alerts the last `connect` asked for.
        var alerts = ConnectionAlerts()
        /// The link was lost and the system is connecting again by itself (the system decides it, and says so with
        /// the loss).
        var reconnecting = false
        /// The latest disconnection, as the five-argument `didDisconnectPeripheral` reports it; set on the
        /// manager's queue just before the delegate hears of it.
        var disconnection = Disconnection(timestamp: 0, isReconnecting: false)
        /// Tasks awaiting the connection under way (the async `connect`): its end finishes them, connected or
        /// not; a reconnection after a loss keeps them waiting.
        var connectWaits: [Waiter<Void>] = []
        /// Tasks awaiting the peripheral's disconnection (the async `disconnect`, which cancels the connection
        /// next): the announcement that leaves it `.disconnected` finishes them (`didDisconnectPeripheral`,
        /// `didFailToConnect`, or a power drop's, which the delegate does not hear).
        var disconnectWaits: [Waiter<Void>] = []
    }

    /// The async waits an announcement ended, taken out under the lock with the state change itself (so a wait
    /// registered at the same moment either saw the new state or is among these) and finished by the caller once
    /// the delegate has heard the change.
    struct EndedWaits {
        var connects: [Waiter<Void>] = []
        /// How the connects end: connected, or the error of the attempt's end.
        var connectResult: Result<Void, BluetoothError> = .success(())
        var disconnects: [Waiter<Void>] = []

        func finish() {
            for w in connects { w.resume(connectResult.mapError { $0 }) }
            for w in disconnects { w.resume(.success(())) }
        }
    }

    /// What a connect request found: whether it started an attempt, joined one under way, or found the
    /// peripheral connected or still disconnecting.
    enum ConnectAsk {
        case started, joined, connected, disconnecting
    }

    /// When a link ended and whether the system reconnects.
    struct Disconnection {
        var timestamp: CFAbsoluteTime
        var isReconnecting: Bool
    }
    let locked: Mutex<State>
    let delegateCell = DelegateCell<any PeripheralDelegate>(nil)

    init(identifier: UUID, address: BluetoothAddress, manager: CentralManager) {
        self.identifier = identifier
        self.locked = Mutex(State(address: address))
        self.manager = manager
    }

    /// The peripheral is now known by `address` (its identity, once it bonded and the host resolves it); only
    /// while disconnected, so a pending connect or a link keeps the address it was made with.
    func readdress(_ address: BluetoothAddress) {
        locked.withLock { s in
            if s.state == .disconnected { s.address = address }
        }
    }

    public var delegate: (any PeripheralDelegate)? {
        get { delegateCell.value }
        set { delegateCell.value = newValue }
    }

    /// The advertised (or GAP) name, when known.
    public var name: String? { locked.withLock { $0.name } }
    /// The connection state.
    public var state: PeripheralState { currentState }
    /// Services discovered so far; nil until the first `discoverServices` completes.
    public var services: [Service]? { locked.withLock { $0.services } }

    /// Whether a write without response can be queued now. When it is false, wait for
    /// `peripheralIsReady(toSendWriteWithoutResponse:)`.
    ///
    /// It turns false as soon as a write is refused or fills the link's queue (the write's own effect), and
    /// true again on the manager's queue, just before `peripheralIsReady(toSendWriteWithoutResponse:)`.
    public var canSendWriteWithoutResponse: Bool {
        locked.withLock { $0.state == .connected && !$0.writeWithoutResponseRefused }
    }

    /// The longest value one write can carry: 512 with response (the long-write procedure splits it),
    /// ATT_MTU - 3 without, but never more than 512, the longest attribute value (Core Spec 5.4, Vol 3, Part F,
    /// 3.2.9): at ATT_MTU 517 that is 512, not 514.
    public func maximumWriteValueLength(for type: CharacteristicWriteType) -> Int {
        switch type {
        case .withResponse: return GATTDatabase.maximumValueLength
        case .withoutResponse:
            guard let handle = locked.withLock({ $0.handle }), let host else { return 20 }
            return min(host.mtu(on: handle) - 3, GATTDatabase.maximumValueLength)
        }
    }

    /// The link's ATT_MTU as the MTU exchange left it (23 when not connected). CoreBluetooth does not show it;
    /// `maximumWriteValueLength(for: .withoutResponse)` is derived from it (minus 3, at most 512). Tools that
    /// report the link, as LightBlue does, read it here.
    public var attMTU: Int {
        guard let handle = locked.withLock({ $0.state == .connected ? $0.handle : nil }), let host else { return 23 }
        return host.mtu(on: handle)
    }

    /// Misuse of the API that CoreBluetooth drops and logs (a write without response too long or not allowed).
    static let logger = Logger(label: "swift-ble.peripheral")

    public var description: String {
        "<Peripheral \(identifier) name=\(name ?? "nil") state=\(state)>"
    }

    public static func == (a: Peripheral, b: Peripheral) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: Internals

    var host: BLEHost.HostDriver? { manager?.system.core.host }
    var handle: ConnectionHandle? { locked.withLock { $0.handle } }
    var currentState: PeripheralState { locked.withLock { $0.state } }
    var isCancelled: Bool { locked.withLock { $0.cancelled } }

    /// Whether the last `connect` asked the system to reconnect after a link loss.
    var wantsAutoReconnect: Bool { locked.withLock { $0.autoReconnect } }
    func setState(_ s: PeripheralState) { locked.withLock { $0.state = s } }
    func setCancelled(_ c: Bool) { locked.withLock { $0.cancelled = c } }

    /// The link is up, on the host's side: events for it reach this peripheral from now on. `state` stays
    /// `.connecting` until `announceConnected(evenIfGone:)`, on the manager's queue.
    func linkUp(handle: ConnectionHandle) {
        locked.withLock {
            $0.handle = handle
            $0.writeWithoutResponseRefused = false
        }
    }

    /// On the manager's queue, just before `didConnect`: the peripheral becomes `.connected`, unless the
    /// application cancelled meanwhile, or the link is already gone (then its disconnection, or failure, follows
    /// instead). With `evenIfGone` (the event was held for a suspended app, which then hears the connection and
    /// its loss in turn) a link gone since does not stop it. Returns whether it did.
    /// Returns the connect waits it finished (for the caller to resume after `didConnect`), or nil when it did not.
    func announceConnected(evenIfGone: Bool = false) -> EndedWaits? {
        locked.withLock { s -> EndedWaits? in
            guard s.state == .connecting, !s.cancelled, s.handle != nil || evenIfGone else { return nil }
            s.state = .connected
            s.reconnecting = false
            defer { s.connectWaits.removeAll() }
            return EndedWaits(connects: s.connectWaits)
        }
    }

    /// Whether the system is connecting again by itself after a link loss.
    var isReconnecting: Bool { locked.withLock { $0.reconnecting } }

    /// The latest disconnection (read by `didDisconnectPeripheral`'s default implementation).
    var disconnection: Disconnection { locked.withLock { $0.disconnection } }

    /// A connect request: whether it asked the system to reconnect after a link loss.
    /// The system alerts a connection asked for (`ConnectOptions.notifyOn*`).
    struct ConnectionAlerts: Sendable, Hashable {
        var onConnection = false
        var onDisconnection = false
        var onNotification = false
    }

    var alerts: ConnectionAlerts { locked.withLock { $0.alerts } }

    /// A connect request: an attempt starts when the peripheral is disconnected; `wait` (an async connect's)
    /// joins the attempt, started or under way, in the same step, and is left to the caller otherwise (connected
    /// already, or still disconnecting).
    func connectRequested(
        autoReconnect: Bool, alerts: ConnectionAlerts = ConnectionAlerts(), wait: Waiter<Void>? = nil
    ) -> ConnectAsk {
        locked.withLock { s in
            switch s.state {
            case .connected: return .connected
            case .disconnecting: return .disconnecting
            case .connecting:
                if let wait { s.connectWaits.append(wait) }
                return .joined
            case .disconnected:
                s.state = .connecting
                s.cancelled = false
                s.alerts = alerts
                s.autoReconnect = autoReconnect
                s.reconnecting = false
                if let wait { s.connectWaits.append(wait) }
                return .started
            }
        }
    }

    /// An async disconnect's wait: kept until the peripheral is `.disconnected` (false, nothing kept, when it
    /// is already).
    func awaitDisconnection(_ wait: Waiter<Void>) -> Bool {
        locked.withLock { s in
            guard s.state != .disconnected else { return false }
            s.disconnectWaits.removeAll { $0.isFinished }
            s.disconnectWaits.append(wait)
            return true
        }
    }

    /// Takes every async wait out (the manager's app ended: nothing will be announced to them).
    func takeWaits() -> [Waiter<Void>] {
        locked.withLock { s in
            defer {
                s.connectWaits.removeAll()
                s.disconnectWaits.removeAll()
            }
            return s.connectWaits + s.disconnectWaits
        }
    }

    /// The link went down and the system connects again by itself (`enableAutoReconnect`).
    func reconnectionStarted() {
        locked.withLock { $0.reconnecting = true }
    }

    /// Auto-reconnection ends (a cancel, a power-off): the next link loss is final.
    func stopReconnecting() {
        locked.withLock { s in
            s.autoReconnect = false
            s.reconnecting = false
        }
    }

    /// On the manager's queue, just before `didDisconnectPeripheral`: when it ended, and whether the system
    /// reconnects (then the peripheral reads `.connecting`, as on iOS, and its characteristics stop
    /// notifying). `error` is the delegate's (nil: the application cancelled); a connect still waiting fails
    /// with it unless the system reconnects. Returns the waits it ended, to finish after the delegate's call.
    func announceDisconnection(at timestamp: CFAbsoluteTime, reconnecting: Bool, error: BluetoothError?)
        -> EndedWaits
    {
        var ended = EndedWaits()
        if reconnecting {
            let characteristics = locked.withLock { s -> [Characteristic] in
                // A disconnect waits on: its cancel, which follows, ends the reconnection and is told.
                if s.state == .connected { s.state = .connecting }
                return Array(s.characteristicsByValue.values)
            }
            for c in characteristics { c.state.withLock { $0.isNotifying = false } }
        } else {
            ended = announceDisconnected(failing: .linkLost(error))
        }
        locked.withLock { $0.disconnection = Disconnection(timestamp: timestamp, isReconnecting: reconnecting) }
        return ended
    }

    /// The link is gone, on the host's side: pending operations were already failed by the host, and no new
    /// request reaches it. `state` changes in `announceDisconnected(failing:)`, on the manager's queue.
    func linkDown() {
        locked.withLock { $0.handle = nil }
    }

    /// On the manager's queue, just before `didDisconnectPeripheral` (or `didFailToConnect`): the peripheral is
    /// `.disconnected` and its characteristics stop notifying. A connect still waiting fails with `error`; a
    /// disconnect waiting is done. Returns those waits, to finish after the delegate's call.
    func announceDisconnected(failing error: BluetoothError) -> EndedWaits {
        let (characteristics, ended) = locked.withLock { s -> ([Characteristic], EndedWaits) in
            s.state = .disconnected
            defer {
                s.connectWaits.removeAll()
                s.disconnectWaits.removeAll()
            }
            let ended = EndedWaits(
                connects: s.connectWaits, connectResult: .failure(error), disconnects: s.disconnectWaits)
            return (Array(s.characteristicsByValue.values), ended)
        }
        for c in characteristics { c.state.withLock { $0.isNotifying = false } }
        return ended
    }

    /// Sets the name heard; true when it replaced another (the caller tells `.nameUpdated`, in a delivery).
    @discardableResult
    func updateName(_ name: String) -> Bool {
        locked.withLock { s -> Bool in
            defer { s.name = name }
            return s.name != nil && s.name != name
        }
    }

    /// Runs `body` on the manager's queue, through the app's delivery; the body changes the objects, then
    /// `tell`s the event. False when it was dropped (the app was terminated).
    @discardableResult
    func deliver(
        repeating: Bool = false, wakes: Bool = true, key: DeliveryKey? = nil,
        _ body: @escaping @Sendable (Peripheral) -> Void
    ) -> Bool {
        guard let manager else { return false }
        // Through the app's delivery: a notification is dropped (and counted) when the app is far behind, and
        // replaces an older value held for a suspended app.
        return manager.app.core.deliver(
            on: manager.queue, generation: manager.launch, repeating: repeating, wakes: wakes ? .central : nil, key: key
        ) { [self] in
            body(self)
        }
    }

    // MARK: Async observation

    /// Internal observers (the async layer): each event `tell` tells the delegate, they consume after it (with
    /// the notification/read-completion distinction the delegate does not get).
    let observers = ObserverList<any PeripheralObserver>()

    func handleValueUpdate(attribute: AttributeHandle, value: [UInt8], isIndication: Bool = false) {
        // Without its manager nothing can be delivered. Taken from the weak reference once: each look was a
        // load through the manager's side table, several times per notification.
        guard let manager else { return }
        // The system subscribes to Service Changed on every link (DiscoveryTable), as iOS does for every app. It
        // only indicates, so a notification (the hot path) never asks the system's shared table, as SystemCore
        // does not either.
        if isIndication, let handle, manager.system.core.isServiceChanged(attribute, on: handle) {
            handleServiceChanged(value)
            return
        }
        let found = locked.withLock { $0.characteristicsByValue[attribute] }
        guard let characteristic = found else { return }
        if manager.isPreserved {
            // Kept for a terminated app: a notification it subscribed to relaunches it.
            if characteristic.isNotifying {
                manager.noteForRestoration(
                    .notification(self, attribute: attribute, value: value, isIndication: isIndication))
            }
            return
        }
        // Whether the app subscribed is decided on its queue, where `isNotifying` turns true just before the
        // callback that reports the subscription, so nothing sent right after that is missed.
        // What `deliver` does, with the one closure the app's queue runs (not `deliver`'s around this one's).
        let update: ValueUpdate.Kind = isIndication ? .indication : .notification
        manager.app.core.deliver(
            on: manager.queue, generation: manager.launch, repeating: !isIndication, wakes: .central,
            key: DeliveryKey(self, attribute: attribute.rawValue)
        ) { [self] in
            // Only to an app that subscribed: other apps on the link do not hear its notifications.
            let data = Data(value)
            let subscribed = characteristic.state.withLock { s -> Bool in
                guard s.isNotifying else { return false }
                s.value = data
                return true
            }
            guard subscribed else { return }
            tell(.valueUpdated(characteristic, nil, update: update))
        }
    }

    /// A Service Changed indication: the services overlapping the handle range are invalidated (dropped from
    /// `services`), and `didModifyServices` reports them; it is called even when none of the known services
    /// was affected (a service was added), so the app knows to discover again.
    private func handleServiceChanged(_ value: [UInt8]) {
        guard value.count >= 4 else { return }
        let start = UInt16(value[0]) | UInt16(value[1]) << 8
        let end = UInt16(value[2]) | UInt16(value[3]) << 8
        // The system already forgot what was discovered there, for every app on the link.
        deliver { p in
            let invalidated = p.invalidateServices(overlapping: start, end)
            p.tell(.servicesModified(invalidated))
        }
    }

    /// The peer's database is not the one its GATT cache was kept for (the system read another Database Hash as
    /// the link came up): every service discovered before is gone, and `didModifyServices` says which. A
    /// peripheral that discovered nothing hears nothing.
    func handleDatabaseChanged() {
        deliver { p in
            guard p.services != nil else { return }
            let invalidated = p.invalidateServices(overlapping: 0x0001, 0xFFFF)
            p.tell(.servicesModified(invalidated))
        }
    }

    /// Called on the manager's queue: drops the services overlapping `start...end` and their characteristics.
    func invalidateServices(overlapping start: UInt16, _ end: UInt16) -> [Service] {
        locked.withLock { s in
            guard let services = s.services else { return [] }
            let hit = services.filter { service in
                guard let range = service.state.withLock({ $0.remote?.handleRange }) else { return false }
                return range.lowerBound.rawValue <= end && range.upperBound.rawValue >= start
            }
            s.services = services.filter { service in !hit.contains { $0 === service } }
            for service in hit {
                for c in service.characteristics ?? [] {
                    if let valueHandle = c.state.withLock({ $0.remote?.valueHandle }) {
                        s.characteristicsByValue[valueHandle] = nil
                    }
                }
            }
            return hit
        }
    }

    func handleReadyToWrite() {
        guard locked.withLock({ $0.writeWithoutResponseRefused }) else { return }
        // It wakes nobody, as on iOS.
        deliver(wakes: false) { p in
            // `canSendWriteWithoutResponse` turns true here, just before the callback that says so.
            guard
                p.locked.withLock({ s -> Bool in
                    defer { s.writeWithoutResponseRefused = false }
                    return s.writeWithoutResponseRefused
                })
            else { return }
            p.tell(.readyToSendWriteWithoutResponse)
        }
    }

    /// Called on the manager's queue: keeps existing objects for services found again.
    func mergeServices(_ found: [GATTService]) {
        // What the system knows of the link, for `retrieveConnectedPeripherals` in every app.
        if let handle, let manager { manager.system.core.noteServices(found.map(\.uuid), on: handle) }
        let objects = found.map { serviceObject(for: $0) }
        locked.withLock { s in
            var list = s.services ?? []
            for o in objects where !list.contains(where: { $0 === o }) { list.append(o) }
            list.sort {
                ($0.state.withLock { $0.remote?.handleRange.lowerBound.rawValue ?? 0 })
                    < ($1.state.withLock { $0.remote?.handleRange.lowerBound.rawValue ?? 0 })
            }
            s.services = list
        }
    }

    func serviceObject(for remote: GATTService) -> Service {
        let existing = locked.withLock { s in
            s.services?.first {
                $0.state.withLock { $0.remote?.handleRange.lowerBound } == remote.handleRange.lowerBound
                    && $0.uuid == remote.uuid
            }
        }
        if let existing { return existing }
        let service = Service(uuid: remote.uuid, isPrimary: remote.isPrimary, peripheral: self)
        service.state.withLock { $0.remote = remote }
        return service
    }

    func mergeCharacteristics(_ found: [GATTCharacteristic], into service: Service) {
        var list = service.characteristics ?? []
        for remote in found {
            if list.contains(where: { $0.state.withLock { $0.remote?.valueHandle } == remote.valueHandle }) { continue }
            let c = Characteristic(
                uuid: remote.uuid, properties: CharacteristicProperties(rawValue: UInt(remote.properties.rawValue)),
                value: nil, service: service)
            c.state.withLock { $0.remote = remote }
            list.append(c)
            locked.withLock { $0.characteristicsByValue[remote.valueHandle] = c }
        }
        list.sort {
            ($0.state.withLock { $0.remote?.valueHandle.rawValue ?? 0 })
                < ($1.state.withLock { $0.remote?.valueHandle.rawValue ?? 0 })
        }
        service.state.withLock { $0.characteristics = list }
    }

    func mergeDescriptors(_ found: [GATTDescriptor], into characteristic: Characteristic) {
        var list = characteristic.descriptors ?? []
        for remote in found where !list.contains(where: { $0.state.withLock { $0.remote?.handle } == remote.handle }) {
            let d = Descriptor(uuid: remote.uuid, value: nil, characteristic: characteristic)
            d.state.withLock { $0.remote = remote }
            list.append(d)
        }
        characteristic.state.withLock { $0.descriptors = list }
    }
}

extension BluetoothError {
    /// Maps a host failure to the public error, keeping ATT codes as `CBATTError` does and the controller's
    /// status in ``BluetoothError/hciStatus``.
    init(_ error: HostError, file: String = #fileID, line: UInt = #line) {
        let code: Code
        switch error.code {
        case .commandTimeout: code = .controllerTimeout
        case .transactionTimeout: code = .transactionTimeout
        case .disconnected: code = .peripheralDisconnected
        case .transportClosed: code = .transportClosed
        case .shutDown: code = .systemShutDown
        case .invalidState: code = .notConnected
        case .invalidParameters: code = .invalidParameters
        case .unsupported: code = .operationNotSupported
        case .cancelled: code = .operationCancelled
        default:
            if let att = error.attErrorCode {
                code = .att(att)
            } else if let status = error.hciStatus {
                self = .fromLinkStatus(status, error.message, file: file, line: line)
                return
            } else {
                code = .unknown
            }
        }
        self.init(code, error.message, file: file, line: line)
    }
}
