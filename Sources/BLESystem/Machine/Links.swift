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
/// A link to a bonded peer is held while the system encrypts it with the kept key (`connected(_:securing:)`),
/// as iOS completes such a connection only once the link is encrypted: its sessions go on waiting and are
/// attached by `secured(_:)`. When the system gives the link up (`refused(_:status:)`: the peer no longer has
/// the key, say), the waiting sessions' connects fail and the sessions on the link hear it go down, with that
/// status.
///
/// ### Implementation
/// Kept by peer, with the handle of each link up; each peer remembers the sessions waiting (in the order they
/// asked), those on its link (in the order they joined, which is the order they are told of its end) and when
/// its first waiter asked. The targets last given to the controller are kept, so they are sent only when they
/// change.
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

        var isUnused: Bool { waiting.isEmpty && link == nil && users.isEmpty }
    }

    package private(set) var peers: [BluetoothAddress: Peer] = [:]
    private var byHandle: [ConnectionHandle: BluetoothAddress] = [:]
    private var nextOrder: UInt64 = 0
    /// The peers the controller was last told to connect to.
    package private(set) var targets: [BluetoothAddress] = []

    package init() {}

    // MARK: Sessions

    /// Connects `session` to `peer`: attached at once (the link returned) when a link to it is up, else waiting.
    mutating func connect(_ session: SessionID, to peer: BluetoothAddress, _ actions: inout [SystemAction])
        -> LinkInfo?
    {
        var entry = peers[peer] ?? Peer()
        if let link = entry.link, !entry.disconnecting, !entry.securing {
            if !entry.users.contains(session) { entry.users.append(session) }
            peers[peer] = entry
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
        guard let link = entry.link, !entry.disconnecting, entry.users.contains(session) else { return .nothing }
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
        let mine = peers.filter { $0.value.waiting.contains(session) || $0.value.users.contains(session) }.keys
            .sorted { $0.description < $1.description }
        return mine.compactMap { peer in
            if case .left(let handle) = cancel(session, from: peer, &actions) { handle } else { nil }
        }
    }

    /// Forgets `session` wherever it still is (a session detached): on a link it no longer leaves, it is no longer
    /// told of the link's end.
    mutating func forget(_ session: SessionID) {
        for (peer, var entry) in peers where entry.waiting.contains(session) || entry.users.contains(session) {
            entry.waiting.removeAll { $0 == session }
            entry.users.removeAll { $0 == session }
            store(entry, for: peer)
        }
    }

    /// The restored `new` takes `old`'s places: its pending connects and its links.
    mutating func transfer(from old: SessionID, to new: SessionID) {
        for (peer, var entry) in peers where entry.waiting.contains(old) || entry.users.contains(old) {
            entry.waiting = entry.waiting.map { $0 == old ? new : $0 }
            entry.users = entry.users.map { $0 == old ? new : $0 }
            peers[peer] = entry
        }
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
        for session in waiting where !entry.users.contains(session) { entry.users.append(session) }
        peers[info.peer] = entry
        updateTargets(&actions)
        if waiting.isEmpty { actions.append(.disconnect(info.handle, .remoteUserTerminatedConnection)) }
        for session in waiting { actions.append(.deliver(session, .linkAttached(info))) }
    }

    /// The held link `handle` is encrypted: every session waiting for it is on it now.
    mutating func secured(_ handle: ConnectionHandle, _ actions: inout [SystemAction]) {
        guard let peer = byHandle[handle], var entry = peers[peer], entry.securing, let link = entry.link,
            !entry.disconnecting
        else { return }
        let waiting = entry.waiting
        entry.waiting = []
        entry.securing = false
        for session in waiting where !entry.users.contains(session) { entry.users.append(session) }
        peers[peer] = entry
        for session in waiting { actions.append(.deliver(session, .linkAttached(link))) }
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

    /// The attempt to `peer` failed: every session waiting for it hears so.
    mutating func failed(_ peer: BluetoothAddress, _ error: HostError, _ actions: inout [SystemAction]) {
        guard var entry = peers[peer] else { return }
        let waiting = entry.waiting
        entry.waiting = []
        store(entry, for: peer)
        updateTargets(&actions)
        for session in waiting { actions.append(.deliver(session, .linkFailed(peer, error))) }
    }

    /// A link went down: every session on it hears so; sessions that asked again meanwhile wait anew. Sessions
    /// that waited for its encryption hear their connect fail (they were never on it).
    mutating func disconnected(_ handle: ConnectionHandle, reason: HCIStatus, _ actions: inout [SystemAction]) {
        guard let peer = byHandle.removeValue(forKey: handle), var entry = peers[peer] else { return }
        let users = entry.users
        let failed = entry.securing ? entry.waiting : []
        if entry.securing { entry.waiting = [] }
        let why = entry.refusal ?? reason
        entry.users = []
        entry.link = nil
        entry.disconnecting = false
        entry.securing = false
        entry.refusal = nil
        entry.services = []
        store(entry, for: peer)
        updateTargets(&actions)
        for session in users { actions.append(.deliver(session, .linkDown(handle, why))) }
        guard !failed.isEmpty else { return }
        let error = HostError(.hci(why), "the link was not secured: \(why)")
        for session in failed { actions.append(.deliver(session, .linkFailed(peer, error))) }
    }

    /// The controller went away, or Bluetooth was switched off: nothing is linked or initiated any more (the
    /// sessions hear of it through their power state), and the controller is taken to have no targets.
    mutating func reset() {
        self = LinkTable()
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
