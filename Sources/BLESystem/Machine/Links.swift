import BLECore
import BLEHCI
import BLEHost

/// What `SystemCore.cancelConnection` did for the manager.
public enum LinkCancellation: Sendable, Hashable {
    /// The manager was not waiting for that peer nor on its link.
    case nothing
    /// Its pending connect was withdrawn (the others' go on).
    case withdrawn
    /// It left a link others still use: the link stays up; for the manager it is over.
    case left(ConnectionHandle)
    /// It was the last on the link: the link is being disconnected, and `.linkDown` follows.
    case disconnecting(ConnectionHandle)
}

/// The central-role links of a system: one per peer, shared by the sessions that asked for it, as iOS shares
/// them, as a value of `SystemMachine`.
///
/// ### Function
/// Every session's pending connects are initiated together: the controller is given the peers waited for, in
/// the order first asked (`.setConnectTargets`), so a device that never appears blocks no other and nothing
/// times out. A session that connects to a peer already linked for another is attached at once; the link goes
/// down when its last session lets go; a session that lets go while others stay is simply off it.
///
/// A connect may ask for the link to come back by itself (`enableAutoReconnect`, IOSRules.md 7.1): once the session
/// has been on the link, a loss puts it back among the waiting at once, and it hears the loss as one it is
/// reconnected from (`.linkDown(_, _, reconnecting: true)`); an attempt that fails then is tried again after
/// `reconnectPause` (`.startTimer(.reconnect)`), unless the peer no longer has the bond's key (PIN or Key
/// Missing): no later attempt could succeed, and the connect fails. Before its first attachment, such a connect
/// fails as any other.
///
/// A link to a bonded peer is held while the system encrypts it with the kept key (`connected(_:securing:)`),
/// as iOS completes such a connection only once the link is encrypted: its sessions go on waiting and are
/// attached by `secured(_:)`. When the system gives the link up (`refused(_:status:)`: the peer no longer has
/// the key, say), the waiting sessions' connects fail and the sessions on the link hear it go down, with that
/// status.
///
/// ### Implementation
/// Kept by peer, with the handle of each link up; each peer remembers the sessions waiting (in the order they
/// asked), those on its link (in the order they joined, which is the order they are told of its end) and when
/// its first waiter asked, and the sessions whose connect asked to reconnect: those attached once, and those
/// waiting for the pause after a failed attempt (by the token of that pause's timer, so a timer left from an
/// earlier pause does nothing). The targets last given to the controller are kept, so they are sent only when
/// they change.
package struct LinkTable: Sendable, Hashable {
    package struct Peer: Sendable, Hashable {
        /// Sessions waiting for the link, in the order they asked.
        package var waiting: [SessionID] = []
        /// When the first of them asked (the order targets are initiated in).
        var order: UInt64 = 0
        package var link: LinkInfo?
        /// Sessions on the link, in the order they joined.
        package var users: [SessionID] = []
        package var disconnecting = false
        /// The link is up but its sessions wait for the system to encrypt it (a bonded peer).
        package var securing = false
        /// Why the system ends the link (`refused`): what its sessions hear instead of the controller's reason.
        var refusal: HCIStatus?
        /// The services any app discovered on the link.
        var services = Set<BluetoothUUID>()
        /// Sessions whose connect asked to reconnect after a loss (`enableAutoReconnect`).
        package var autoReconnect: Set<SessionID> = []
        /// Those of them that were on the link once: a loss puts them back among the waiting.
        package var armed: Set<SessionID> = []
        /// Armed sessions whose attempt failed, waiting for the pause to end, by its timer's token.
        package var retrying: [SessionID: UInt64] = [:]
        /// The alerts each session's connect asked for (none: not listed), until it lets go of the peer.
        package var alerts: [SessionID: ConnectionAlertWishes] = [:]

        var isUnused: Bool { waiting.isEmpty && link == nil && users.isEmpty && retrying.isEmpty }

        /// Whether `session` waits for the peer, is on its link, or waits to try again.
        func involves(_ session: SessionID) -> Bool {
            waiting.contains(session) || users.contains(session) || retrying[session] != nil
        }

        /// `session`'s connect is over (failed, or let go of): it no longer reconnects, nor waits to try again.
        mutating func endWish(_ session: SessionID) {
            retrying[session] = nil
            autoReconnect.remove(session)
            armed.remove(session)
            alerts[session] = nil
        }

        /// `session` is done with the peer: what it asked for it goes.
        mutating func drop(_ session: SessionID) {
            waiting.removeAll { $0 == session }
            users.removeAll { $0 == session }
            retrying[session] = nil
            autoReconnect.remove(session)
            armed.remove(session)
            alerts[session] = nil
        }

        /// `session` is on the link now: from here on, a loss reconnects it if it asked.
        mutating func join(_ session: SessionID) {
            if !users.contains(session) { users.append(session) }
            if autoReconnect.contains(session) { armed.insert(session) }
        }
    }

    /// How long an automatic reconnection waits after an attempt that failed (a controller that refuses at once
    /// must not make a busy loop).
    package static let reconnectPause: Duration = .seconds(1)

    package private(set) var peers: [BluetoothAddress: Peer] = [:] { didSet { revision &+= 1 } }
    private var byHandle: [ConnectionHandle: BluetoothAddress] = [:] { didSet { revision &+= 1 } }
    /// Changes with every change of the table (never the same twice): who is on a link may be kept for as long as
    /// it does not (`SystemCore`'s notification path).
    package private(set) var revision: UInt64 = 0
    private var nextOrder: UInt64 = 0
    private var nextToken: UInt64 = 0
    /// The peers the controller was last told to connect to.
    package private(set) var targets: [BluetoothAddress] = []

    package init() {}

    // MARK: Sessions

    /// Connects `session` to `peer`: attached at once (the link returned) when a link to it is up, else waiting.
    /// With `autoReconnect`, a loss of the link once it is on it puts it back among the waiting. `alerts` are
    /// the alerts the connect asks for (`.alert` actions as the link comes, goes, and notifies), replacing those an
    /// earlier connect asked; attached at once, the connection's is among `actions`.
    mutating func connect(
        _ session: SessionID, to peer: BluetoothAddress, autoReconnect: Bool,
        alerts: ConnectionAlertWishes = ConnectionAlertWishes(), _ actions: inout [SystemAction]
    ) -> LinkInfo? {
        var entry = peers[peer] ?? Peer()
        entry.alerts[session] = alerts.isEmpty ? nil : alerts
        // A new connect: it reconnects after a loss only once on the link (at once, below, or when it comes up).
        entry.retrying[session] = nil
        entry.armed.remove(session)
        if autoReconnect { entry.autoReconnect.insert(session) } else { entry.autoReconnect.remove(session) }
        if let link = entry.link, !entry.disconnecting, !entry.securing {
            entry.join(session)
            peers[peer] = entry
            if alerts.connection { actions.append(.alert(.connection, session, peer: peer)) }
            return link
        }
        if !entry.waiting.contains(session) {
            if entry.waiting.isEmpty {
                entry.order = nextOrder
                nextOrder += 1
            }
            entry.waiting.append(session)
        }
        peers[peer] = entry
        updateTargets(&actions)
        return nil
    }

    /// `session` lets go of `peer`: its pending connect is withdrawn, or it leaves the link.
    mutating func cancel(_ session: SessionID, from peer: BluetoothAddress, _ actions: inout [SystemAction])
        -> LinkCancellation
    {
        guard var entry = peers[peer] else { return .nothing }
        entry.autoReconnect.remove(session)
        entry.armed.remove(session)
        // The app's own doing: no alert for what follows (the link's end, IOSRules.md 3.5).
        entry.alerts[session] = nil
        if entry.retrying.removeValue(forKey: session) != nil {
            store(entry, for: peer)
            return .withdrawn
        }
        if let i = entry.waiting.firstIndex(of: session) {
            entry.waiting.remove(at: i)
            if let link = entry.link, entry.securing, entry.waiting.isEmpty, !entry.disconnecting {
                // Every session let go while the link was being encrypted: nobody wants it.
                entry.disconnecting = true
                actions.append(.disconnect(link.handle, .remoteUserTerminatedConnection))
            }
            store(entry, for: peer)
            updateTargets(&actions)
            return .withdrawn
        }
        guard let link = entry.link, !entry.disconnecting, entry.users.contains(session) else {
            store(entry, for: peer)
            return .nothing
        }
        guard entry.users.count == 1 else {
            entry.users.removeAll { $0 == session }
            store(entry, for: peer)
            return .left(link.handle)
        }
        // The last user stays on the link until it is down, and hears `.linkDown` then.
        entry.disconnecting = true
        store(entry, for: peer)
        actions.append(.disconnect(link.handle, .remoteUserTerminatedConnection))
        return .disconnecting(link.handle)
    }

    /// `session` lets go of everything it asked for (it went away, or its app did). Returns the links it left
    /// while others stay on them.
    mutating func release(_ session: SessionID, _ actions: inout [SystemAction]) -> [ConnectionHandle] {
        let mine = peers.filter { $0.value.involves(session) }.keys
            .sorted { $0.description < $1.description }
        return mine.compactMap { peer in
            if case .left(let handle) = cancel(session, from: peer, &actions) { handle } else { nil }
        }
    }

    /// Forgets `session` wherever it still is (a session detached): on a link it no longer leaves, it is no longer
    /// told of the link's end.
    mutating func forget(_ session: SessionID) {
        for (peer, var entry) in peers where entry.involves(session) {
            entry.drop(session)
            store(entry, for: peer)
        }
    }

    /// The restored `new` takes `old`'s places: its pending connects and its links.
    mutating func transfer(from old: SessionID, to new: SessionID) {
        for (peer, var entry) in peers where entry.involves(old) {
            entry.waiting = entry.waiting.map { $0 == old ? new : $0 }
            entry.users = entry.users.map { $0 == old ? new : $0 }
            if let token = entry.retrying.removeValue(forKey: old) { entry.retrying[new] = token }
            if entry.autoReconnect.remove(old) != nil { entry.autoReconnect.insert(new) }
            if entry.armed.remove(old) != nil { entry.armed.insert(new) }
            if let wishes = entry.alerts.removeValue(forKey: old) { entry.alerts[new] = wishes }
            peers[peer] = entry
        }
    }

    /// Whether the link `handle` is held while the system encrypts it (its sessions wait).
    package func isHeld(_ handle: ConnectionHandle) -> Bool {
        guard let peer = byHandle[handle] else { return false }
        return peers[peer]?.securing == true
    }

    /// The sessions on the link `handle` (none while it is held, or once it went down), in the order they came on.
    package func users(of handle: ConnectionHandle) -> [SessionID] {
        guard let peer = byHandle[handle] else { return [] }
        return peers[peer]?.users ?? []
    }

    /// Whether `session` is on the link `handle`.
    package func isUser(_ session: SessionID, of handle: ConnectionHandle) -> Bool {
        guard let peer = byHandle[handle] else { return false }
        return peers[peer]?.users.contains(session) == true
    }

    /// The peers of the links up now (not being encrypted or disconnected) that offer any of `services` (every
    /// one, with nil).
    package func linkedPeers(offering services: [BluetoothUUID]?) -> [BluetoothAddress] {
        peers.filter { _, entry in
            guard entry.link != nil, !entry.disconnecting, !entry.securing else { return false }
            guard let services else { return true }
            return services.contains(where: entry.services.contains)
        }.keys.map { $0 }
    }

    /// Services an app discovered on the link `handle`.
    mutating func noteServices(_ services: [BluetoothUUID], on handle: ConnectionHandle) {
        guard let peer = byHandle[handle] else { return }
        peers[peer]?.services.formUnion(services)
    }

    // MARK: The host's events

    /// A link came up in the central role: every session waiting for its peer is on it; with `securing`, they
    /// go on waiting until `secured(_:)` (or the link's end: their connects fail). Nobody waiting (every session
    /// cancelled while the controller was completing the connection): the link is disconnected.
    mutating func connected(_ info: LinkInfo, securing: Bool, _ actions: inout [SystemAction]) {
        var entry = peers[info.peer] ?? Peer()
        entry.link = info
        entry.refusal = nil
        byHandle[info.handle] = info.peer
        let waiting = entry.waiting
        entry.disconnecting = waiting.isEmpty
        if securing && !waiting.isEmpty {
            entry.securing = true
            peers[info.peer] = entry
            updateTargets(&actions)
            return
        }
        entry.waiting = []
        for session in waiting { entry.join(session) }
        peers[info.peer] = entry
        updateTargets(&actions)
        if waiting.isEmpty { actions.append(.disconnect(info.handle, .remoteUserTerminatedConnection)) }
        Self.attach(waiting, to: info, of: entry, &actions)
    }

    /// Tells `sessions` they are on `link` (`entry`'s), each followed by the connection's alert its connect asked.
    private static func attach(
        _ sessions: [SessionID], to link: LinkInfo, of entry: Peer, _ actions: inout [SystemAction]
    ) {
        for session in sessions {
            actions.append(.deliver(session, .linkAttached(link)))
            if entry.alerts[session]?.connection == true {
                actions.append(.alert(.connection, session, peer: link.peer))
            }
        }
    }

    /// The sessions on the link `handle` whose connect asked an alert for its notifications, with the peer.
    package func alerting(on handle: ConnectionHandle) -> [(SessionID, BluetoothAddress)] {
        guard let peer = byHandle[handle], let entry = peers[peer], !entry.alerts.isEmpty else { return [] }
        return entry.users.filter { entry.alerts[$0]?.notification == true }.map { ($0, peer) }
    }

    /// The held link `handle` is encrypted: every session waiting for it is on it now.
    mutating func secured(_ handle: ConnectionHandle, _ actions: inout [SystemAction]) {
        guard let peer = byHandle[handle], var entry = peers[peer], entry.securing, let link = entry.link,
            !entry.disconnecting
        else { return }
        let waiting = entry.waiting
        entry.waiting = []
        entry.securing = false
        for session in waiting { entry.join(session) }
        peers[peer] = entry
        Self.attach(waiting, to: link, of: entry, &actions)
    }

    /// The system gives the link `handle` up (`status` says why: PIN or Key Missing when the peer no longer has
    /// the bond's key): it is disconnected, and its sessions hear `status` as the reason, whether they were on it
    /// (`.linkDown`) or waiting for its encryption (`.linkFailed`).
    mutating func refused(_ handle: ConnectionHandle, status: HCIStatus, _ actions: inout [SystemAction]) {
        guard let peer = byHandle[handle], var entry = peers[peer] else { return }
        entry.refusal = entry.refusal ?? status
        defer { peers[peer] = entry }
        guard !entry.disconnecting else { return }
        entry.disconnecting = true
        actions.append(.disconnect(handle, .authenticationFailure))
    }

    /// The attempt to `peer` failed: every session waiting for it hears so, but those reconnecting, which try
    /// again after `reconnectPause` (unless the peer lost the bond's key).
    mutating func failed(_ peer: BluetoothAddress, _ error: HostError, _ actions: inout [SystemAction]) {
        guard var entry = peers[peer] else { return }
        let waiting = entry.waiting
        entry.waiting = []
        let failed = settle(waiting, of: &entry, peer: peer, after: error, &actions)
        store(entry, for: peer)
        updateTargets(&actions)
        for session in failed { actions.append(.deliver(session, .linkFailed(peer, error))) }
    }

    /// Of `sessions`, whose attempt ended with `error`, those reconnecting wait for `reconnectPause` to try again
    /// (one timer for them all); the others, returned, are done with the peer. A peer that no longer has the
    /// bond's key (PIN or Key Missing) ends the reconnection: no later attempt could succeed until the user forgets
    /// the device.
    private mutating func settle(
        _ sessions: [SessionID], of entry: inout Peer, peer: BluetoothAddress, after error: HostError,
        _ actions: inout [SystemAction]
    ) -> [SessionID] {
        let lostKey = error.code == .hci(.pinOrKeyMissing)
        var retrying: [SessionID] = []
        var failed: [SessionID] = []
        for session in sessions {
            if entry.armed.contains(session), !lostKey { retrying.append(session) } else { failed.append(session) }
        }
        // Not off the link, should it be on one still (being disconnected, asked again meanwhile): it hears its end.
        for session in failed { entry.endWish(session) }
        guard !retrying.isEmpty else { return failed }
        let token = nextToken
        nextToken += 1
        for session in retrying { entry.retrying[session] = token }
        actions.append(.startTimer(.reconnect(peer, token: token), after: Self.reconnectPause))
        return failed
    }

    /// The pause after a reconnection's failed attempt is over: the sessions that waited for it (with `token`)
    /// wait for the peer again, or are attached at once when a link to it is up (another session's).
    mutating func retry(_ peer: BluetoothAddress, token: UInt64, _ actions: inout [SystemAction]) {
        guard var entry = peers[peer] else { return }
        let sessions = entry.retrying.filter { $0.value == token }.keys.sorted()
        guard !sessions.isEmpty else { return }
        for session in sessions { entry.retrying[session] = nil }
        if let link = entry.link, !entry.disconnecting, !entry.securing {
            for session in sessions { entry.join(session) }
            peers[peer] = entry
            Self.attach(sessions, to: link, of: entry, &actions)
            return
        }
        if entry.waiting.isEmpty {
            entry.order = nextOrder
            nextOrder += 1
        }
        for session in sessions where !entry.waiting.contains(session) { entry.waiting.append(session) }
        peers[peer] = entry
        updateTargets(&actions)
    }

    /// A link went down: every session on it hears so; those that asked to reconnect (and did not let go) wait
    /// for the peer again at once, and hear it as a loss they are reconnected from, and sessions that asked again
    /// meanwhile wait anew. Sessions that waited for its encryption hear their connect fail (they were never on
    /// it), but those reconnecting, which try again after the pause unless the peer lost the bond's key.
    mutating func disconnected(_ handle: ConnectionHandle, reason: HCIStatus, _ actions: inout [SystemAction]) {
        guard let peer = byHandle.removeValue(forKey: handle), var entry = peers[peer] else { return }
        let users = entry.users
        // As asked before the sessions' wishes go with the link (a session that let go asks none).
        let wishes = entry.alerts
        let securing = entry.securing ? entry.waiting : []
        if entry.securing { entry.waiting = [] }
        let why = entry.refusal ?? reason
        entry.users = []
        entry.link = nil
        entry.disconnecting = false
        entry.securing = false
        entry.refusal = nil
        entry.services = []
        let error = HostError(.hci(why), "the link was not secured: \(why)")
        let failed = settle(securing, of: &entry, peer: peer, after: error, &actions)
        var down: [(SessionID, Bool)] = []
        for session in users {
            let again = entry.armed.contains(session)
            if again {
                if entry.waiting.isEmpty {
                    entry.order = nextOrder
                    nextOrder += 1
                }
                if !entry.waiting.contains(session) { entry.waiting.append(session) }
            } else if !entry.waiting.contains(session) {
                entry.drop(session)
            }
            down.append((session, again))
        }
        store(entry, for: peer)
        updateTargets(&actions)
        for (session, again) in down {
            actions.append(.deliver(session, .linkDown(handle, why, reconnecting: again)))
            if wishes[session]?.disconnection == true { actions.append(.alert(.disconnection, session, peer: peer)) }
        }
        for session in failed { actions.append(.deliver(session, .linkFailed(peer, error))) }
    }

    /// The controller went away, or Bluetooth was switched off: nothing is linked or initiated any more (the
    /// sessions hear of it through their power state), and the controller is taken to have no targets.
    mutating func reset() {
        // The tokens go on: a reconnection's timer may still fire, and must not match a pause started after.
        let token = nextToken
        let revision = revision
        self = LinkTable()
        nextToken = token
        self.revision = revision &+ 1
    }

    // MARK: Targets

    private mutating func store(_ entry: Peer, for peer: BluetoothAddress) {
        peers[peer] = entry.isUnused ? nil : entry
    }

    /// Tells the controller the peers waited for, in the order first asked, when that changed.
    private mutating func updateTargets(_ actions: inout [SystemAction]) {
        let now = peers.filter { !$0.value.waiting.isEmpty && $0.value.link == nil }
            .sorted { $0.value.order < $1.value.order }.map(\.key)
        guard now != targets else { return }
        targets = now
        actions.append(.setConnectTargets(now))
    }
}
