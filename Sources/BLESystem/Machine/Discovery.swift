import BLEATT
import BLECore
import BLEGATT
import BLEHost
import Foundation

/// What an app (or the system) asks to discover on a link.
package enum DiscoveryRequest: Sendable, Hashable {
    /// The primary services: all of them, or those of one type.
    case services(BluetoothUUID?)
    /// The services a service includes.
    case includedServices(GATTService)
    /// A service's characteristics: all of them, or those of one type.
    case characteristics(GATTService, BluetoothUUID?)
    /// A characteristic's descriptors.
    case descriptors(GATTCharacteristic)

    /// Whether its result is the whole of what it names (no type filter), so it can be kept and answer later.
    var isComplete: Bool {
        switch self {
        case .services(let uuid), .characteristics(_, let uuid): uuid == nil
        case .includedServices, .descriptors: true
        }
    }
}

/// What a discovery found.
package enum DiscoveryResult: Sendable, Hashable {
    case services([GATTService])
    case characteristics([GATTCharacteristic])
    case descriptors([GATTDescriptor])
}

/// Which discovery an answer is for.
package struct DiscoveryID: RawRepresentable, Hashable, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// How the machine takes a discovery asked for.
package enum DiscoveryAnswer: Sendable, Hashable {
    /// Known already: the result.
    case found(DiscoveryResult)
    /// Ask the peer now, on the caller's thread (in order with its other GATT requests), and step the answer
    /// back with `discoveryCompleted`.
    case ask(DiscoveryID)
    /// Waits for the peer's Database Hash; `.discoveryAnswered` or `.discover` follows.
    case wait(DiscoveryID)
}

/// What the Database Hash read found.
package enum DatabaseHashRead: Sendable, Hashable {
    /// The peer answered: its hash (nil when the value is not 128 bits, which is no hash to trust).
    case value([UInt8]?)
    /// The peer has no Database Hash (Attribute Not Found: a server older than Core 5.1).
    case absent
    /// The read failed (another error, the link going down): nothing is known of the peer's database.
    case failed
}

/// A GATT cache as the store keeps it, decoded: nil `record` when it cannot be read.
package struct StoredGATTCache: Sendable, Hashable {
    package var hash: [UInt8]
    package var record: GATTCacheRecord?
    package init(hash: [UInt8], record: GATTCacheRecord?) {
        self.hash = hash
        self.record = record
    }
}

