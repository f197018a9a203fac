import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Foundation
import Testing

@testable import BLESystem

/// One GATT discovery per link, shared by the apps on it and kept across links (`DiscoveryTable`, in the system
/// machine): discoveries wait for the peer's Database Hash, a cache kept under the same hash answers without
/// asking the peer, another hash drops it and tells the apps, a peer without a hash is cached only while bonded,
/// and the system finds and enables Service Changed on every link.
@Suite struct DiscoveryTests {
    static let link = ConnectionHandle(7)
    static let peer = UUID(uuidString: "00000000-0000-0000-0000-00000000BEEF")!
    static let hash: [UInt8] = Array(repeating: 0xA5, count: 16)
    static let otherHash: [UInt8] = Array(repeating: 0x5A, count: 16)

    static let gatt = GATTService(
        uuid: .genericAttribute, isPrimary: true, handleRange: AttributeHandle(1)...AttributeHandle(4))
    static let sensor = GATTService(
        uuid: BluetoothUUID(0x180D), isPrimary: true, handleRange: AttributeHandle(5)...AttributeHandle(9))
    static let changed = GATTCharacteristic(
        uuid: .serviceChanged, properties: .indicate, declarationHandle: AttributeHandle(2),
        valueHandle: AttributeHandle(3), endHandle: AttributeHandle(4))
    static let cccd = GATTDescriptor(uuid: .clientCharacteristicConfiguration, handle: AttributeHandle(4))

    /// Everything the Service Changed search needs, and the sensor's service.
    static let record = GATTCacheRecord(
        services: [gatt, sensor], characteristics: [gatt.handleRange.lowerBound: [changed]],
        descriptors: [changed.valueHandle: [cccd]])

