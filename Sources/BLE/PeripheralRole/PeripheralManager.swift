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

/// Publishes services and advertises them to remote centrals (`CBPeripheralManager`).
///
/// Delegate methods are called on the manager's queue (the main queue when `queue` is nil).
public final class PeripheralManager: Sendable {
    let system: BluetoothSystem
    /// What the system knows this manager by (its registration, services and advertisement): every call to the
    /// system names the manager with it, and the system's calls come through it.
    let session: PeripheralSession
    let queue: DispatchQueue
    /// The options this manager was created with.
    public let options: Options?

    struct Published {
        let service: MutableService
        let serviceHandle: AttributeHandle
        /// Value handle -> characteristic.
        var characteristics: [AttributeHandle: MutableCharacteristic]
    }

    struct State {
        var managerState: ManagerState = .unknown
        var published: [Published] = []
        var advertising: AdvertisementData?
        var isAdvertising = false
        var centrals: [ConnectionHandle: Central] = [:]
        var updateRefused = false
        /// Kept by the system for its terminated app (state restoration): nothing is delivered to it.
        var preserved = false
        /// Centrals' requests while kept, for the manager that restores it.
        var restorationEvents: [HostEvent] = []
        /// Work preserved by an earlier process (services to publish, an advertisement to start), which the
        /// system starts once the controller is on: until this manager hears it did (`.resumedServicesPublished`).
        var resumeAtPowerOn: ResumedWork?
        /// Tasks awaiting `.poweredOn` (`waitUntilPoweredOn`).
        var poweredOnWaits = PoweredOnWaits()
        /// Set when the manager's app ended: an async wait asked later fails at once with it.
        var abandoned: BluetoothError?
    }
    let locked = Mutex(State())
    let delegateCell = DelegateCell<any PeripheralManagerDelegate>(nil)

    /// The app this manager belongs to.
    public let app: BluetoothSystem.App
    /// The app's launch this manager was made in: after a termination nothing reaches it.
    let launch: UInt64

    /// Creates a peripheral manager of `system`'s default app (the process default system when nil).
    public convenience init(
        delegate: (any PeripheralManagerDelegate)?, queue: DispatchQueue?, options: Options? = nil,
        system: BluetoothSystem? = nil
    ) {
        self.init(delegate: delegate, queue: queue, options: options, app: (system ?? .processDefault).defaultApp)
    }

    /// Creates a peripheral manager of `app`: only `app`'s services are its to answer for.
    public init(
        delegate: (any PeripheralManagerDelegate)?, queue: DispatchQueue?, options: Options? = nil,
        app: BluetoothSystem.App
    ) {
        self.app = app
        self.launch = app.core.generation
        self.system = app.system
        self.queue = queue ?? .main
        self.options = options
        self.session = PeripheralSession(core: app.system.core)
        session.attach(self)
        delegateCell.value = delegate
        // Relaunched for state restoration: take over from the manager the system kept, before registering, so
        // that `willRestoreState` comes first, as CoreBluetooth tells it.
        let kept = options?.restoreIdentifier.flatMap { app.system.takeKeptPeripheral(of: app, restoreIdentifier: $0) }
        if options?.restoreIdentifier != nil, !app.backgroundModes.contains(.bluetoothPeripheral) {
            // iOS fails an assertion here; this manager works, without restoration.
            Self.latencyLogger.error(
                "API MISUSE: a peripheral manager with a restore identifier in an app without the bluetooth-peripheral background mode: it will not be restored",
                metadata: ["app": "\(app.id)"])
        }
        if let kept {
            // Taken over in the controller's serial domain, where everything that reaches the kept manager happens
            // (its centrals' requests, its advertisement's answers, a restarted system's work): nothing of that runs
            // meanwhile, so nothing is lost or told twice without a lock. At once when this manager is made there
            // (a relaunch's launch handler runs there), else as soon as the domain is free.
            system.core.inDomain { [self] in takeOver(from: kept.kept, notes: kept.notes) }
        } else {
            self.system.core.register(session, app: app.core, role: .peripheral)
            adoptLinkedCentrals()
        }
    }

    /// Centrals already connected to the device (for another app) can reach this manager's services too.
    func adoptLinkedCentrals() {
        let host = system.core.host
        for link in host.links where link.role == .peripheral {
            let central = Central(
                identifier: system.core.store.identifier(for: link.peer), address: link.peer,
                handle: link.handle.rawValue,
                mtu: host.mtu(on: link.handle), host: host)
            locked.withLock { s in if s.centrals[link.handle] == nil { s.centrals[link.handle] = central } }
        }
    }

