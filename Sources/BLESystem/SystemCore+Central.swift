import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import BLETransport
import Foundation
import Logging
import Synchronization

// The central role of the system: scans, links and their subscriptions, discovery (SystemMachine does the
// deciding; this part calls it and the host).

extension SystemCore {
    // MARK: Scanning

    /// Starts or changes `client`'s scan: the controller scans for every client's request at once, and `client`
    /// hears only what its own request matches, each discovery carrying `id` (the client's name for this scan,
    /// recorded before the call).
    package func startScan(_ client: any SystemSession, _ request: ScanRequest, id: UInt64) {
        guard let app = appOf(ObjectIdentifier(client)) else { return refuseDefunct("a scan") }
        step { s in
            guard let session = s.ids[ObjectIdentifier(client)] else { return ((), []) }
            let mode = s.machine.apps.scanMode(of: app.id)
            return ((), s.machine.scanStarted(session, request, id: id, mode: mode))
        }
    }

    /// Ends `client`'s scan (and the controller's, when no other client scans).
    package func stopScan(_ client: any SystemSession) {
        step { s in
            guard let session = s.ids[ObjectIdentifier(client)] ?? s.reserved[ObjectIdentifier(client)] else {
                return ((), [])
            }
            return ((), s.machine.scanStopped(session))
        }
    }

    // MARK: Connections

    /// Connects `client` to `peer`: returns the link's info at once when a link to it is up (another app's),
    /// else the client waits with every other app's pending connects, and `linkAttached` or `linkFailed` follows.
    /// With `autoReconnect`, the system connects again by itself after a loss of a link the client was on
    /// (`linkDown` says so), until the client lets go. `alerts`: the alerts the system shows about the peer
    /// while the client's app is away, as its rules say (`SystemMachine.connectionAlert`).
    package func connect(
        _ client: any SystemSession, to peer: BluetoothAddress, autoReconnect: Bool = false,
        alerts: ConnectionAlertWishes = ConnectionAlertWishes()
    ) -> LinkInfo? {
        let (live, link) = step { s -> ((Bool, LinkInfo?), [SystemAction]) in
            guard let session = s.ids[ObjectIdentifier(client)] else { return ((false, nil), []) }
            let (link, actions) = s.machine.connect(session, to: peer, autoReconnect: autoReconnect, alerts: alerts)
            return ((true, link), actions)
        }
        if !live { refuseDefunct("a connection") }
        return link
    }

    /// `client` lets go of `peer`: a pending connect is withdrawn, or the client leaves the link (which goes down
    /// when it was the last).
    /// The subscriptions only `client` wanted on a link it leaves while others stay end on the peer.
    package func cancelConnection(_ client: any SystemSession, from peer: BluetoothAddress) -> LinkCancellation {
        step { s in
            guard let session = s.session(of: ObjectIdentifier(client)) else { return (.nothing, []) }
            return s.machine.cancelConnection(session, from: peer)
        }
    }

    /// Whether `client` is on the link `handle` now.
    public func isOnLink(_ client: ObjectIdentifier, _ handle: ConnectionHandle) -> Bool {
        state.withLock { s in s.session(of: client).map { s.machine.links.isUser($0, of: handle) } ?? false }
    }

    /// A client that went away (`ObjectIdentifier` of the manager: it may be mid-deinit) lets go of everything,
    /// its subscriptions on the links others stay on included. Nothing happens for a manager detached already
    /// (its app's termination let go for it).
    public func releaseLinks(of client: ObjectIdentifier) {
        step { s in
            guard let session = s.session(of: client) else { return ((), []) }
            return ((), s.machine.releaseLinks(of: session))
        }
    }

