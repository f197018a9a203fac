import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import BLETransport
import Foundation
import Logging
import Synchronization

/// A manager (central or peripheral role) attached to a system, as the system knows it.
///
/// Sessions are told what concerns them (`SessionEvent`: the machine's deliveries, the host's events among
/// them) in the order the machine made it, in the controller's serial domain, outside the system's lock; they
/// must not block and must not call delegates from there (they dispatch to their own queue).
package protocol SystemSession: AnyObject, Sendable {
    /// One event for the manager. The machine makes none for a session after its `.appTerminated` or once it was
    /// unregistered, but one made before may still arrive meanwhile (the manager's app drops its delegate calls:
    /// they are of an earlier launch).
    func apply(_ event: SessionEvent)
}

/// The "bluetoothd" of one controller: it owns the host, the system store, the apps and the managers attached
/// to them, and routes host events to them.
public final class SystemCore: Sendable {
    public let name: String
    public let host: HostDriver
    public let scheduler: any HostScheduler
    /// What outlives the process: identifiers and known peers (later bonds, GATT caches, preserved state).
    public let store: SystemStore
    /// Pairing and encryption: bonds, LTK requests, links secured on demand.
    /// The app of managers made without one: the process itself, on a real controller.
    public let defaultApp: SystemApp

    /// The id of `defaultApp`.
    public static let defaultAppID = "default"
    /// The timing of the rules for apps out of the foreground, for every app of this system.
    public let appRules: AppRules
    /// What relaunches an app for state restoration (`SystemAction.relaunch`), by its id: set by the system's
    /// facade, which runs apps' launches.
    let relaunchHandler = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// A caller's completion, with the session it called for (so a restored manager can take it over).
    struct Caller<Value: Sendable>: Sendable {
        var session: SessionID
        var tell: @Sendable (Value) -> Void
    }

    /// The system's rules as a value (`SystemMachine`), stepped under `state`'s lock; what it asks is performed
    /// outside the lock, in its order, by one thread at a time (`outbox`), as `HostDriver` performs the host's.
    struct State {
        var machine: SystemMachine
        /// The managers attached, by the id the machine knows them by; held weakly.
        var sinks: [SessionID: WeakSession] = [:] { didSet { recipients &+= 1 } }
        /// The id of each attached manager's object.
        var ids: [ObjectIdentifier: SessionID] = [:]
        var nextSession: UInt64 = 1
        var apps: [String: SystemApp] = [:]
        var outbox = DomainOutbox<SystemAction>()
        /// Who waits for each descriptor write the machine made for a wish (`setSubscription`).
        var subscriptionWaiters: [DescriptorWriteID: [@Sendable (Result<Void, HostError>) -> Void]] = [:]
        /// Who waits for each start of advertising (`startAdvertising`), and the session that made it.
        var advertisingStarts: [AdvertisingStartID: Caller<Result<Void, HostError>>] = [:]
        /// Who hears that the advertisement a start put on the air ended after it started (until the session
        /// stops, starts again, or goes).
        var advertisingEnds: [AdvertisingStartID: Caller<HostError>] = [:]
        /// The system's own starts of advertising (a restarted system's kept advertisement,
        /// `.advertiseResumed`), by the session that hears their answer and end as events: known in the step that
        /// makes them, before any answer can come; a restorer's take-over moves them to it.
        var resumedAdvertising: [AdvertisingStartID: SessionID] = [:]
        /// Who answers the pairing's questions (`SystemSecurity.setPrompter`).
        var prompter: SystemSecurity.Prompter?
        /// Who waits for each link's encryption (`SystemSecurity.secure`).
        var secureWaiters: [SecureID: @Sendable (Result<Void, SecurityFailure>) -> Void] = [:]
        /// Who waits for each pairing (`SystemSecurity.pair`).
        var pairWaiters: [PairID: @Sendable (Result<PairingOutcome, any Error>) -> Void] = [:]
        /// Who waits for each discovery an app asked for.
        var discoveryWaiters: [DiscoveryID: @Sendable (Result<DiscoveryResult, HostError>) -> Void] = [:]

        /// Managers whose app was terminated, detached, until they are told so.
        var leaving: [SessionID: WeakSession] = [:] { didSet { recipients &+= 1 } }

        /// Restored peripheral managers known by id before they take the kept one's place (`transfer`, then
        /// `replace`): the requests for their services reach them meanwhile.
        var reserved: [ObjectIdentifier: SessionID] = [:]
        /// Kept peripheral managers replaced by their restored successors, while work queued for them may still be
        /// in the outbox: it reaches the successor (emptied when the outbox is). (A central's is readdressed in
        /// the outbox: `replaceKept`.)
        var forwarded: [SessionID: SessionID] = [:] { didSet { recipients &+= 1 } }
        /// Changes with every change of who a delivery reaches (`sinks`, `leaving`, `forwarded`).
        var recipients: UInt64 = 0
        /// Who the last notification's link reaches, while neither the links nor the recipients changed.
        var linkRoute: LinkRoute?
        /// The buffer each routed host event's actions are made in (`route`), kept with its capacity: the
        /// notification path allocates nothing for them.
        var scratch: [SystemAction] = []