/// One GATT discovery per link, shared by the apps on it and kept across links in the store (the GATT cache), as a
/// value of `SystemMachine`.
///
/// ### Function
/// - On a link: a complete result (every primary service, every characteristic or included service of a
///   service, every descriptor of a characteristic) answers any app's later request, for all or for some types,
///   without a request to the peer. A filtered request with nothing kept goes to the peer as it is (and is not
///   kept).
/// - Across links: when a link comes up, the peer's Database Hash is read (`.readDatabaseHash`: Read Using
///   Characteristic UUID over 0x0001–0xFFFF, Core Spec 5.4, Vol 3, Part G, 7.3) before any discovery goes out.
///   The same bytes as the cache was kept under: the cache answers as if discovered on this link, so a
///   reconnection costs that one read. Other bytes, or no hash where there was one: the cache is dropped and the
///   apps are told (`.peerDatabaseChanged`, which the managers turn into `didModifyServices`). A peer without a
///   hash is cached across links only while bonded: Core Spec 5.4, Vol 3, Part G, 2.5.2 lets a client keep a
///   bonded server's handles, which the server must tell it of with Service Changed, so its cache is kept under
///   an empty hash (`.keepGATTCache` with no hash: the store keeps it only for a bonded peer) and answers on every
///   link while the bond lasts.
/// - Service Changed: the system subscribes to it on every link (as iOS does for every app), from what is kept
///   when it can (`.writeServiceChangedConfiguration`); an indication forgets what is kept for the link and in
///   the store (before any app hears of it) and the hash is read again before the next discovery. An answer
///   still on its way from before is handed on, not kept.
///
/// ### Implementation
/// Per link: what was discovered (`GATTCacheRecord`), a generation that changes when the link goes down or the
/// peer's database changes (an answer to a request made before is handed on, not kept), the peer's identifier,
/// the hash (being read, or known), the requests waiting for it, and the Service Changed subscription. Every
/// request going to the peer has an id; the system's own (the Service Changed chain) are the machine's, the apps'
/// are answered with `.discoveryAnswered` (their completions are the driver's).
package struct DiscoveryTable: Sendable, Hashable {
    package enum Hash: Sendable, Hashable {
        /// Being read: discoveries wait for it.
        case reading
        /// Read: the peer's hash, or nil when it has none.
        case known([UInt8]?)
        /// The read failed: nothing is known of the peer's database, so nothing found on this link is kept across
        /// links (a bonded peer's cache under its hash must not be replaced by one under no hash).
        case unknown
    }

    package struct Link: Sendable, Hashable {
        package var record = GATTCacheRecord()
        var generation: UInt64 = 0
        package var peer: UUID?
        package var hash = Hash.known(nil)
        /// Requests waiting for the hash, in the order asked.
        var waiting: [DiscoveryID] = []
        /// The peer's Service Changed value handle, once subscribed.
        package var serviceChanged: AttributeHandle?
    }

    /// Whose a request to the peer is.
    enum Purpose: Sendable, Hashable {
        /// An app's: answered with `.discoveryAnswered`.
        case app
        /// The system's search for Service Changed.
        case serviceChanged
    }

    struct Pending: Sendable, Hashable {
        var link: ConnectionHandle
        var request: DiscoveryRequest
        /// The link's generation when it went out (nil while it waits for the hash).
        var asOf: UInt64?
        var purpose: Purpose
    }

    package private(set) var links: [ConnectionHandle: Link] = [:]
    private(set) var pending: [DiscoveryID: Pending] = [:]
    private var nextID: UInt64 = 0
    /// Generations are drawn from one counter that only grows, so a handle used again (after a reset too) never
    /// meets a generation of its earlier link.
    private var lastGeneration: UInt64 = 0

    package init() {}

    /// Whether `attribute` is the peer's Service Changed characteristic on `link` (its indications are the
    /// system's, not an app's).
    package func isServiceChanged(_ attribute: AttributeHandle, on link: ConnectionHandle) -> Bool {
        links[link]?.serviceChanged == attribute
    }

    // MARK: Requests

    /// An app asks for `request` on `link`.
    mutating func discover(_ request: DiscoveryRequest, on link: ConnectionHandle) -> DiscoveryAnswer {
        if let kept = links[link], case .reading = kept.hash {
            let id = draw()
            pending[id] = Pending(link: link, request: request, asOf: nil, purpose: .app)
            links[link]!.waiting.append(id)
            return .wait(id)
        }
        if let found = kept(request, on: link) { return .found(found) }
        let id = draw()
        pending[id] = Pending(link: link, request: request, asOf: links[link]?.generation ?? 0, purpose: .app)
        return .ask(id)
    }

    /// The peer answered the discovery `id`: a complete result is kept, unless the link went down or its peer's
    /// database changed since it was asked.
    mutating func completed(
        _ id: DiscoveryID, _ result: Result<DiscoveryResult, HostError>, _ actions: inout [SystemAction]
    ) {
        guard let request = pending.removeValue(forKey: id) else { return }
        if case .success(let found) = result, request.request.isComplete, let asOf = request.asOf {
            keep(found, for: request.request, on: request.link, asOf: asOf, &actions)
        }
        switch request.purpose {
        case .app: actions.append(.discoveryAnswered(id, result))
        case .serviceChanged:
            guard case .success(let found) = result, let asOf = request.asOf else { return }
            searchServiceChanged(on: request.link, asOf: asOf, after: (request.request, found), &actions)
        }
    }

    // MARK: The link's life

    /// A link to `peer` (its identifier in the store, when it has one) came up as a central: the hash is read
    /// before any discovery.
    mutating func linkUp(_ link: ConnectionHandle, peer: UUID?, _ actions: inout [SystemAction]) {
        // Requests still waiting on the handle (its end was never told) go on, and fail with the old link.
        for id in links[link]?.waiting ?? [] { release(id, &actions) }
        let generation = nextGeneration()
        links[link] = Link(generation: generation, peer: peer, hash: .reading)
        actions.append(.readDatabaseHash(link, asOf: generation, peer: peer, againstCache: true))
    }

    /// The peer's database changed (Service Changed): everything kept for the link and in the store is forgotten
    /// (a service that only overlaps the changed range changed too, and the indication is rare), and the hash is
    /// read again before the next discovery.
    mutating func invalidate(_ link: ConnectionHandle, _ actions: inout [SystemAction]) {
        guard let old = links[link] else { return }
        var kept = Link(generation: nextGeneration(), peer: old.peer, hash: .reading)
        kept.waiting = old.waiting
        kept.serviceChanged = old.serviceChanged
        links[link] = kept
        if let peer = old.peer { actions.append(.dropGATTCache(peer)) }
        actions.append(.readDatabaseHash(link, asOf: kept.generation, peer: old.peer, againstCache: false))
    }

    /// The Database Hash read for `asOf` ended; `cached` is what the store keeps for the peer (read by the driver
    /// when the read asked to compare, or found the peer without a hash), and `bonded` whether the peer is bonded.
    mutating func hashRead(
        _ link: ConnectionHandle, asOf: UInt64, _ read: DatabaseHashRead, cached stored: StoredGATTCache?,
        bonded: Bool, _ actions: inout [SystemAction]
    ) {
        guard var kept = links[link], kept.generation == asOf, case .reading = kept.hash else { return }
        let hash: [UInt8]?
        switch read {
        case .value(let value): hash = value
        case .absent, .failed: hash = nil
        }
        // A read that failed says nothing of the peer's database: the cache is neither used nor dropped.
        let cached = read == .failed ? nil : stored
        // A cache kept under the same hash; or, for a peer without one, kept (under an empty hash) while bonded.
        let same = cached.map { $0.hash == (hash ?? []) } ?? false
        var loaded: GATTCacheRecord?
        if let cached, same, hash != nil || bonded { loaded = cached.record }
        if let loaded { kept.record = loaded }
        kept.hash = read == .failed ? .unknown : .known(hash)
        let waiting = kept.waiting
        kept.waiting = []
        links[link] = kept
        if cached != nil, loaded == nil, let peer = kept.peer {
            // Dropped: another hash, no hash any more, or a record that cannot be read (that alone is no change
            // of the peer's, so nobody is told).
            actions.append(.dropGATTCache(peer))
            if !same { actions.append(.peerDatabaseChanged(link)) }
        }
        // The system's own requests first, then the apps' that waited, in the order they asked.
        if kept.serviceChanged == nil { searchServiceChanged(on: link, asOf: asOf, after: nil, &actions) }
        for id in waiting { release(id, &actions) }
    }

    /// The link went down: nothing of it is kept here (the store keeps the cache), and requests still waiting for
    /// the hash go on to the peer, whose end fails them. What was discovered before the peer bonded on this link is
    /// kept once the bond is there (`.keepGATTCache` with no hash).
    mutating func linkDown(_ link: ConnectionHandle, _ actions: inout [SystemAction]) {
        let old = links[link]
        links[link] = Link(generation: nextGeneration())
        guard let old else { return }
        if case .known(nil) = old.hash, let peer = old.peer, !old.record.isEmpty {
            actions.append(.keepGATTCache(peer, hash: nil, old.record))
        }
        for id in old.waiting { release(id, &actions) }
    }

    /// The controller went away: as a link's end for every link, nothing kept.
    mutating func reset(_ actions: inout [SystemAction]) {
        let waiting = links.keys.sorted { $0.rawValue < $1.rawValue }.flatMap { links[$0]!.waiting }
        links = [:]
        for id in waiting { release(id, &actions) }
    }

    // MARK: Private

    private mutating func nextGeneration() -> UInt64 {
        lastGeneration += 1
        return lastGeneration
    }

    private mutating func draw() -> DiscoveryID {
        defer { nextID += 1 }
        return DiscoveryID(rawValue: nextID)
    }

    /// What is kept on `link` that answers `request`.
    private func kept(_ request: DiscoveryRequest, on link: ConnectionHandle) -> DiscoveryResult? {
        guard let record = links[link]?.record else { return nil }
        switch request {
        case .services(let uuid):
            return record.services.map { all in .services(all.filter { uuid == nil || $0.uuid == uuid }) }
        case .includedServices(let service):
            return record.includedServices[service.handleRange.lowerBound].map { .services($0) }
        case .characteristics(let service, let uuid):
            return record.characteristics[service.handleRange.lowerBound].map { all in
                .characteristics(all.filter { uuid == nil || $0.uuid == uuid })
            }
        case .descriptors(let characteristic):
            return record.descriptors[characteristic.valueHandle].map { .descriptors($0) }
        }
    }

    /// A request that waited for the hash: answered from what is kept now, or sent to the peer.
    private mutating func release(_ id: DiscoveryID, _ actions: inout [SystemAction]) {
        guard var request = pending[id] else { return }
        if let found = kept(request.request, on: request.link) {
            pending[id] = nil
            if request.purpose == .app { actions.append(.discoveryAnswered(id, .success(found))) }
            return
        }
        request.asOf = links[request.link]?.generation ?? 0
        pending[id] = request
        actions.append(.discover(id, request.link, request.request))
    }

    /// Keeps `found` for `request` on `link` if the link is still the one it was asked on, and has the store keep
    /// it when it is to be kept across links.
    private mutating func keep(
        _ found: DiscoveryResult, for request: DiscoveryRequest, on link: ConnectionHandle, asOf: UInt64,
        _ actions: inout [SystemAction]
    ) {
        guard var kept = links[link], kept.generation == asOf else { return }
        switch (request, found) {
        case (.services, .services(let all)): kept.record.services = all
        case (.includedServices(let service), .services(let all)):
            kept.record.includedServices[service.handleRange.lowerBound] = all
        case (.characteristics(let service, _), .characteristics(let all)):
            kept.record.characteristics[service.handleRange.lowerBound] = all
        case (.descriptors(let characteristic), .descriptors(let all)):
            kept.record.descriptors[characteristic.valueHandle] = all
        default: return
        }
        links[link] = kept
        guard let peer = kept.peer, case .known(let hash) = kept.hash else { return }
        actions.append(.keepGATTCache(peer, hash: hash, kept.record))
    }

    /// The next step of the system's search for the peer's Service Changed characteristic, whose indications it
    /// enables (through what is kept, so a cached peer is asked nothing): the services, then the Generic
    /// Attribute service's characteristics, then Service Changed's descriptors, then its configuration written.
    /// A peer without it is left alone.
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 7.1 (Service Changed).
    private mutating func searchServiceChanged(
        on link: ConnectionHandle, asOf: UInt64, after step: (DiscoveryRequest, DiscoveryResult)?,
        _ actions: inout [SystemAction]
    ) {
        var request = step?.0 ?? .services(nil)
        var result = step?.1
        while links[link]?.generation == asOf {
            guard let found = result ?? kept(request, on: link) else {
                let id = draw()
                pending[id] = Pending(link: link, request: request, asOf: asOf, purpose: .serviceChanged)
                actions.append(.discover(id, link, request))
                return
            }
            switch (request, found) {
            case (.services, .services(let services)):
                guard let gatt = services.first(where: { $0.uuid == .genericAttribute }) else { return }
                request = .characteristics(gatt, nil)
            case (.characteristics, .characteristics(let characteristics)):
                guard let changed = characteristics.first(where: { $0.uuid == .serviceChanged }),
                    changed.properties.contains(.indicate)
                else { return }
                request = .descriptors(changed)
            case (.descriptors(let changed), .descriptors(let descriptors)):
                guard let cccd = descriptors.first(where: { $0.uuid == .clientCharacteristicConfiguration }) else {
                    return
                }
                links[link]!.serviceChanged = changed.valueHandle
                actions.append(.writeServiceChangedConfiguration(link, cccd.handle))
                return
            default:
                return
            }
            result = nil
        }
    }
}
