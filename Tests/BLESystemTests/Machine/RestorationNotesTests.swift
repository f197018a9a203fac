import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// What reaches a kept manager is noted by the machine, not told (`RestorationTable.Notes`,
/// `SystemMachine.note`): which notes wake the app (IOSRules.md 5.10, 6.2), that it is relaunched once, what a
/// stream keeps, and how the notes and a restarted system's work go to the manager that restores it.
@Suite struct RestorationNotesTests {
    static let a = SessionID(rawValue: 1)
    static let b = SessionID(rawValue: 2)
    static let peer = BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice)
    static let link = LinkInfo(
        handle: ConnectionHandle(7), role: .central, peer: peer, interval: 24, latency: 0, supervisionTimeout: 400)

    static func discovery(_ last: UInt8, rssi: Int = -50) -> SystemDiscovery {
        SystemDiscovery(
            address: BluetoothAddress(bytes: [last, 2, 3, 4, 5, 0xC6], type: .randomDevice), advertisement: [],
            scanResponse: nil, kind: .connectableUndirected, connectable: true, rssi: rssi,
            data: AdvertisingData())
    }

    /// App "one"'s central `a`, kept under "r" when the app is ended.
    static let keepingA = [
        RestorationTable.Candidate(manager: a, role: .central, restoreIdentifier: "r", restorable: true)
    ]

    /// A machine whose app "one" was terminated by the system, keeping its central `a` under "r", scanning for a
    /// service under the scan id 1.
    static func kept() -> SystemMachine {
        var m = SystemMachine()
        _ = m.opened(a, app: "one")
        _ = m.scanStarted(a, ScanRequest(services: [BluetoothUUID(UInt16(0x180D))]), id: 1, mode: .foreground)
        _ = m.appTerminated("one", cause: .bySystem, keeping: keepingA)
        return m
    }

    /// A machine, powered on, whose app "one"'s central `a` is on the link `link`.
    static func linked() -> SystemMachine {
        var m = SystemMachine()
        _ = m.opened(a, app: "one")
        _ = m.controllerChanged(.poweredOn)
        _ = m.connect(a, to: peer)
        _ = m.linkConnected(link, securing: false)
        return m
    }

    @Test func theFirstNoteThatWakesTheAppRelaunchesItOnceUntilItLaunches() {
        var m = Self.kept()
        #expect(m.restoration.notes(Self.a))
        // The state, a link lost while it is being reconnected: noted, nothing to wake the app for.
        #expect(m.note(.powerChanged(.poweredOff(reason: "off")), for: Self.a) == nil)
        #expect(m.note(.linkDown(Self.link.handle, .connectionTimeout, reconnecting: true), for: Self.a) == nil)
        // A connection made: the app is relaunched, once.
        #expect(m.note(.linkAttached(Self.link), for: Self.a) == "one")
        #expect(m.note(.linkDown(Self.link.handle, .connectionTimeout, reconnecting: false), for: Self.a) == nil)
        #expect(m.restoration.woke("one"))
        // Its relaunch takes the manager over, with everything noted, in order.
        let taken = m.takeKept("one", role: .central, restoreIdentifier: "r")
        #expect(taken?.session == Self.a)
        #expect(
            taken?.notes == [
                .powerChanged(.poweredOff(reason: "off")),
                .linkDown(Self.link.handle, .connectionTimeout, reconnecting: true),
                .linkAttached(Self.link), .linkDown(Self.link.handle, .connectionTimeout, reconnecting: false),
            ])
        // Once launched and terminated again, a note wakes it again.
        _ = m.launched("one")
        _ = m.appTerminated(
            "one", cause: .crash,
            keeping: Self.keepingA)
        #expect(m.note(.linkFailed(Self.peer, HostError(.disconnected, "gone")), for: Self.a) == "one")
    }

    /// A kept central manager's scan goes on when it is for services; one for every device ends, and the
    /// manager hears it (noted) as any scan the system ended (IOSRules.md 5.5, 6.5).
    @Test func aKeptManagersScanGoesOnOnlyWhenItIsForServices() {
        let forServices = Self.kept()
        #expect(forServices.scans.request(of: Self.a) != nil)
        var m = SystemMachine()
        _ = m.opened(Self.a, app: "one")
        _ = m.scanStarted(Self.a, ScanRequest(services: nil), id: 3, mode: .foreground)
        let (actions, _) = m.appTerminated(
            "one", cause: .bySystem,
            keeping: Self.keepingA)
        #expect(m.scans.request(of: Self.a) == nil)
        #expect(actions.contains(.deliver(Self.a, .scanEnded(3, refused: nil))))
    }

    /// A session a restorer took but had not replaced when its app was ended again (by the user: not kept) is
    /// noted no more, and hears its end.
    @Test func aTakenSessionNotKeptAgainHearsItsEnd() {
        var k = Self.kept()
        _ = k.takeKept("one", role: .central, restoreIdentifier: "r")
        let (actions, _) = k.appTerminated("one", cause: .byUser, keeping: [])
        #expect(!k.restoration.notes(Self.a))
        #expect(actions.contains(.deliver(Self.a, .appTerminated)))
        #expect(k.restoration.notes.isEmpty)
    }

    @Test func eachWakingEventWakesTheAppAndTheOthersDoNot() {
        let waking: [SessionEvent] = [
            .discovered(Self.discovery(1), scan: 1), .linkAttached(Self.link),
            .linkFailed(Self.peer, HostError(.disconnected, "gone")),
            .linkDown(Self.link.handle, .remoteUserTerminatedConnection, reconnecting: false),
        ]
        let quiet: [SessionEvent] = [
            .powerChanged(.poweredOn), .scanEnded(1, refused: nil), .readyToWrite(Self.link.handle),
            .peerDatabaseChanged(Self.link.handle), .advertised(Self.peer, []),
            .connectionEvent(Self.link.handle, peer: Self.peer, up: true),
            .linkDown(Self.link.handle, .connectionTimeout, reconnecting: true),
            .valueUpdated(Self.link.handle, AttributeHandle(4), [1], isIndication: false),
            // A discovery of a scan that is not the session's now (one stopped, still on its way).
            .discovered(Self.discovery(1), scan: 2),
        ]
        for event in waking {
            var m = Self.kept()
            #expect(m.note(event, for: Self.a) == "one", "\(event)")
        }
        for event in quiet {
            var m = Self.kept()
            #expect(m.note(event, for: Self.a) == nil, "\(event)")
            #expect(!m.restoration.woke("one"))
        }
    }

    @Test func aNotificationWakesTheAppOnlyForACharacteristicItsManagerSubscribedTo() {
        var m = Self.linked()
        let (answer, _) = m.subscribe(
            Self.a, 1, descriptor: AttributeHandle(5), characteristic: AttributeHandle(4), on: Self.link.handle)
        #expect(answer != .notOnLink)
        _ = m.appTerminated(
            "one", cause: .bySystem,
            keeping: Self.keepingA)
        let other = SessionEvent.valueUpdated(Self.link.handle, AttributeHandle(8), [1], isIndication: false)
        let subscribed = SessionEvent.valueUpdated(Self.link.handle, AttributeHandle(4), [2], isIndication: false)
        #expect(m.note(other, for: Self.a) == nil)
        #expect(m.note(subscribed, for: Self.a) == "one")
    }

    @Test func aStreamKeepsItsLatestAndTheNotesAreBoundedButNeverALinksEvents() {
        var m = Self.kept()
        _ = m.note(.discovered(Self.discovery(1, rssi: -70), scan: 1), for: Self.a)
        _ = m.note(.linkAttached(Self.link), for: Self.a)
        _ = m.note(.discovered(Self.discovery(1, rssi: -40), scan: 1), for: Self.a)
        _ = m.note(.valueUpdated(Self.link.handle, AttributeHandle(4), [1], isIndication: false), for: Self.a)
        _ = m.note(.valueUpdated(Self.link.handle, AttributeHandle(4), [2], isIndication: false), for: Self.a)
        var notes = m.restoration.notes[Self.a]?.events ?? []
        #expect(
            notes == [
                .linkAttached(Self.link), .discovered(Self.discovery(1, rssi: -40), scan: 1),
                .valueUpdated(Self.link.handle, AttributeHandle(4), [2], isIndication: false),
            ])
        // Past the bound, the oldest of the streams goes first; the link's events stay.
        for n in 2...80 { _ = m.note(.discovered(Self.discovery(UInt8(n)), scan: 1), for: Self.a) }
        _ = m.note(.linkDown(Self.link.handle, .connectionTimeout, reconnecting: false), for: Self.a)
        notes = m.restoration.notes[Self.a]?.events ?? []
        #expect(notes.count == RestorationTable.Notes.limit)
        #expect(notes.first == .linkAttached(Self.link))
        #expect(notes.last == .linkDown(Self.link.handle, .connectionTimeout, reconnecting: false))
        #expect(notes.contains(.discovered(Self.discovery(80), scan: 1)))
        #expect(!notes.contains(.discovered(Self.discovery(2), scan: 1)))
    }

    @Test func whatComesWhileTheManagerIsTakenOverIsNotedWithoutARelaunchAndGoesToItsRestorer() {
        var m = Self.kept()
        _ = m.note(.linkAttached(Self.link), for: Self.a)
        let taken = m.takeKept("one", role: .central, restoreIdentifier: "r")
        #expect(taken?.notes == [.linkAttached(Self.link)])
        // Taken, not yet replaced: still noted (nothing reaches it), but the app is launching: no relaunch; and
        // all of it, as the restorer would have been told it (no stream collapsed).
        let values = (1...3).map {
            SessionEvent.valueUpdated(Self.link.handle, AttributeHandle(4), [$0], isIndication: false)
        }
        let lost = SessionEvent.linkDown(Self.link.handle, .connectionTimeout, reconnecting: false)
        #expect(m.restoration.notes(Self.a))
        for value in values { #expect(m.note(value, for: Self.a) == nil) }
        #expect(m.note(lost, for: Self.a) == nil)
        let (_, later) = m.replaced(Self.a, by: Self.b, app: "one")
        #expect(later == values + [lost])
        // Gone with it: nothing is noted for it any more.
        #expect(!m.restoration.notes(Self.a))
        #expect(m.note(lost, for: Self.a) == nil)
        #expect(m.restoration.notes.isEmpty)
    }

    @Test func aRestartedSystemsWorkStartsWhenTheControllerIsOnForWhoeverHoldsItThen() {
        let work = RestorationTable.Resume(
            peers: [.init(address: Self.peer, autoReconnect: true)],
            scan: .init(request: ScanRequest(services: [BluetoothUUID(UInt16(0x180D))]), id: 7))
        // Kept before the controller is on: nothing starts.
        var m = SystemMachine()
        _ = m.opened(Self.a, app: "one")
        #expect(m.keptForRestoration(Self.a, restoreIdentifier: "r", work: work).isEmpty)
        #expect(m.links.peers[Self.peer] == nil)
        // The restored manager takes it over before; the controller comes on: the work is its own.
        _ = m.takeKept("one", role: .central, restoreIdentifier: "r")
        _ = m.replaced(Self.a, by: Self.b, app: "one")
        let on = m.controllerChanged(.poweredOn)
        #expect(on.contains(.setConnectTargets([Self.peer])))
        #expect(m.links.peers[Self.peer]?.waiting == [Self.b])
        #expect(m.links.peers[Self.peer]?.autoReconnect == [Self.b])
        #expect(m.scans.request(of: Self.b) == work.scan?.request)
        // Started once: the controller's next change starts nothing again.
        _ = m.controllerChanged(.resetting(reason: "reset"))
        #expect(!m.controllerChanged(.poweredOn).contains(.setConnectTargets([Self.peer])))
    }

    @Test func aRestartedSystemsWorkTheManagerWithdrewBeforeTheControllerIsOnIsNotStarted() {
        let work = RestorationTable.Resume(
            peers: [.init(address: Self.peer, autoReconnect: false)],
            scan: .init(request: ScanRequest(services: [BluetoothUUID(UInt16(0x180D))]), id: 7))
        // The restored manager stops the scan and cancels the connect before the controller is on.
        var m = SystemMachine()
        _ = m.opened(Self.a, app: "one")
        _ = m.keptForRestoration(Self.a, restoreIdentifier: "r", work: work)
        _ = m.scanStopped(Self.a)
        #expect(m.cancelConnection(Self.a, from: Self.peer).0 == .nothing)
        let on = m.controllerChanged(.poweredOn)
        #expect(!on.contains(.setConnectTargets([Self.peer])))
        #expect(m.links.peers[Self.peer] == nil)
        #expect(m.scans.request(of: Self.a) == nil)
        // Told the controller is off first (it was not on yet): nothing of it starts when it comes on.
        var n = SystemMachine()
        _ = n.opened(Self.a, app: "one")
        _ = n.keptForRestoration(Self.a, restoreIdentifier: "r", work: work)
        _ = n.controllerChanged(.poweredOff(reason: "off"))
        _ = n.controllerChanged(.poweredOn)
        #expect(n.links.peers[Self.peer] == nil)
        #expect(n.scans.request(of: Self.a) == nil)
    }

    /// A restarted system's kept peripheral manager: its services are published again and its advertisement put
    /// on the air by the machine once the controller is on (the publication first, the system's own start named
    /// before its answer can come), for whoever holds the session then, once; states other than on told first
    /// do not withdraw it (a restarting controller's), what the manager withdrew before does (its advertisement
    /// stopped or replaced by its own, its services taken out); what the machine started for the kept session
    /// while its restorer was taking over is the restorer's.
    @Test func aRestartedPeripheralManagersServicesAndAdvertisementStartWhenTheControllerIsOn() throws {
        let service = GATTServiceDefinition(uuid: BluetoothUUID(UInt16(0x180F)))
        let advertisement = RestorationTable.Resume.Advertisement(
            request: AdvertisingTests.foregroundA, background: AdvertisingTests.backgroundA)
        let work = RestorationTable.Resume(services: [service], advertisement: advertisement)
        func kept() -> SystemMachine {
            var m = SystemMachine()
            _ = m.opened(Self.a, app: "two", role: .peripheral)
            #expect(m.keptForRestoration(Self.a, restoreIdentifier: "p", work: work).isEmpty)
            return m
        }
        func isPublish(_ action: SystemAction) -> Bool { if case .publish = action { true } else { false } }
        func isNamed(_ action: SystemAction) -> Bool { if case .advertiseResumed = action { true } else { false } }
        var m = kept()
        #expect(m.advertising.entries.isEmpty)
        _ = m.takeKept("two", role: .peripheral, restoreIdentifier: "p")
        _ = m.replaced(Self.a, by: Self.b, app: "two", role: .peripheral)
        let on = m.controllerChanged(.poweredOn)
        let publish = try #require(on.firstIndex(of: .publish(Self.b, [service])))
        let named = try #require(on.firstIndex { if case .advertiseResumed(Self.b, _) = $0 { true } else { false } })
        let asked = try #require(on.firstIndex { if case .startAdvertising = $0 { true } else { false } })
        #expect(publish < named && named < asked)
        #expect(m.advertising.entries.map(\.session) == [Self.b])
        // Once: nothing starts again, whether the controller stays on or comes on again.
        #expect(!m.authorizationChanged(.allowedAlways).contains(where: isPublish))
        _ = m.controllerChanged(.resetting(reason: "reset"))
        #expect(!m.controllerChanged(.poweredOn).contains(where: isPublish))

        // A restarting controller's first states do not withdraw it.
        var restarting = kept()
        _ = restarting.controllerChanged(.resetting(reason: "reset"))
        _ = restarting.controllerChanged(.poweredOff(reason: "off"))
        let late = restarting.controllerChanged(.poweredOn)
        #expect(late.contains(.publish(Self.a, [service])) && late.contains(where: isNamed))
        // Withdrawn before the controller is on: its advertisement stopped, or replaced by its own; then its
        // services taken out too.
        var stopped = kept()
        _ = stopped.stopAdvertising(Self.a)
        let onAfterStop = stopped.controllerChanged(.poweredOn)
        #expect(onAfterStop.contains(.publish(Self.a, [service])))
        #expect(!onAfterStop.contains(where: isNamed))
        var replacedByOwn = kept()
        _ = replacedByOwn.startAdvertising(
            Self.a, AdvertisingTests.foregroundB, background: nil, mode: .foreground)
        #expect(!replacedByOwn.controllerChanged(.poweredOn).contains(where: isNamed))
        var removed = kept()
        _ = removed.stopAdvertising(Self.a)
        _ = removed.servicesRemoved(of: Self.a)
        let onAfterAll = removed.controllerChanged(.poweredOn)
        #expect(onAfterAll.contains(.publish(Self.a, [])), "told it is over")
        #expect(!onAfterAll.contains(where: isNamed))

        // Started for the kept session as its restorer takes over (after the services and advertisement were
        // handed over, before the restorer took its place): the restorer's once it does.
        var during = kept()
        _ = during.takeKept("two", role: .peripheral, restoreIdentifier: "p")
        _ = during.servicesTransferred(from: Self.a, to: Self.b)
        _ = during.advertisingTransferred(from: Self.a, to: Self.b)
        _ = during.controllerChanged(.poweredOn)
        during.servicePublished(
            PublishedService(serviceHandle: AttributeHandle(0x10), characteristicValueHandles: []), by: Self.a)
        _ = during.replaced(Self.a, by: Self.b, app: "two", role: .peripheral)
        #expect(during.advertising.entries.map(\.session) == [Self.b])
        #expect(during.servicesRemoved(of: Self.b) == [AttributeHandle(0x10)])
    }

    /// A kept peripheral manager's central's link keeps what the restorer needs: its latest MTU and subscription
    /// state; a link that came and went while noted leaves only its requests, and one up before the notes began
    /// leaves its end; none of it goes beyond the bound, so it cannot grow with centrals that come and go.
    @Test func aCentralsLinkToAKeptPeripheralManagerKeepsItsLatestStateAndGoesWithItsEnd() {
        var notes = RestorationTable.Notes()
        let central = BluetoothAddress(bytes: [9, 8, 7, 6, 5, 0xC4], type: .randomDevice)
        func up(_ handle: UInt16) -> SessionEvent {
            .server(
                .connected(
                    LinkInfo(
                        handle: ConnectionHandle(handle), role: .peripheral, peer: central, interval: 24, latency: 0,
                        supervisionTimeout: 400)))
        }
        let old = ConnectionHandle(3)
        let read = SessionEvent.server(
            .serverRead(GATTServerRequestID(rawValue: 1), old, attribute: AttributeHandle(0x12), offset: 0))
        notes.append(.server(.mtuChanged(old, mtu: 100)), wakes: false)
        notes.append(.server(.mtuChanged(old, mtu: 185)), wakes: false)
        notes.append(
            .server(.subscriptionChanged(old, attribute: AttributeHandle(0x12), notify: true, indicate: false)),
            wakes: true)
        notes.append(
            .server(.subscriptionChanged(old, attribute: AttributeHandle(0x12), notify: false, indicate: false)),
            wakes: true)
        #expect(
            notes.events == [
                .server(.mtuChanged(old, mtu: 185)),
                .server(.subscriptionChanged(old, attribute: AttributeHandle(0x12), notify: false, indicate: false)),
            ])
        notes.append(read, wakes: true)
        notes.append(.server(.disconnected(old, reason: .remoteUserTerminatedConnection)), wakes: false)
        #expect(notes.events == [read, .server(.disconnected(old, reason: .remoteUserTerminatedConnection))])
        // Centrals coming and going, each subscribing: nothing stays of them.
        for n in 0..<200 {
            let handle = ConnectionHandle(UInt16(10 + n))
            notes.append(up(10 + UInt16(n)), wakes: false)
            notes.append(.server(.mtuChanged(handle, mtu: 185)), wakes: false)
            notes.append(
                .server(.subscriptionChanged(handle, attribute: AttributeHandle(0x12), notify: true, indicate: false)),
                wakes: true)
            notes.append(.server(.disconnected(handle, reason: .remoteUserTerminatedConnection)), wakes: false)
        }
        #expect(notes.events == [read, .server(.disconnected(old, reason: .remoteUserTerminatedConnection))])
        #expect(notes.woke)
    }

    /// A kept central's link the system let go of as the user took Bluetooth away is noted without relaunching the
    /// app (it lost nothing it could act on), even when the user allowed it again before the link was down; the
    /// end of another link wakes it.
    @Test func aLinkLetGoOfForADenialDoesNotWakeTheApp() {
        var m = Self.linked()
        _ = m.appTerminated("one", cause: .bySystem, keeping: Self.keepingA)
        _ = m.authorizationChanged(.denied)
        _ = m.authorizationChanged(.allowedAlways)
        let down = SessionEvent.linkDown(Self.link.handle, .connectionTerminatedByLocalHost, reconnecting: false)
        #expect(m.note(down, for: Self.a) == nil)
        #expect(!m.restoration.woke("one"))
        let other = ConnectionHandle(8)
        #expect(m.note(.linkDown(other, .connectionTimeout, reconnecting: false), for: Self.a) == "one")
    }

    /// A manager kept under many power changes keeps, of each run of them, the first that is not `.poweredOn`
    /// (what it ended) and the last (the state now); a run ends at any other event, and a stream's note that
    /// goes joins the runs around it.
    @Test func manyPowerChangesKeepWhatTheyEndedAndTheStateNow() {
        var m = Self.kept()
        let off = SystemPowerState.poweredOff(reason: "Bluetooth is turned off")
        let reset = SystemPowerState.resetting(reason: "hardware error")
        for _ in 0..<100 {
            _ = m.note(.powerChanged(.poweredOn), for: Self.a)
            _ = m.note(.powerChanged(off), for: Self.a)
        }
        #expect(m.restoration.notes[Self.a]?.events == [.powerChanged(off)])
        _ = m.note(.powerChanged(.poweredOn), for: Self.a)
        #expect(m.restoration.notes[Self.a]?.events == [.powerChanged(off), .powerChanged(.poweredOn)])
        _ = m.note(.linkAttached(Self.link), for: Self.a)
        _ = m.note(.powerChanged(reset), for: Self.a)
        _ = m.note(.powerChanged(off), for: Self.a)
        _ = m.note(.powerChanged(.poweredOn), for: Self.a)
        #expect(
            m.restoration.notes[Self.a]?.events == [
                .powerChanged(off), .powerChanged(.poweredOn), .linkAttached(Self.link), .powerChanged(reset),
                .powerChanged(.poweredOn),
            ])
        // A device's discovery between two runs goes when the device is heard again: the runs join.
        var n = Self.kept()
        _ = n.note(.powerChanged(off), for: Self.a)
        _ = n.note(.discovered(Self.discovery(1), scan: 1), for: Self.a)
        _ = n.note(.powerChanged(.poweredOn), for: Self.a)
        _ = n.note(.discovered(Self.discovery(1, rssi: -60), scan: 1), for: Self.a)
        #expect(
            n.restoration.notes[Self.a]?.events == [
                .powerChanged(off), .powerChanged(.poweredOn), .discovered(Self.discovery(1, rssi: -60), scan: 1),
            ])
    }

    @Test func whatIsLetGoOfIsNotedNoMore() {
        // Let go of by a launch that did not take it, by Bluetooth turned off, or gone.
        var launched = Self.kept()
        _ = launched.launched("one")
        var off = Self.kept()
        _ = off.restorationSwitchedOff()
        var closed = Self.kept()
        _ = closed.closed(Self.a)
        for var m in [launched, off, closed] {
            #expect(!m.restoration.notes(Self.a))
            #expect(m.note(.linkAttached(Self.link), for: Self.a) == nil)
            #expect(m.restoration.notes.isEmpty)
        }
    }

    /// A kept peripheral manager (IOSRules.md 5.6): a central's read, write or subscription to its services is
    /// noted and relaunches the app (once); a link's start, say, is noted without; so is its state; a
    /// request the system refused as the app ended (its delivery on the way) is not noted; past the bound, the
    /// oldest Write Command goes first, never a request waiting for its answer.
    @Test func aKeptPeripheralManagersCentralsRequestsAreNotedAndWakeTheApp() throws {
        var m = SystemMachine()
        _ = m.opened(Self.b, app: "two", role: .peripheral)
        m.servicePublished(
            PublishedService(serviceHandle: AttributeHandle(0x10), characteristicValueHandles: [AttributeHandle(0x12)]),
            by: Self.b)
        let central = ConnectionHandle(9)
        func routed(_ event: HostEvent) -> SessionEvent? {
            var actions: [SystemAction] = []
            _ = m.serverEvent(event, into: &actions)
            for case .deliver(Self.b, let told) in actions { return told }
            return nil
        }
        let early = try #require(
            routed(.serverRead(GATTServerRequestID(rawValue: 1), central, attribute: AttributeHandle(0x12), offset: 0)))
        _ = m.appTerminated(
            "two", cause: .bySystem,
            keeping: [.init(manager: Self.b, role: .peripheral, restoreIdentifier: "p", restorable: true)])
        #expect(m.restoration.restoreIdentifiers(of: "two", role: .peripheral) == ["p"])
        // Its state is noted too (a restarted system's keeper is not told it: the machine starts its work).
        #expect(m.notes(Self.b, .powerChanged(.poweredOn)))
        #expect(m.notes(Self.b, early))
        // The read routed before the end was refused with it: nobody is to answer it.
        #expect(m.note(early, for: Self.b) == nil)
        let up = LinkInfo(
            handle: central, role: .peripheral, peer: Self.peer, interval: 24, latency: 0, supervisionTimeout: 400)
        #expect(m.note(.server(.connected(up)), for: Self.b) == nil)
        let write = try #require(
            routed(
                .serverWrite(nil, central, [GATTWriteRequest(attribute: AttributeHandle(0x12), offset: 0, value: [1])]))
        )
        #expect(m.note(write, for: Self.b) == "two")
        let read = try #require(
            routed(.serverRead(GATTServerRequestID(rawValue: 2), central, attribute: AttributeHandle(0x12), offset: 0)))
        #expect(m.note(read, for: Self.b) == nil, "relaunched once")
        #expect(m.restoration.woke("two"))
        // Past the bound the Write Commands go first; the read waiting for its answer stays.
        for _ in 0..<RestorationTable.Notes.limit { _ = m.note(write, for: Self.b) }
        let notes = m.takeNotes(of: Self.b)
        #expect(notes.count == RestorationTable.Notes.limit)
        #expect(notes.prefix(2) == [.server(.connected(up)), read])
        #expect(notes.dropFirst(2).allSatisfy { $0 == write })
    }

    @Test func aRestartedSystemsWorkStartsAtOnceWhenTheControllerIsOnJoiningALinkUpAlready() {
        var m = SystemMachine()
        _ = m.opened(Self.a, app: "one")
        _ = m.opened(Self.b, app: "two")
        _ = m.controllerChanged(.poweredOn)
        _ = m.connect(Self.b, to: Self.peer)
        _ = m.linkConnected(Self.link, securing: false)
        let actions = m.keptForRestoration(
            Self.a, restoreIdentifier: "r",
            work: .init(peers: [.init(address: Self.peer, autoReconnect: false)], scan: nil))
        #expect(actions == [.deliver(Self.a, .linkAttached(Self.link))])
        #expect(m.links.isUser(Self.a, of: Self.link.handle))
    }
}