    public convenience init() { self.init(delegate: nil, queue: nil, options: nil, system: nil) }

    deinit {
        // A manager that goes away takes its services with it (clients hear Service Changed), and its requests
        // still waiting for an answer are refused rather than left to the ATT transaction timeout. Nothing is
        // carried on for it. The system knows it by `session`, which lives until this body has run.
        if let key = preservationKey { system.forgetPreserved(key, owner: ObjectIdentifier(session)) }
        // Its requests still waiting for an answer are refused by the system as it lets the manager go.
        system.core.removeServices(of: ObjectIdentifier(session))
        system.core.stopAdvertising(ObjectIdentifier(session))
        system.core.unregister(session)
    }

    public var delegate: (any PeripheralManagerDelegate)? {
        get { delegateCell.value }
        set { delegateCell.value = newValue }
    }

    /// The controller's state as this manager last reported it.
    public var state: ManagerState { locked.withLock { $0.managerState } }

    /// Whether advertising is on.
    public var isAdvertising: Bool { locked.withLock { $0.isAdvertising } }

    // MARK: Services

    /// Publishes `service` and its characteristics and descriptors; `didAdd` reports the outcome. A
    /// characteristic with a non-nil value must be read-only (the stack answers its reads itself); one with a
    /// nil value reaches `didReceiveRead`/`didReceiveWrite`. A Client Characteristic Configuration descriptor
    /// is added by the stack to every notifying or indicating characteristic. Services listed in
    /// `includedServices` must have been added first; the first published service of each type is included.
    public func add(_ service: MutableService) {
        add(service, reply: .delegate)
    }

    func add(_ service: MutableService, reply: Reply<Void>) {
        let result = Self.definition(of: service).flatMap { definition -> Result<PublishedService, BluetoothError> in
            system.core.addService(definition, owner: session).mapError { BluetoothError($0) }
        }
        switch result {
        case .success(let published):
            record(service, as: published)
            persistRestorableState()
            report(reply, nil) { e in .added(service, e) }
        case .failure(let error):
            report(reply, error) { e in .added(service, e) }
        }
    }

    /// `service` is published with `published`'s handles: its characteristics answer for them.
    func record(_ service: MutableService, as published: PublishedService) {
        let entry = entry(for: service, as: published)
        locked.withLock { $0.published.append(entry) }
    }

    /// What this manager keeps of `service`, published with `published`'s handles.
    func entry(for service: MutableService, as published: PublishedService) -> Published {
        var map: [AttributeHandle: MutableCharacteristic] = [:]
        let characteristics = (service.characteristics ?? []).compactMap { $0 as? MutableCharacteristic }
        for (c, handle) in zip(characteristics, published.characteristicValueHandles) {
            c.state.withLock { $0.service = service }
            map[handle] = c
        }
        return Published(service: service, serviceHandle: published.serviceHandle, characteristics: map)
    }

    /// Unpublishes a service added with `add(_:)`.
    public func remove(_ service: MutableService) {
        let entry = locked.withLock { s -> Published? in
            guard let i = s.published.firstIndex(where: { $0.service === service }) else {
                // One a restarted system keeps for it, not published yet: taken out once it is.
                s.resumeAtPowerOn?.withdraw(service)
                return nil
            }
            return s.published.remove(at: i)
        }
        if let entry { system.core.removeService(at: entry.serviceHandle, owner: session) }
        persistRestorableState()
    }

    /// Unpublishes every service this manager added.
    public func removeAllServices() {
        locked.withLock { s in
            s.published.removeAll()
            // And those a restarted system keeps for it and has not published yet (the system forgets them, or
            // this manager takes them out once it hears they were published).
            s.resumeAtPowerOn?.withdrawAll()
        }
        system.core.removeServices(of: ObjectIdentifier(session))
        persistRestorableState()
    }

    // MARK: Advertising

    /// Starts advertising `advertisementData` (local name and service UUIDs, plus any other field given);
    /// what does not fit the 31-byte advertising PDU goes into the scan response.
    /// `peripheralManagerDidStartAdvertising` reports the outcome.
    public func startAdvertising(_ advertisementData: AdvertisementData?) {
        startAdvertising(advertisementData, reply: .delegate)
    }

