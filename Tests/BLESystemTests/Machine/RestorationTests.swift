import Testing

@testable import BLESystem

/// Which managers the system keeps for an app that is not running (`RestorationTable`, IOSRules.md 5, 6.2–6.5):
/// what a termination keeps, what a launch takes over and lets go of, what a force-quit and Bluetooth turned off
/// end, and what a relaunch names. At the machine's level, by session.
@Suite struct RestorationTests {
    typealias Candidate = RestorationTable.Candidate

    static func central(_ n: UInt64, _ id: String?, restorable: Bool = true) -> Candidate {
        Candidate(manager: SessionID(rawValue: n), role: .central, restoreIdentifier: id, restorable: restorable)
    }

    static func peripheral(_ n: UInt64, _ id: String?, restorable: Bool = true) -> Candidate {
        Candidate(manager: SessionID(rawValue: n), role: .peripheral, restoreIdentifier: id, restorable: restorable)
    }

    static let both: Set<AppBackgroundMode> = [.bluetoothCentral, .bluetoothPeripheral]

    @Test func aTerminationKeepsOnlyManagersWithAnIdentifierTheirRolesModeAndWork() {
        let candidates = [
            Self.central(1, "scanner"), Self.central(2, nil), Self.central(3, "idle", restorable: false),
            Self.peripheral(4, "sensor"),
        ]
        // Ended by the system or a crash: each manager the rules allow.
        for cause in [AppTermination.bySystem, .crash] {
            let kept = RestorationTable.keeps(cause, modes: Self.both, candidates: candidates)
            #expect(kept.map(\.manager.rawValue) == [1, 4], "\(cause)")
        }
        // The user ended it: nothing (5e).
        #expect(RestorationTable.keeps(.byUser, modes: Self.both, candidates: candidates).isEmpty)
        // Without the role's background mode, a manager is never restored (5.3).
        let centralOnly = RestorationTable.keeps(.bySystem, modes: [.bluetoothCentral], candidates: candidates)
        #expect(centralOnly.map(\.manager.rawValue) == [1])
        // Of two with one identifier and role, the later.
        let twice = RestorationTable.keeps(
            .bySystem, modes: Self.both,
            candidates: [Self.central(5, "x"), Self.central(6, "x"), Self.peripheral(7, "x")])
        #expect(twice.map(\.manager.rawValue) == [6, 7])
    }

    @Test func aLaunchTakesWhatItRestoresAndLetsGoOfTheRest() {
        var table = RestorationTable()
        let released = table.terminated(
            "app", cause: .bySystem, keeping: [Self.central(1, "a"), Self.central(2, "b"), Self.peripheral(3, "a")])
        #expect(released.isEmpty)
        #expect(table.restoreIdentifiers(of: "app", role: .central) == ["a", "b"])
        #expect(table.restoreIdentifiers(of: "app", role: .peripheral) == ["a"])
        #expect(table.lastTermination["app"] == .bySystem)
        let options = table.relaunchOptions(of: "app")
        #expect(options?.centrals == ["a", "b"] && options?.peripherals == ["a"])
        // The relaunch makes a central manager "a": it takes over session 1, and only once.
        #expect(table.take("app", role: .central, restoreIdentifier: "a") == SessionID(rawValue: 1))
        #expect(table.take("app", role: .central, restoreIdentifier: "a") == nil)
        #expect(table.take("app", role: .central, restoreIdentifier: "c") == nil, "nothing kept under it")
        // What the launch did not take over goes.
        #expect(table.launched("app") == [SessionID(rawValue: 2), SessionID(rawValue: 3)])
        #expect(table.relaunchOptions(of: "app") == nil, "nothing to relaunch it for")
        #expect(table.kept.isEmpty)
    }

