import BLECore
import BLEGATT
import BLEHost

/// A manager of an app being terminated, as the restoration rules see it: known by its session in the machine,
/// by its object's identity at `SystemCore`'s calls.
package struct RestorationCandidate<Manager: Hashable & Sendable>: Sendable, Hashable {
    package var manager: Manager
    package var role: SessionRole
    package var restoreIdentifier: String?
    /// Whether it has work the system can carry on: for a central manager a scan for services, a link or a
    /// pending connection; for a peripheral manager services or an advertisement.
    package var restorable: Bool

    package init(manager: Manager, role: SessionRole, restoreIdentifier: String?, restorable: Bool) {
        self.manager = manager
        self.role = role
        self.restoreIdentifier = restoreIdentifier
        self.restorable = restorable
    }

    /// The same candidate, known as `other`.
    func known<Other>(as other: Other) -> RestorationCandidate<Other> {
        RestorationCandidate<Other>(
            manager: other, role: role, restoreIdentifier: restoreIdentifier, restorable: restorable)
    }
}

/// Which managers the system keeps for apps that are not running, for state restoration (IOSRules.md 5, 6.2–6.5),
/// by app, role and restore identifier, and the rules that decide it: which managers a termination keeps, what a
/// launch takes over and what it lets go of, what a force-quit or Bluetooth turned off ends, and what a relaunch
/// names in its launch options.
///
/// What reaches a kept manager is noted here (`Notes`), not told to it: the manager that restores it takes the
/// notes and applies them, in order, to the kept one's state (`take`) or, for those that came while it took over,
/// to its own (`replaced`). The first note that would wake the app relaunches it (`note`). The work a restarted
/// system carries on (`Resume`: a central's pending connects and scan for services, a peripheral manager's services
/// and advertisement) is started by the machine when the controller is on, whoever holds the session then.
package struct RestorationTable: Sendable, Hashable {
    /// A manager of an app being terminated, known by its session.
    package typealias Candidate = RestorationCandidate<SessionID>

    /// What is kept for one app, by role and restore identifier.
    package struct Kept: Sendable, Hashable {
        package var centrals: [String: SessionID] = [:]
        package var peripherals: [String: SessionID] = [:]

        subscript(role role: SessionRole) -> [String: SessionID] {
            get { role == .central ? centrals : peripherals }
            set {
                if role == .central { centrals = newValue } else { peripherals = newValue }
            }
        }

        var all: [SessionID] { (Array(centrals.values) + Array(peripherals.values)).sorted() }
        var isEmpty: Bool { centrals.isEmpty && peripherals.isEmpty }
    }

    /// What reached a kept session since it was kept (or since its restorer last took its notes).
    package struct Notes: Sendable, Hashable {
        /// The events, oldest first.
        package private(set) var events: [SessionEvent] = []
        /// Whether one of them woke the app (asked for its relaunch).
        package private(set) var woke = false
        /// Taken over by a restorer: what comes now is what it would have been told itself, all of it.
        package private(set) var taken = false

        /// Beyond this many while the app is not running, the oldest of a stream (a discovery, a notification, a
        /// central's Write Command) goes first. A central-role link's events and a central's requests are all
        /// kept: the restorer's state depends on each of them, and a request waits for an answer (there are few:
        /// one a link at a time). What a central's link to a kept peripheral manager changed keeps its latest MTU
        /// and subscription per characteristic, and all of it (its security's events too) goes with the link's
        /// end.
        package static let limit = 64

        /// Notes `event`; while the app is not running, events of one key (a device's discovery, a
        /// characteristic's value, a subscription) replace each other, and a central's link that ended leaves
        /// only its requests (and, when it was up before the notes began, its end).
        mutating func append(_ event: SessionEvent, wakes: Bool) {
            if wakes { woke = true }
            guard !taken else { return events.append(event) }
            let before = events.count
            var kept = true
            if let key = Self.key(of: event) { events.removeAll { Self.key(of: $0) == key } }
            if case .server(.disconnected(let handle, _)) = event {
                events.removeAll { noted in
                    guard Self.changesLink(noted) == handle else { return false }
                    // Up and down while noted: the restorer has nothing to undo.
                    if case .server(.connected) = noted { kept = false }
                    return true
                }
            }
            if kept, events.count >= Self.limit, let oldest = events.firstIndex(where: Self.isStream) {
                events.remove(at: oldest)
            }
            if kept { events.append(event) }
            // Runs of states meet only where a state is added or a note between two runs went (not on every
            // discovery or notification, the busiest notes).
            var isPower = false
            if case .powerChanged = event { isPower = true }
            if isPower || events.count != before + (kept ? 1 : 0) { collapsePowerRuns() }
        }

        /// Of the states told one after another with nothing between them, the kept manager's state depends only
        /// on the first that is not `.poweredOn` (what it ends: its links, its scan) and on the last: the others
        /// go, so a manager kept under many power changes does not grow its notes with them.
        private mutating func collapsePowerRuns() {
            var kept: [SessionEvent] = []
            var run: [SystemPowerState] = []
            func endRun() {
                guard let last = run.last else { return }
                if let first = run.dropLast().first(where: { $0 != .poweredOn }), first != last {
                    kept.append(.powerChanged(first))
                }
                kept.append(.powerChanged(last))
                run = []
            }
            for event in events {
                if case .powerChanged(let state) = event {
                    run.append(state)
                } else {
                    endRun()
                    kept.append(event)
                }
            }
            endRun()
            if kept.count != events.count { events = kept }
        }

        /// The central's link whose state `event` changes for a kept peripheral manager (not a request: it
        /// waits for its answer, link or not).
        static func changesLink(_ event: SessionEvent) -> ConnectionHandle? {
            guard case .server(let event) = event else { return nil }
            switch event {
            case .connected(let info): return info.handle
            case .mtuChanged(let handle, _), .pairingStarted(let handle, _), .pairingCompleted(let handle, _),
                .pairingFailed(let handle, _), .encryptionChanged(let handle, _, _),
                .subscriptionChanged(let handle, _, _, _):
                return handle
            default: return nil
            }
        }

        /// Kept again (its app ended before its restorer took its place): a stream keeps its latest again.
        mutating func kept() {
            taken = false
        }

        /// The events noted so far, taken by the restorer: the next take starts after them, and from now on
        /// nothing is collapsed (a restorer takes over in an instant).
        mutating func take() -> [SessionEvent] {
            defer {
                events = []
                taken = true
            }
            return events
        }

        /// What makes two events of a stream the same for the restorer: only the latest of each is applied.
        enum Key: Hashable {
            case device(BluetoothAddress)
            case value(ConnectionHandle, AttributeHandle)
            case advertised(BluetoothAddress)
            case readyToWrite(ConnectionHandle)
            case connection(ConnectionHandle)
            case databaseChanged(ConnectionHandle)
            case readyToNotify
            /// A kept peripheral manager's central's: the latest stands for the state, and none may go.
            case mtu(ConnectionHandle)
            case subscription(ConnectionHandle, AttributeHandle)

            /// Of a stream: the oldest may go beyond the limit.
            var isStream: Bool {
                switch self {
                case .mtu, .subscription: false
                default: true
                }
            }
        }

        /// An event of a stream, the first to go beyond the limit: one with such a key, or a central's Write
        /// Command (nobody waits for its answer).
        static func isStream(_ event: SessionEvent) -> Bool {
            if let key = key(of: event) { return key.isStream }
            if case .server(.serverWrite(nil, _, _)) = event { return true }
            return false
        }

        static func key(of event: SessionEvent) -> Key? {
            switch event {
            case .discovered(let discovery, _): .device(discovery.address)
            case .valueUpdated(let link, let attribute, _, _): .value(link, attribute)
            case .advertised(let address, _): .advertised(address)
            case .readyToWrite(let link): .readyToWrite(link)
            case .connectionEvent(let link, _, _): .connection(link)
            case .peerDatabaseChanged(let link): .databaseChanged(link)
            case .server(.readyToNotify): .readyToNotify
            case .server(.mtuChanged(let link, _)): .mtu(link)
            case .server(.subscriptionChanged(let link, let attribute, _, _)): .subscription(link, attribute)
            default: nil
            }
        }
    }

    /// The work a restarted system carries on for a kept session from its preserved record, started once the
    /// controller is on (5e): a central's pending connects and its scan for services; a peripheral manager's
    /// services, published again, and its advertisement.
    package struct Resume: Sendable, Hashable {
        package struct Peer: Sendable, Hashable {
            package var address: BluetoothAddress
            package var autoReconnect: Bool
            package var alerts: ConnectionAlertWishes
            package init(
                address: BluetoothAddress, autoReconnect: Bool, alerts: ConnectionAlertWishes = ConnectionAlertWishes()
            ) {
                self.address = address
                self.autoReconnect = autoReconnect
                self.alerts = alerts
            }
        }
        /// The scan's request and the id its discoveries carry.
        package struct Scan: Sendable, Hashable {
            package var request: ScanRequest
            package var id: UInt64
            package init(request: ScanRequest, id: UInt64) {
                self.request = request
                self.id = id
            }
        }
        /// An advertisement: as asked, and its background form (the app is not running).
        package struct Advertisement: Sendable, Hashable {
            package var request: AdvertisingRequest
            package var background: AdvertisingRequest?
            package init(request: AdvertisingRequest, background: AdvertisingRequest?) {
                self.request = request
                self.background = background
            }
        }
        package var peers: [Peer]
        package var scan: Scan?
        /// In the record's order (the session hears their handles in it: `.resumedServicesPublished`).
        package var services: [GATTServiceDefinition]
        package var advertisement: Advertisement?

        package init(
            peers: [Peer] = [], scan: Scan? = nil, services: [GATTServiceDefinition] = [],
            advertisement: Advertisement? = nil
        ) {
            self.peers = peers
            self.scan = scan
            self.services = services
            self.advertisement = advertisement
        }
    }

    package private(set) var kept: [String: Kept] = [:]
    /// How each app last stopped.
    package private(set) var lastTermination: [String: AppTermination] = [:]
    /// The notes of each kept session, from its keeping until its restorer replaces it (or it goes).
    package private(set) var notes: [SessionID: Notes] = [:]
    /// Changes whenever a session starts or stops being noted (never the same twice): who a link's events are
    /// noted for may be kept for as long as it does not.
    package private(set) var notingRevision: UInt64 = 0
    /// Work of a restarted system's kept sessions not started yet (the controller is not on).
    package private(set) var resuming: [SessionID: Resume] = [:]
    /// The apps whose relaunch was asked since they last launched.
    private var relaunching: Set<String> = []

    package init() {}

    /// The managers a termination by `cause` keeps, of an app declaring `modes`: none when the user ended it
    /// (5e); otherwise each with a restore identifier, in an app with its role's background mode (5.3: without
    /// it a manager is never restored), and with work the system can carry on (5.5, 6.3–6.5). Of two with one
    /// restore identifier and role, the later counts.
    package static func keeps(
        _ cause: AppTermination, modes: Set<AppBackgroundMode>, candidates: [Candidate]
    ) -> [Candidate] {
        guard cause != .byUser else { return [] }
        var chosen: [String: Candidate] = [:]
        for candidate in candidates {
            let mode: AppBackgroundMode = candidate.role == .central ? .bluetoothCentral : .bluetoothPeripheral
            guard modes.contains(mode), let id = candidate.restoreIdentifier, candidate.restorable else { continue }
            chosen["\(candidate.role)/\(id)"] = candidate
        }
        return chosen.values.sorted { $0.manager < $1.manager }
    }

    /// `app` was terminated by `cause`, the system keeping `keeping` (chosen by `keeps`). What an earlier
    /// termination kept and this one does not is let go of: a force-quit ends it (5e), a later termination by the
    /// system keeps only what it keeps. Returns the sessions let go of.
    package mutating func terminated(_ app: String, cause: AppTermination, keeping: [Candidate]) -> [SessionID] {
        lastTermination[app] = cause
        var now = Kept()
        for candidate in keeping {
            guard let id = candidate.restoreIdentifier else { continue }
            now[role: candidate.role][id] = candidate.manager
        }
        let kept = Set(now.all)
        let released = (self.kept[app]?.all ?? []).filter { !kept.contains($0) }
        self.kept[app] = now.isEmpty ? nil : now
        relaunching.remove(app)
        // What reaches a kept manager from now on is noted (an earlier keeping's notes go on, as the notes of an
        // app that is not running: a restorer of the ended launch may have taken them).
        for session in now.all {
            if notes[session] == nil { startNoting(session) } else { notes[session]!.kept() }
        }
        for session in released { drop(session) }
        return released
    }

    /// A restarted system keeps `session` for `app`, which is not running (its preserved record). One record per
    /// app, role and identifier: a second under the same is refused (false).
    @discardableResult
    package mutating func keep(_ session: SessionID, of app: String, role: SessionRole, restoreIdentifier: String)
        -> Bool
    {
        guard kept[app]?[role: role][restoreIdentifier] == nil else { return false }
        kept[app, default: Kept()][role: role][restoreIdentifier] = session
        startNoting(session)
        return true
    }

    /// What reaches `session` is noted from now on.
    private mutating func startNoting(_ session: SessionID) {
        notes[session] = Notes()
        notingRevision &+= 1
    }

    /// Work `session` (kept by `keep`) carries on once the controller is on.
    mutating func resume(_ session: SessionID, _ work: Resume) {
        resuming[session] = work
    }

    /// `session` cancelled its connect to `peer`: not started for it once the controller is on.
    mutating func withdraw(_ peer: BluetoothAddress, of session: SessionID) {
        resuming[session]?.peers.removeAll { $0.address == peer }
    }

    /// `session` started or stopped a scan of its own: the kept one is not started for it.
    mutating func withdrawScan(of session: SessionID) {
        resuming[session]?.scan = nil
    }

    /// `session` started or stopped an advertisement of its own: the kept one is not started for it.
    mutating func withdrawAdvertising(of session: SessionID) {
        resuming[session]?.advertisement = nil
    }

    /// `session` took out every service it published: the kept ones are not published for it.
    mutating func withdrawServices(of session: SessionID) {
        resuming[session]?.services = []
    }

    /// `session` was told the controller is off (or not allowed): nothing is started for it.
    mutating func withdrawAll(of session: SessionID) {
        resuming[session] = nil
    }

    /// The controller is on: the work waiting for it, to start now, by session.
    mutating func takeResuming() -> [(SessionID, Resume)] {
        defer { resuming = [:] }
        return resuming.keys.sorted().map { ($0, resuming[$0]!) }
    }

    /// Whether what reaches `session` is noted rather than told (a kept session, or one being taken over;
    /// `SystemMachine.notes(_:_:)` says which events).
    @inline(__always)
    package func notes(_ session: SessionID) -> Bool {
        !notes.isEmpty && notes[session] != nil
    }

    /// Notes `event` for `session` (`notes(session)` holds). Returns the app to relaunch when the event wakes it
    /// (`wakes`), the session is still kept (not being taken over) and no relaunch was asked since its last launch.
    package mutating func note(_ event: SessionEvent, for session: SessionID, wakes: Bool) -> String? {
        guard notes[session] != nil else { return nil }
        notes[session]!.append(event, wakes: wakes)
        guard wakes, let app = app(keeping: session), !relaunching.contains(app) else { return nil }
        relaunching.insert(app)
        return app
    }

    /// The notes of `session` so far, taken (its restorer applies them to the kept manager); later ones are noted
    /// until `replaced`.
    package mutating func takeNotes(of session: SessionID) -> [SessionEvent] {
        notes[session]?.take() ?? []
    }

    /// Whether something that would wake `app` reached a manager kept for it (a restarted system's app that had no
    /// launch handler then is relaunched once it sets one).
    package func woke(_ app: String) -> Bool {
        kept[app]?.all.contains { notes[$0]?.woke == true } ?? false
    }

    /// The app that keeps `session` (not one being taken over).
    private func app(keeping session: SessionID) -> String? {
        kept.first { $0.value.all.contains(session) }?.key
    }

    /// `session`'s notes and waiting work go (it is closed, or let go of).
    private mutating func drop(_ session: SessionID) {
        if notes.removeValue(forKey: session) != nil { notingRevision &+= 1 }
        resuming[session] = nil
    }

    /// `old` is replaced by `new`, its restorer: the notes since the restorer took them, and the work not started
    /// yet, which is `new`'s now.
    mutating func replaced(_ old: SessionID, by new: SessionID) -> [SessionEvent] {
        let later = notes[old]?.events ?? []
        let work = resuming[old]
        forget(old)
        if let work { resuming[new] = work }
        return later
    }

    /// `session` is gone (closed, or replaced by its restored successor): kept for nobody any more.
    package mutating func forget(_ session: SessionID) {
        drop(session)
        for app in kept.keys.sorted() {
            for role in [SessionRole.central, .peripheral] {
                guard let id = kept[app]?[role: role].first(where: { $0.value == session })?.key else { continue }
                kept[app]?[role: role][id] = nil
            }
            if kept[app]?.isEmpty == true { kept[app] = nil }
        }
    }

    /// A manager made by `app` with `restoreIdentifier` takes over the one kept under it, if any.
    package mutating func take(_ app: String, role: SessionRole, restoreIdentifier: String) -> SessionID? {
        guard let session = kept[app]?[role: role].removeValue(forKey: restoreIdentifier) else { return nil }
        if kept[app]?.isEmpty == true { kept[app] = nil }
        return session
    }

    /// `app`'s launch handler ran: what it did not take over is let go of (the system stops the work it kept for
    /// nobody). Returns the sessions let go of.
    package mutating func launched(_ app: String) -> [SessionID] {
        relaunching.remove(app)
        let released = kept.removeValue(forKey: app)?.all ?? []
        for session in released { drop(session) }
        return released
    }

    /// Bluetooth was turned off in Settings: nothing is restored after it (5e). Returns every kept session, app
    /// by app.
    package mutating func switchedOff() -> [SessionID] {
        defer { kept.removeAll() }
        let released = kept.keys.sorted().flatMap { kept[$0]!.all }
        for session in released { drop(session) }
        return released
    }

    /// The restore identifiers kept for `app` in `role`, sorted.
    package func restoreIdentifiers(of app: String, role: SessionRole) -> [String] {
        (kept[app]?[role: role].keys).map { $0.sorted() } ?? []
    }

    /// What a relaunch of `app` for restoration names in its launch options (5.13, 5.15): the restore
    /// identifiers kept for it, per role; nil when nothing is kept (nothing to relaunch it for).
    package func relaunchOptions(of app: String) -> (centrals: [String], peripherals: [String])? {
        guard let kept = kept[app], !kept.isEmpty else { return nil }
        return (kept.centrals.keys.sorted(), kept.peripherals.keys.sorted())
    }

    /// Whether `session` is kept for an app.
    package func isKept(_ session: SessionID) -> Bool {
        kept.values.contains { $0.centrals.values.contains(session) || $0.peripherals.values.contains(session) }
    }
}
