import BLECore
import BLEHCI
import BLEHost
import Synchronization

/// A manager that connects to peripherals through the system.
public protocol LinkClient: AnyObject, Sendable {
    /// The link to `info.peer` is up for this client: it just came up, or it was up already for another app.
    /// Called on the host's context (or, for a link already up, in the client's `connect` call).
    func linkAttached(_ info: LinkInfo)
    /// The connection attempt to `peer` ended without a link.
    func linkFailed(peer: BluetoothAddress, error: HostError)
    /// The link went down (`reason`, from the controller), for every client on it.
    func linkDown(_ handle: ConnectionHandle, reason: HCIStatus)
}

/// What `SharedLinks.cancel` did for the client.
public enum LinkCancellation: Sendable, Hashable {
    /// The client was not waiting for that peer nor on its link.
    case nothing
    /// Its pending connect was withdrawn (the others' go on).
    case withdrawn
    /// It left a link others still use: the link stays up; for the client it is over.
    case left(ConnectionHandle)
    /// It was the last on the link: the link is being disconnected, and `linkDown` follows.
    case disconnecting(ConnectionHandle)
}

/// One link per peer, shared by the apps that asked for it (Arbitration/SharedLinks.swift), as iOS shares them:
/// every app's pending connects are initiated together (`HostDriver.setConnectTargets`: a device that never
/// appears blocks no other, and nothing times out); an app that connects to a peer already linked for another
/// app is attached at once; the link goes down when its last app lets go; an app that lets go while others stay
/// is simply off it. Only links this device initiated (central role) are shared here.
///
/// A link to a bonded peer is held while the system encrypts it with the kept key (`connected(_:securing:)`),
/// as iOS completes such a connection only once the link is encrypted: its clients keep waiting and are attached
/// by `secured(_:)`. When the system gives the link up (`refuse(_:status:)`, the peer no longer has the key,
/// say), the waiting clients' connect fails, and clients already on the link hear it go down, with that status.
final class SharedLinks: Sendable {
    private struct WeakClient {
        weak var client: (any LinkClient)?
    }

    private struct Peer {
        /// Clients waiting for the link, in the order they asked.
        var waiting: [(id: ObjectIdentifier, client: WeakClient)] = []
        /// When the first of them asked (the order targets are initiated in).
        var order: UInt64 = 0
        var link: LinkInfo?
        var users: [ObjectIdentifier: WeakClient] = [:]
        var disconnecting = false
        /// The link is up but its clients wait for the system to encrypt it (a bonded peer).
        var securing = false
        /// Why the system ends the link (`refuse`): what its clients hear instead of the controller's reason.
        var refusal: HCIStatus?
        /// The services any app discovered on the link.
        var services = Set<BluetoothUUID>()

        var isUnused: Bool { waiting.isEmpty && link == nil && users.isEmpty }
    }

    private struct State {
        var peers: [BluetoothAddress: Peer] = [:]
        var byHandle: [ConnectionHandle: BluetoothAddress] = [:]
        var nextOrder: UInt64 = 0
        var targets: [BluetoothAddress] = []
        /// The list for `sendTargets` to hand the host.
        var targetWish = LatestWish<[BluetoothAddress]>()
    }
    private let state = Mutex(State())
    private let host: HostDriver

    init(host: HostDriver) { self.host = host }

    /// Connects `client` to `peer`: attached at once (the info returned) when a link to it is up, else waiting.
    func connect(_ client: any LinkClient, to peer: BluetoothAddress) -> LinkInfo? {
        let id = ObjectIdentifier(client)
        let (attached, targets) = state.withLock { s -> (LinkInfo?, [BluetoothAddress]?) in
            var entry = s.peers[peer] ?? Peer()
            if let link = entry.link, !entry.disconnecting, !entry.securing {
                entry.users[id] = WeakClient(client: client)
                s.peers[peer] = entry
                return (link, nil)
            }
            if !entry.waiting.contains(where: { $0.id == id }) {
                if entry.waiting.isEmpty {
                    entry.order = s.nextOrder
                    s.nextOrder += 1
                }
                entry.waiting.append((id, WeakClient(client: client)))
            }
            s.peers[peer] = entry
            return (nil, Self.changedTargets(&s))
        }
        if targets != nil { sendTargets() }
        return attached
    }

    /// `client` lets go of `peer`: its pending connect is withdrawn, or it leaves the link.
    func cancel(_ client: any LinkClient, from peer: BluetoothAddress) -> LinkCancellation {
        leave(ObjectIdentifier(client), from: peer)
    }

    /// A client that went away lets go of everything it asked for. Returns the links it left while others
    /// stay on them.
    func release(_ id: ObjectIdentifier) -> [ConnectionHandle] {
        let peers = state.withLock { s in
            s.peers.filter { $0.value.waiting.contains { $0.id == id } || $0.value.users[id] != nil }.keys.sorted {
                $0.description < $1.description
            }
        }
        return peers.compactMap { peer in
            if case .left(let handle) = leave(id, from: peer) { handle } else { nil }
        }
    }