    /// `client` wants `value` (0 none, 1 notifications, 2 indications) in the Client Characteristic
    /// Configuration descriptor at `descriptor` (of the characteristic whose value is at `characteristic`) on
    /// `link`, and `done` hears when the peer holds what every app wants together: at once when it already does,
    /// else when the system's write of it ends (a refusal takes the client's wish back). A client no longer on the
    /// link is refused.
    public func setSubscription(
        _ value: UInt16, by client: ObjectIdentifier, descriptor: AttributeHandle,
        characteristic: AttributeHandle? = nil,
        on link: ConnectionHandle, done: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        let answer = step { s -> (SubscriptionAnswer, [SystemAction]) in
            guard let session = s.session(of: client) else { return (.notOnLink, []) }
            let (answer, actions) = s.machine.subscribe(
                session, value, descriptor: descriptor, characteristic: characteristic, on: link)
            // Known before the write can end: its answer is stepped after this step.
            switch answer {
            case .write(let id, _), .joined(let id): s.subscriptionWaiters[id, default: []].append(done)
            case .done, .notOnLink: break
            }
            return (answer, actions)
        }
        switch answer {
        case .done: done(.success(()))
        case .notOnLink: done(.failure(HostError(.disconnected, "the application is no longer on this link")))
        case .write(let id, let value):
            // Written here, on the caller's thread, as its other GATT requests are: the peer gets the descriptor
            // before what the app asks next (a command whose answer comes as a notification, say).
            writeDescriptor(value, descriptor: descriptor, on: link, id: id)
        case .joined: break
        }
    }

    /// Writes a descriptor the machine asked for; the peer's answer is stepped. The core is held until then:
    /// whoever waits for the write is answered even if the app let the system go.
    func writeDescriptor(
        _ value: UInt16, descriptor: AttributeHandle, on link: ConnectionHandle, id: DescriptorWriteID
    ) {
        host.write(on: link, attribute: descriptor, value: [UInt8(value & 0xFF), UInt8(value >> 8)]) { result in
            let error: HostError? = if case .failure(let error) = result { error } else { nil }
            self.step { ((), $0.machine.subscriptionWritten(id, error: error)) }
        }
    }

    /// The peers this device is linked to as a central, whichever app asked, that offer any of `services` (as
    /// discovered by any app; all of them when nil).
    public func connectedPeers(offering services: [BluetoothUUID]? = nil) -> [BluetoothAddress] {
        state.withLock { $0.machine.links.linkedPeers(offering: services) }
    }

    /// Services an app discovered on the link `handle`, for every app's `retrieveConnectedPeripherals`.
    public func noteServices(_ services: [BluetoothUUID], on handle: ConnectionHandle) {
        state.withLock { $0.machine.noteServices(services, on: handle) }
    }

    // MARK: Discovery

    /// Discovers the primary services on `link` (all, or those of type `uuid`) for an app, through the system:
    /// what another app (or this one) discovered on the link, or what the GATT cache kept for its peer, is not
    /// asked again (`DiscoveryTable`).
    public func discoverServices(
        on link: ConnectionHandle, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        discover(.services(uuid), on: link) { result in
            completion(result.map { if case .services(let all) = $0 { all } else { [] } })
        }
    }

    /// Discovers the services `service` includes, through the system.
    public func discoverIncludedServices(
        on link: ConnectionHandle, in service: GATTService,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        discover(.includedServices(service), on: link) { result in
            completion(result.map { if case .services(let all) = $0 { all } else { [] } })
        }
    }

