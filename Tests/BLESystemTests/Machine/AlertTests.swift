import BLECore
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