    /// An app's manager on the link (when a test brings it up `attached`): it hears of the peer's changed database.
    static let session = SessionID(rawValue: 1)
    static let address = BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice)
    static let told = SystemAction.deliver(session, .peerDatabaseChanged(link))

    /// The link comes up (its discovery's part, whose actions are returned); `attached`, with `session` on it, as
    /// the driver steps a central-role link: the discovery's part first, then the link's.
    static func linkUp(_ m: inout SystemMachine, attached: Bool = false) -> [SystemAction] {
        if attached {
            if m.sessions[session] == nil { _ = m.opened(session, app: "app") }
            _ = m.connect(session, to: address)
        }
        let actions = m.discoveryLinkUp(link, peer: peer)
        if attached {
            let info = LinkInfo(
                handle: link, role: .central, peer: address, interval: 24, latency: 0, supervisionTimeout: 400)
            _ = m.linkConnected(info, securing: false)
        }
        return actions
    }

    static func discoveries(_ actions: [SystemAction]) -> [(DiscoveryID, DiscoveryRequest)] {
        actions.compactMap { if case .discover(let id, _, let request) = $0 { (id, request) } else { nil } }
    }

    @Test func discoveriesWaitForTheHashThenGoToThePeerAndAreKept() throws {
        var m = SystemMachine()
        #expect(Self.linkUp(&m) == [.readDatabaseHash(Self.link, asOf: 1, peer: Self.peer, againstCache: true)])
        guard case .wait(let id) = m.discover(.services(nil), on: Self.link) else {
            Issue.record("a discovery before the hash was not made to wait")
            return
        }
        let read = m.databaseHashRead(Self.link, asOf: 1, .value(Self.hash), cached: nil, bonded: false)
        // The system's own search first, then the app's, each asked of the peer.
        let asked = Self.discoveries(read)
        #expect(asked.map(\.1) == [.services(nil), .services(nil)])
        #expect(asked.last?.0 == id)
        let found = m.discoveryCompleted(id, .success(.services([Self.gatt, Self.sensor])))
        var kept = GATTCacheRecord()
        kept.services = [Self.gatt, Self.sensor]
        #expect(
            found == [
                .keepGATTCache(Self.peer, hash: Self.hash, kept),
                .discoveryAnswered(id, .success(.services([Self.gatt, Self.sensor]))),
            ])
        // Another app's request for one type is answered from what is kept.
        #expect(m.discover(.services(BluetoothUUID(0x180D)), on: Self.link) == .found(.services([Self.sensor])))
    }

    @Test func aFilteredRequestWithNothingKeptGoesAsItIsAndIsNotKept() {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        _ = m.databaseHashRead(Self.link, asOf: 1, .value(Self.hash), cached: nil, bonded: false)
        guard case .ask(let id) = m.discover(.services(BluetoothUUID(0x180D)), on: Self.link) else {
            Issue.record("a filtered request was not asked of the peer")
            return
        }
        let done = m.discoveryCompleted(id, .success(.services([Self.sensor])))
        #expect(done == [.discoveryAnswered(id, .success(.services([Self.sensor])))])
        #expect(m.discovery.links[Self.link]?.record.services == nil)
    }

    /// The reconnection costs the hash read: the cache kept under the same bytes answers every discovery, the
    /// system's Service Changed search included (its configuration is written at once).
    @Test func aCacheUnderTheSameHashAnswersWithoutAskingThePeer() {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        guard case .wait(let id) = m.discover(.characteristics(Self.gatt, nil), on: Self.link) else {
            Issue.record("not made to wait")
            return
        }
        let read = m.databaseHashRead(
            Self.link, asOf: 1, .value(Self.hash), cached: StoredGATTCache(hash: Self.hash, record: Self.record),
            bonded: false)
        #expect(
            read == [
                .writeServiceChangedConfiguration(Self.link, Self.cccd.handle),
                .discoveryAnswered(id, .success(.characteristics([Self.changed]))),
            ])
        #expect(m.discovery.isServiceChanged(Self.changed.valueHandle, on: Self.link))
    }

    @Test func anotherHashDropsTheCacheAndTellsTheApps() {
        var m = SystemMachine()
        _ = Self.linkUp(&m, attached: true)
        let read = m.databaseHashRead(
            Self.link, asOf: 1, .value(Self.otherHash),
            cached: StoredGATTCache(hash: Self.hash, record: Self.record), bonded: true)
        #expect(Array(read.prefix(2)) == [.dropGATTCache(Self.peer), Self.told])
        #expect(Self.discoveries(read).map(\.1) == [.services(nil)])
    }

    /// Core Spec 5.4, Vol 3, Part G, 2.5.2: a server without a hash may be cached only while bonded.
    @Test(arguments: [false, true])
    func aPeerWithoutAHashIsCachedOnlyWhileBonded(_ bonded: Bool) {
        var m = SystemMachine()
        _ = Self.linkUp(&m, attached: true)
        let read = m.databaseHashRead(
            Self.link, asOf: 1, .absent, cached: StoredGATTCache(hash: [], record: Self.record), bonded: bonded)
        if bonded {
            #expect(read == [.writeServiceChangedConfiguration(Self.link, Self.cccd.handle)])
        } else {
            // Dropped, but nothing changed that the apps must hear of.
            #expect(read.first == .dropGATTCache(Self.peer))
            #expect(!read.contains(Self.told))
        }
    }

    @Test func aFailedReadNeitherUsesNorDropsTheCacheAndAnUnreadableOneIsDroppedQuietly() {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        let failed = m.databaseHashRead(
            Self.link, asOf: 1, .failed, cached: StoredGATTCache(hash: Self.hash, record: Self.record),
            bonded: true)
        #expect(Self.discoveries(failed).map(\.1) == [.services(nil)])
        #expect(!failed.contains(.dropGATTCache(Self.peer)))
        var n = SystemMachine()
        _ = Self.linkUp(&n, attached: true)
        let unreadable = n.databaseHashRead(
            Self.link, asOf: 1, .value(Self.hash), cached: StoredGATTCache(hash: Self.hash, record: nil),
            bonded: false)
        #expect(unreadable.first == .dropGATTCache(Self.peer))
        #expect(!unreadable.contains(Self.told))
    }

    /// A Service Changed indication forgets what was kept, here and in the store, and the hash is read again
    /// before the next discovery; an answer to a request made before is handed on, not kept.
    @Test func serviceChangedForgetsWhatWasKeptAndReadsTheHashAgain() {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        _ = m.databaseHashRead(
            Self.link, asOf: 1, .value(Self.hash), cached: StoredGATTCache(hash: Self.hash, record: Self.record),
            bonded: false)
        guard
            case .ask(let id) = m.discover(
                .descriptors(
                    GATTCharacteristic(
                        uuid: BluetoothUUID(0x2A37), properties: .notify, declarationHandle: AttributeHandle(6),
                        valueHandle: AttributeHandle(7), endHandle: AttributeHandle(8))), on: Self.link)
        else {
            Issue.record("not asked")
            return
        }
        let changed = m.peerServicesChanged(on: Self.link)
        #expect(
            changed == [
                .dropGATTCache(Self.peer), .readDatabaseHash(Self.link, asOf: 2, peer: Self.peer, againstCache: false),
            ])
        #expect(m.discovery.links[Self.link]?.record == GATTCacheRecord())
        let late = m.discoveryCompleted(id, .success(.descriptors([Self.cccd])))
        #expect(late == [.discoveryAnswered(id, .success(.descriptors([Self.cccd])))])
        #expect(m.discovery.links[Self.link]?.record == GATTCacheRecord())
        guard case .wait = m.discover(.services(nil), on: Self.link) else {
            Issue.record("a discovery after Service Changed did not wait for the hash")
            return
        }
    }

    /// The link goes down: requests waiting for the hash go on to the peer (whose end fails them), and what was
    /// discovered without a hash is handed to the store, which keeps it if the peer bonded meanwhile.
    @Test func aLinkThatGoesDownReleasesItsWaitersAndHandsOverWhatWasFound() throws {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        let read = m.databaseHashRead(Self.link, asOf: 1, .absent, cached: nil, bonded: false)
        #expect(m.databaseHashRead(Self.link, asOf: 1, .absent, cached: nil, bonded: false) == [])  // answered once
        let search = try #require(Self.discoveries(read).first)
        // No Generic Attribute service: the search ends, and what was found is offered to the store.
        var kept = GATTCacheRecord()
        kept.services = [Self.sensor]
        let found = m.discoveryCompleted(search.0, .success(.services([Self.sensor])))
        #expect(found == [.keepGATTCache(Self.peer, hash: nil, kept)])
        // Handed over again as the link goes down (the peer may have bonded since).
        var n = m
        #expect(
            n.linkDisconnected(Self.link, reason: .connectionTimeout) == [.keepGATTCache(Self.peer, hash: nil, kept)])
        // A request waiting for the hash when the link goes down goes on to the peer, whose end fails it.
        _ = m.peerServicesChanged(on: Self.link)
        guard case .wait(let id) = m.discover(.services(nil), on: Self.link) else {
            Issue.record("not made to wait")
            return
        }
        #expect(m.linkDisconnected(Self.link, reason: .connectionTimeout) == [.discover(id, Self.link, .services(nil))])
    }

    /// Without a cache, the system's search for Service Changed asks the peer step by step (keeping what it finds)
    /// and writes the configuration at the end; a search overtaken by a change of the peer's database stops.
    @Test func theServiceChangedSearchAsksThePeerStepByStep() throws {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        let read = m.databaseHashRead(Self.link, asOf: 1, .value(Self.hash), cached: nil, bonded: false)
        let services = try #require(Self.discoveries(read).first)
        #expect(services.1 == .services(nil))
        let second = m.discoveryCompleted(services.0, .success(.services([Self.gatt, Self.sensor])))
        let characteristics = try #require(Self.discoveries(second).first)
        #expect(characteristics.1 == .characteristics(Self.gatt, nil))
        let third = m.discoveryCompleted(characteristics.0, .success(.characteristics([Self.changed])))
        let descriptors = try #require(Self.discoveries(third).first)
        #expect(descriptors.1 == .descriptors(Self.changed))
        let last = m.discoveryCompleted(descriptors.0, .success(.descriptors([Self.cccd])))
        #expect(last.last == .writeServiceChangedConfiguration(Self.link, Self.cccd.handle))
        #expect(last.first == .keepGATTCache(Self.peer, hash: Self.hash, Self.record))
        // Overtaken: the peer's database changed while the first step was on its way.
        var n = SystemMachine()
        _ = Self.linkUp(&n)
        let first = try #require(
            Self.discoveries(n.databaseHashRead(Self.link, asOf: 1, .value(Self.hash), cached: nil, bonded: false))
                .first)
        _ = n.peerServicesChanged(on: Self.link)
        #expect(n.discoveryCompleted(first.0, .success(.services([Self.gatt]))) == [])
    }

    /// A hash read that failed says nothing of the peer's database: what is found on the link is not kept across
    /// links (a bonded peer's cache under its hash would be replaced by one under no hash).
    @Test func afterAFailedReadNothingIsKeptAcrossLinks() throws {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        let read = m.databaseHashRead(Self.link, asOf: 1, .failed, cached: nil, bonded: true)
        let services = try #require(Self.discoveries(read).first)
        let found = m.discoveryCompleted(services.0, .success(.services([Self.sensor])))
        #expect(!found.contains { if case .keepGATTCache = $0 { true } else { false } })
        #expect(m.discovery.links[Self.link]?.record.services == [Self.sensor])  // still answers on this link
        #expect(m.linkDisconnected(Self.link, reason: .connectionTimeout) == [])
    }

    /// The controller goes away: requests waiting for a hash go on to the peer (whose end fails them), and a
    /// handle used again by the next link starts afresh.
    @Test func aResetReleasesTheWaitingAndTheNextLinkStartsAfresh() {
        var m = SystemMachine()
        _ = Self.linkUp(&m)
        guard case .wait(let id) = m.discover(.services(nil), on: Self.link) else {
            Issue.record("not made to wait")
            return
        }
        let reset = m.linksReset()
        #expect(reset == [.discover(id, Self.link, .services(nil))])
        let again = Self.linkUp(&m)
        #expect(again == [.readDatabaseHash(Self.link, asOf: 2, peer: Self.peer, againstCache: true)])
        // The answer to the request sent for the old link is handed on, not kept for the new one.
        #expect(
            m.discoveryCompleted(id, .success(.services([Self.sensor]))) == [
                .discoveryAnswered(id, .success(.services([Self.sensor])))
            ])
        #expect(m.discovery.links[Self.link]?.record.services == nil)
    }

    /// Every sequence of eight of eight inputs (an app asking for the services or for the Generic Attribute
    /// service's characteristics; the peer answering the Database Hash read, or failing it, and answering the
    /// oldest discovery sent to it; the link going down or coming up; the peer's database changing, with its
    /// Service Changed indication while the link is up), from a store that keeps what the machine asks. After each
    /// step: every app request is answered once, and one not answered yet is still the machine's; every answer
    /// (from what is kept or from the peer) is what the peer's database holds now; the store keeps a record only
    /// under the hash of the database it describes; the apps are told of a change only when the store held a
    /// cache under another hash.
    @Test func everySequenceAnswersEachRequestOnceWithThePeersDatabase() {
        enum Input: CaseIterable {
            case askServices, askCharacteristics, hashAnswered, hashFailed, peerAnswers, down, up, change
        }
        let other = GATTService(
            uuid: BluetoothUUID(0x180F), isPrimary: true, handleRange: AttributeHandle(5)...AttributeHandle(12))
        let hashes = [Self.hash, Self.otherHash]
        let databases = [[Self.gatt, Self.sensor], [Self.gatt, other]]
        struct Node {
            var machine = SystemMachine()
            var version = 0
            var up = false
            /// Hash reads sent and not answered (their generation, and whether they compare with the store).
            var hashReads: [(asOf: UInt64, againstCache: Bool)] = []
            /// Discoveries sent to the peer, oldest first, and the link's incarnation they were sent on.
            var sent: [(id: DiscoveryID, request: DiscoveryRequest, incarnation: Int)] = []
            var incarnation = 0
            /// App requests not answered yet, and what each asked.
            var open: Set<DiscoveryID> = []
            var asked: [DiscoveryID: DiscoveryRequest] = [:]
            var store: StoredGATTCache?
        }
        func peer(_ request: DiscoveryRequest, version: Int) -> DiscoveryResult {
            switch request {
            case .services(let uuid): .services(databases[version].filter { uuid == nil || $0.uuid == uuid })
            case .characteristics(let service, _) where service == Self.gatt: .characteristics([Self.changed])
            case .descriptors(let characteristic) where characteristic == Self.changed: .descriptors([Self.cccd])
            case .includedServices: .services([])
            case .characteristics: .characteristics([])
            case .descriptors: .descriptors([])
            }
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 8) { (n: inout Node, input: Input) in
            var failures: [String] = []
            var actions: [SystemAction] = []
            func ask(_ request: DiscoveryRequest) {
                switch n.machine.discover(request, on: Self.link) {
                case .found(let result):
                    if result != peer(request, version: n.version) {
                        failures.append(
                            "\(request) answered \(result) from what was kept; the peer holds v\(n.version)")
                    }
                case .ask(let id):
                    n.open.insert(id)
                    n.asked[id] = request
                    n.sent.append((id, request, n.incarnation))
                case .wait(let id):
                    n.open.insert(id)
                    n.asked[id] = request
                }
            }
            switch input {
            case .askServices:
                guard n.up else { return nil }
                ask(.services(nil))
            case .askCharacteristics:
                guard n.up else { return nil }
                ask(.characteristics(Self.gatt, nil))
            case .hashAnswered, .hashFailed:
                guard n.up, !n.hashReads.isEmpty else { return nil }
                let read = n.hashReads.removeFirst()
                let outcome: DatabaseHashRead = input == .hashFailed ? .failed : .value(hashes[n.version])
                // As the driver does: the store is read when the read compares with it and did not fail.
                let cached = input == .hashFailed || !read.againstCache ? nil : n.store
                actions = n.machine.databaseHashRead(Self.link, asOf: read.asOf, outcome, cached: cached, bonded: false)
                if actions.contains(Self.told), cached?.hash == hashes[n.version] {
                    failures.append("the apps were told of a change with the same hash kept")
                }
            case .peerAnswers:
                guard !n.sent.isEmpty else { return nil }
                let (id, request, incarnation) = n.sent.removeFirst()
                let result: Result<DiscoveryResult, HostError> =
                    n.up && incarnation == n.incarnation
                    ? .success(peer(request, version: n.version)) : .failure(HostError(.disconnected, "gone"))
                actions = n.machine.discoveryCompleted(id, result)
            case .down:
                guard n.up else { return nil }
                n.up = false
                n.hashReads = []  // the read fails with the link: its answer is stepped for an old generation
                actions = n.machine.linkDisconnected(Self.link, reason: .connectionTimeout)
            case .up:
                guard !n.up else { return nil }
                n.up = true
                n.incarnation += 1
                actions = Self.linkUp(&n.machine, attached: true)
            case .change:
                n.version = 1 - n.version
                guard n.up else { return [] }
                actions = n.machine.peerServicesChanged(on: Self.link)
            }
            for action in actions {
                switch action {
                case .readDatabaseHash(_, let asOf, _, let againstCache): n.hashReads.append((asOf, againstCache))
                case .discover(let id, _, let request): n.sent.append((id, request, n.incarnation))
                case .discoveryAnswered(let id, let result):
                    if n.open.remove(id) == nil { failures.append("request \(id) answered twice, or never asked") }
                    if case .success(let found) = result {
                        // An answer sent to the peer comes back with what it holds; one released from what is kept
                        // must match it too.
                        if let request = n.asked[id], found != peer(request, version: n.version) {
                            failures.append("request \(id) answered \(found); the peer holds v\(n.version)")
                        }
                    }
                case .keepGATTCache(_, let hash?, let record):
                    n.store = StoredGATTCache(hash: hash, record: record)
                case .keepGATTCache(_, nil, _): break  // not bonded: the store keeps nothing
                case .dropGATTCache: n.store = nil
                case .deliver(Self.session, .peerDatabaseChanged(Self.link)), .writeServiceChangedConfiguration: break
                case .deliver(Self.session, .linkDown): break  // the app's manager leaves the link with it
                default: failures.append("unexpected \(action)")
                }
            }
            if let kept = n.store, let services = kept.record?.services {
                let version = hashes.firstIndex(of: kept.hash)
                if version.map({ databases[$0] != services }) ?? true {
                    failures.append("the store keeps \(services.map(\.uuid)) under a hash of another database")
                }
            }
            let pending = Set(n.machine.discovery.pending.filter { $0.value.purpose == .app }.keys)
            if pending != n.open { failures.append("open requests \(n.open), the machine has \(pending)") }
            return failures
        }
        #expect(visited > 100_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