        /// An id for a restored manager not registered yet; what is delivered to it reaches it from now on.
        mutating func reserve(_ session: any SystemSession, app: SystemApp) -> SessionID {
            let object = ObjectIdentifier(session)
            if let id = reserved[object] { return id }
            let id = SessionID(rawValue: nextSession)
            nextSession += 1
            reserved[object] = id
            sinks[id] = WeakSession(session: session, app: app)
            return id
        }

        mutating func attach(_ session: any SystemSession, app: SystemApp, _ actions: inout [SystemAction]) -> SessionID
        {
            let object = ObjectIdentifier(session)
            // A manager freed without detaching would leave its identity behind for another object to take.
            if let stale = ids[object] {
                detach(stale, leaving: false)
                actions += machine.closed(stale)
            }
            let id: SessionID
            if let early = reserved.removeValue(forKey: object) {
                id = early
                sinks[id] = nil
            } else {
                id = SessionID(rawValue: nextSession)
                nextSession += 1
            }
            let sink = WeakSession(session: session, app: app)
            sinks[id] = sink
            ids[sink.object] = id
            return id
        }

        /// Who a delivery to `id` of `event` reaches now: the manager, while it lives (or, replaced by its restored
        /// successor while the delivery was queued, the successor); nobody (`.gone`); or nobody now, as it is noted
        /// for a kept manager instead (`note`).
        mutating func recipient(_ id: SessionID, _ event: SessionEvent) -> Recipient {
            if machine.notes(id, event) {
                note(event, for: id)
                return .noted
            }
            var power = false
            if case .powerChanged = event { power = true }
            // Not noted: a manager not kept.
            let found = sink(id, hostEvent: event.isHostEvent, power: power, noted: false)
            if case .appTerminated = event { leaving[id] = nil }
            return found?.session.map(Recipient.manager) ?? .gone
        }

        /// `event`, for the kept manager `id`, is noted by the machine rather than told; a relaunch it
        /// asks is performed in the drain under way (every delivery is performed in one).
        mutating func note(_ event: SessionEvent, for id: SessionID) {
            if let app = machine.note(event, for: id) {
                _ = outbox.append(contentsOf: [.relaunch(app)], inDomain: true)
            }
        }

        /// The manager a delivery to `id` reaches now (`recipient`; `hostEvent`: one of the host's events routed
        /// to it, `power`: its state; `noted`: what reaches `id` is noted, `recipient`, `route(on:)`).
        private func sink(_ id: SessionID, hostEvent: Bool, power: Bool, noted: Bool) -> WeakSession? {
            if noted { return nil }
            // A manager whose app ended is told what the machine did for it before the end, then the end; not the
            // host's events it no longer takes part in (a connection event would make it a peripheral, and the
            // store an identifier, for nobody).
            if let sink = sinks[id] ?? (hostEvent ? nil : leaving[id]) { return sink }
            // Not the state the kept one was told: its successor is told its own (`replace`).
            guard !power, let successor = forwarded[id] else { return nil }
            return sinks[successor]
        }

        /// The sessions on `link` (the machine's `sessionsOn`), with the managers they reach now; kept from the
        /// last notification when nothing changed since (the notification path hashes nothing then).
        mutating func route(on link: ConnectionHandle) -> LinkRoute {
            if let last = linkRoute, last.link == link, last.links == machine.links.revision,
                last.recipients == recipients, last.noting == machine.restoration.notingRevision
            {
                return last
            }
            let ids = machine.sessionsOn(link)
            let reached = ids.map { sink($0, hostEvent: true, power: false, noted: machine.restoration.notes($0)) }
            let route = LinkRoute(
                link: link, links: machine.links.revision, recipients: recipients,
                noting: machine.restoration.notingRevision, sessions: ids, reached: reached,
                noted: ids.filter { machine.restoration.notes($0) }, alerting: !machine.links.alerting(on: link).isEmpty
            )
            linkRoute = route
            return route
        }

        /// The id of a registered manager, or of a restored one not registered yet.
        func session(of object: ObjectIdentifier) -> SessionID? {
            ids[object] ?? reserved[object]
        }

        /// Restoration candidates known by their registered managers' sessions (an unregistered one is left out).
        func bySession(_ candidates: [RestorationCandidate]) -> [RestorationTable.Candidate] {
            candidates.compactMap { c in ids[c.manager].map { c.known(as: $0) } }
        }

        /// Takes the manager `id` off the list events visit; `leaving`, it is kept aside until told its app ended.
        mutating func detach(_ id: SessionID, leaving isLeaving: Bool) {
            guard let sink = sinks.removeValue(forKey: id) else { return }
            ids[sink.object] = nil
            advertisingEnds = advertisingEnds.filter { $0.value.session != id }
            if isLeaving { leaving[id] = sink }
        }
    }
    let state: Mutex<State>

    /// A registered manager, held weakly. A class, so that a list of them (a link's, kept for its notifications:
    /// `LinkRoute`) is copied by reference: a struct with a weak field is copied field by field, through the weak
    /// reference's side table, each time.
    /// Sendable: nothing in it changes after `init` (the weak reference only ever goes to nil by itself).
    final class WeakSession: @unchecked Sendable {
        weak var session: (any SystemSession)?
        let app: SystemApp
        /// The manager's identity, kept: the weak reference is nil once its deinit began.
        let object: ObjectIdentifier

