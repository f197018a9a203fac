import BLECore
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The host's events the managers hear of, routed by the machine to the sessions they concern
/// (`SystemMachine.route`): a notification to the managers on its link alone, the connection events to the
/// managers registered for them whichever manager made the link, the peripheral role's events to every
/// peripheral manager and to no central one.
@Suite struct HostEventTests {
    static let peer = BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice)
    static let central = BluetoothAddress(bytes: [9, 8, 7, 6, 5, 0xC4], type: .randomDevice)
    static let link = ConnectionHandle(7)
    static let served = ConnectionHandle(8)
    static let up = LinkInfo(
        handle: link, role: .central, peer: peer, interval: 24, latency: 0, supervisionTimeout: 400)
    static let centralUp = LinkInfo(
        handle: served, role: .peripheral, peer: central, interval: 24, latency: 0, supervisionTimeout: 400)
    static let note = HostEvent.valueUpdated(link, attribute: AttributeHandle(3), value: [0x2A], isIndication: false)
    static let told = SessionEvent.valueUpdated(link, AttributeHandle(3), [0x2A], isIndication: false)

    static func route(_ rig: inout SystemRig, _ event: HostEvent) -> [SystemAction] {
        rig.step { m in
            var actions: [SystemAction] = []
            m.route(event, into: &actions)
            return actions
        }
    }

    @Test func aNotificationReachesTheManagersOnItsLinkAlone() {
        var rig = SystemRig()
        let a = rig.open()
        let b = rig.open()
        rig.open(role: .peripheral)
        _ = rig.step { $0.connect(a, to: Self.peer).1 }
        #expect(Self.route(&rig, Self.note).isEmpty, "nobody is on a link not up yet")
        _ = rig.step { $0.linkConnected(Self.up, securing: false) }
        let first = Self.route(&rig, Self.note)
        #expect(first == [.deliver(a, Self.told)])
        // Another app's manager comes on the link that is up.
        _ = rig.step { $0.connect(b, to: Self.peer).1 }
        let both = Self.route(&rig, Self.note)
        #expect(both == [.deliver(a, Self.told), .deliver(b, Self.told)])
        let ready = Self.route(&rig, .readyToWriteWithoutResponse(Self.link))
        #expect(ready == [.deliver(a, .readyToWrite(Self.link)), .deliver(b, .readyToWrite(Self.link))])
        // The first lets go of the link: the other is still on it.
        _ = rig.step { $0.cancelConnection(a, from: Self.peer).1 }
        let second = Self.route(&rig, Self.note)
        #expect(second == [.deliver(b, Self.told)])
        _ = rig.step { $0.linkDisconnected(Self.link, reason: .connectionTimeout) }
        #expect(Self.route(&rig, Self.note).isEmpty, "nobody is on a link that went down")
    }

    @Test func theConnectionEventsReachTheWatchersWhoeverMadeTheLink() {
        var rig = SystemRig()
        let maker = rig.open()
        let watcher = rig.open()
        rig.machine.watchConnections(watcher)
        _ = rig.step { $0.connect(maker, to: Self.peer).1 }
        let came = Self.route(&rig, .connected(Self.up))
        #expect(came == [.deliver(watcher, .connectionEvent(Self.link, peer: Self.peer, up: true))])
        // What a device advertises is told to the watcher, when it names services.
        let withServices = AdvertisingReport(
            kind: .connectableUndirected, address: Self.peer, rssi: -40, data: [0x03, 0x03, 0x0D, 0x18])
        let advertised = Self.route(&rig, .advertisingReport(withServices))
        #expect(advertised == [.deliver(watcher, .advertised(Self.peer, [BluetoothUUID(0x180D)]))])
        let bare = AdvertisingReport(
            kind: .connectableUndirected, address: Self.peer, rssi: -40, data: [0x02, 0x01, 0x06])
        #expect(Self.route(&rig, .advertisingReport(bare)).isEmpty)
        let went = Self.route(&rig, .disconnected(Self.link, reason: .connectionTimeout))
        #expect(went == [.deliver(watcher, .connectionEvent(Self.link, peer: Self.peer, up: false))])
        #expect(Self.route(&rig, .disconnected(Self.link, reason: .connectionTimeout)).isEmpty, "told once")
        // The controller goes away with a link up: its end is told, though the host reports none.
        _ = Self.route(&rig, .connected(Self.up))
        let reset = Self.route(&rig, .transportClosed(nil))
        #expect(reset == [.deliver(watcher, .connectionEvent(Self.link, peer: Self.peer, up: false))])
        // A watcher that went away is told nothing more.
        _ = rig.step { $0.closed(watcher) }
        #expect(Self.route(&rig, .connected(Self.up)).isEmpty)
    }

    @Test func thePeripheralRolesEventsReachEveryPeripheralManagerAndNoCentralOne() {
        var rig = SystemRig()
        let watcher = rig.open()
        rig.machine.watchConnections(watcher)
        let first = rig.open(role: .peripheral)
        let second = rig.open(role: .peripheral)
        func everyPeripheralManager(_ event: HostEvent) -> [SystemAction] {
            [.deliver(first, .server(event)), .deliver(second, .server(event))]
        }
        let connected = HostEvent.connected(Self.centralUp)
        #expect(Self.route(&rig, connected) == everyPeripheralManager(connected), "no connection event either")
        for event in [
            HostEvent.mtuChanged(Self.served, mtu: 185), .pairingStarted(Self.served, byPeer: true), .readyToNotify,
            .encryptionChanged(Self.served, encrypted: true, status: .success),
        ] {
            #expect(Self.route(&rig, event) == everyPeripheralManager(event))
        }
        // A central-role link's pairing is the system's alone.
        _ = Self.route(&rig, .connected(Self.up))
        #expect(Self.route(&rig, .pairingStarted(Self.link, byPeer: false)).isEmpty)
        let gone = HostEvent.disconnected(Self.served, reason: .remoteUserTerminatedConnection)
        #expect(Self.route(&rig, gone) == everyPeripheralManager(gone))
        #expect(Self.route(&rig, .mtuChanged(Self.served, mtu: 23)).isEmpty, "the link is gone")
    }

    @Test func aRestoredManagerKeepsItsRoleButRegistersForConnectionEventsItself() {
        var rig = SystemRig()
        let keptServer = rig.open(role: .peripheral)
        let keptWatcher = rig.open()
        rig.machine.watchConnections(keptWatcher)
        let server = rig.draw()
        _ = rig.machine.replaced(keptServer, by: server, app: "app", role: .peripheral)
        let watcher = rig.draw()
        _ = rig.machine.replaced(keptWatcher, by: watcher, app: "app", role: .central)
        #expect(Self.route(&rig, .readyToNotify) == [.deliver(server, .server(.readyToNotify))])
        #expect(Self.route(&rig, .connected(Self.up)).isEmpty)
        rig.machine.watchConnections(watcher)
        let went = Self.route(&rig, .disconnected(Self.link, reason: .connectionTimeout))
        #expect(went == [.deliver(watcher, .connectionEvent(Self.link, peer: Self.peer, up: false))])
    }
}