    /// Discovers the characteristics of `service` (all, or those of type `uuid`), through the system.
    public func discoverCharacteristics(
        on link: ConnectionHandle, in service: GATTService, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTCharacteristic], HostError>) -> Void
    ) {
        discover(.characteristics(service, uuid), on: link) { result in
            completion(result.map { if case .characteristics(let all) = $0 { all } else { [] } })
        }
    }

    /// Discovers the descriptors of `characteristic`, through the system.
    public func discoverDescriptors(
        on link: ConnectionHandle, of characteristic: GATTCharacteristic,
        completion: @escaping @Sendable (Result<[GATTDescriptor], HostError>) -> Void
    ) {
        discover(.descriptors(characteristic), on: link) { result in
            completion(result.map { if case .descriptors(let all) = $0 { all } else { [] } })
        }
    }

    /// Whether `attribute` is the peer's Service Changed characteristic on `link` (its indications are the
    /// system's, not an app's).
    public func isServiceChanged(_ attribute: AttributeHandle, on link: ConnectionHandle) -> Bool {
        state.withLock { $0.machine.discovery.isServiceChanged(attribute, on: link) }
    }

    /// An app's discovery: answered at once from what is kept, asked of the peer here (on the caller's thread, in
    /// order with its other GATT requests), or left to wait for the peer's Database Hash.
    func discover(
        _ request: DiscoveryRequest, on link: ConnectionHandle,
        completion: @escaping @Sendable (Result<DiscoveryResult, HostError>) -> Void
    ) {
        let answer = state.withLock { s -> DiscoveryAnswer in
            let answer = s.machine.discover(request, on: link)
            switch answer {
            case .ask(let id), .wait(let id): s.discoveryWaiters[id] = completion
            case .found: break
            }
            return answer
        }
        switch answer {
        case .found(let result): completion(.success(result))
        case .ask(let id):
            ask(request, on: link) { [weak self] result in
                guard let self else { return completion(result) }
                step { ((), $0.machine.discoveryCompleted(id, result)) }
            }
        case .wait: break
        }
    }

    /// Asks the peer for `request`.
    func ask(
        _ request: DiscoveryRequest, on link: ConnectionHandle,
        completion: @escaping @Sendable (Result<DiscoveryResult, HostError>) -> Void
    ) {
        switch request {
        case .services(let uuid):
            host.discoverServices(on: link, uuid: uuid) { completion($0.map(DiscoveryResult.services)) }
        case .includedServices(let service):
            host.discoverIncludedServices(on: link, in: service) { completion($0.map(DiscoveryResult.services)) }
        case .characteristics(let service, let uuid):
            host.discoverCharacteristics(on: link, in: service, uuid: uuid) {
                completion($0.map(DiscoveryResult.characteristics))
            }
        case .descriptors(let characteristic):
            host.discoverDescriptors(on: link, of: characteristic) { completion($0.map(DiscoveryResult.descriptors)) }
        }
    }

    /// Reads the peer's Database Hash, then steps what it found with what the store keeps for the peer (read
    /// here, off the machine).
    func readDatabaseHash(on link: ConnectionHandle, asOf: UInt64, peer: UUID?, againstCache: Bool) {
        let everything = AttributeHandle(0x0001)...AttributeHandle(0xFFFF)
        // The core is held until the peer answers (the read ends, at the latest, with the link): the discoveries
        // waiting for it are always answered.
        host.readUsingCharacteristicUUID(on: link, uuid: .databaseHash, range: everything) { [self] result in
            let read: DatabaseHashRead
            switch result {
            case .success(let values):
                // A hash is 128 bits; anything else is no hash to trust.
                read = .value(values.first.map(\.value).flatMap { $0.count == 16 ? $0 : nil })
            case .failure(let error) where error.attErrorCode == .attributeNotFound: read = .absent
            case .failure: read = .failed
            }
            var cached: StoredGATTCache?
            if let peer, read != .failed, againstCache || read == .absent, let kept = store.gattCache(for: peer) {
                let record = GATTCacheRecord(decoding: kept.record)
                if record == nil {
                    Self.cacheLogger.warning(
                        "a GATT cache in the store cannot be read; it is dropped and the peer discovered again",
                        metadata: ["identifier": "\(peer)"])
                }
                cached = StoredGATTCache(hash: kept.hash, record: record)
            }
            let bonded = peer.flatMap { store.bond(for: $0) } != nil
            step { ((), $0.machine.databaseHashRead(link, asOf: asOf, read, cached: cached, bonded: bonded)) }
        }
    }
}