    func startAdvertising(_ advertisementData: AdvertisementData?, reply: Reply<Void>) {
        let tell: EventReport = { e in .startedAdvertising(e) }
        let data = advertisementData ?? AdvertisementData()
        guard state == .poweredOn else {
            return report(reply, BluetoothError(.invalidParameters, "the manager is not powered on"), tell)
        }
        guard system.core.mayStartAdvertising(app: app.core) else {
            // The system's rule: advertising starts only in the foreground (and then goes on in the background
            // form, with `bluetooth-peripheral`).
            let error = BluetoothError(
                .operationNotSupported, "an app cannot start advertising out of the foreground")
            return report(reply, error, tell)
        }
        let alreadyAdvertising = locked.withLock { s -> Bool in
            if s.isAdvertising { return true }
            s.advertising = data
            // It replaces the one a restarted system keeps for it (the system withdraws it too).
            s.resumeAtPowerOn?.advertisement = nil
            return false
        }
        if alreadyAdvertising {
            return report(reply, BluetoothError(.alreadyAdvertising, "already advertising"), tell)
        }
        persistRestorableState()
        // Through the system: with other apps advertising, each app's advertisement has the air in turn; the system
        // builds the forms it puts on the air (as asked, and the background form).
        system.core.startAdvertising(
            ObjectIdentifier(session), data.content, started: started(reply, tell),
            ended: { [weak self] error in self?.advertisingEnded(error) })
    }

    /// The controller refused the advertisement when the system put it on the air again: this manager no longer
    /// advertises (CoreBluetooth has no callback for it).
    func advertisingEnded(_ error: HostError) {
        locked.withLock { s in
            s.isAdvertising = false
            s.advertising = nil
        }
        persistRestorableState()
        Self.latencyLogger.warning("advertising ended: the controller refused it (\(error))")
    }