    private func leave(_ id: ObjectIdentifier, from peer: BluetoothAddress) -> LinkCancellation {
        // Strong references taken under the lock are let go after it (a manager's deinit takes this lock).
        var others: [any LinkClient] = []
        defer { withExtendedLifetime(others) {} }
        var disconnect: ConnectionHandle?
        let (outcome, targets) = state.withLock { s -> (LinkCancellation, [BluetoothAddress]?) in
            guard var entry = s.peers[peer] else { return (.nothing, nil) }
            defer { s.peers[peer] = entry.isUnused ? nil : entry }
            if let i = entry.waiting.firstIndex(where: { $0.id == id }) {
                entry.waiting.remove(at: i)
                if let link = entry.link, entry.securing, entry.waiting.isEmpty, !entry.disconnecting {
                    // Every app let go while the link was being encrypted: nobody wants it.
                    entry.disconnecting = true
                    disconnect = link.handle
                }
                return (.withdrawn, Self.changedTargets(&s, updating: peer, to: entry))
            }
            guard let link = entry.link, !entry.disconnecting, let leaving = entry.users[id] else {
                return (.nothing, nil)
            }
            for (key, user) in entry.users {
                if key != id, let client = user.client { others.append(client) } else { entry.users[key] = nil }
            }
            guard entry.users.isEmpty else { return (.left(link.handle), nil) }
            // The last user stays on the link until it is down, and hears `linkDown` then.
            entry.users[id] = leaving
            entry.disconnecting = true
            return (.disconnecting(link.handle), nil)
        }
        if targets != nil { sendTargets() }
        if case .disconnecting(let handle) = outcome {
            host.disconnect(handle, reason: .remoteUserTerminatedConnection)
        }
        if let disconnect { host.disconnect(disconnect, reason: .remoteUserTerminatedConnection) }
        return outcome
    }

    /// The peers of the central-role links up now that offer any of `services` (every one, with nil).
    func linkedPeers(offering services: [BluetoothUUID]?) -> [BluetoothAddress] {
        state.withLock { s in
            s.peers.filter { _, entry in
                guard entry.link != nil, !entry.disconnecting, !entry.securing else { return false }
                guard let services else { return true }
                return services.contains(where: entry.services.contains)
            }.keys.map { $0 }
        }
    }

    /// Hands everything `old` waits for or is on to `new` (a restored manager taking over from the one the system
    /// kept for a terminated app), in the same places.
    func transfer(from old: ObjectIdentifier, to new: any LinkClient) {
        let id = ObjectIdentifier(new)
        state.withLock { s in
            for (peer, var entry) in s.peers {
                for i in entry.waiting.indices where entry.waiting[i].id == old {
                    entry.waiting[i] = (id, WeakClient(client: new))
                }
                if entry.users.removeValue(forKey: old) != nil { entry.users[id] = WeakClient(client: new) }
                s.peers[peer] = entry
            }
        }
    }

    /// Whether `client` is on the link `handle` (attached, and not gone).
    func isUser(_ client: ObjectIdentifier, of handle: ConnectionHandle) -> Bool {
        state.withLock { s in
            guard let peer = s.byHandle[handle], let entry = s.peers[peer] else { return false }
            return entry.users[client] != nil
        }
    }

    /// Services an app discovered on the link `handle`.
    func noteServices(_ services: [BluetoothUUID], on handle: ConnectionHandle) {
        state.withLock { s in
            guard let peer = s.byHandle[handle] else { return }
            s.peers[peer]?.services.formUnion(services)
        }
    }

    // MARK: Host events

    /// A link came up in the central role: every client waiting for its peer is on it; with `securing`, they
    /// go on waiting until `secured(_:)` (or the link's end: their connect fails).
    func connected(_ info: LinkInfo, securing: Bool = false) {
        let (clients, orphan, targets) = state.withLock {
            s -> ([any LinkClient], Bool, [BluetoothAddress]?) in
            var entry = s.peers[info.peer] ?? Peer()
            entry.link = info
            entry.refusal = nil
            s.byHandle[info.handle] = info.peer
            defer { s.peers[info.peer] = entry }
            let waiting = entry.waiting.compactMap { w in w.client.client.map { (w.id, $0) } }
            entry.disconnecting = waiting.isEmpty
            if securing && !waiting.isEmpty {
                entry.securing = true
                return ([], false, Self.changedTargets(&s, updating: info.peer, to: entry))
            }
            entry.waiting = []
            for (id, client) in waiting { entry.users[id] = WeakClient(client: client) }
            return (waiting.map(\.1), waiting.isEmpty, Self.changedTargets(&s, updating: info.peer, to: entry))
        }
        if targets != nil { sendTargets() }
        // Every app cancelled while the controller was completing the connection: nobody wants it.
        if orphan { host.disconnect(info.handle, reason: .remoteUserTerminatedConnection) }
        for client in clients { client.linkAttached(info) }
    }

