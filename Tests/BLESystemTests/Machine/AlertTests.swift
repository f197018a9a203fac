import BLECore
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The alerts the system shows (`AlertLog`, in the system machine): a connect's option shows one only to an app
/// out of the foreground and not woken for the event (IOSRules.md 3.5); for one event asked by several apps, the
/// app most recently in the foreground gets it (3.6); "turn on Bluetooth" only while the switch is off (3.8).
@Suite struct AlertTests {
    static let peer = BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice)
    /// `a` of app "one", `b` of app "two" (`LinkTests.machine`).
    static let a = LinkTests.a
    static let b = LinkTests.b

    static func machine() -> SystemMachine { LinkTests.machine() }

    /// A connect's alerts are the machine's, kept with the connect (`LinkTable`): each follows the event it is
    /// about, for the session that asked it only (a connection as the link comes, or at once when it is up
    /// already; a disconnection as it goes, not after the session let go; a notification of a characteristic the
    /// session subscribed to); a restored session takes them over; the rules (`connectionAlert`) decide.
    @Test func aConnectsAlertsFollowTheirEventsForTheSessionThatAskedThem() {
        let all = ConnectionAlertWishes(connection: true, disconnection: true, notification: true)
        let link = LinkTests.link(7)
        let down = SystemAction.deliver(
            Self.a, .linkDown(link.handle, .connectionTimeout, reconnecting: false))
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer, alerts: all)
        _ = m.connect(Self.b, to: Self.peer)
        let up = m.linkConnected(link, securing: false)
        let attached = up.firstIndex(of: .deliver(Self.a, .linkAttached(link)))
        #expect(attached != nil)
        #expect(
            up.filter { if case .alert = $0 { true } else { false } } == [.alert(.connection, Self.a, peer: Self.peer)])
        #expect(up.firstIndex(of: .alert(.connection, Self.a, peer: Self.peer)) == attached.map { $0 + 1 })
        // A notification: only of a characteristic the session subscribed to, and only while the rules would
        // show it (an app in the foreground costs its notifications nothing).
        #expect(m.notificationAlerts(link.handle, AttributeHandle(4)).isEmpty)
        _ = m.subscribe(Self.a, 1, descriptor: AttributeHandle(5), characteristic: AttributeHandle(4), on: link.handle)
        _ = m.subscribe(Self.b, 1, descriptor: AttributeHandle(5), characteristic: AttributeHandle(4), on: link.handle)
        #expect(m.notificationAlerts(link.handle, AttributeHandle(4)).isEmpty, "app one is in the foreground")
        _ = m.appChanged("one", AppTable.App(lifecycle: .suspended, revision: 1))
        _ = m.appChanged("two", AppTable.App(lifecycle: .suspended, revision: 1))
        #expect(
            m.notificationAlerts(link.handle, AttributeHandle(4)) == [.alert(.notification, Self.a, peer: Self.peer)])
        #expect(m.notificationAlerts(link.handle, AttributeHandle(8)).isEmpty)
        // The link goes: a disconnection's.
        let lost = m.linkDisconnected(link.handle, reason: .connectionTimeout)
        #expect(
            lost.firstIndex(of: .alert(.disconnection, Self.a, peer: Self.peer))
                == lost.firstIndex(of: down).map { $0 + 1 })
        #expect(lost.contains(.alert(.disconnection, Self.a, peer: Self.peer)))

        // Up already: the connection's alert comes with the connect. Let go of: none for the end.
        var n = Self.machine()
        _ = n.connect(Self.b, to: Self.peer)
        _ = n.linkConnected(link, securing: false)
        let (at, joined) = n.connect(Self.a, to: Self.peer, alerts: all)
        #expect(at == link && joined == [.alert(.connection, Self.a, peer: Self.peer)])
        // The last on the link, it hears its end: without an alert.
        _ = n.cancelConnection(Self.b, from: Self.peer)
        _ = n.cancelConnection(Self.a, from: Self.peer)
        let ended = n.linkDisconnected(link.handle, reason: .connectionTerminatedByLocalHost)
        #expect(
            ended.contains(
                .deliver(Self.a, .linkDown(link.handle, .connectionTerminatedByLocalHost, reconnecting: false))))
        #expect(!ended.contains { if case .alert = $0 { true } else { false } })
        #expect(!n.stillAsks(.connection, Self.a, about: Self.peer), "a connection's queued before is not shown")

        // A restored session takes the wishes with the connect.
        var r = Self.machine()
        _ = r.connect(Self.a, to: Self.peer, alerts: all)
        r.linksTransferred(from: Self.a, to: Self.b)
        #expect(r.linkConnected(link, securing: false).contains(.alert(.connection, Self.b, peer: Self.peer)))
    }

    @Test func aConnectsOptionShowsAnAlertOnlyToAnAppOutOfTheForegroundNotWokenForIt() {
        var m = Self.machine()
        let shown1 = m.connectionAlert(.disconnection, for: Self.a, peer: Self.peer, name: "HRM", at: .seconds(1))
        #expect(!shown1)
        _ = m.appChanged("one", AppTable.App(lifecycle: .background, modes: [.bluetoothCentral], revision: 1))
        let shown2 = m.connectionAlert(.disconnection, for: Self.a, peer: Self.peer, name: "HRM", at: .seconds(2))
        #expect(!shown2)
        _ = m.appChanged("one", AppTable.App(lifecycle: .suspended, revision: 2))
        let shown3 = m.connectionAlert(.disconnection, for: Self.a, peer: Self.peer, name: "HRM", at: .seconds(3))
        #expect(shown3)
        #expect(
            m.alerts.shown.map { [$0.kind.rawValue, $0.app, $0.name ?? "-"] } == [["disconnection", "one", "HRM"]])
        #expect(m.alerts.shown.first?.time == .seconds(3))
    }

    @Test func oneEventsAlertGoesToTheAppMostRecentlyInTheForeground() {
        var m = Self.machine()
        _ = m.appChanged("one", AppTable.App(lifecycle: .suspended, lastForeground: .seconds(5), revision: 1))
        _ = m.appChanged("two", AppTable.App(lifecycle: .background, lastForeground: .seconds(8), revision: 1))
        m.connectionAlert(.connection, for: Self.a, peer: Self.peer, name: nil, at: .seconds(10))
        m.connectionAlert(.connection, for: Self.b, peer: Self.peer, name: nil, at: .seconds(10))
        #expect(m.alerts.shown.map(\.app) == ["two"])
        // The earlier-foreground app asking second does not take it back; another event is another alert.
        m.connectionAlert(.connection, for: Self.a, peer: Self.peer, name: nil, at: .seconds(10))
        m.connectionAlert(.disconnection, for: Self.a, peer: Self.peer, name: nil, at: .seconds(10))
        #expect(m.alerts.shown.map(\.app) == ["two", "one"])
    }

    @Test func anAppWithOnlyBluetoothPeripheralGetsTheAlertAndTheLogKeepsTheLatest() {
        var m = Self.machine()
        _ = m.appChanged("one", AppTable.App(lifecycle: .suspended, modes: [.bluetoothPeripheral], revision: 1))
        for second in 1...(AlertLog.limit + 5) {
            m.connectionAlert(.notification, for: Self.a, peer: Self.peer, name: nil, at: .seconds(second))
        }
        #expect(m.alerts.shown.count == AlertLog.limit)
        #expect(m.alerts.shown.first?.time == .seconds(6) && m.alerts.shown.last?.time == .seconds(AlertLog.limit + 5))
    }

    @Test func thePowerAlertIsShownOnlyWhileTheSwitchIsOff() {
        var m = Self.machine()
        let shown4 = m.powerAlert(for: Self.a, at: .seconds(1))
        #expect(!shown4)
        _ = m.bluetoothSwitched(on: false)
        let shown5 = m.powerAlert(for: Self.a, at: .seconds(2))
        #expect(shown5)
        #expect(m.alerts.shown.map(\.kind) == [.powerOff])
    }
}
