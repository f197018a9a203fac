import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import BLESMP
import Foundation

/// One manager attached to the system (a central or a peripheral manager), by an id its driver draws and
/// never reuses; the machine uses it only as a key, and as the order managers are told things in (the order
/// they were attached).
package struct SessionID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }
    package static func < (a: SessionID, b: SessionID) -> Bool { a.rawValue < b.rawValue }
    package var description: String { "session \(rawValue)" }
}

/// What the machine asks its driver to do, in the order it asks.
package enum SystemAction: Sendable, Hashable {
    /// Tell a manager something, in order with everything else it is told.
    case deliver(SessionID, SessionEvent)
    /// Have the controller scan with these parameters (start, or change how it scans).
    case startScan(ScanParameters)
    /// Have the controller stop scanning.
    case stopScan
    /// Have the controller connect to these peers (every pending connect of every session, in the order first
    /// asked; none: stop initiating).
    case setConnectTargets([BluetoothAddress])
    /// Have the controller end a link, with this reason.
    case disconnect(ConnectionHandle, HCIStatus)
    /// Write a Client Characteristic Configuration descriptor (its value: 0 none, 1 notifications, 2
    /// indications) on a central-role link, on the system's account (a session left, or what is wanted changed
    /// while a write was on its way); `subscriptionWritten(_:error:)` is stepped when the peer answers.
    case writeDescriptor(ConnectionHandle, AttributeHandle, UInt16, DescriptorWriteID)
    /// Answer whoever asked for the wish that write `id` was made for: done, or refused with this error.
    case subscriptionWritten(DescriptorWriteID, HostError?)
    /// Refuse a client's request to the GATT server (nobody answers for the attribute it names).
    case refuse(GATTServerRequestID, ATTErrorCode)
    /// Take a service out of the GATT server (its session went away with its app).
    case removeService(AttributeHandle)
    /// Step `timerFired(_:)` with this timer after `after` (a timer the machine no longer waits for does nothing
    /// when it fires, so none is ever cancelled).
    case startTimer(SystemTimer, after: Duration)
    /// Have the controller advertise this (replacing what it advertises); `advertisingAnswered(_:_:)` is stepped
    /// with its answer, under the request's number.
    case startAdvertising(AdvertisingRequest, attempt: UInt64)
    /// Have the controller stop advertising.
    case stopAdvertising
    /// Answer a session's start of advertising: the controller advertises for it, or the error says why not.
    case advertisingStarted(AdvertisingStartID, HostError?)
    /// Tell whoever made the start that its advertising, started before, ended: the controller refused it when
    /// it was put on the air again.
    case advertisingRefused(AdvertisingStartID, HostError)
    /// Publish again, in order, the services a restarted system keeps for `session` (its preserved record's);
    /// each published is `servicePublished` by it, and it hears `.resumedServicesPublished` (also with none).
    case publish(SessionID, [GATTServiceDefinition])
    /// The start numbered so is the system's own, for the advertisement it keeps for `session`: its answer and
    /// its end are told to the session as events (`.resumedAdvertising`, `.resumedAdvertisingEnded`). Comes
    /// before the start's actions, so before its answer.
    case advertiseResumed(SessionID, AdvertisingStartID)
    /// Show the alert `session`'s connect asked about `peer` (`connectionAlert`: the rules decide; the driver
    /// gives the time and the peer's name).
    case alert(AlertKind, SessionID, peer: BluetoothAddress)
    /// Read the peer's Database Hash on `link`; `databaseHashRead` is stepped with the answer, with what the store
    /// keeps for `peer` when `againstCache` (or when the peer turns out to have no hash).
    case readDatabaseHash(ConnectionHandle, asOf: UInt64, peer: UUID?, againstCache: Bool)
    /// Ask the peer for a discovery; `discoveryCompleted` is stepped with its answer.
    case discover(DiscoveryID, ConnectionHandle, DiscoveryRequest)
    /// Answer an app's discovery.
    case discoveryAnswered(DiscoveryID, Result<DiscoveryResult, HostError>)
    /// Have the store keep a peer's GATT cache, under its Database Hash; with none, under an empty hash and only
    /// while the peer is bonded (Core Spec 5.4, Vol 3, Part G, 2.5.2).
    case keepGATTCache(UUID, hash: [UInt8]?, GATTCacheRecord)
    /// Have the store forget a peer's GATT cache.
    case dropGATTCache(UUID)
    /// `DiscoveryTable`'s: the peer's database on `link` is not the one its cache was kept for. The machine turns
    /// it into a `.peerDatabaseChanged` delivery to each session on the link; its driver never receives it.
    case peerDatabaseChanged(ConnectionHandle)
    /// Enable the indications of the peer's Service Changed characteristic (write 2 to this configuration
    /// descriptor), for the system.
    case writeServiceChangedConfiguration(ConnectionHandle, AttributeHandle)
    /// Encrypt the link with the key kept for `peer`'s bond (this device central); `encryptionFailed` is stepped
    /// when it cannot be.
    case encrypt(ConnectionHandle, peer: BluetoothAddress)
    /// Pair on the link; `pairingRefused` is stepped when the host refuses or ends it without the pairing machine.
    case pair(ConnectionHandle)
    /// Ask the user the pairing's question (`peer`: the link's peer).
    case prompt(ConnectionHandle, peer: BluetoothAddress?, PairingPrompt)
    /// Answer the pairing's question for the user.
    case answerPairing(ConnectionHandle, PairingAnswer)
    /// Make one ATT exchange after a central's distributed keys; `keysDelivered` is stepped when it comes back.
    case confirmKeyDelivery(ConnectionHandle)
    /// Answer a wait for a link's encryption: encrypted (nil), or why not.
    case secureAnswered(SecureID, SecurityFailure?)
    /// Answer a wait for a pairing.
    case pairAnswered(PairID, PairAnswer)
    /// Relaunch the app in the background for state restoration: something reached a manager kept for it
    /// (`note(_:for:)`).
    case relaunch(String)
}