        init(session: any SystemSession, app: SystemApp) {
            self.session = session
            self.app = app
            self.object = ObjectIdentifier(session)
        }
    }

    /// Creates the host on `transport` and starts initialising the controller at once.
    public init(
        name: String, transport: any HCITransport, scheduler: any HostScheduler,
        configuration: HostConfiguration = HostConfiguration(), store: SystemStore, appRules: AppRules = AppRules()
    ) {
        self.name = name
        self.scheduler = scheduler
        self.store = store
        self.appRules = appRules
        let defaultApp = SystemApp(id: Self.defaultAppID, scheduler: scheduler, rules: appRules)
        self.defaultApp = defaultApp
        // In 0.625 ms units, within what LE Set Scan Parameters takes (2.5 ms ... 10.24 s).
        let window = min(appRules.backgroundScanWindow, appRules.backgroundScanInterval)
        let scans = ScanUnion(
            backgroundParameters: ScanParameters(
                interval: appRules.backgroundScanInterval.units(of: .microseconds(625), within: 0x0004...0x4000),
                window: window.units(of: .microseconds(625), within: 0x0004...0x4000)),
            active: configuration.activeScanning)
        var initial = State(machine: SystemMachine(scans: scans, pairs: configuration.security != nil))
        initial.apps[Self.defaultAppID] = defaultApp
        self.state = Mutex(initial)
        let host = HostDriver(transport: transport, scheduler: scheduler, configuration: configuration)
        self.host = host
        refreshResolvingList()
        host.setEventHandler { [weak self] event in self?.handle(event) }
        defaultApp.observeLifecycle { [weak self] report in self?.appChanged(Self.defaultAppID, report) }
        host.start { [weak self] result in
            switch result {
            case .success: self?.setPower(.poweredOn)
            case .failure(let error):
                if error.code == .transportClosed {
                    self?.setPower(.poweredOff(reason: error.message))
                } else {
                    self?.setPower(.unsupported(reason: error.message))
                }
            }
        }
    }

    /// The controller's state, whatever the authorization.
    public var powerState: SystemPowerState { state.withLock { $0.machine.power.controller } }

    /// The app with this id, made on first use.
    public func app(id: String) -> SystemApp {
        state.withLock { s in
            if let app = s.apps[id] { return app }
            let app = SystemApp(id: id, scheduler: scheduler, rules: appRules)
            app.observeLifecycle { [weak self] report in self?.appChanged(id, report) }
            s.apps[id] = app
            return app
        }
    }

    static let defunct = HostError(.invalidState, "the application was terminated")
    /// What a start of advertising waiting as the controller goes away hears.
    static let gone = HostError(.transportClosed, "the controller went away")
    static let apiLogger = Logger(label: "swift-ble.api")
    static let cacheLogger = Logger(label: "swift-ble.gatt-cache")
    /// What the system noticed that no app is told.
    static let logger = Logger(label: "swift-ble.system")

    func refuseDefunct(_ what: String) {
        Self.apiLogger.warning("\(what) asked for by a manager of a terminated application was refused")
    }

    /// Whether `shutDown()` was called.
    public var isShutDown: Bool { state.withLock { $0.machine.power.isShutDown } }