    /// The held link `handle` is encrypted: every client waiting for it is on it now.
    func secured(_ handle: ConnectionHandle) {
        let (info, clients) = state.withLock { s -> (LinkInfo?, [any LinkClient]) in
            guard let peer = s.byHandle[handle], var entry = s.peers[peer], entry.securing, let link = entry.link,
                !entry.disconnecting
            else { return (nil, []) }
            let waiting = entry.waiting.compactMap { w in w.client.client.map { (w.id, $0) } }
            entry.waiting = []
            entry.securing = false
            for (id, client) in waiting { entry.users[id] = WeakClient(client: client) }
            s.peers[peer] = entry
            return (link, waiting.map(\.1))
        }
        guard let info else { return }
        for client in clients { client.linkAttached(info) }
    }

    /// The system gives the link `handle` up (`status` says why, e.g. PIN or Key Missing: the peer no longer
    /// has the bond's key): it is disconnected, and its clients hear `status` as the reason, whether they were
    /// on it (`linkDown`) or waiting for its encryption (`linkFailed`).
    func refuse(_ handle: ConnectionHandle, status: HCIStatus) {
        let disconnect = state.withLock { s -> Bool in
            guard let peer = s.byHandle[handle], var entry = s.peers[peer] else { return false }
            entry.refusal = entry.refusal ?? status
            defer { s.peers[peer] = entry }
            guard !entry.disconnecting else { return false }
            entry.disconnecting = true
            return true
        }
        if disconnect { host.disconnect(handle, reason: .authenticationFailure) }
    }

    /// The attempt to `peer` failed: every client waiting for it hears so.
    func failed(_ peer: BluetoothAddress, _ error: HostError) {
        let (clients, targets) = state.withLock { s -> ([any LinkClient], [BluetoothAddress]?) in
            guard var entry = s.peers[peer] else { return ([], nil) }
            let waiting = entry.waiting.compactMap(\.client.client)
            entry.waiting = []
            s.peers[peer] = entry.isUnused ? nil : entry
            return (waiting, Self.changedTargets(&s))
        }
        if targets != nil { sendTargets() }
        for client in clients { client.linkFailed(peer: peer, error: error) }
    }

    /// A link went down: every client on it hears so; clients that asked again meanwhile wait anew. Clients
    /// that waited for its encryption hear their connect fail (they were never on it).
    func disconnected(_ handle: ConnectionHandle, reason: HCIStatus) {
        let (peer, clients, failed, why, targets) = state.withLock {
            s -> (BluetoothAddress?, [any LinkClient], [any LinkClient], HCIStatus, [BluetoothAddress]?) in
            guard let peer = s.byHandle.removeValue(forKey: handle), var entry = s.peers[peer] else {
                return (nil, [], [], reason, nil)
            }
            let users = entry.users.values.compactMap(\.client)
            let failed = entry.securing ? entry.waiting.compactMap(\.client.client) : []
            if entry.securing { entry.waiting = [] }
            let why = entry.refusal ?? reason
            entry.users = [:]
            entry.link = nil
            entry.disconnecting = false
            entry.securing = false
            entry.refusal = nil
            entry.services = []
            s.peers[peer] = entry.isUnused ? nil : entry
            return (peer, users, failed, why, Self.changedTargets(&s))
        }
        if targets != nil { sendTargets() }
        for client in clients { client.linkDown(handle, reason: why) }
        guard let peer, !failed.isEmpty else { return }
        let error = HostError(.hci(why), "the link was not secured: \(why)")
        for client in failed { client.linkFailed(peer: peer, error: error) }
    }

    /// The controller went away: nothing is linked or initiated any more (clients hear of the power state).
    func reset() {
        state.withLock { s in
            let wish = s.targetWish.droppingPending
            s = State()
            s.targetWish = wish
        }
    }

    // MARK: Targets

    /// Hands the host the current list of peers waited for, the latest one only (`LatestWish`).
    private func sendTargets() {
        guard state.withLock({ $0.targetWish.offer($0.targets) }) else { return }
        while let targets = state.withLock({ $0.targetWish.take() }) {
            host.setConnectTargets(targets, parameters: host.configuration.connectionParameters)
        }
    }

    /// The peers waited for, in the order first asked, if that differs from what the host was last given.
    private static func changedTargets(_ s: inout State) -> [BluetoothAddress]? {
        let targets = s.peers.filter { !$0.value.waiting.isEmpty && $0.value.link == nil }
            .sorted { $0.value.order < $1.value.order }.map(\.key)
        guard targets != s.targets else { return nil }
        s.targets = targets
        return targets
    }

    private static func changedTargets(_ s: inout State, updating peer: BluetoothAddress, to entry: Peer)
        -> [BluetoothAddress]?
    {
        s.peers[peer] = entry
        return changedTargets(&s)
    }
}