extension SystemAction {
    /// Whether it tells a manager something (and asks nothing of the host or the store).
    package var isDelivery: Bool {
        if case .deliver = self { return true }
        return false
    }
}

/// A timer the machine started (`.startTimer`), as it is stepped back when it fires.
package enum SystemTimer: Sendable, Hashable {
    /// The pause after a failed attempt of an automatic reconnection to the peer (`token` tells one pause from
    /// another).
    case reconnect(BluetoothAddress, token: UInt64)
    /// The end of an advertisement's turn on the air (`token` tells one turn from another).
    case advertisingTurn(UInt64)
    /// The end of the wait for held advertisements' scan responses (`ScanUnion.scanResponseWait`).
    case scanResponseWait(UInt64)
}

/// What a manager is told.
package enum SessionEvent: Sendable, Hashable {
    /// The state the manager sees changed (or, once attached, is no longer `.unknown`).
    case powerChanged(SystemPowerState)
    /// The manager's app was terminated: the manager lets go of everything it holds in the system. Nothing
    /// reaches it afterwards.
    case appTerminated
    /// A device matched the manager's scan `scan` (after the manager's own coalescing).
    case discovered(SystemDiscovery, scan: UInt64)
    /// The scan `scan` ended without the manager stopping it: the controller refused to scan (`refused`, why),
    /// or went away or is being reset (nil: the power state's change that follows says why).
    case scanEnded(UInt64, refused: HostError?)
    /// The link to a peer the manager connects to is up for it: it just came up (and, for a bonded peer, was
    /// encrypted), or it was up already for another manager.
    case linkAttached(LinkInfo)
    /// The manager's connect to the peer ended without a link.
    case linkFailed(BluetoothAddress, HostError)
    /// The link the manager was on went down, for this reason; with `reconnecting`, the manager's connect asked
    /// to reconnect, and it waits for the peer again.
    case linkDown(ConnectionHandle, HCIStatus, reconnecting: Bool)
    /// A host event of the peripheral role: a client's request, or change of subscription, for an attribute of a
    /// service the manager published (a request is answered by the manager, or refused when it has gone away);
    /// for every peripheral manager, a central's link up or down, its MTU, its pairing and encryption, and the
    /// controller's readiness to notify again.
    case server(HostEvent)
    /// The system published again the services a restarted system keeps for the manager's app (its preserved
    /// record's, `RestorationTable.Resume.services`): each one's handles, in the record's order, or nil where the
    /// server refused it (logged). What the system carries on for the manager starts with this, the
    /// advertisement after it (`resumedAdvertising`).
    case resumedServicesPublished([PublishedService?])
    /// The controller advertises the advertisement a restarted system keeps for the manager (nil), or why not.
    case resumedAdvertising(HostError?)
    /// That advertisement left the air for good: the controller refused it when it put it back.
    case resumedAdvertisingEnded(HostError)
    /// A notification or indication from the peer of a central-role link the manager is on.
    case valueUpdated(ConnectionHandle, AttributeHandle, [UInt8], isIndication: Bool)
    /// A link the manager is on can take a write without response again.
    case readyToWrite(ConnectionHandle)
    /// The peer on a link the manager is on has another database than the one its GATT cache was kept for (its
    /// Database Hash changed while no link was up): what the manager discovered there before is gone.
    case peerDatabaseChanged(ConnectionHandle)
    /// For a manager registered for connection events: a device advertised these services.
    case advertised(BluetoothAddress, [BluetoothUUID])
    /// For a manager registered for connection events: a central-role link to `peer` came up (`up`) or went
    /// down, whichever manager made it.
    case connectionEvent(ConnectionHandle, peer: BluetoothAddress, up: Bool)
}

/// Which manager a session stands for: the host's events of that role reach it.
package enum SessionRole: Sendable, Hashable {
    case central
    case peripheral
}