    /// Shuts the system down: every pending host request fails with `.shutDown`, managers see the controller
    /// powered off, `powerOff` takes the controller away (a simulated one leaves the radio), and the store
    /// writes what it batched and closes. Later calls do nothing. Done in the controller's serial domain, and
    /// returns once it is done there: what the host reports of its end reaches the managers before the store
    /// closes.
    public func shutDown(powerOff: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            scheduler.execute { [self] in
                defer { done.resume() }
                let first = state.withLock { $0.machine.shutDown() }
                guard first else { return }
                host.shutDown()
                powerOff()
                store.close()
            }
        }
    }

    /// Whether the user allowed Bluetooth. Real controllers start `.allowedAlways` (nothing here asks a user);
    /// a simulation sets it to test an app's permission flow.
    public var authorization: SystemAuthorization { state.withLock { $0.machine.power.authorization } }

    /// Why managers are powered off while the user's Bluetooth switch is off.
    public static let switchedOff = Power.switchedOff

    /// Whether the user's Bluetooth switch (Settings) is on.
    public var isBluetoothEnabled: Bool { state.withLock { $0.machine.power.bluetoothEnabled } }

    /// The user turns Bluetooth off (or on again) in Settings. Off: managers see `.poweredOff` first (they forget
    /// their links and scans without a callback per peripheral, IOSRules.md 6.7), then the radio goes quiet: every
    /// scan, pending connection and advertisement ends, and every link is dropped (the peers hear Remote Device
    /// Terminated Connection due to Power Off). On: managers see the controller's state again; nothing resumes
    /// by itself.
    public func setBluetoothEnabled(_ enabled: Bool) {
        let switched = step { s -> (Bool, [SystemAction]) in
            guard s.machine.power.bluetoothEnabled != enabled else { return (false, []) }
            return (true, s.machine.bluetoothSwitched(on: enabled))
        }
        guard switched, !enabled else { return }
        let off = HostError(.transportClosed, "Bluetooth was switched off")
        step { ((), $0.machine.scansSwitchedOff() + $0.machine.linksReset() + $0.machine.advertisingReset(off)) }
        for link in host.links { host.disconnect(link.handle, reason: .remoteDeviceTerminatedConnectionPowerOff) }
    }

    /// Changes the authorization (the user answered the prompt, or changed the setting): every manager whose
    /// visible state changes is told.
    public func setAuthorization(_ authorization: SystemAuthorization) {
        step { s in
            let actions = s.machine.authorizationChanged(authorization)
            // Every advertisement stopped with it: none of their ends is to be told.
            if s.machine.visible == .unauthorized { s.advertisingEnds.removeAll() }
            return ((), actions)
        }
    }

    /// Attaches a manager of `app` (the default app when nil) in `role`; it is told its state at once unless
    /// that is still `.unknown`.
    package func register(_ session: any SystemSession, app: SystemApp? = nil, role: SessionRole = .central) {
        let app = app ?? defaultApp
        step { s in
            var actions: [SystemAction] = []
            let id = s.attach(session, app: app, &actions)
            return ((), actions + s.machine.opened(id, app: app.id, role: role))
        }
    }

    /// Puts `new`, a manager of `app` in `role` restored from `old`, in `old`'s place among the registered
    /// managers, in one step: an event for every manager reaches one of them, never neither (what was noted for
    /// the kept one since its notes were last taken, then what is still queued for it, reach the new one first).
    /// `new` was told `told` already (its restoration's): when the state changed since, it is told the state now.
    package func replace(
        _ old: any SystemSession, with new: any SystemSession, app: SystemApp, role: SessionRole,
        told: SystemPowerState
    ) {
        let inDomain = scheduler.isExecuting
        let drain = state.withLock { s -> DomainOutbox<SystemAction>.Start in
            let oldID = s.ids[ObjectIdentifier(old)]
            if let oldID { s.detach(oldID, leaving: false) }
            var actions: [SystemAction] = []
            let newID = s.attach(new, app: app, &actions)
            if let oldID {
                s.forwarded[oldID] = newID
                s.resumedAdvertising = s.resumedAdvertising.mapValues { $0 == oldID ? newID : $0 }
            }
            let (power, later) = s.machine.replaced(oldID, by: newID, app: app.id, role: role)
            if power != told { actions.append(.deliver(newID, .powerChanged(power))) }
            return s.outbox.prepend(later.map { .deliver(newID, $0) }, then: actions, inDomain: inDomain)
        }
        start(drain)
    }

    /// The notes made for the kept manager `kept` since they were last taken (`takeKept`), taken now: its
    /// restorer applies them to it before taking its place.
    package func takeNotes(of kept: any SystemSession) -> [SessionEvent] {
        state.withLock { s in s.ids[ObjectIdentifier(kept)].map { s.machine.takeNotes(of: $0) } ?? [] }
    }

    /// Runs `body` (in the domain) with what it steps queued rather than performed at once, then performs it: a
    /// restorer's take-over, so that nothing reaches the kept manager it is emptying, nor the restorer before it
    /// has told its restoration and state.
    package func holdingDrains(_ body: () -> Void) {
        let held = state.withLock { $0.outbox.hold() }
        body()
        if held { drainOutbox() }
    }

    /// A restored central manager, `new`, takes the place of `old`, kept for its app, in one step: `old`'s links,
    /// pending connects, subscriptions and (when `scan`, the id both know it by) scan are `new`'s; what was noted
    /// for `old` since its notes were taken (`takeKept`) and what is still queued for it reach `new` first, in
    /// their order, before anything stepped after. `new` has built its state from `old`'s with the notes taken
    /// before, and told its restoration and its state; nothing reached it before this.
    package func replaceKept(_ old: any SystemSession, with new: any SystemSession, app: SystemApp, scan: UInt64?) {
        let inDomain = scheduler.isExecuting
        let drain = state.withLock { s -> DomainOutbox<SystemAction>.Start in
            var actions: [SystemAction] = []
            let newID = s.attach(new, app: app, &actions)
            guard let oldID = s.ids[ObjectIdentifier(old)] else {
                // The kept one went meanwhile (let go of): a manager like any other, told its state.
                return s.outbox.append(contentsOf: actions + s.machine.opened(newID, app: app.id), inDomain: inDomain)
            }
            s.detach(oldID, leaving: false)
            s.machine.linksTransferred(from: oldID, to: newID)
            if let scan { _ = s.machine.scanTransferred(from: oldID, to: newID, id: scan) }
            let later = s.machine.replaced(oldID, by: newID, app: app.id, role: .central).notes
            s.outbox.transform { action in
                switch action {
                case .deliver(oldID, let event): .deliver(newID, event)
                case .alert(let kind, oldID, let peer): .alert(kind, newID, peer: peer)
                default: action
                }
            }
            return s.outbox.prepend(later.map { .deliver(newID, $0) }, then: actions, inDomain: inDomain)
        }
        start(drain)
    }

    /// `session` is told of every central-role link's start and end from now on, and of the services devices
    /// advertise (`registerForConnectionEvents`).
    package func watchConnections(_ session: any SystemSession) {
        step { s in
            if let id = s.ids[ObjectIdentifier(session)] { s.machine.watchConnections(id) }
            return ((), [])
        }
    }

    package func unregister(_ session: any SystemSession) {
        step { s in
            let object = ObjectIdentifier(session)
            guard let id = s.ids[object] ?? s.reserved.removeValue(forKey: object) else { return ((), []) }
            s.detach(id, leaving: false)
            s.resumedAdvertising = s.resumedAdvertising.filter { $0.value != id }
            return ((), s.machine.closed(id))
        }
    }

    func setPower(_ power: SystemPowerState) {
        step { ((), $0.machine.controllerChanged(power)) }
    }

    /// Steps the machine with `body` under the lock, queues the actions it produced, and has them performed in
    /// the scheduler's domain unless a drain is already under way (it performs these too, in order, as
    /// `HostDriver` does the host's):
    /// a manager is told the states in the order the machine produced them, so two changes racing on two
    /// threads (the host's power, a user's authorization) cannot leave it with the earlier one.
    @discardableResult
    func step<T>(_ body: (inout State) -> (T, [SystemAction])) -> T {
        // In the domain, a drain starts at once and performs everything stepped so far, in order (a drain
        // scheduled from outside may not have run yet); from outside, one is scheduled in the domain.
        let inDomain = scheduler.isExecuting
        let (value, drain) = state.withLock { s -> (T, DomainOutbox<SystemAction>.Start) in
            let (value, actions) = body(&s)
            for case .advertiseResumed(let session, let id) in actions { s.resumedAdvertising[id] = session }
            return (value, s.outbox.append(contentsOf: actions, inDomain: inDomain))
        }
        start(drain)
        return value
    }

    /// Drains now, or has a drain scheduled in the domain, as the outbox said.
    func start(_ drain: DomainOutbox<SystemAction>.Start) {
        switch drain {
        case .now: drainOutbox()
        case .scheduled: scheduler.execute { [self] in scheduledDrain() }
        case .none: break
        }
    }

    /// A drain scheduled from outside the domain, now in it: it performs what waits, unless a drain started in
    /// the domain meanwhile has (or is doing so).
    func scheduledDrain() {
        let start = state.withLock { $0.outbox.scheduledDrainArrived() }
        if start { drainOutbox() }
    }

    /// Performs queued actions until the outbox is empty, outside the lock. Only one thread drains at a time.
    func drainOutbox() {
        while true {
            let next = state.withLock { s -> (action: SystemAction, session: Recipient)? in
                guard let action = s.outbox.next() else {
                    if !s.forwarded.isEmpty { s.forwarded = [:] }
                    return nil
                }
                guard case .deliver(let id, let event) = action else { return (action, .gone) }
                return (action, s.recipient(id, event))
            }
            guard let next else { return }
            perform(next.action, for: next.session)
        }
    }

    /// Publishes again the services a restarted system keeps for `session`, in order (a refusal is logged), and
    /// tells the session their handles: for whoever holds it now (its restorer, when it took the kept one's place
    /// since); one nobody holds any more is taken out again.
    private func publishResumed(_ definitions: [GATTServiceDefinition], for session: SessionID) {
        let results = definitions.map { definition -> PublishedService? in
            switch host.addService(definition) {
            case .success(let published): return published
            case .failure(let error):
                Self.logger.warning(
                    "a preserved service could not be published again: \(error)",
                    metadata: ["service": "\(definition.uuid)"])
                return nil
            }
        }
        let orphans = state.withLock { s -> [AttributeHandle] in
            let holder = s.forwarded[session] ?? session
            guard s.sinks[holder] != nil else { return results.compactMap { $0?.serviceHandle } }
            for case let published? in results { s.machine.servicePublished(published, by: holder) }
            return []
        }
        for handle in orphans { host.removeService(at: handle) }
        if orphans.isEmpty { deliverResumed(.resumedServicesPublished(results), to: session) }
    }

    /// Delivers `event`, about the work a restarted system carries on, to whoever holds `session` now (noted for
    /// a kept one, as any delivery).
    private func deliverResumed(_ event: SessionEvent, to session: SessionID) {
        step { s in ((), [.deliver(s.forwarded[session] ?? session, event)]) }
    }

    /// A client's request for a manager that went away before it was told: refused at once, so the client does
    /// not wait for the ATT transaction timeout (unless it was refused already, as its manager's session closed).
    public func refuseUndelivered(_ event: HostEvent) {
        let request: GATTServerRequestID
        switch event {
        case .serverRead(let id, _, _, _): request = id
        case .serverWrite(let id?, _, _): request = id
        default: return
        }
        // Unless the machine refused it already (its session was closed after the step that routed it).
        guard state.withLock({ $0.machine.serverRequestUndelivered(request) }) else { return }
        host.respond(to: request, result: .unlikelyError, value: nil)
    }

    /// Performs one of the machine's actions (`recipient`: whom a delivery reaches).
    func perform(_ action: SystemAction, for recipient: Recipient) {
        switch action {
        case .deliver(_, let event):
            switch recipient {
            case .manager(let session): session.apply(event)
            case .gone:
                // A client's request for a manager that went away before it was told is refused at once.
                if case .server(let request) = event { refuseUndelivered(request) }
            case .noted:
                // Kept for the manager's restorer, which answers it (a request waits).
                break
            }
        case .startScan(let parameters):
            host.startScan(parameters) { [weak self] result in
                // Cancelled: every scan stopped before the controller scanned (or a later start overtook it).
                if case .failure(let error) = result, error.code != .cancelled {
                    // Said here: a delegate hears no callback for it (CoreBluetooth has none), only `isScanning`;
                    // an async scan stream ends with it.
                    Self.logger.warning("the controller did not scan, and every app's scan ended: \(error)")
                    self?.step { ((), $0.machine.scanFailed(refused: error)) }
                }
            }
        case .stopScan: host.stopScan { _ in }
        case .setConnectTargets(let peers):
            host.setConnectTargets(peers, parameters: host.configuration.connectionParameters)
        case .disconnect(let handle, let reason): host.disconnect(handle, reason: reason)
        case .refuse(let request, let code): host.respond(to: request, result: code, value: nil)
        case .removeService(let handle): host.removeService(at: handle)
        case .encrypt(let link, let peer): encrypt(link, peer: peer)
        case .pair(let link):
            host.pair(on: link) { [weak self] result in
                // A failure the pairing machine reports itself comes as `.pairingFailed`.
                guard case .failure(let error) = result, error.code != .pairingFailed else { return }
                self?.step { ((), $0.machine.pairingRefused(link, error)) }
            }
        case .prompt(let link, let peer, let prompt):
            if let prompter = state.withLock({ $0.prompter }) {
                prompter(link, peer.flatMap { store.existingIdentifier(for: $0) }, prompt)
            } else if let answer = SecurityTable.defaultAnswer(to: prompt) {
                // The prompter went since the step: every question still gets an answer.
                host.answerPairing(on: link, answer)
            }
        case .answerPairing(let link, let answer): host.answerPairing(on: link, answer)
        case .confirmKeyDelivery(let link):
            // One ATT exchange after the keys (a read of the first handle, whatever it answers) comes back only
            // once the peer has read what came before it on the link.
            host.read(on: link, attribute: .min) { [weak self] _ in self?.step { ((), $0.machine.keysDelivered(link)) }
            }
        case .secureAnswered(let id, let failure):
            let waiting = state.withLock { $0.secureWaiters.removeValue(forKey: id) }
            waiting?(failure.map { .failure($0) } ?? .success(()))
        case .pairAnswered(let id, let answer):
            let waiting = state.withLock { $0.pairWaiters.removeValue(forKey: id) }
            switch answer {
            case .paired(let outcome): waiting?(.success(outcome))
            case .failed(let failure): waiting?(.failure(failure))
            case .refused(let error): waiting?(.failure(error))
            }
        case .relaunch(let app):
            relaunchHandler.withLock { $0 }?(app)
        case .readDatabaseHash(let link, let asOf, let peer, let againstCache):
            readDatabaseHash(on: link, asOf: asOf, peer: peer, againstCache: againstCache)
        case .discover(let id, let link, let request):
            // Held until the peer answers, as for the hash: whoever waits is answered.
            ask(request, on: link) { [self] result in
                step { ((), $0.machine.discoveryCompleted(id, result)) }
            }
        case .discoveryAnswered(let id, let result):
            let waiting = state.withLock { $0.discoveryWaiters.removeValue(forKey: id) }
            waiting?(result)
        case .keepGATTCache(let peer, let hash, let record):
            // Without a hash, kept only while the peer is bonded: then it answers on every link.
            guard hash != nil || store.bond(for: peer) != nil else { break }
            store.setGATTCache(SystemStore.GATTCache(hash: hash ?? [], record: record.encoded()), for: peer)
        case .dropGATTCache(let peer): store.setGATTCache(nil, for: peer)
        case .peerDatabaseChanged: break  // the machine's own (it delivers it to the sessions on the link)
        case .writeServiceChangedConfiguration(let link, let descriptor):
            host.write(on: link, attribute: descriptor, value: [0x02, 0x00]) { _ in }
        case .startAdvertising(let request, let attempt):
            host.startAdvertising(request.parameters, data: request.data, scanResponse: request.scanResponse) {
                [weak self] result in
                self?.step { ((), $0.machine.advertisingAnswered(attempt, result)) }
            }
        case .stopAdvertising: host.stopAdvertising { _ in }
        case .advertisingStarted(let id, let error):
            let (waiting, resumed) = state.withLock { s in
                // A start that failed put nothing on the air whose end could be told.
                if error != nil { s.advertisingEnds[id] = nil }
                let resumed = error == nil ? s.resumedAdvertising[id] : s.resumedAdvertising.removeValue(forKey: id)
                return (s.advertisingStarts.removeValue(forKey: id), resumed)
            }
            waiting?.tell(error.map { .failure($0) } ?? .success(()))
            if let resumed { deliverResumed(.resumedAdvertising(error), to: resumed) }
        case .advertisingRefused(let id, let error):
            let (ended, resumed) = state.withLock {
                ($0.advertisingEnds.removeValue(forKey: id), $0.resumedAdvertising.removeValue(forKey: id))
            }
            ended?.tell(error)
            if let resumed { deliverResumed(.resumedAdvertisingEnded(error), to: resumed) }
        case .publish(let session, let definitions): publishResumed(definitions, for: session)
        case .advertiseResumed:
            // Known in the step that made it (`resumedAdvertising`).
            break
        case .alert(let kind, let session, let peer):
            // Named as the system last heard the peer (its advertisement's name, kept by the store).
            let name = store.existingIdentifier(for: peer).flatMap { store.knownPeer($0)?.name }
            let now = scheduler.now
            state.withLock { s in
                // Not for a connect let go of since the alert was queued (its end asks none either).
                guard s.machine.stillAsks(kind, session, about: peer) else { return }
                s.machine.connectionAlert(kind, for: session, peer: peer, name: name, at: now)
            }
        case .startTimer(let timer, let delay):
            if case .reconnect(let peer, _) = timer {
                Self.logger.info("reconnection to \(peer) did not succeed; the system tries again in \(delay)")
            }
            _ = scheduler.schedule(after: delay) { [weak self] in
                self?.step { ((), $0.machine.timerFired(timer)) }
            }
        case .writeDescriptor(let link, let descriptor, let value, let id):
            writeDescriptor(value, descriptor: descriptor, on: link, id: id)
        case .subscriptionWritten(let id, let error):
            let waiting = state.withLock { $0.subscriptionWaiters.removeValue(forKey: id) } ?? []
            if waiting.isEmpty, let error {
                // A write on the system's account: no app hears of its refusal, so it is said here.
                Self.logger.notice(
                    "the peer refused the notification setting the system wrote for its apps (write \(id.rawValue)): \(error)"
                )
            }
            for done in waiting { done(error.map { .failure($0) } ?? .success(())) }
        }
    }

    /// An event of the host, in the order the host produced it: the system takes its part (scans, links, the
    /// GATT server's owners), and the managers it concerns are told of it after that part, in the same step
    /// (`SystemMachine.route`). The host's event handler; a test may feed events here as a controller would cause
    /// them.
    public func handle(_ event: HostEvent) {
        switch event {
        case .transportClosed(let reason):
            let why = reason ?? "the controller's transport closed"
            step { s in
                (
                    (),
                    s.machine.securityReset(why) + s.machine.scanFailed() + s.machine.linksReset()
                        + s.machine.advertisingReset(Self.gone)
                )
            }
            setPower(.poweredOff(reason: why))
        case .controllerResetting(let reason):
            // As on iOS (IOSRules.md 6.7): managers see `.resetting`; scans, pending connects, advertising and links
            // end without a callback each (the host reports no link's end: every table keyed by link is cleared
            // here, in this one step).
            step { s in
                (
                    (),
                    s.machine.securityReset(reason) + s.machine.scanFailed() + s.machine.linksReset()
                        + s.machine.advertisingReset(Self.gone)
                )
            }
            setPower(.resetting(reason: reason))
        case .controllerRestarted(.success):
            setPower(.poweredOn)
        case .controllerRestarted(.failure(let error)):
            setPower(.poweredOff(reason: "the controller did not come back after a reset: \(error.message)"))
        case .advertisingReport(let report):
            // The scans' deliveries and the event's in one step (a report is the busiest event after notifications).
            return route(event) { s, actions in s.machine.advertisingReport(report, into: &actions) }
        case .advertisingEnded:
            step { ((), $0.machine.advertisingInterrupted()) }
        case .connected(let info):
            let peer = store.existingIdentifier(for: info.peer)
            let bond = peer.flatMap { store.bond(for: $0) }
            // At once, before the host takes anything more from the peer: what its GATT server answers depends
            // on it (Insufficient Encryption rather than Authentication for a bonded peer).
            if bond != nil, host.configuration.security != nil { host.setPeerBonded(on: info.handle, true) }
            return route(event) { s, actions in
                // A phone encrypts a bonded peripheral's link at once, with the key it kept.
                actions += s.machine.securityLinkUp(info, bonded: bond != nil, centralKey: bond?.centralKey != nil)
                guard info.role == .central else { return }
                // The peer's Database Hash is read before any discovery on the link. A bonded peer's link is held
                // from the apps while it is encrypted: as on iOS, their connection completes once it is, and fails
                // when it cannot be (a peer that lost the key: `peerRemovedPairingInformation`).
                actions += s.machine.discoveryLinkUp(info.handle, peer: peer)
                actions += s.machine.linkConnected(info, securing: s.machine.security.isSecuring(info.handle))
            }
        case .encryptionChanged(let handle, let encrypted, .success):
            return route(event) { s, actions in actions += s.machine.encryptionChanged(handle, encrypted: encrypted) }
        case .pairingCompleted(let handle, let result):
            // The bond is kept first: whoever hears of the pairing finds it in the store.
            let identifier = keepBond(result, on: handle)
            let outcome = PairingOutcome(result: result, bondIdentifier: identifier)
            return route(event) { s, actions in actions += s.machine.pairingCompleted(handle, outcome) }
        case .pairingFailed(let handle, let failure):
            return route(event) { s, actions in actions += s.machine.pairingFailed(handle, failure) }
        case .pairingPrompt(let handle, let prompt):
            step { ((), $0.machine.pairingPrompt(handle, prompt)) }
        case .longTermKeyRequested(let handle, let ediv, let rand):
            host.replyLongTermKey(on: handle, key: keyForRequest(handle, ediv: ediv, rand: rand)?.key)
        case .securityRequested(let handle, _):
            // Central: the peripheral wants security; encrypt with the bond, or pair.
            let bonded = hasCentralKey(handle)
            step { ((), $0.machine.securityRequested(handle, bonded: bonded)) }
        case .valueUpdated(let link, let attribute, let value, isIndication: true)
        where isServiceChanged(attribute, on: link):
            // Every app on the link forgets what was discovered there, before any of them hears of it (whatever
            // the range: a service that only overlaps it changed too, and the indication is rare).
            return route(event) { s, actions in
                if value.count >= 4 { actions += s.machine.peerServicesChanged(on: link) }
            }
        case .valueUpdated(let link, let attribute, let value, let isIndication):
            return deliver(.valueUpdated(link, attribute, value, isIndication: isIndication), on: link)
        case .readyToWriteWithoutResponse(let link):
            return deliver(.readyToWrite(link), on: link)
        case .connectionFailed(let peer, let error):
            step { ((), $0.machine.connectionFailed(peer, error)) }
        case .disconnected(let handle, let reason):
            return route(event) { s, actions in actions += s.machine.linkDisconnected(handle, reason: reason) }
        default:
            break
        }
        route(event) { _, _ in }
    }

    /// Steps `body` (the system's part of `event`, into `actions`), then routes `event` to the managers it
    /// concerns, after those actions. When all that makes is deliveries and there is nothing else to do in the
    /// domain (nothing queued, no drain under way: the path of nearly every notification and advertisement), they
    /// are performed at once, as the drainer, rather than through the queue.
    func route(_ event: HostEvent, _ body: (inout State, inout [SystemAction]) -> Void) {
        let inDomain = scheduler.isExecuting
        let (direct, drain) = state.withLock { s -> (Direct, DomainOutbox<SystemAction>.Start) in
            var actions = s.scratch
            s.scratch = []
            defer {
                actions.removeAll(keepingCapacity: true)
                s.scratch = actions
            }
            body(&s, &actions)
            s.machine.route(event, into: &actions)
            // Nothing to do (a notification on a link nobody is on any more): no drain either.
            if actions.isEmpty { return (.queued, .none) }
            guard actions.allSatisfy(\.isDelivery), s.outbox.beginDirect(inDomain: inDomain) else {
                return (.queued, s.outbox.append(contentsOf: actions, inDomain: inDomain))
            }
            // Most often one manager (the one on a notification's link): no array is made for it.
            if actions.count == 1, case .deliver(let id, let event) = actions[0] {
                return (.one(actions[0], s.recipient(id, event)), .none)
            }
            return (
                .many(
                    actions.map { action in
                        guard case .deliver(let id, let event) = action else { preconditionFailure() }
                        return (action, s.recipient(id, event))
                    }), .none
            )
        }
        switch direct {
        case .queued: return start(drain)
        case .one(let action, let session): perform(action, for: session)
        case .many(let deliveries): for (action, session) in deliveries { perform(action, for: session) }
        }
        drainOutbox()
    }

    /// A notification, indication or readiness to write on `link`: told to the sessions on it, as
    /// `SystemMachine.route` says, without a step of the machine (the system has no part in it), and when nothing
    /// else is to be done in the domain, at once (the busiest path of all).
    func deliver(_ event: SessionEvent, on link: ConnectionHandle) {
        let inDomain = scheduler.isExecuting
        let (direct, drain) = state.withLock { s -> ([WeakSession?]?, DomainOutbox<SystemAction>.Start) in
            let route = s.route(on: link)
            if route.sessions.isEmpty { return (nil, .none) }
            // A connect that asked alerts for its notifications (rare): queued with them.
            if route.alerting, case .valueUpdated(_, let attribute, _, _) = event {
                let alerts = s.machine.notificationAlerts(link, attribute)
                if !alerts.isEmpty {
                    let deliveries = route.sessions.map { SystemAction.deliver($0, event) }
                    return (nil, s.outbox.append(contentsOf: deliveries + alerts, inDomain: inDomain))
                }
            }
            if s.outbox.beginDirect(inDomain: inDomain) {
                for id in route.noted { s.note(event, for: id) }
                return (route.reached, .none)
            }
            return (nil, s.outbox.append(contentsOf: route.sessions.map { .deliver($0, event) }, inDomain: inDomain))
        }
        guard let direct else { return start(drain) }
        for sink in direct { sink?.session?.apply(event) }
        drainOutbox()
    }

    /// Who a link's events reach (`State.route(on:)`), as of the links', the recipients' and the kept sessions'
    /// revisions: the managers told, and the kept ones the events are noted for.
    struct LinkRoute {
        var link: ConnectionHandle
        var links: UInt64
        var recipients: UInt64
        var noting: UInt64
        var sessions: [SessionID]
        var reached: [WeakSession?]
        var noted: [SessionID]
        /// Whether a session's connect asked alerts for the link's notifications.
        var alerting: Bool
    }

    /// The deliveries a routed event's step performs at once (`route`), each with the manager it reaches
    /// (`queued`: it made none, or queued them for a drain).
    enum Direct {
        case queued
        case one(SystemAction, Recipient)
        case many([(SystemAction, Recipient)])
    }

    /// Whom a delivery reaches (`State.recipient`).
    enum Recipient {
        /// The manager, told now.
        case manager(any SystemSession)
        /// Nobody: the manager went away.
        case gone
        /// Nobody now: noted for the kept manager's restorer.
        case noted
    }
}
