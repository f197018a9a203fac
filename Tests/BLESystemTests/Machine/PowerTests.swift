import BLECore
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The state managers see (IOSRules.md 6.7 and the authorization of 1.0): the controller's state behind the
/// user's authorization and Bluetooth switch, told to each manager once when attached and once per change,
/// and never to a manager that is gone.
@Suite struct PowerTests {
    static let controllerStates: [SystemPowerState] = [
        .unknown, .poweredOn, .unsupported(reason: "no LE"), .poweredOff(reason: "closed"),
        .resetting(reason: "hardware error"), .unauthorized,
    ]
    static let authorizations: [SystemAuthorization] = [.notDetermined, .restricted, .denied, .allowedAlways]

    @Test func whatManagersSeeIsTheControllerOnlyWhenAllowedAndSwitchedOn() {
        for controller in Self.controllerStates {
            for authorization in Self.authorizations {
                for enabled in [true, false] {
                    var machine = SystemMachine()
                    _ = machine.controllerChanged(controller)
                    _ = machine.authorizationChanged(authorization)
                    _ = machine.bluetoothSwitched(on: enabled)
                    let expected: SystemPowerState =
                        switch (authorization, enabled) {
                        case (.notDetermined, _): .unknown
                        case (.restricted, _), (.denied, _): .unauthorized
                        case (.allowedAlways, false): .poweredOff(reason: "Bluetooth is turned off")
                        case (.allowedAlways, true): controller
                        }
                    #expect(
                        machine.visible == expected, "controller \(controller), \(authorization), switch on \(enabled)")
                }
            }
        }
    }

    @Test func aManagerIsToldItsStateWhenAttachedUnlessItIsStillUnknown() {
        var rig = SystemRig()
        let early = rig.open()
        #expect(rig.told(early).isEmpty)
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        let late = rig.open()
        #expect(rig.powerTold(early) == [.poweredOn])
        #expect(rig.powerTold(late) == [.poweredOn])
    }

    @Test func aChangeIsToldOnceToEachLiveManagerInTheOrderTheyCame() {
        var rig = SystemRig()
        let a = rig.open(app: "one")
        let b = rig.open(app: "two")
        let c = rig.open(app: "one")
        _ = rig.machine.closed(b)
        let actions = rig.step { $0.controllerChanged(.poweredOn) }
        #expect(actions == [.deliver(a, .powerChanged(.poweredOn)), .deliver(c, .powerChanged(.poweredOn))])
        // The same state again changes nothing anyone sees.
        #expect(rig.step { $0.controllerChanged(.poweredOn) } == [])
        #expect(rig.step { $0.bluetoothSwitched(on: true) } == [])
        #expect(rig.step { $0.authorizationChanged(.allowedAlways) } == [])
    }

    @Test func behindARefusalTheControllerChangesUnseen() {
        var rig = SystemRig()
        let a = rig.open()
        _ = rig.step { $0.authorizationChanged(.denied) }
        #expect(rig.step { $0.controllerChanged(.poweredOn) } == [])
        #expect(rig.step { $0.controllerChanged(.resetting(reason: "hardware error")) } == [])
        _ = rig.step { $0.authorizationChanged(.allowedAlways) }
        #expect(rig.powerTold(a) == [.unauthorized, .resetting(reason: "hardware error")])
    }

    /// A denial takes the radio from every app at once (IOSRules.md 6.7): each manager is told, then each
    /// central's scan ends on the controller, its links and pending connects are let go of (the last user's
    /// link disconnected), each peripheral manager's advertising stops, and the links centrals made to the
    /// device are ended. Told again (the setting changed twice), nothing more happens.
    @Test func aDenialEndsEveryAppsScanLinksAndAdvertising() {
        var rig = SystemRig()
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        let central = rig.open(app: "one")
        let server = rig.open(app: "two", role: .peripheral)
        _ = rig.step { $0.scanStarted(central, ScanRequest(services: nil), id: 1, mode: .foreground) }
        _ = rig.step { $0.connect(central, to: HostEventTests.peer).1 }
        _ = rig.step { $0.linkConnected(HostEventTests.up, securing: false) }
        _ = rig.step { $0.connect(central, to: LinkTests.other).1 }
        _ = HostEventTests.route(&rig, .connected(HostEventTests.centralUp))
        _ = rig.step { $0.startAdvertising(server, AdvertisingTests.foregroundA, background: nil, mode: .foreground).1 }
        _ = rig.step { $0.advertisingAnswered($0.advertising.attempt, .success(())) }

        let denied = rig.step { $0.authorizationChanged(.denied) }
        #expect(
            denied == [
                .deliver(central, .powerChanged(.unauthorized)), .deliver(server, .powerChanged(.unauthorized)),
                .stopScan, .disconnect(HostEventTests.link, .remoteUserTerminatedConnection), .setConnectTargets([]),
                .stopAdvertising,
                .disconnect(HostEventTests.served, .remoteUserTerminatedConnection),
            ])
        #expect(rig.machine.scans.scanID(of: central) == nil)
        #expect(rig.machine.links.targets.isEmpty)
        #expect(rig.step { $0.authorizationChanged(.restricted) } == [])
        // Asked before the manager heard the state: refused, nothing reaches the controller.
        #expect(rig.step { $0.scanStarted(central, ScanRequest(services: nil), id: 2, mode: .foreground) } == [])
        #expect(rig.machine.scans.scanID(of: central) == nil)
        let (link, connecting) = rig.machine.connect(central, to: LinkTests.other)
        #expect(link == nil && connecting.isEmpty)
        #expect(rig.machine.links.targets.isEmpty)
        let (start, advertising) = rig.machine.startAdvertising(
            server, AdvertisingTests.foregroundA, background: nil, mode: .foreground)
        #expect(
            advertising == [
                .advertisingStarted(
                    start, HostError(.invalidState, "the application is not authorized to use Bluetooth"))
            ])
        #expect(rig.machine.advertising.entries.isEmpty)
    }

    /// What a session not attached (a restorer's, between its taking the kept one's advertisement and its place)
    /// holds is withdrawn too.
    @Test func aDenialStopsTheAdvertisingOfASessionNotAttachedYet() {
        var rig = SystemRig()
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        let restorer = rig.draw()
        _ = rig.step {
            $0.startAdvertising(restorer, AdvertisingTests.foregroundA, background: nil, mode: .foreground).1
        }
        _ = rig.step { $0.advertisingAnswered($0.advertising.attempt, .success(())) }
        #expect(rig.step { $0.authorizationChanged(.denied) } == [.stopAdvertising])
        #expect(rig.machine.advertising.entries.isEmpty)
    }

    @Test func theSwitchOffShowsPoweredOffWhateverTheControllerDoesAndOnShowsItAgain() {
        var rig = SystemRig()
        let a = rig.open()
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        _ = rig.step { $0.bluetoothSwitched(on: false) }
        #expect(rig.step { $0.controllerChanged(.poweredOff(reason: "closed")) } == [])
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        _ = rig.step { $0.bluetoothSwitched(on: true) }
        #expect(rig.powerTold(a) == [.poweredOn, .poweredOff(reason: "Bluetooth is turned off"), .poweredOn])
    }

    @Test func aTerminatedAppsManagersAreToldAndDetachedExceptThoseKept() {
        var rig = SystemRig()
        let a = rig.open(app: "one")
        let kept = rig.open(app: "one")
        let other = rig.open(app: "two")
        let actions = rig.step { $0.appTerminated("one", keeping: [kept]) }
        #expect(actions == [.deliver(a, .appTerminated)])
        #expect(rig.machine.sessions(of: "one") == [kept])
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        #expect(rig.powerTold(a) == [])
        #expect(rig.powerTold(kept) == [.poweredOn])
        #expect(rig.powerTold(other) == [.poweredOn])
    }

    @Test func aRestoredManagerTakesTheKeptOnesPlaceAndIsToldItsStateByTheCaller() {
        var rig = SystemRig()
        _ = rig.step { $0.controllerChanged(.poweredOn) }
        let kept = rig.open(app: "one")
        let restored = rig.draw()
        #expect(rig.machine.replaced(kept, by: restored, app: "one").power == .poweredOn)
        #expect(rig.machine.sessions(of: "one") == [restored])
        // Counted as told: the same state again reaches nobody; a change reaches the restored one only.
        #expect(rig.step { $0.controllerChanged(.poweredOn) } == [])
        let actions = rig.step { $0.controllerChanged(.poweredOff(reason: "closed")) }
        #expect(actions == [.deliver(restored, .powerChanged(.poweredOff(reason: "closed")))])
    }

    @Test func shutDownIsReportedOnce() {
        var machine = SystemMachine()
        let first = machine.shutDown()
        let second = machine.shutDown()
        #expect(first && !second)
        #expect(machine.power.isShutDown)
    }

    /// Every sequence of five inputs out of eleven (161,051 of them less those closing nobody, walked as a tree so each prefix is stepped
    /// once): after each step, every attached manager was last told exactly what it sees (nothing, while that
    /// is `.unknown`), no manager is told one state twice in a row, and nothing reaches a detached one.
    @Test func everySequenceOfInputsLeavesEachManagerToldWhatItSees() {
        enum Input: CaseIterable {
            case on, off, reset, unsupported, switchOff, switchOn, deny, allow, undetermined, open, close
        }
        struct Node {
            var machine = SystemMachine()
            var live: [SessionID] = []
            var last: [SessionID: SystemPowerState] = [:]
            var next: UInt64 = 1
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 5) { (n: inout Node, input: Input) in
            var actions: [SystemAction] = []
            switch input {
            case .on: actions = n.machine.controllerChanged(.poweredOn)
            case .off: actions = n.machine.controllerChanged(.poweredOff(reason: "closed"))
            case .reset: actions = n.machine.controllerChanged(.resetting(reason: "hardware error"))
            case .unsupported: actions = n.machine.controllerChanged(.unsupported(reason: "no LE"))
            case .switchOff: actions = n.machine.bluetoothSwitched(on: false)
            case .switchOn: actions = n.machine.bluetoothSwitched(on: true)
            case .deny: actions = n.machine.authorizationChanged(.denied)
            case .allow: actions = n.machine.authorizationChanged(.allowedAlways)
            case .undetermined: actions = n.machine.authorizationChanged(.notDetermined)
            case .open:
                let id = SessionID(rawValue: n.next)
                n.next += 1
                n.live.append(id)
                actions = n.machine.opened(id, app: "app")
            case .close:
                guard let first = n.live.first else { return nil }
                n.live.removeFirst()
                n.last[first] = nil
                _ = n.machine.closed(first)
            }
            var failures: [String] = []
            for case .deliver(let id, .powerChanged(let state)) in actions {
                if !n.live.contains(id) { failures.append("\(id) is detached but was told \(state)") }
                if n.last[id] == state { failures.append("\(id) was told \(state) twice in a row") }
                n.last[id] = state
            }
            for id in n.live where (n.last[id] ?? .unknown) != n.machine.visible {
                failures.append("\(id) was last told \(n.last[id] ?? .unknown), sees \(n.machine.visible)")
            }
            return failures
        }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
        #expect(visited > 100_000)
    }
}