    @Test func aForceQuitEndsWhatAnEarlierTerminationKept() {
        var table = RestorationTable()
        _ = table.terminated("app", cause: .bySystem, keeping: [Self.central(1, "a"), Self.central(2, "b")])
        // Killed again by the system, keeping only a new "a": the earlier ones not kept again go.
        let second = table.terminated("app", cause: .crash, keeping: [Self.central(4, "a")])
        #expect(second == [SessionID(rawValue: 1), SessionID(rawValue: 2)])
        // The user force-quits it: everything goes, and nothing is relaunched.
        let quit = table.terminated("app", cause: .byUser, keeping: [])
        #expect(quit == [SessionID(rawValue: 4)])
        #expect(table.relaunchOptions(of: "app") == nil)
        #expect(table.lastTermination["app"] == .byUser)
    }

    @Test func aRestartedSystemsKeeperIsTakenOnceAndOnlyByItsApp() {
        var table = RestorationTable()
        let keeper = SessionID(rawValue: 9)
        let first = table.keep(keeper, of: "app", role: .central, restoreIdentifier: "a")
        let second = table.keep(SessionID(rawValue: 10), of: "app", role: .central, restoreIdentifier: "a")
        #expect(first && !second, "one per identifier")
        #expect(table.take("other", role: .central, restoreIdentifier: "a") == nil, "another app's")
        #expect(table.take("app", role: .peripheral, restoreIdentifier: "a") == nil, "the other role's")
        #expect(table.take("app", role: .central, restoreIdentifier: "a") == keeper)
        // Kept again by a second termination by the system: nothing is let go of.
        _ = table.terminated("app", cause: .crash, keeping: [Self.central(11, "b")])
        #expect(table.terminated("app", cause: .bySystem, keeping: [Self.central(11, "b")]).isEmpty)
        #expect(table.lastTermination["app"] == .bySystem)
        // After the launch, nothing is left to take.
        #expect(table.launched("app") == [SessionID(rawValue: 11)])
        #expect(table.take("app", role: .central, restoreIdentifier: "b") == nil)
    }

    @Test func aKeptSessionThatGoesIsKeptForNobody() {
        var table = RestorationTable()
        _ = table.terminated("app", cause: .bySystem, keeping: [Self.central(1, "a"), Self.peripheral(2, "p")])
        table.forget(SessionID(rawValue: 1))
        #expect(table.restoreIdentifiers(of: "app", role: .central).isEmpty)
        #expect(table.launched("app") == [SessionID(rawValue: 2)])
    }

    @Test func bluetoothTurnedOffEndsEveryAppsKeptManagers() {
        var table = RestorationTable()
        _ = table.terminated("one", cause: .bySystem, keeping: [Self.central(1, "a")])
        _ = table.terminated("two", cause: .crash, keeping: [Self.peripheral(2, "p")])
        table.keep(SessionID(rawValue: 3), of: "three", role: .central, restoreIdentifier: "restarted")
        #expect(table.isKept(SessionID(rawValue: 3)))
        #expect(table.switchedOff() == [SessionID(rawValue: 1), SessionID(rawValue: 3), SessionID(rawValue: 2)])
        #expect(table.kept.isEmpty)
    }

    @Test func theMachineKeepsTheChosenSessionsAndEndsTheRest() {
        var m = ScanTests.machine()
        let kept = SessionID(rawValue: 1)
        let ended = SessionID(rawValue: 2)
        _ = m.opened(kept, app: "app")
        _ = m.opened(ended, app: "app")
        let (actions, released) = m.appTerminated(
            "app", cause: .bySystem,
            keeping: [Candidate(manager: kept, role: .central, restoreIdentifier: "a", restorable: true)])
        #expect(released.isEmpty)
        #expect(actions.contains(.deliver(ended, .appTerminated)))
        #expect(!actions.contains(.deliver(kept, .appTerminated)))
        #expect(m.restoration.relaunchOptions(of: "app")?.centrals == ["a"])
        // A force-quit: the kept one is handed back to be released (still registered), not ended here.
        let (quit, letGo) = m.appTerminated("app", cause: .byUser, keeping: [])
        #expect(letGo == [kept])
        #expect(!quit.contains(.deliver(kept, .appTerminated)))
    }
}