/// The system above one host, as one value: what the simulated iOS decides, and none of its I/O.
///
/// ### Overview
/// Issue 34 moves the system's rules here one concern at a time (`docs/SystemMachinePlan.md`). Today it
/// holds the managers attached to the system, with their apps; the power state each one sees: the
/// controller's, behind the user's authorization and Bluetooth switch; the scans of every manager as one
/// controller scan (`ScanUnion`); the central-role links, one per peer, shared by the managers that asked for
/// it (`LinkTable`, which also reconnects them), and their subscriptions (`SubscriptionTable`); who answers for
/// each service of the GATT server (`ServiceTable`); and the advertisements taking turns on the controller's
/// one advertising set (`AdvertisingTable`); what was discovered on each link and kept across links
/// (`DiscoveryTable`); pairing and encryption (`SecurityTable`); where each app is in its lifecycle, and the
/// rules for apps out of the foreground that follow (`AppTable`). Its timers are actions (`.startTimer`), stepped
/// back when they fire (`timerFired(_:)`).
///
/// ### Function
/// Inputs come in through mutating methods (a manager attached, detached or replaced by its restored
/// successor, an app terminated, the controller's state, a user's setting); each returns the `SystemAction`s
/// it produced, in order, for the driver (`SystemCore`) to perform in that order. A manager is told its state
/// once when attached (unless it is still `.unknown`) and then once per change of what it sees, never twice
/// the same state in a row; nothing reaches a manager after it is detached or its app is terminated.
///
/// ### Implementation
/// Sessions are kept by id, so they are visited in the order they were attached. Each remembers the state it
/// was last told, which makes "once per change" a comparison rather than a promise of the callers.
package struct SystemMachine: Sendable {
    package private(set) var power = Power()
    package private(set) var sessions: [SessionID: Session] = [:]
    package private(set) var scans: ScanUnion
    package private(set) var links = LinkTable()
    package private(set) var subscriptions = SubscriptionTable()
    package private(set) var services = ServiceTable()
    package private(set) var advertising = AdvertisingTable()
    package private(set) var discovery = DiscoveryTable()
    package private(set) var security: SecurityTable
    package private(set) var apps = AppTable()
    package private(set) var restoration = RestorationTable()
    package internal(set) var alerts = AlertLog()

    /// The links where this device is the peripheral, each once its `connected` event was routed (the managers of
    /// that role hear of those links: `HostEvents.swift`).
    package internal(set) var peripheralRoleLinks: Set<ConnectionHandle> = []
    /// The central-role links the managers registered for connection events were told of, with their peers (so
    /// that their ends are told, even when the host reports none: a reset).
    package internal(set) var centralRoleLinks: [ConnectionHandle: BluetoothAddress] = [:]
    /// The central-role links let go of as the user took Bluetooth away (`withdrawAuthorization`), until they are
    /// down: their end wakes no kept manager, whatever the user allowed since.
    package private(set) var withdrawnLinks: Set<ConnectionHandle> = []
    /// The sessions registered for connection events (`registerForConnectionEvents`), in the order attached.
    package internal(set) var connectionWatchers: [SessionID] = []

    /// A manager as the machine knows it.
    package struct Session: Sendable, Hashable {
        /// The id of its app (`SystemApp.id`).
        package var app: String
        /// Which manager it is: what the host's events for that role reach.
        package var role: SessionRole
        /// The state it was last told; nil before the first.
        package var told: SystemPowerState?
    }

    package init(
        scans: ScanUnion = ScanUnion(backgroundParameters: ScanUnion.parameters), pairs: Bool = true
    ) {
        self.scans = scans
        self.security = SecurityTable(enabled: pairs)
    }

    /// What managers see now.
    package var visible: SystemPowerState { power.visible }

    /// The state `session` was last told (nil: none yet).
    package func told(_ session: SessionID) -> SystemPowerState? { sessions[session]?.told }

    // MARK: Managers

    /// A manager of `app` is attached: it is told its state at once unless that is still `.unknown`.
    package mutating func opened(_ session: SessionID, app: String, role: SessionRole = .central) -> [SystemAction] {
        precondition(sessions[session] == nil, "\(session) attached twice")
        sessions[session] = Session(app: app, role: role)
        var actions: [SystemAction] = []
        tell(session, &actions)
        return actions
    }

    /// A manager is detached (it went away): nothing reaches it any more, and its scan ends, and its links and
    /// pending connects (a link it was the last on is disconnected), and its services.
    package mutating func closed(_ session: SessionID) -> [SystemAction] {
        sessions[session] = nil
        restoration.forget(session)
        connectionWatchers.removeAll { $0 == session }
        var actions = scans.stop(session)
        advertising.stop(session, &actions)
        release(session, &actions)
        links.forget(session)
        for handle in services.removeAll(of: session) { actions.append(.removeService(handle)) }
        services.refuseUnanswered(of: session, &actions)
        return actions
    }

    /// `new`, restored from the kept manager `old`, takes `old`'s place in one step. The state it sees is
    /// returned rather than delivered: the caller tells it once the restoration itself has been told, and it
    /// counts as told. So are the events noted for `old` since its notes were last taken (`takeNotes`), which
    /// are `new`'s to apply, in order, before anything delivered to it after this step; and the work a restarted
    /// system kept for `old` and has not started yet is `new`'s.
    package mutating func replaced(_ old: SessionID?, by new: SessionID, app: String, role: SessionRole = .central)
        -> (power: SystemPowerState, notes: [SessionEvent])
    {
        precondition(sessions[new] == nil, "\(new) attached twice")
        var notes: [SessionEvent] = []
        // It registers for connection events itself if it wants them (a registration is not restored).
        if let old {
            sessions[old] = nil
            connectionWatchers.removeAll { $0 == old }
            notes = restoration.replaced(old, by: new)
            // What the system started for `old` since its services and advertisement were handed over
            // (`servicesTransferred`, `advertisingTransferred`): a restarted system's kept work, say.
            services.transfer(from: old, to: new)
            _ = advertising.transfer(from: old, to: new)
        }
        let state = visible
        sessions[new] = Session(app: app, role: role, told: state == .unknown ? nil : state)
        return (state, notes)
    }

    /// `app` was terminated by `cause`, the system keeping `keeping` for its restoration (chosen by
    /// `RestorationTable.keeps`): its other managers end (`appTerminated(_:keeping:)`). Returns the actions and
    /// the sessions an earlier termination kept that this one lets go of: left registered here, for the caller
    /// to release as any kept manager nothing restores.
    package mutating func appTerminated(
        _ app: String, cause: AppTermination, keeping: [RestorationTable.Candidate]
    ) -> (actions: [SystemAction], released: [SessionID]) {
        let released = restoration.terminated(app, cause: cause, keeping: keeping)
        var actions = appTerminated(app, keeping: Set(keeping.map(\.manager) + released))
        // A kept central manager's scan goes on only when it is for services (IOSRules.md 5.5, 6.5): one for every
        // device ends, and the manager hears it as any scan the system ended (noted, as what reaches it now is).
        for candidate in keeping where candidate.role == .central {
            let session = candidate.manager
            guard let id = scans.scanID(of: session), (scans.request(of: session)?.services ?? []).isEmpty else {
                continue
            }
            actions += scans.stop(session)
            actions.append(.deliver(session, .scanEnded(id, refused: nil)))
        }
        return (actions, released)
    }

    /// A restarted system keeps `session` for its app, not running (a preserved record), with the work the
    /// record names (`work`, a central's): started at once when the controller is on, else when it comes on.
    package mutating func keptForRestoration(
        _ session: SessionID, restoreIdentifier: String, work: RestorationTable.Resume? = nil
    ) -> [SystemAction] {
        guard let known = sessions[session],
            restoration.keep(session, of: known.app, role: known.role, restoreIdentifier: restoreIdentifier)
        else { return [] }
        guard let work else { return [] }
        restoration.resume(session, work)
        var actions: [SystemAction] = []
        if visible == .poweredOn { startResumedWork(&actions) }
        return actions
    }

    /// Starts the work a restarted system keeps for sessions (`RestorationTable.resuming`): each one's pending
    /// connects (one to a peer linked already is attached at once) and its scan, in its app's mode.
    private mutating func startResumedWork(_ actions: inout [SystemAction]) {
        for (session, work) in restoration.takeResuming() {
            guard let known = sessions[session] else { continue }
            for peer in work.peers {
                var attaching: [SystemAction] = []
                if let link = links.connect(
                    session, to: peer.address, autoReconnect: peer.autoReconnect, alerts: peer.alerts, &attaching)
                {
                    actions.append(.deliver(session, .linkAttached(link)))
                }
                // Its alert after the attachment it is about.
                actions += attaching
            }
            if let scan = work.scan {
                actions += scans.start(session, scan.request, id: scan.id, mode: apps.scanMode(of: known.app))
            }
            guard known.role == .peripheral else { continue }
            // As the system restarts them: not refused out of the foreground (that rule is about apps' calls).
            // Told even when the manager withdrew all of it: it then knows the work is over.
            actions.append(.publish(session, work.services))
            if let advertisement = work.advertisement {
                var started: [SystemAction] = []
                let id = advertising.start(
                    session, advertisement.request, background: advertisement.background,
                    mode: apps.advertisingMode(of: known.app), &started)
                actions.append(.advertiseResumed(session, id))
                actions += started
            }
        }
    }

    /// Whether `event`, delivered to `session`, is noted rather than told (`note`): everything that reaches a kept
    /// manager.
    package func notes(_ session: SessionID, _ event: SessionEvent) -> Bool {
        restoration.notes(session)
    }

    /// Notes `event` for a kept session (`notes(_:_:)`), instead of telling it. Returns the app to relaunch when
    /// the event wakes it (IOSRules.md 5.10, 6.2: a device a central's scan was for, a connection made or failed,
    /// a link lost for good, a value it subscribed to; 5.6: a central's read, write or subscription to a kept
    /// peripheral manager's services). A request the system refused as the app ended (its delivery was on its
    /// way) needs nobody: not noted.
    package mutating func note(_ event: SessionEvent, for session: SessionID) -> String? {
        let wakes: Bool
        switch event {
        case .discovered(_, let scan): wakes = scans.scanID(of: session) == scan
        case .linkAttached, .linkFailed: wakes = true
        // Not a link the system let go of as the user took Bluetooth away.
        case .linkDown(let link, _, let reconnecting): wakes = !reconnecting && !withdrawnLinks.contains(link)
        case .valueUpdated(let link, let attribute, _, _):
            wakes = subscriptions.subscribes(session, to: attribute, on: link)
        case .server(.serverRead(let request, _, _, _)), .server(.serverWrite(let request?, _, _)):
            guard services.isUnanswered(request, by: session) else { return nil }
            wakes = true
        case .server(.serverWrite(nil, _, _)), .server(.subscriptionChanged): wakes = true
        default: wakes = false
        }
        return restoration.note(event, for: session, wakes: wakes)
    }

    /// A manager made by `app` in `role` with `restoreIdentifier` takes over the one kept under it, if any: the
    /// kept session, and what was noted for it so far (later events are noted until `replaced`).
    package mutating func takeKept(_ app: String, role: SessionRole, restoreIdentifier: String)
        -> (session: SessionID, notes: [SessionEvent])?
    {
        guard let session = restoration.take(app, role: role, restoreIdentifier: restoreIdentifier) else { return nil }
        return (session, restoration.takeNotes(of: session))
    }

    /// What was noted for the kept `session` since its notes were last taken (`takeKept`), taken now.
    package mutating func takeNotes(of session: SessionID) -> [SessionEvent] {
        restoration.takeNotes(of: session)
    }

    /// `app`'s launch handler ran: the kept sessions it did not take over, to be released.
    package mutating func launched(_ app: String) -> [SessionID] { restoration.launched(app) }

    /// Bluetooth was turned off in Settings: every kept session, to be released.
    package mutating func restorationSwitchedOff() -> [SessionID] { restoration.switchedOff() }

    /// `app` was terminated: each of its managers not in `keeping` (kept for state restoration) is told, and
    /// detached.
    package mutating func appTerminated(_ app: String, keeping: Set<SessionID>) -> [SystemAction] {
        var actions: [SystemAction] = []
        // The requests the ended app never answered are refused, kept managers' too: nobody will answer them
        // (what reaches a kept manager from now on is kept for the one that restores it).
        for id in sessions.keys.sorted() where sessions[id]!.app == app {
            services.refuseUnanswered(of: id, &actions)
        }
        for id in sessions.keys.sorted() where sessions[id]!.app == app && !keeping.contains(id) {
            sessions[id] = nil
            connectionWatchers.removeAll { $0 == id }
            // One a restorer took and had not replaced yet is noted no more: it hears its end.
            restoration.forget(id)
            actions.append(.deliver(id, .appTerminated))
            // What the system did for it ends with it (the manager is detached, and can no longer stop it).
            actions += scans.stop(id)
            advertising.stop(id, &actions)
            release(id, &actions)
            links.forget(id)
            for handle in services.removeAll(of: id) { actions.append(.removeService(handle)) }
        }
        return actions
    }

    /// `app` reported where it is in its lifecycle and its background modes: its sessions' scans and
    /// advertisements follow (nothing changes for a report older than the last).
    package mutating func appChanged(_ app: String, _ report: AppTable.App) -> [SystemAction] {
        guard apps.report(app, report) else { return [] }
        let ids = sessions(of: app)
        let scan = apps.scanMode(of: app)
        let air = apps.advertisingMode(of: app)
        var actions = scans.setModes(Dictionary(uniqueKeysWithValues: ids.map { ($0, scan) }))
        advertising.setModes(Dictionary(uniqueKeysWithValues: ids.map { ($0, air) }), &actions)
        return actions
    }

    /// The managers of `app`, in the order they were attached.
    package func sessions(of app: String) -> [SessionID] {
        sessions.keys.sorted().filter { sessions[$0]!.app == app }
    }

    // MARK: Scans

    /// `session` scans for `request` (replacing its scan, IOSRules.md 1.7), in `mode`; its discoveries carry `id`.
    package mutating func scanStarted(_ session: SessionID, _ request: ScanRequest, id: UInt64, mode: ScanMode)
        -> [SystemAction]
    {
        restoration.withdrawScan(of: session)
        // Asked before the manager heard it is not allowed (`withdrawAuthorization`): it hears the state next.
        guard !isUnauthorized else { return [] }
        return scans.start(session, request, id: id, mode: mode)
    }

    /// `session` stops scanning (a restarted system's scan it holds, not started yet, with it).
    package mutating func scanStopped(_ session: SessionID) -> [SystemAction] {
        restoration.withdrawScan(of: session)
        return scans.stop(session)
    }

    /// The sessions' apps moved in their lifecycles: each scan runs in its app's new mode.
    package mutating func scanModesChanged(_ modes: [SessionID: ScanMode]) -> [SystemAction] {
        scans.setModes(modes)
    }

    /// The restored `new` takes over `old`'s scan, under the scan id `id`; false when `old` did not scan.
    package mutating func scanTransferred(from old: SessionID, to new: SessionID, id: UInt64) -> Bool {
        scans.transfer(from: old, to: new, id: id)
    }

    /// The controller no longer scans (it refused to, with `refused` saying why; it went away, it is being
    /// reset): every scan ends.
    package mutating func scanFailed(refused: HostError? = nil) -> [SystemAction] {
        scans.controllerFailed(refused: refused)
    }

    /// Bluetooth was switched off: every scan ends, and the controller, if it scans, is stopped (after the
    /// scans asked for before, in the order the machine asked).
    package mutating func scansSwitchedOff() -> [SystemAction] {
        let scanning = scans.controllerScanning
        return scans.controllerFailed() + (scanning ? [.stopScan] : [])
    }

    /// An advertising report: the sessions it concerns are told, in `actions` (the notification path's buffer,
    /// so that a report allocates no array of its own).
    package mutating func advertisingReport(_ report: AdvertisingReport, into actions: inout [SystemAction]) {
        scans.received(report, into: &actions)
    }

    // MARK: Links

    /// `session` connects to `peer`: the link's info when a link to it is up already (another manager's; the
    /// session is on it now), else nil, and `.linkAttached` or `.linkFailed` follows. With `autoReconnect`
    /// (IOSRules.md 7.1), once the session has been on the link, its loss is followed by new attempts until the
    /// session lets go.
    package mutating func connect(
        _ session: SessionID, to peer: BluetoothAddress, autoReconnect: Bool = false,
        alerts: ConnectionAlertWishes = ConnectionAlertWishes()
    ) -> (LinkInfo?, [SystemAction]) {
        // Asked before the manager heard it is not allowed: the state it hears next fails the attempt.
        guard !isUnauthorized else { return (nil, []) }
        var actions: [SystemAction] = []
        let link = links.connect(session, to: peer, autoReconnect: autoReconnect, alerts: alerts, &actions)
        return (link, actions)
    }

    /// `session` lets go of `peer`: a pending connect is withdrawn, or it leaves the link (which goes down when
    /// it was the last on it).
    package mutating func cancelConnection(_ session: SessionID, from peer: BluetoothAddress)
        -> (LinkCancellation, [SystemAction])
    {
        var actions: [SystemAction] = []
        // A restarted system's connect it holds, not started yet, is withdrawn (the caller's own is `.nothing`).
        restoration.withdraw(peer, of: session)
        let outcome = links.cancel(session, from: peer, &actions)
        if case .left(let handle) = outcome { subscriptions.leave(session, link: handle, &actions) }
        return (outcome, actions)
    }

    /// `session` lets go of every link and pending connect it has; returns the links it left while others
    /// stay on them.
    package mutating func releaseLinks(of session: SessionID) -> [SystemAction] {
        var actions: [SystemAction] = []
        release(session, &actions)
        return actions
    }

    /// `session` lets go of its links and pending connects, and of its subscriptions on the links others stay on.
    private mutating func release(_ session: SessionID, _ actions: inout [SystemAction]) {
        for handle in links.release(session, &actions) { subscriptions.leave(session, link: handle, &actions) }
    }

    /// The restored `new` takes over `old`'s links and pending connects.
    package mutating func linksTransferred(from old: SessionID, to new: SessionID) {
        links.transfer(from: old, to: new)
        subscriptions.transfer(from: old, to: new)
    }

    // MARK: The GATT server

    /// `session` published `service`: the requests for its attributes reach `session` alone.
    package mutating func servicePublished(_ service: PublishedService, by session: SessionID) {
        services.published(service, by: session)
    }

    /// Forgets the service declared at `handle` if `session` published it; whether it did (its caller then
    /// takes it out of the server).
    package mutating func serviceRemoved(at handle: AttributeHandle, by session: SessionID) -> Bool {
        services.remove(at: handle, by: session)
    }

    /// Forgets every service `session` published; their declaration handles (its caller takes them out).
    package mutating func servicesRemoved(of session: SessionID) -> [AttributeHandle] {
        // Those a restarted system keeps for it, not published yet, are not published any more.
        restoration.withdrawServices(of: session)
        return services.removeAll(of: session)
    }

    /// The restored `new` answers for the services `old` published.
    package mutating func servicesTransferred(from old: SessionID, to new: SessionID) {
        services.transfer(from: old, to: new)
    }

    /// A server event: told to the owners of the attributes it names, or refused; false when it names no
    /// attribute.
    package mutating func serverEvent(_ event: HostEvent, into actions: inout [SystemAction]) -> Bool {
        let (apps, sessions) = (apps, sessions)
        return services.route(event, answering: { apps.answersCentrals(sessions[$0]?.app ?? "") }, &actions)
    }

    /// `session` answers the client's `request`: true when it was routed to it and is not answered yet (the
    /// caller answers it now); false when it was answered, refused, or is another session's.
    package mutating func serverRequestAnswered(_ request: GATTServerRequestID, by session: SessionID) -> Bool {
        services.answer(request, by: session)
    }

    /// The client's `request` reached no session (it went before it was told): true when it is still unanswered
    /// (the caller refuses it now).
    package mutating func serverRequestUndelivered(_ request: GATTServerRequestID) -> Bool {
        services.drop(request)
    }

    /// Services an app discovered on the link `handle` (for every manager's list of connected peers).
    package mutating func noteServices(_ services: [BluetoothUUID], on handle: ConnectionHandle) {
        links.noteServices(services, on: handle)
    }

    /// A central-role link came up; `securing` when the system encrypts it with a bond's key before the managers
    /// waiting for it are attached.
    package mutating func linkConnected(_ info: LinkInfo, securing: Bool) -> [SystemAction] {
        // A handle used again: not the link a denial let go of.
        withdrawnLinks.remove(info.handle)
        var actions: [SystemAction] = []
        links.connected(info, securing: securing, &actions)
        return actions
    }

    /// The held link `handle` is encrypted.
    package mutating func linkSecured(_ handle: ConnectionHandle) -> [SystemAction] {
        var actions: [SystemAction] = []
        links.secured(handle, &actions)
        return actions
    }

    /// The system gives the link `handle` up, for `status`.
    package mutating func linkRefused(_ handle: ConnectionHandle, status: HCIStatus) -> [SystemAction] {
        var actions: [SystemAction] = []
        links.refused(handle, status: status, &actions)
        return actions
    }

    /// The controller's attempt to connect to `peer` failed.
    package mutating func connectionFailed(_ peer: BluetoothAddress, _ error: HostError) -> [SystemAction] {
        var actions: [SystemAction] = []
        links.failed(peer, error, &actions)
        return actions
    }

    /// A link went down.
    package mutating func linkDisconnected(_ handle: ConnectionHandle, reason: HCIStatus) -> [SystemAction] {
        var actions: [SystemAction] = []
        security.disconnected(handle, reason: reason, &actions)
        _ = security.takeEnded()
        services.linkDown(handle)
        discovery.linkDown(handle, &actions)
        subscriptions.linkDown(handle)
        links.disconnected(handle, reason: reason, &actions)
        return actions
    }

    /// The controller went away, is being reset, or Bluetooth was switched off: no link is up or initiated any
    /// more, and nothing is subscribed. A connect list the controller was given (or is about to be: it may still wait in the driver's
    /// queue) is withdrawn, so the controller, or the one that comes back, initiates nothing for a table that
    /// waits for nothing.
    package mutating func linksReset() -> [SystemAction] {
        withdrawnLinks.removeAll()
        let initiating = !links.targets.isEmpty
        links.reset()
        subscriptions.reset()
        services.linkDown(nil)
        var actions: [SystemAction] = initiating ? [.setConnectTargets([])] : []
        discovery.reset(&actions)
        return actions
    }

    // MARK: Advertising

    /// `session` advertises `request` (replacing what it advertised) in `mode`, `background` being its form out
    /// of the foreground with `bluetooth-peripheral`; the start returned is answered by `.advertisingStarted`.
    package mutating func startAdvertising(
        _ session: SessionID, _ request: AdvertisingRequest, background: AdvertisingRequest?, mode: AdvertisingMode
    ) -> (AdvertisingStartID, [SystemAction]) {
        var actions: [SystemAction] = []
        // Its own advertisement replaces the one a restarted system keeps for it, not started yet.
        restoration.withdrawAdvertising(of: session)
        guard !isUnauthorized else {
            // Asked before the manager heard it is not allowed: refused at once.
            let refusal = HostError(.invalidState, "the application is not authorized to use Bluetooth")
            return (advertising.refused(refusal, &actions), actions)
        }
        let id = advertising.start(session, request, background: background, mode: mode, &actions)
        return (id, actions)
    }

    /// `session` stops advertising.
    package mutating func stopAdvertising(_ session: SessionID) -> [SystemAction] {
        restoration.withdrawAdvertising(of: session)
        var actions: [SystemAction] = []
        advertising.stop(session, &actions)
        return actions
    }

    /// The sessions' apps moved in their lifecycles: each advertisement follows its app's new mode.
    package mutating func advertisingModesChanged(_ modes: [SessionID: AdvertisingMode]) -> [SystemAction] {
        var actions: [SystemAction] = []
        advertising.setModes(modes, &actions)
        return actions
    }

    /// The restored `new` advertises what `old` did; returns the start still waiting (its answer is `new`'s now).
    package mutating func advertisingTransferred(from old: SessionID, to new: SessionID) -> [AdvertisingStartID] {
        advertising.transfer(from: old, to: new)
    }

    /// The controller answered the request to advertise numbered `attempt`.
    package mutating func advertisingAnswered(_ attempt: UInt64, _ result: Result<Void, HostError>)
        -> [SystemAction]
    {
        var actions: [SystemAction] = []
        advertising.answered(attempt, result, &actions)
        return actions
    }

    /// A central connected, and the controller stopped advertising.
    package mutating func advertisingInterrupted() -> [SystemAction] {
        var actions: [SystemAction] = []
        advertising.interrupted(&actions)
        return actions
    }

    /// The controller went away, is being reset, or Bluetooth was switched off: nothing advertises, and the
    /// starts waiting hear `error`.
    package mutating func advertisingReset(_ error: HostError) -> [SystemAction] {
        var actions: [SystemAction] = []
        advertising.reset(error, &actions)
        return actions
    }

    // MARK: Discovery

    /// An app asks for `request` on `link`: answered from what is kept, asked of the peer by the caller, or
    /// waiting for the peer's Database Hash.
    package mutating func discover(_ request: DiscoveryRequest, on link: ConnectionHandle) -> DiscoveryAnswer {
        discovery.discover(request, on: link)
    }

    /// The peer answered the discovery `id`.
    package mutating func discoveryCompleted(_ id: DiscoveryID, _ result: Result<DiscoveryResult, HostError>)
        -> [SystemAction]
    {
        var actions: [SystemAction] = []
        discovery.completed(id, result, &actions)
        return actions
    }

    /// A central-role link to `peer` (its identifier in the store, when it has one) came up: its discoveries wait
    /// for the Database Hash.
    package mutating func discoveryLinkUp(_ link: ConnectionHandle, peer: UUID?) -> [SystemAction] {
        var actions: [SystemAction] = []
        discovery.linkUp(link, peer: peer, &actions)
        return actions
    }

    /// The Database Hash read `asOf` ended (`cached`: the store's cache for the peer, when asked; `bonded`:
    /// whether the peer is bonded).
    package mutating func databaseHashRead(
        _ link: ConnectionHandle, asOf: UInt64, _ read: DatabaseHashRead, cached: StoredGATTCache?, bonded: Bool
    ) -> [SystemAction] {
        var table: [SystemAction] = []
        discovery.hashRead(link, asOf: asOf, read, cached: cached, bonded: bonded, &table)
        var actions: [SystemAction] = []
        for action in table {
            if case .peerDatabaseChanged(let link) = action {
                tellDatabaseChanged(link, &actions)
            } else {
                actions.append(action)
            }
        }
        return actions
    }

    /// The peer indicated Service Changed on `link`: what was discovered there is forgotten before any app hears
    /// of it.
    package mutating func peerServicesChanged(on link: ConnectionHandle) -> [SystemAction] {
        var actions: [SystemAction] = []
        discovery.invalidate(link, &actions)
        return actions
    }

    // MARK: Security

    /// A link came up (either role); `bonded`: its peer has a bond, `centralKey`: with a key this device
    /// encrypts with as central (then the link is encrypted at once, and, central, held from its managers until
    /// it is).
    package mutating func securityLinkUp(_ info: LinkInfo, bonded: Bool, centralKey: Bool) -> [SystemAction] {
        var actions: [SystemAction] = []
        security.connected(info, bonded: bonded, centralKey: centralKey, &actions)
        return actions
    }

    /// Someone needs the link encrypted (`bonded`: its peer has a bond with a central key).
    package mutating func secure(_ handle: ConnectionHandle, bonded: Bool) -> (SecureStart, [SystemAction]) {
        var actions: [SystemAction] = []
        let start = security.secure(handle, bonded: bonded, &actions)
        settleSecurity(&actions)
        return (start, actions)
    }

    /// The peer asked for security (a Security Request): the link is secured, for nobody waiting.
    package mutating func securityRequested(_ handle: ConnectionHandle, bonded: Bool) -> [SystemAction] {
        securityStep { _ = $0.secure(handle, bonded: bonded, waiting: false, &$1) }
    }

    /// A user asks to pair on the link.
    package mutating func pair(_ handle: ConnectionHandle) -> ((PairID?, PairAnswer?), [SystemAction]) {
        var actions: [SystemAction] = []
        let answer = security.pair(handle, &actions)
        return (answer, actions)
    }

    /// Whether someone answers the pairing's questions.
    package mutating func prompterChanged(present: Bool) {
        security.setPrompter(present)
    }

    /// The link's encryption changed (successfully).
    package mutating func encryptionChanged(_ handle: ConnectionHandle, encrypted: Bool) -> [SystemAction] {
        securityStep { $0.encryptionChanged(handle, encrypted: encrypted, &$1) }
    }

    /// The encryption with a bond's key failed: with PIN or Key Missing the peer no longer has the key, and the
    /// link is ended (its managers hear why).
    package mutating func encryptionFailed(_ handle: ConnectionHandle, status: HCIStatus) -> [SystemAction] {
        var actions: [SystemAction] = []
        if status == .pinOrKeyMissing { links.refused(handle, status: .pinOrKeyMissing, &actions) }
        security.encryptionFailed(handle, status: status, &actions)
        settleSecurity(&actions)
        return actions
    }

    /// A pairing completed (its bond kept by the driver).
    package mutating func pairingCompleted(_ handle: ConnectionHandle, _ outcome: PairingOutcome) -> [SystemAction] {
        securityStep { $0.pairingCompleted(handle, outcome, &$1) }
    }

    /// The exchange after a central's distributed keys came back.
    package mutating func keysDelivered(_ handle: ConnectionHandle) -> [SystemAction] {
        securityStep { $0.keysDelivered(handle, &$1) }
    }

    /// A pairing failed.
    package mutating func pairingFailed(_ handle: ConnectionHandle, _ failure: SMPPairing.Failure) -> [SystemAction] {
        securityStep { $0.pairingFailed(handle, failure, &$1) }
    }

    /// The host refused or ended a pairing this system asked for, without the pairing machine.
    package mutating func pairingRefused(_ handle: ConnectionHandle, _ error: HostError) -> [SystemAction] {
        securityStep { $0.pairingRefused(handle, error, &$1) }
    }

    /// The key to encrypt the link with is gone from the store: the link is paired instead.
    package mutating func encryptionKeyGone(_ handle: ConnectionHandle) -> [SystemAction] {
        securityStep { $0.keyGone(handle, &$1) }
    }

    /// The pairing asks the user something.
    package mutating func pairingPrompt(_ handle: ConnectionHandle, _ prompt: PairingPrompt) -> [SystemAction] {
        securityStep { $0.prompt(handle, prompt, &$1) }
    }

    /// The controller went away or is being reset: every wait for security fails with `why`.
    package mutating func securityReset(_ why: String) -> [SystemAction] {
        var actions: [SystemAction] = []
        security.reset(why, &actions)
        _ = security.takeEnded()
        return actions
    }

    /// Steps the security table with `body`, then settles the links held for their encryption whose securing
    /// ended there: every security input goes through it, so none can forget them.
    private mutating func securityStep(_ body: (inout SecurityTable, inout [SystemAction]) -> Void) -> [SystemAction] {
        var actions: [SystemAction] = []
        body(&security, &actions)
        settleSecurity(&actions)
        return actions
    }

    /// A link held for its encryption is attached once encrypted, or given up when it cannot be (a peer that
    /// lost the bond's key: its managers' connects fail with `peerRemovedPairingInformation`).
    private mutating func settleSecurity(_ actions: inout [SystemAction]) {
        for end in security.takeEnded() where links.isHeld(end.handle) {
            switch end.failure {
            case nil: links.secured(end.handle, &actions)
            case .peerRemovedPairingInformation?: links.refused(end.handle, status: .pinOrKeyMissing, &actions)
            case .encryption(let status)?: links.refused(end.handle, status: status, &actions)
            case .pairing?: links.refused(end.handle, status: .authenticationFailure, &actions)
            case .unavailable?: break  // the link is down already; its end tells its managers
            }
        }
    }

    // MARK: Timers

    /// A timer the machine started fired.
    package mutating func timerFired(_ timer: SystemTimer) -> [SystemAction] {
        var actions: [SystemAction] = []
        switch timer {
        case .reconnect(let peer, let token): links.retry(peer, token: token, &actions)
        case .advertisingTurn(let token): advertising.turnEnded(token, &actions)
        case .scanResponseWait(let token): scans.scanResponseWaitEnded(token, into: &actions)
        }
        return actions
    }

    // MARK: Subscriptions

    /// `session` wants `value` (0 none, 1 notifications, 2 indications) in the Client Characteristic
    /// Configuration descriptor at `descriptor` on `link`: done at once when the peer already holds what every
    /// session wants together, refused when the session is not on the link, else written (by the caller, at
    /// once) or waiting for the write on its way.
    package mutating func subscribe(
        _ session: SessionID, _ value: UInt16, descriptor: AttributeHandle, characteristic: AttributeHandle? = nil,
        on link: ConnectionHandle
    ) -> (SubscriptionAnswer, [SystemAction]) {
        guard links.isUser(session, of: link) else { return (.notOnLink, []) }
        var actions: [SystemAction] = []
        let answer = subscriptions.set(
            value, by: session, descriptor: descriptor, characteristic: characteristic, on: link, &actions)
        return (answer, actions)
    }

    /// The peer answered the write `id` (`error`: its refusal, or the link's end).
    package mutating func subscriptionWritten(_ id: DescriptorWriteID, error: HostError?) -> [SystemAction] {
        var actions: [SystemAction] = []
        subscriptions.written(id, error: error, &actions)
        return actions
    }

    // MARK: Power

    /// The controller's own state changed (initialised, refused, gone, resetting, back).
    package mutating func controllerChanged(_ state: SystemPowerState) -> [SystemAction] {
        change { $0.controller = state }
    }

    /// The user turned Bluetooth off or on in Settings.
    package mutating func bluetoothSwitched(on enabled: Bool) -> [SystemAction] {
        change { $0.bluetoothEnabled = enabled }
    }

    /// The user answered the authorization prompt, or changed the setting.
    package mutating func authorizationChanged(_ authorization: SystemAuthorization) -> [SystemAction] {
        change { $0.authorization = authorization }
    }

    /// The system is shut down; returns false when it already was.
    package mutating func shutDown() -> Bool {
        defer { power.isShutDown = true }
        return !power.isShutDown
    }

    private mutating func change(_ body: (inout Power) -> Void) -> [SystemAction] {
        let before = visible
        body(&power)
        var actions: [SystemAction] = []
        for id in sessions.keys.sorted() { tell(id, &actions) }
        if visible == .unauthorized, before != .unauthorized { withdrawAuthorization(&actions) }
        if visible == .poweredOn { startResumedWork(&actions) }
        return actions
    }

    /// The user took Bluetooth away from the apps (IOSRules.md 6.7): the controller still works, but no app may
    /// use it. Every scan ends, every link and connection attempt is let go of (so they end on the controller)
    /// and every advertisement stops, whoever holds them (a manager told `.unauthorized` just before, a kept one,
    /// one being restored and not attached yet); the links centrals made to the apps' services are ended too.
    /// Until the user allows it again, what a manager asks before it hears the state is refused (`scanStarted`,
    /// `connect`, `startAdvertising`).
    private mutating func withdrawAuthorization(_ actions: inout [SystemAction]) {
        var holders = Set(sessions.keys).union(scans.scanners.keys)
        holders.formUnion((advertising.entries + advertising.paused).map(\.session))
        for peer in links.peers.values {
            holders.formUnion(peer.users + peer.waiting + peer.retrying.keys)
            if let link = peer.link, !peer.users.isEmpty { withdrawnLinks.insert(link.handle) }
        }
        for id in holders.sorted() {
            actions += scanStopped(id)
            release(id, &actions)
            advertising.stop(id, &actions)
        }
        for handle in peripheralRoleLinks.sorted(by: { $0.rawValue < $1.rawValue }) {
            actions.append(.disconnect(handle, .remoteUserTerminatedConnection))
        }
    }

    /// Whether the user took Bluetooth away from the apps: what they ask is refused until allowed again.
    private var isUnauthorized: Bool { visible == .unauthorized }

    /// Tells `session` the state it sees, unless it was told that already (or it is `.unknown`, which a
    /// manager starts in).
    private mutating func tell(_ session: SessionID, _ actions: inout [SystemAction]) {
        let state = visible
        guard let current = sessions[session], (current.told ?? .unknown) != state else { return }
        sessions[session]!.told = state
        actions.append(.deliver(session, .powerChanged(state)))
        // A central manager told the controller is off (or not allowed) has no pending connects nor scan any
        // more: the work a restarted system kept for it, not started yet, goes with them. A peripheral manager's
        // services and advertisement wait for the controller to be on (a restarting controller's first states).
        if state != .poweredOn, current.role == .central { restoration.withdrawAll(of: session) }
    }
}
