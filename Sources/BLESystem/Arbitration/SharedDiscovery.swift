import BLEATT
import BLECore
import BLEGATT
import BLEHost
import Foundation
import Logging
import Synchronization

/// One GATT discovery per link, shared by the apps on it, and kept across links in the store (the GATT cache).
///
/// - On a link: a complete result (every primary service, every characteristic or included service of a
///   service, every descriptor of a characteristic) answers any app's later request, for all or for some types,
///   without a request to the peer. A filtered request with nothing kept goes to the peer as it is (and is not
///   kept).
/// - Across links: when a link comes up, the system reads the peer's Database Hash (Read Using Characteristic
///   UUID over 0x0001–0xFFFF, Core Spec 5.4, Vol 3, Part G, 7.3) before any discovery goes out. The same bytes
///   as the cache was kept under: the cache answers as if discovered on this link, so a reconnection costs that
///   one read. Other bytes, or no hash where there was one: the cache is dropped and the apps are told
///   (`databaseChanged`, which the managers turn into `didModifyServices`). A peer without a hash (it answers the
///   read with nothing, or Attribute Not Found) is cached across links only when bonded: Core Spec 5.4, Vol 3,
///   Part G, 2.5.2 lets a client keep a bonded server's handles, which the server must tell it of with Service
///   Changed, so its cache is kept under an empty hash and answers on every link while the bond lasts.
/// - Service Changed: the system subscribes to it on every link (as iOS does for every app), from the cache when
///   it can; an indication forgets what is kept for the link and in the store (the system calls `invalidate`
///   before any app hears of it) and the hash is read again before the next discovery. An answer still on its
///   way from before is handed on, not kept.
public final class SharedDiscovery: Sendable {
    private enum Hash {
        /// Being read: discoveries wait for it.
        case reading
        /// Read: the peer's hash, or nil when it has none (or the read failed).
        case known([UInt8]?)
    }

    private struct Kept {
        var record = GATTCacheRecord()
        /// Changes when the link goes down or the peer's database changes: an answer to a request made before
        /// is handed on, not kept.
        var generation: UInt64 = 0
        /// The peer's identifier in the store, for its cache.
        var peer: UUID?
        var hash = Hash.known(nil)
        /// Requests waiting for the hash.
        var waiting: [@Sendable () -> Void] = []
        /// The peer's Service Changed value handle, once subscribed.
        var serviceChanged: AttributeHandle?
    }

    private let state = Mutex<[ConnectionHandle: Kept]>([:])
    private let host: HostDriver
    private let store: SystemStore
    private let databaseChanged = Mutex<(@Sendable (ConnectionHandle) -> Void)?>(nil)

    private static let logger = Logger(label: "swift-ble.gatt-cache")

    /// The whole handle range, where the hash is read.
    private static let everything = AttributeHandle(0x0001)...AttributeHandle(0xFFFF)

    init(host: HostDriver, store: SystemStore) {
        self.host = host
        self.store = store
    }

    /// Who hears that a peer's database is not the one its cache was kept for (on the host's context).
    func onDatabaseChanged(_ handler: @escaping @Sendable (ConnectionHandle) -> Void) {
        databaseChanged.withLock { $0 = handler }
    }

    // MARK: Discovery

    public func services(
        on link: ConnectionHandle, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        whenReady(link) { [self] in
            if let all = state.withLock({ $0[link]?.record.services }) {
                return completion(.success(all.filter { uuid == nil || $0.uuid == uuid }))
            }
            guard uuid == nil else { return host.discoverServices(on: link, uuid: uuid, completion: completion) }
            let asOf = generation(link)
            host.discoverServices(on: link, uuid: nil) { [self] result in
                if case .success(let all) = result { keep(link, asOf: asOf) { $0.services = all } }
                completion(result)
            }
        }
    }

    public func includedServices(
        on link: ConnectionHandle, in service: GATTService,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        let key = service.handleRange.lowerBound
        whenReady(link) { [self] in
            if let all = state.withLock({ $0[link]?.record.includedServices[key] }) {
                return completion(.success(all))
            }
            let asOf = generation(link)
            host.discoverIncludedServices(on: link, in: service) { [self] result in
                if case .success(let all) = result { keep(link, asOf: asOf) { $0.includedServices[key] = all } }
                completion(result)
            }
        }
    }