    /// What a start's outcome does: `isAdvertising` and `peripheralManagerDidStartAdvertising`.
    private func started(
        _ reply: Reply<Void>, _ tell: @escaping EventReport
    ) -> @Sendable (Result<Void, HostError>) -> Void {
        // Held weakly: a start kept waiting (its app out of the foreground) must not keep a manager the app let go.
        { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                // `isAdvertising` turns true on the manager's queue, just before the callback that says so.
                report(reply, nil, tell) { m in m.locked.withLock { $0.isAdvertising = $0.advertising != nil } }
            case .failure(let error):
                // Cancelled: stopAdvertising came before the controller advertised, and the state is already
                // what that call made it (or what a later startAdvertising made it since).
                if error.code != .cancelled {
                    locked.withLock { $0.advertising = nil }
                    // A controller going away is not the app's wish changing: the preserved advertisement stays.
                    if error.code != .transportClosed { persistRestorableState() }
                }
                report(reply, BluetoothError(error), tell)
            }
        }
    }

    /// Stops advertising.
    public func stopAdvertising() {
        let was = locked.withLock { s -> Bool in
            defer {
                s.isAdvertising = false
                s.advertising = nil
                s.resumeAtPowerOn?.advertisement = nil
            }
            return s.isAdvertising || s.advertising != nil || s.resumeAtPowerOn?.advertisement != nil
        }
        if was { system.core.stopAdvertising(ObjectIdentifier(session)) }
        persistRestorableState()
    }

    // MARK: Requests and updates

    /// Answers a read or write request. For a read, set `request.value` first (the bytes from
    /// `request.offset` on); for a long write, answer through the first request of the array, or (a swift-ble
    /// addition) through the request whose part you refuse, so the central's Error Response names its attribute.
    public func respond(to request: ATTRequest, withResult result: ATTErrorCode) {
        respond(to: request, withResult: result, reply: nil)
    }

    /// `reply` (a task's) hears once whether the response was handed to the central's bearer, or why not: the
    /// request was already answered or is not one of this manager's, or its link is gone.
    func respond(to request: ATTRequest, withResult result: ATTErrorCode, reply: Reply<Void>?) {
        let value = result == .success ? request.value.map { Array($0) } : nil
        var completion: (@Sendable (Result<Void, HostError>) -> Void)?
        if let reply { completion = hostCompletion(reporting: reply) }
        // The system knows which requests are this manager's and not answered yet (the characteristic says the
        // request is this manager's at all: another system's may carry the same id).
        guard let id = request.id, owns(request.characteristic),
            system.core.respond(
                to: GATTServerRequestID(rawValue: id), by: session, result: result, value: value,
                attribute: request.attribute.map { AttributeHandle($0) }, completion: completion)
        else {
            let error = BluetoothError(.invalidParameters, "\(request) was already answered, or is not this manager's")
            if let reply { report(reply, error, { _ in nil }) }
            return
        }
    }

    /// Sends `value` to subscribed centrals (all of them, or those in `centrals`) as a notification or
    /// indication, as each subscribed. Returns false when the transmit queue is full: nothing was sent, and
    /// `peripheralManagerIsReady(toUpdateSubscribers:)` follows when there is room. A value longer than a
    /// central's `maximumUpdateValueLength` is truncated for that central, as ATT requires.
    public func updateValue(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]?
    ) -> Bool {
        updateValue(value, for: characteristic, onSubscribedCentrals: centrals, delivered: nil)
    }

    /// When sent, `delivered` (a task's) hears once whether every target received the value: each notification
    /// acknowledged by the central's link layer, each indication confirmed, or a target's link gone first.
    func updateValue(
        _ value: Data, for characteristic: MutableCharacteristic, onSubscribedCentrals centrals: [Central]?,
        delivered: Reply<Void>?
    ) -> Bool {
        let handle = locked.withLock { s -> AttributeHandle? in
            for p in s.published {
                if let (h, _) = p.characteristics.first(where: { $0.value === characteristic }) { return h }
            }
            return nil
        }
        guard let handle else { return false }
        let targets = centrals.map { list in list.map { ConnectionHandle($0.handle.withLock { $0 }) } }
        var completion: (@Sendable (Result<Void, HostError>) -> Void)?
        if let delivered { completion = hostCompletion(reporting: delivered) }
        // Marked under the host's lock, before the "ready" that clears it can be produced.
        return system.core.host.notify(
            attribute: handle, value: Array(value), to: targets, delivered: completion,
            whenRefused: { [self] in locked.withLock { $0.updateRefused = true } })
    }

    // MARK: Internals

    /// Runs `body` on the manager's queue through the app's delivery, in order; `request` marks a read, write or
    /// subscription from a central (the app's delivery decides whom that wakes).
    /// The body changes the objects, then `tell`s the event. False when it was dropped (the app was terminated).
    @discardableResult
    func deliver(request: Bool = false, _ body: @escaping @Sendable (PeripheralManager) -> Void) -> Bool {
        app.core.deliver(on: queue, generation: launch, wakes: request ? .peripheral : nil) { [self] in
            body(self)
        }
    }

    /// The manager's app was terminated: every task waiting on it ends, since nothing is delivered to it any more.
    func abandonAsyncWork() {
        let waits = locked.withLock { s in
            s.abandoned = CentralManager.appTerminated
            return s.poweredOnWaits.take()
        }
        PoweredOnWaits.finish(waits, .abandoned(CentralManager.appTerminated), system: system)
        // Attached if it was not: a stream asked of the ended manager later must end at once too.
        asyncObserver.terminate(CentralManager.appTerminated)
    }

    func systemAppTerminated() {
        // As `deinit` does; the system unregisters this manager next, and nothing reaches it any more.
        // Its requests still waiting for an answer are refused by the system as the app ends.
        system.core.removeServices(of: ObjectIdentifier(session))
        system.core.stopAdvertising(ObjectIdentifier(session))
    }

    /// A host completion that reports to a task's reply on the manager's queue (the delegate hears nothing).
    func hostCompletion(reporting reply: Reply<Void>) -> @Sendable (Result<Void, HostError>) -> Void {
        let silent: EventReport = { _ in nil }
        return { [self] result in report(reply, result.failure.map { BluetoothError($0) }, silent) }
    }

    /// The event that tells one kind of request's outcome, given the error (nil on success); nil when the
    /// delegate has no callback for it (the request's reply alone hears it).
    typealias EventReport = @Sendable (BluetoothError?) -> PeripheralManagerEvent?

    /// Reports a request's outcome (nil: success) on the manager's queue: `apply` first, on success; then the
    /// delegate, if the request was the delegate's; then the task, if it was a task's.
    func report(
        _ reply: Reply<Void>, _ error: BluetoothError?, _ tell: @escaping EventReport,
        apply: @escaping @Sendable (PeripheralManager) -> Void = { _ in }
    ) {
        let delivered = deliver { m in
            if error == nil { apply(m) }
            if reply.isDelegate, let event = tell(error) { m.tell(event) }
            reply.finish(error.map { .failure($0) } ?? .success(()))
        }
        // Dropped: the app was terminated. A task awaiting it still hears, at once.
        if !delivered { reply.finish(.failure(CentralManager.appTerminated)) }
    }

    // MARK: Async observation

    /// Internal observers (the async layer): each event `tell` tells the delegate, they consume after it.
    let observers = ObserverList<any PeripheralManagerObserver>()

    private func characteristic(at handle: AttributeHandle) -> MutableCharacteristic? {
        locked.withLock { s in
            for p in s.published { if let c = p.characteristics[handle] { return c } }
            return nil
        }
    }

    /// Whether `characteristic` is one of the services this manager published.
    private func owns(_ characteristic: Characteristic) -> Bool {
        locked.withLock { s in s.published.contains { $0.characteristics.values.contains { $0 === characteristic } } }
    }

    /// Refuses a client's request this manager was given but will not answer (`refuse(_:with:)`).
    private func refuse(_ serverID: GATTServerRequestID, with code: ATTErrorCode) {
        _ = system.core.respond(to: serverID, by: session, result: code, value: nil)
    }

    /// A change of the controller's power state, told.
    func powerChanged(_ power: SystemPowerState) {
        let new = ManagerState(power)
        // Out of `.poweredOn` (unauthorized included: the system stopped the advertising and ended the
        // centrals' links as it told the state), nothing advertises and no central is linked.
        let change = locked.withLock { s -> (changed: Bool, gone: [Central]) in
            guard s.managerState != new else { return (false, []) }
            s.managerState = new
            guard new != .poweredOn else { return (true, []) }
            s.isAdvertising = false
            s.advertising = nil
            let gone = Array(s.centrals.values)
            for central in gone { central.isLinked.withLock { $0 = false } }
            s.centrals.removeAll()
            return (true, gone)
        }
        guard change.changed else { return }
        // Their links ended with the controller (told by the state alone): subscribed to nothing any more.
        unsubscribe(change.gone)
        deliver { m in
            m.tell(.stateUpdated)
            // Taken here, not at the change, a wait stays where the app's end finds it until the change is told;
            // with the state now (a later change may have come since this one), as `state` reads it.
            let (waits, now) = m.locked.withLock { s in (s.poweredOnWaits.take(at: s.managerState), s.managerState) }
            PoweredOnWaits.finish(waits, .state(now), system: m.system)
        }
    }

    /// `centrals`, whose links ended without an end each (the controller went, a reset), are subscribed to none
    /// of this manager's characteristics any more; the app hears it from the state, not a `didUnsubscribe` each.
    func unsubscribe(_ centrals: [Central]) {
        guard !centrals.isEmpty else { return }
        let gone = Set(centrals.map(ObjectIdentifier.init))
        let all = locked.withLock { $0.published.flatMap { Array($0.characteristics.values) } }
        for c in all {
            c.mutableState.withLock { $0.subscribedCentrals.removeAll { gone.contains(ObjectIdentifier($0)) } }
        }
    }

    /// A `waitUntilPoweredOn`'s wait: finished at once for a state that is final (or when the app ended), kept
    /// otherwise, in one step with the state's change.
    func awaitPoweredOn(_ waiter: Waiter<Void>) {
        let ending = locked.withLock { s in
            s.poweredOnWaits.register(waiter, state: s.managerState, abandoned: s.abandoned)
        }
        if let ending { PoweredOnWaits.finish([waiter], ending, system: system) }
    }

    /// One event from the system (through `PeripheralSession`), in the controller's serial domain.
    func apply(_ event: SessionEvent) {
        switch event {
        case .powerChanged(let power): powerChanged(power)
        case .appTerminated: systemAppTerminated()
        case .server(let event): received(event)
        case .resumedServicesPublished(let results): resumedServicesPublished(results)
        case .resumedAdvertising(let error): resumedAdvertising(error)
        case .resumedAdvertisingEnded(let error): advertisingEnded(error)
        case .discovered, .scanEnded, .linkAttached, .linkFailed, .linkDown, .valueUpdated, .readyToWrite,
            .peerDatabaseChanged, .advertised, .connectionEvent:
            // A central manager's: the system sends none to a peripheral manager.
            break
        }
    }

    private func received(_ event: HostEvent) {
        if isPreserved {
            switch event {
            case .serverRead, .serverWrite, .subscriptionChanged:
                // Kept for a terminated app (what the system noted for it, absorbed by its restorer, or a request
                // that reached it as its app ended): it waits for the restored manager.
                return noteForRestoration(event)
            default: break
            }
        }
        switch event {
        case .connected(let link) where link.role == .peripheral:
            let central = Central(
                identifier: system.core.store.identifier(for: link.peer), address: link.peer,
                handle: link.handle.rawValue, mtu: 23, host: system.core.host)
            locked.withLock { $0.centrals[link.handle] = central }
            deliver { m in m.tell(.connected(central)) }
        case .disconnected(let handle, let reason):
            guard let central = locked.withLock({ $0.centrals.removeValue(forKey: handle) }) else { return }
            central.isLinked.withLock { $0 = false }
            // A central that goes away is no longer subscribed to anything.
            let all = locked.withLock { $0.published.flatMap { Array($0.characteristics.values) } }
            for c in all {
                let was = c.mutableState.withLock { m -> Bool in
                    let before = m.subscribedCentrals.count
                    m.subscribedCentrals.removeAll { $0 === central }
                    return m.subscribedCentrals.count != before
                }
                if was { deliver { m in m.tell(.unsubscribed(central, c)) } }
            }
            let error = BluetoothError.fromLinkStatus(reason, "the central's link ended: \(reason)")
            deliver { m in m.tell(.disconnected(central, error)) }
        case .mtuChanged(let handle, let mtu):
            guard let central = locked.withLock({ $0.centrals[handle] }) else { return }
            central.mtu.withLock { $0 = mtu }
            deliver { m in m.tell(.mtuUpdated(central, mtu)) }
        case .serverRead(let serverID, let handle, let attribute, let offset):
            guard let central = locked.withLock({ $0.centrals[handle] }), let c = characteristic(at: attribute) else {
                return refuse(serverID, with: .unlikelyError)
            }
            // Known to the app by the system's id: the system checks an answer is this manager's, and its once.
            let request = ATTRequest(
                central: central, characteristic: c, offset: offset, value: nil, id: serverID.rawValue)
            deliver(request: true) { m in m.tell(.read(request)) }
        case .serverWrite(let serverID, let handle, let writes):
            guard let central = locked.withLock({ $0.centrals[handle] }) else {
                if let serverID { refuse(serverID, with: .unlikelyError) }
                return
            }
            let id = serverID?.rawValue
            var requests: [ATTRequest] = []
            // Every part carries the write's id: the app answers through the first, or through a part it refuses.
            for w in writes {
                guard let c = characteristic(at: w.attribute) else { continue }
                requests.append(
                    ATTRequest(
                        central: central, characteristic: c, offset: w.offset, value: Data(w.value),
                        id: id, isWriteCommand: serverID == nil, attribute: w.attribute.rawValue))
            }
            let delivered = requests
            guard !delivered.isEmpty else {
                if let serverID { refuse(serverID, with: .invalidHandle) }
                return
            }
            deliver(request: true) { m in m.tell(.write(delivered)) }
        case .subscriptionChanged(let handle, let attribute, let notify, let indicate):
            guard let central = locked.withLock({ $0.centrals[handle] }), let c = characteristic(at: attribute) else {
                return
            }
            let subscribed = notify || indicate
            let changed = c.mutableState.withLock { m -> Bool in
                let was = m.subscribedCentrals.contains { $0 === central }
                if subscribed && !was { m.subscribedCentrals.append(central) }
                if !subscribed && was { m.subscribedCentrals.removeAll { $0 === central } }
                return was != subscribed
            }
            guard changed else { return }
            deliver(request: true) { m in
                m.tell(subscribed ? .subscribed(central, c) : .unsubscribed(central, c))
            }
        case .readyToNotify:
            let refused = locked.withLock { s -> Bool in
                defer { s.updateRefused = false }
                return s.updateRefused
            }
            if refused { deliver { m in m.tell(.readyToUpdateSubscribers) } }
        case .advertisingEnded, .advertisingReport, .connected, .connectionFailed, .valueUpdated,
            .readyToWriteWithoutResponse, .transportClosed, .controllerResetting, .controllerRestarted:
            // The controller's end and reset reach this manager as its state (`powerChanged`).
            break
        case .pairingStarted(let handle, _):
            securityChanged(on: handle, .pairingStarted)
        case .pairingCompleted(let handle, let result):
            guard let central = locked.withLock({ $0.centrals[handle] }) else { return }
            let paired = PairingResult(
                peer: central.identifier, method: PairingResult.Method(result.method),
                secureConnections: result.secureConnections, authenticated: result.authenticated,
                bonded: result.bonded, keySize: Int(result.keySize))
            securityChanged(on: handle, .paired(paired))
        case .pairingFailed(let handle, let failure):
            securityChanged(
                on: handle, .pairingFailed(Peripheral.pairingError(SystemSecurity.Failure.pairing(failure))))
        case .encryptionChanged(let handle, let encrypted, let status):
            if status != .success {
                securityChanged(
                    on: handle, .encryptionFailed(.fromLinkStatus(status, "encrypting the link failed: \(status)")))
            } else if encrypted {
                securityChanged(on: handle, .encrypted)
            }
        case .pairingPrompt, .securityRequested, .longTermKeyRequested:
            // The system (`SystemSecurity`) answers these; CoreBluetooth tells an app nothing of them.
            break
        }
    }

    /// Tells the delegate of a change in the security of a central's link (a swift-ble extension).
    private func securityChanged(on handle: ConnectionHandle, _ event: CentralSecurityEvent) {
        guard let central = locked.withLock({ $0.centrals[handle] }) else { return }
        deliver { m in m.tell(.securityUpdated(central, event)) }
    }

    /// The GATT definition of a published service, or why it cannot be published.
    static func definition(of service: MutableService) -> Result<GATTServiceDefinition, BluetoothError> {
        var characteristics: [GATTCharacteristicDefinition] = []
        for c in service.characteristics ?? [] {
            guard let m = c as? MutableCharacteristic else {
                return .failure(
                    BluetoothError(.invalidParameters, "only MutableCharacteristic objects can be published"))
            }
            let props = m.properties
            if m.value != nil && !props.subtracting([.read, .broadcast, .extendedProperties]).isEmpty {
                return .failure(
                    BluetoothError(
                        .invalidParameters,
                        "characteristic \(m.uuid.uuidString) has a cached value, so it must be read-only"))
            }
            if let v = m.value, v.count > 512 {
                return .failure(
                    BluetoothError(.invalidParameters, "characteristic \(m.uuid.uuidString) value exceeds 512 bytes"))
            }
            var descriptors: [GATTDescriptorDefinition] = []
            for d in m.descriptors ?? [] {
                if d.uuid == .clientCharacteristicConfiguration {
                    return .failure(
                        BluetoothError(
                            .uuidNotAllowed,
                            "the Client Characteristic Configuration descriptor is managed by the stack"))
                }
                descriptors.append(GATTDescriptorDefinition(uuid: d.uuid, value: d.value.map { Array($0) } ?? []))
            }
            // `notifyEncryptionRequired` and `indicateEncryptionRequired` are notify and indicate in the declaration,
            // with a CCCD that only an encrypted link may write (as CoreBluetooth's "trusted devices").
            var declared = UInt8(props.rawValue & 0xFF)
            if props.contains(.notifyEncryptionRequired) { declared |= UInt8(CharacteristicProperties.notify.rawValue) }
            if props.contains(.indicateEncryptionRequired) {
                declared |= UInt8(CharacteristicProperties.indicate.rawValue)
            }
            characteristics.append(
                GATTCharacteristicDefinition(
                    uuid: m.uuid,
                    properties: GATTCharacteristicProperties(rawValue: declared),
                    permissions: GATTAttributePermissions(rawValue: UInt8(m.permissions.rawValue & 0xFF)),
                    value: m.value.map { Array($0) },
                    descriptors: descriptors,
                    subscribingRequiresEncryption: !props.isDisjoint(with: [
                        .notifyEncryptionRequired, .indicateEncryptionRequired,
                    ])))
        }
        return .success(
            GATTServiceDefinition(
                uuid: service.uuid, isPrimary: service.isPrimary,
                includedServices: (service.includedServices ?? []).map(\.uuid),
                characteristics: characteristics))
    }
}