    public func characteristics(
        on link: ConnectionHandle, in service: GATTService, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTCharacteristic], HostError>) -> Void
    ) {
        let key = service.handleRange.lowerBound
        whenReady(link) { [self] in
            if let all = state.withLock({ $0[link]?.record.characteristics[key] }) {
                return completion(.success(all.filter { uuid == nil || $0.uuid == uuid }))
            }
            guard uuid == nil else {
                return host.discoverCharacteristics(on: link, in: service, uuid: uuid, completion: completion)
            }
            let asOf = generation(link)
            host.discoverCharacteristics(on: link, in: service, uuid: nil) { [self] result in
                if case .success(let all) = result { keep(link, asOf: asOf) { $0.characteristics[key] = all } }
                completion(result)
            }
        }
    }

    public func descriptors(
        on link: ConnectionHandle, of characteristic: GATTCharacteristic,
        completion: @escaping @Sendable (Result<[GATTDescriptor], HostError>) -> Void
    ) {
        let key = characteristic.valueHandle
        whenReady(link) { [self] in
            if let all = state.withLock({ $0[link]?.record.descriptors[key] }) { return completion(.success(all)) }
            let asOf = generation(link)
            host.discoverDescriptors(on: link, of: characteristic) { [self] result in
                if case .success(let all) = result { keep(link, asOf: asOf) { $0.descriptors[key] = all } }
                completion(result)
            }
        }
    }

    /// Whether `attribute` is the peer's Service Changed characteristic on `link` (its indications are the
    /// system's, not an app's).
    public func isServiceChanged(_ attribute: AttributeHandle, on link: ConnectionHandle) -> Bool {
        state.withLock { $0[link]?.serviceChanged == attribute }
    }

    // MARK: The link's life (SystemCore)

    /// A link to `peer` (its identifier in the store, when it has one) came up as a central: the hash is read
    /// before any discovery, and compared with the cache's.
    func linkUp(_ link: ConnectionHandle, peer: UUID?) {
        let asOf = state.withLock { s -> UInt64 in
            let next = (s[link]?.generation ?? 0) &+ 1
            s[link] = Kept(generation: next, peer: peer, hash: .reading)
            return next
        }
        readHash(on: link, asOf: asOf, againstCache: true)
    }

    /// The peer's database changed in `start...end` (Service Changed): everything kept for the link and in the
    /// store is forgotten (a service that only overlaps the range changed too, and the indication is rare), and
    /// the hash is read again before the next discovery.
    public func invalidate(on link: ConnectionHandle, from start: UInt16, to end: UInt16) {
        let changed = state.withLock { s -> (asOf: UInt64, peer: UUID?)? in
            guard let old = s[link] else { return nil }
            var kept = Kept(generation: old.generation &+ 1, peer: old.peer, hash: .reading)
            kept.waiting = old.waiting
            kept.serviceChanged = old.serviceChanged
            s[link] = kept
            return (kept.generation, kept.peer)
        }
        guard let changed else { return }
        if let peer = changed.peer { store.setGATTCache(nil, for: peer) }
        readHash(on: link, asOf: changed.asOf, againstCache: false)
    }

    /// The link went down: nothing of it is kept here (the store keeps the cache), and requests still waiting for
    /// the hash go on to the host, which fails them.
    func linkDown(_ link: ConnectionHandle) {
        let (waiting, old) = state.withLock { s -> ([@Sendable () -> Void], Kept?) in
            let old = s[link]
            s[link] = Kept(generation: (s[link]?.generation ?? 0) &+ 1)
            return (old?.waiting ?? [], old)
        }
        // What was discovered before the peer bonded on this link is kept once the bond is there.
        if let old, case .known(nil) = old.hash, let (peer, cache) = cache(of: old) {
            store.setGATTCache(cache, for: peer)
        }
        for request in waiting { request() }
    }

    /// The controller went away: as `linkDown` for every link.
    func reset() {
        let waiting = state.withLock { s -> [@Sendable () -> Void] in
            defer { s = [:] }
            return s.values.flatMap(\.waiting)
        }
        for request in waiting { request() }
    }

    // MARK: Private

    private func generation(_ link: ConnectionHandle) -> UInt64 {
        state.withLock { $0[link]?.generation ?? 0 }
    }

    /// Runs `request` now, or once the link's hash is known.
    private func whenReady(_ link: ConnectionHandle, _ request: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            guard var kept = s[link], case .reading = kept.hash else { return true }
            kept.waiting.append(request)
            s[link] = kept
            return false
        }
        if now { request() }
    }

    private func keep(_ link: ConnectionHandle, asOf generation: UInt64, _ change: (inout GATTCacheRecord) -> Void) {
        let save = state.withLock { s -> (UUID, StoreCache)? in
            guard var kept = s[link], kept.generation == generation else { return nil }
            change(&kept.record)
            s[link] = kept
            return cache(of: kept)
        }
        if let (peer, cache) = save { store.setGATTCache(cache, for: peer) }
    }

    /// What the store keeps of a link's discovery: under the peer's hash, or, for a bonded peer without one, under
    /// an empty hash; nil when nothing is to be kept (no identifier, the hash unknown, no hash and no bond).
    private func cache(of kept: Kept) -> (UUID, StoreCache)? {
        guard let peer = kept.peer, case .known(let hash) = kept.hash, !kept.record.isEmpty else { return nil }
        if let hash { return (peer, StoreCache(hash: hash, record: kept.record.encoded())) }
        guard store.bond(for: peer) != nil else { return nil }
        return (peer, StoreCache(hash: [], record: kept.record.encoded()))
    }

    private typealias StoreCache = SystemStore.GATTCache

    private func readHash(on link: ConnectionHandle, asOf: UInt64, againstCache: Bool) {
        host.readUsingCharacteristicUUID(on: link, uuid: .databaseHash, range: Self.everything) { [self] result in
            switch result {
            case .success(let values):
                // A hash is 128 bits; anything else is no hash to trust.
                let hash = values.first.map(\.value).flatMap { $0.count == 16 ? $0 : nil }
                hashRead(hash, on: link, asOf: asOf, againstCache: againstCache)
            case .failure(let error) where error.attErrorCode == .attributeNotFound:
                // The peer has no Database Hash (a server older than Core 5.1).
                hashRead(nil, on: link, asOf: asOf, againstCache: true)
            case .failure:
                // The read failed (another error the peer answered, the link going down): nothing is known of its
                // database, so the cache is neither used nor dropped, and nobody is told of a change.
                hashRead(nil, on: link, asOf: asOf, againstCache: false)
            }
        }
    }

    private func hashRead(_ hash: [UInt8]?, on link: ConnectionHandle, asOf: UInt64, againstCache: Bool) {
        // The store is read outside the lock; the generation, checked again below, says whether it still applies.
        let peer = state.withLock { $0[link]?.generation == asOf ? $0[link]?.peer : nil }
        let cached = againstCache ? peer.flatMap(store.gattCache(for:)) : nil
        var loaded: GATTCacheRecord?
        // A cache kept under the same hash; or, for a peer without one, kept (under an empty hash) while bonded.
        let same = cached.map { $0.hash == (hash ?? []) } ?? false
        if let cached, same, hash != nil || peer.flatMap(store.bond(for:)) != nil {
            loaded = GATTCacheRecord(decoding: cached.record)
            if loaded == nil, let peer {
                Self.logger.warning(
                    "a GATT cache in the store cannot be read; it is dropped and the peer discovered again",
                    metadata: ["identifier": "\(peer)"])
            }
        }
        let waiting = state.withLock { s -> [@Sendable () -> Void]? in
            guard var kept = s[link], kept.generation == asOf else { return nil }
            if let loaded { kept.record = loaded }
            kept.hash = .known(hash)
            let waiting = kept.waiting
            kept.waiting = []
            s[link] = kept
            return waiting
        }
        guard let waiting else { return }
        if cached != nil, loaded == nil, let peer {
            // Dropped: another hash, no hash any more, or a record that cannot be read (that alone is no change
            // of the peer's, so nobody is told).
            store.setGATTCache(nil, for: peer)
            if !same, let handler = databaseChanged.withLock({ $0 }) { handler(link) }
        }
        // The system's own requests first, then the apps' that waited: in one order whatever the threads, so a
        // simulation repeats (an app's next request comes after, from its queue).
        subscribeToServiceChanged(on: link, asOf: asOf)
        for request in waiting { request() }
    }

    /// Finds the peer's Service Changed characteristic (through the kept discovery, so a cached peer is asked
    /// nothing) and enables its indications; a peer without it is left alone.
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 7.1 (Service Changed).
    private func subscribeToServiceChanged(on link: ConnectionHandle, asOf: UInt64) {
        guard state.withLock({ $0[link]?.serviceChanged == nil }) else { return }
        services(on: link, uuid: nil) { [self] result in
            guard case .success(let services) = result,
                let gatt = services.first(where: { $0.uuid == .genericAttribute })
            else { return }
            characteristics(on: link, in: gatt, uuid: nil) { [self] result in
                guard case .success(let found) = result,
                    let changed = found.first(where: { $0.uuid == .serviceChanged }),
                    changed.properties.contains(.indicate)
                else { return }
                descriptors(on: link, of: changed) { [self] result in
                    guard case .success(let descriptors) = result,
                        let cccd = descriptors.first(where: { $0.uuid == .clientCharacteristicConfiguration })
                    else { return }
                    let current = state.withLock { s -> Bool in
                        guard s[link]?.generation == asOf else { return false }
                        s[link]?.serviceChanged = changed.valueHandle
                        return true
                    }
                    guard current else { return }
                    host.write(on: link, attribute: cccd.handle, value: [0x02, 0x00]) { _ in }
                }
            }
        }
    }
}
