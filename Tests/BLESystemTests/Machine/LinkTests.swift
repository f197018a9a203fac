import BLECore
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The central-role links (`LinkTable`, in the system machine): one link per peer, shared by the managers that
/// asked for it, every pending connect initiated together in the order first asked, a link held while the
/// system encrypts it for a bonded peer, and a link disconnected when its last manager lets go.
@Suite struct LinkTests {
    static let a = SessionID(rawValue: 1)
    static let b = SessionID(rawValue: 2)
    static let peer = BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice)
    static let other = BluetoothAddress(bytes: [6, 7, 8, 9, 10, 0xC6], type: .randomDevice)

    static func link(_ handle: UInt16, to peer: BluetoothAddress = peer) -> LinkInfo {
        LinkInfo(
            handle: ConnectionHandle(handle), role: .central, peer: peer, interval: 24, latency: 0,
            supervisionTimeout: 400)
    }

    static func machine() -> SystemMachine {
        var m = SystemMachine()
        _ = m.opened(a, app: "one")
        _ = m.opened(b, app: "two")
        return m
    }

    @Test func twoManagersShareOneLinkThatGoesDownWithTheLast() {
        var m = Self.machine()
        let (r1, c1) = m.connect(Self.a, to: Self.peer)
        #expect(r1 == nil)
        #expect(c1 == [.setConnectTargets([Self.peer])])
        let (r2, c2) = m.connect(Self.b, to: Self.peer)
        #expect(r2 == nil)
        #expect(c2 == [])  // the same target
        let up = m.linkConnected(Self.link(7), securing: false)
        #expect(
            up == [
                .setConnectTargets([]), .deliver(Self.a, .linkAttached(Self.link(7))),
                .deliver(Self.b, .linkAttached(Self.link(7))),
            ])
        let (left, l1) = m.cancelConnection(Self.a, from: Self.peer)
        #expect(left == .left(ConnectionHandle(7)))
        #expect(l1 == [])
        let (last, l2) = m.cancelConnection(Self.b, from: Self.peer)
        #expect(last == .disconnecting(ConnectionHandle(7)))
        #expect(l2 == [.disconnect(ConnectionHandle(7), .remoteUserTerminatedConnection)])
        let down = m.linkDisconnected(ConnectionHandle(7), reason: .connectionTerminatedByLocalHost)
        #expect(
            down == [
                .deliver(Self.b, .linkDown(ConnectionHandle(7), .connectionTerminatedByLocalHost, reconnecting: false))
            ])
        #expect(m.links.peers.isEmpty)
    }

    @Test func aManagerConnectingToAPeerAlreadyLinkedIsAttachedAtOnce() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        _ = m.linkConnected(Self.link(7), securing: false)
        let (info, actions) = m.connect(Self.b, to: Self.peer)
        #expect(info == Self.link(7))
        #expect(actions == [])
        #expect(m.links.isUser(Self.b, of: ConnectionHandle(7)))
        #expect(m.links.linkedPeers(offering: nil) == [Self.peer])
    }

    @Test func pendingConnectsAreInitiatedTogetherInTheOrderFirstAsked() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.other)
        let (_, second) = m.connect(Self.b, to: Self.peer)
        #expect(second == [.setConnectTargets([Self.other, Self.peer])])
        let (outcome, withdrawn) = m.cancelConnection(Self.a, from: Self.other)
        #expect(outcome == .withdrawn)
        #expect(withdrawn == [.setConnectTargets([Self.peer])])
        let error = HostError(.hci(.connectionFailedToBeEstablished), "no answer")
        let failed = m.connectionFailed(Self.peer, error)
        #expect(failed == [.setConnectTargets([]), .deliver(Self.b, .linkFailed(Self.peer, error))])
    }

    @Test func aBondedPeersLinkIsHeldUntilEncrypted() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        let held = m.linkConnected(Self.link(7), securing: true)
        #expect(held == [.setConnectTargets([])])
        #expect(!m.links.isUser(Self.a, of: ConnectionHandle(7)))
        #expect(m.links.linkedPeers(offering: nil).isEmpty)
        // Another manager asking meanwhile waits with the first.
        let (info, _) = m.connect(Self.b, to: Self.peer)
        #expect(info == nil)
        let secured = m.linkSecured(ConnectionHandle(7))
        #expect(
            secured == [
                .deliver(Self.a, .linkAttached(Self.link(7))), .deliver(Self.b, .linkAttached(Self.link(7))),
            ])
    }

    /// IOSRules.md 7.x: a peer that lost the bond's key. The waiting managers' connects fail with the system's
    /// status, not the controller's reason for the end.
    @Test func aRefusedLinkIsEndedAndItsWaitersHearWhy() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        _ = m.linkConnected(Self.link(7), securing: true)
        let refused = m.linkRefused(ConnectionHandle(7), status: .pinOrKeyMissing)
        #expect(refused == [.disconnect(ConnectionHandle(7), .authenticationFailure)])
        let again = m.linkRefused(ConnectionHandle(7), status: .authenticationFailure)
        #expect(again == [])
        let down = m.linkDisconnected(ConnectionHandle(7), reason: .connectionTerminatedByLocalHost)
        let error = HostError(.hci(.pinOrKeyMissing), "the link was not secured: \(HCIStatus.pinOrKeyMissing)")
        #expect(down == [.deliver(Self.a, .linkFailed(Self.peer, error))])
    }

    @Test func everyManagerLettingGoOfAHeldLinkEndsIt() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        _ = m.linkConnected(Self.link(7), securing: true)
        let (outcome, actions) = m.cancelConnection(Self.a, from: Self.peer)
        #expect(outcome == .withdrawn)
        #expect(actions == [.disconnect(ConnectionHandle(7), .remoteUserTerminatedConnection)])
    }

    @Test func aLinkNobodyWaitsForAnyMoreIsDisconnectedAsItComesUp() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        _ = m.cancelConnection(Self.a, from: Self.peer)
        let up = m.linkConnected(Self.link(7), securing: false)
        #expect(up == [.disconnect(ConnectionHandle(7), .remoteUserTerminatedConnection)])
        #expect(m.links.linkedPeers(offering: nil).isEmpty)
    }

    @Test func aManagerThatGoesAwayOrWhoseAppEndsLetsGo() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        _ = m.connect(Self.b, to: Self.peer)
        _ = m.linkConnected(Self.link(7), securing: false)
        let closed = m.closed(Self.a)
        #expect(closed == [])  // b stays on it
        let terminated = m.appTerminated("two", keeping: [])
        #expect(
            terminated == [
                .deliver(Self.b, .appTerminated), .disconnect(ConnectionHandle(7), .remoteUserTerminatedConnection),
            ])
        let down = m.linkDisconnected(ConnectionHandle(7), reason: .connectionTerminatedByLocalHost)
        #expect(down == [])  // nobody attached is told
    }

    @Test func aRestoredManagerTakesTheKeptOnesPlaces() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        _ = m.connect(Self.a, to: Self.other)
        _ = m.linkConnected(Self.link(7), securing: false)
        let restored = SessionID(rawValue: 3)
        m.linksTransferred(from: Self.a, to: restored)
        #expect(m.links.isUser(restored, of: ConnectionHandle(7)))
        #expect(!m.links.isUser(Self.a, of: ConnectionHandle(7)))
        let failed = m.connectionFailed(Self.other, HostError(.cancelled, "test"))
        #expect(failed.contains(.deliver(restored, .linkFailed(Self.other, HostError(.cancelled, "test")))))
    }

    @Test func aResetOrSwitchingBluetoothOffWithdrawsTheConnectList() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer)
        let off = m.linksReset()
        #expect(off == [.setConnectTargets([])])
        #expect(m.links.peers.isEmpty)
        let again = m.linksReset()
        #expect(again == [])
    }

    // MARK: Reconnection (IOSRules.md 7)

    /// `a` connected with `enableAutoReconnect` and lost link 7, so it waits for the peer again; `failedOnce`:
    /// and its first attempt failed, so it waits for the pause (token 0).
    static func reconnecting(failedOnce: Bool = false) -> SystemMachine {
        var m = machine()
        _ = m.connect(a, to: peer, autoReconnect: true)
        _ = m.linkConnected(link(7), securing: false)
        _ = m.linkDisconnected(ConnectionHandle(7), reason: .connectionTimeout)
        if failedOnce {
            _ = m.connectionFailed(peer, HostError(.hci(.connectionFailedToBeEstablished), "no answer"))
        }
        return m
    }

    /// A connect with `enableAutoReconnect` whose link is lost waits for the peer again at once, and its manager
    /// hears the loss as one it is reconnected from; a manager on the same link without the option hears a
    /// final loss.
    @Test func aLostLinkIsWaitedForAgainByTheManagerThatAskedForIt() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer, autoReconnect: true)
        _ = m.connect(Self.b, to: Self.peer)
        _ = m.linkConnected(Self.link(7), securing: false)
        let down = m.linkDisconnected(ConnectionHandle(7), reason: .connectionTimeout)
        #expect(
            down == [
                .setConnectTargets([Self.peer]),
                .deliver(Self.a, .linkDown(ConnectionHandle(7), .connectionTimeout, reconnecting: true)),
                .deliver(Self.b, .linkDown(ConnectionHandle(7), .connectionTimeout, reconnecting: false)),
            ])
        #expect(m.links.peers[Self.peer]?.waiting == [Self.a])
        let back = m.linkConnected(Self.link(8), securing: false)
        #expect(back == [.setConnectTargets([]), .deliver(Self.a, .linkAttached(Self.link(8)))])
    }

    /// Before its first link, a connect that asked to reconnect fails as any other: there is nothing to come
    /// back to.
    @Test func beforeItsFirstLinkSuchAConnectFailsAsAnyOther() {
        var m = Self.machine()
        _ = m.connect(Self.a, to: Self.peer, autoReconnect: true)
        let error = HostError(.hci(.connectionFailedToBeEstablished), "no answer")
        let failed = m.connectionFailed(Self.peer, error)
        #expect(failed == [.setConnectTargets([]), .deliver(Self.a, .linkFailed(Self.peer, error))])
        #expect(m.links.peers.isEmpty)
    }

    /// A reconnection's attempt that fails is tried again after the pause, by a timer, and tells the manager
    /// nothing; a timer of an earlier pause does nothing.
    @Test func aFailedAttemptIsTriedAgainAfterThePause() {
        var m = Self.reconnecting()
        let error = HostError(.hci(.connectionFailedToBeEstablished), "no answer")
        let failed = m.connectionFailed(Self.peer, error)
        let pause = SystemTimer.reconnect(Self.peer, token: 0)
        #expect(failed == [.startTimer(pause, after: LinkTable.reconnectPause), .setConnectTargets([])])
        let again = m.timerFired(pause)
        #expect(again == [.setConnectTargets([Self.peer])])
        let stale = m.timerFired(pause)
        #expect(stale == [])
        // The second failure's pause has a token of its own.
        let twice = m.connectionFailed(Self.peer, error)
        #expect(twice.first == .startTimer(.reconnect(Self.peer, token: 1), after: LinkTable.reconnectPause))
        #expect(m.timerFired(pause) == [])
    }

    /// A peer that no longer has the bond's key ends the reconnection: no later attempt could succeed, so the
    /// manager's connect fails, saying why.
    @Test func aPeerThatLostTheKeyEndsTheReconnection() {
        var m = Self.reconnecting()
        _ = m.linkConnected(Self.link(8), securing: true)
        _ = m.linkRefused(ConnectionHandle(8), status: .pinOrKeyMissing)
        let down = m.linkDisconnected(ConnectionHandle(8), reason: .connectionTerminatedByLocalHost)
        let error = HostError(.hci(.pinOrKeyMissing), "the link was not secured: \(HCIStatus.pinOrKeyMissing)")
        #expect(down == [.deliver(Self.a, .linkFailed(Self.peer, error))])
        #expect(m.links.peers.isEmpty)
    }

    /// Letting go while waiting for the pause withdraws the reconnection; the pause's end then does nothing.
    @Test func cancellingDuringThePauseWithdrawsTheReconnection() {
        var m = Self.reconnecting(failedOnce: true)
        let (outcome, actions) = m.cancelConnection(Self.a, from: Self.peer)
        #expect(outcome == .withdrawn)
        #expect(actions == [])
        #expect(m.links.peers.isEmpty)
        #expect(m.timerFired(.reconnect(Self.peer, token: 0)) == [])
    }

    /// The pause ends while another manager's link to the peer is up: the reconnecting manager is attached to it.
    @Test func thePausesEndJoinsALinkAnotherManagerBroughtUp() {
        var m = Self.reconnecting(failedOnce: true)
        _ = m.connect(Self.b, to: Self.peer)
        _ = m.linkConnected(Self.link(8), securing: false)
        let joined = m.timerFired(.reconnect(Self.peer, token: 0))
        #expect(joined == [.deliver(Self.a, .linkAttached(Self.link(8)))])
        #expect(m.links.isUser(Self.a, of: ConnectionHandle(8)))
    }

    /// A restored manager takes the kept one's reconnection over, pause and all.
    @Test func aRestoredManagerTakesAReconnectionOver() {
        var m = Self.reconnecting(failedOnce: true)
        let restored = SessionID(rawValue: 3)
        m.linksTransferred(from: Self.a, to: restored)
        _ = m.timerFired(.reconnect(Self.peer, token: 0))
        let back = m.linkConnected(Self.link(8), securing: false)
        #expect(back == [.setConnectTargets([]), .deliver(restored, .linkAttached(Self.link(8)))])
        let down = m.linkDisconnected(ConnectionHandle(8), reason: .connectionTimeout)
        #expect(
            down.contains(.deliver(restored, .linkDown(ConnectionHandle(8), .connectionTimeout, reconnecting: true))))
    }

    /// Every sequence of six of fifteen inputs (two managers connecting, the first with `enableAutoReconnect`, the
    /// second with or without it, and cancelling, one going away; the controller connecting, with or without the
    /// system holding the link for encryption, failing, failing for a lost key, the link secured, refused, or
    /// going down; a reconnection's pause ending; the controller may complete or fail an attempt it was just told
    /// to stop). After each step: every connect a manager made ends once, by the deliveries and the returns a
    /// manager sees, and one that asked to reconnect ends only when the manager lets go or the peer lost the
    /// bond's key; a loss is told as one the manager is reconnected from only after it was on the link; a manager
    /// waiting to try again has a timer for it; a wish to reconnect lives only as long as its connect, and an
    /// entry nobody uses is gone; the controller initiates exactly while someone waits and no link is up; a link
    /// the controller holds up has someone on it or waiting, or is being disconnected; a detached manager is
    /// nowhere.
    @Test func everySequenceEndsEachConnectOnceAndHoldsALinkOnlyForSomeone() {
        enum Input: CaseIterable {
            case connectA, connectB, connectBAuto, cancelA, cancelB, closeA
            case up, upHeld, failed, lostKey, secured, refused, down, reset, pauseEnds
        }
        /// What a manager believes of its connects, from what it was told and what its calls returned: on the
        /// link (until told it went down), waiting (asked again while its link was being disconnected, or
        /// reconnecting), and armed (its connect asked to reconnect and it was on the link since).
        struct Belief: Hashable {
            var on = false
            var waiting = false
            var armed = false
        }
        struct Node {
            var machine = LinkTests.machine()
            var belief: [SessionID: Belief] = [LinkTests.a: Belief(), LinkTests.b: Belief()]
            var aLive = true
            /// The controller, as the actions left it.
            var targets: [BluetoothAddress] = []
            /// The controller was given the peer since its last attempt ended: it may still complete (or fail)
            /// an attempt it was told to stop, as a real one may.
            var initiating = false
            var link: ConnectionHandle?
            var held = false
            var disconnecting = false
            var nextHandle: UInt16 = 1
            /// Whether each manager's latest connect asked to reconnect.
            var asked: [SessionID: Bool] = [LinkTests.a: false, LinkTests.b: false]
            /// Timers started and not fired yet, oldest first (a reset leaves them: they fire for nothing).
            var timers: [SystemTimer] = []
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 6) { (n: inout Node, input: Input) in
            var failures: [String] = []
            var actions: [SystemAction] = []
            func connect(_ s: SessionID, auto: Bool) {
                let (info, new) = n.machine.connect(s, to: Self.peer, autoReconnect: auto)
                n.asked[s] = auto
                actions = new
                if info != nil {
                    // Attached at once (waiting to try again, it is no longer).
                    n.belief[s] = Belief(on: true, waiting: false, armed: auto)
                } else {
                    n.belief[s]!.waiting = true
                    n.belief[s]!.armed = false
                }
            }
            func cancel(_ s: SessionID) {
                let (outcome, new) = n.machine.cancelConnection(s, from: Self.peer)
                actions = new
                switch outcome {
                case .nothing:
                    if n.belief[s]!.waiting || (n.belief[s]!.on && !n.disconnecting) {
                        failures.append("\(s)'s cancel did nothing")
                    }
                case .withdrawn: n.belief[s]!.waiting = false
                case .left: n.belief[s]!.on = false
                case .disconnecting: break  // `.linkDown` follows
                }
                n.belief[s]!.armed = false
            }
            switch input {
            case .connectA:
                guard n.aLive else { return nil }
                connect(Self.a, auto: true)
            case .connectB: connect(Self.b, auto: false)
            case .connectBAuto: connect(Self.b, auto: true)
            case .cancelA:
                guard n.aLive else { return nil }
                cancel(Self.a)
            case .cancelB: cancel(Self.b)
            case .closeA:
                guard n.aLive else { return nil }
                actions = n.machine.closed(Self.a)
                n.aLive = false
                n.belief[Self.a] = Belief()
            case .up, .upHeld:
                guard n.link == nil, n.initiating else { return nil }
                n.initiating = false
                n.link = ConnectionHandle(n.nextHandle)
                n.nextHandle += 1
                n.held = input == .upHeld
                actions = n.machine.linkConnected(Self.link(n.link!.rawValue), securing: n.held)
            case .failed, .lostKey:
                guard n.link == nil, n.initiating else { return nil }
                n.initiating = false
                let status: HCIStatus = input == .lostKey ? .pinOrKeyMissing : .connectionFailedToBeEstablished
                actions = n.machine.connectionFailed(Self.peer, HostError(.hci(status), ""))
            case .secured:
                guard let link = n.link, n.held else { return nil }
                n.held = false
                actions = n.machine.linkSecured(link)
            case .refused:
                guard let link = n.link, n.held else { return nil }
                n.held = false
                actions = n.machine.linkRefused(link, status: .pinOrKeyMissing)
            case .down:
                guard let link = n.link else { return nil }
                n.link = nil
                n.held = false
                n.disconnecting = false
                actions = n.machine.linkDisconnected(link, reason: .connectionTimeout)
            case .reset:
                // The controller went away: managers hear it through their power state and forget everything.
                actions = n.machine.linksReset()
                n.link = nil
                n.held = false
                n.disconnecting = false
                n.targets = []
                n.initiating = false
                n.belief = n.belief.mapValues { _ in Belief() }
            case .pauseEnds:
                guard !n.timers.isEmpty else { return nil }
                actions = n.machine.timerFired(n.timers.removeFirst())
            }
            for action in actions {
                switch action {
                case .setConnectTargets(let peers):
                    n.targets = peers
                    if peers.contains(Self.peer) { n.initiating = true }
                case .disconnect(let handle, _):
                    if handle != n.link { failures.append("disconnects \(handle), which is not up") }
                    n.disconnecting = true
                case .deliver(let s, .linkAttached):
                    if !n.belief[s]!.waiting { failures.append("\(s) attached while not waiting") }
                    n.belief[s] = Belief(on: true, waiting: false, armed: n.asked[s]!)
                case .deliver(let s, .linkFailed(_, let error)):
                    if !n.belief[s]!.waiting { failures.append("\(s)'s connect failed while not waiting") }
                    if n.belief[s]!.armed, error.code != .hci(.pinOrKeyMissing) {
                        failures.append("\(s)'s reconnection failed for good: \(error)")
                    }
                    n.belief[s]!.waiting = false
                    n.belief[s]!.armed = false
                case .deliver(let s, .linkDown(_, _, let reconnecting)):
                    if !n.belief[s]!.on { failures.append("\(s) heard a link go down while not on it") }
                    n.belief[s]!.on = false
                    if reconnecting {
                        if !n.belief[s]!.armed { failures.append("\(s) reconnects, never having been on the link") }
                        n.belief[s]!.waiting = true
                    } else if n.belief[s]!.armed {
                        failures.append("\(s) is not reconnected though it asked to be")
                    }
                case .startTimer(let timer, after: LinkTable.reconnectPause):
                    n.timers.append(timer)
                default: failures.append("unexpected \(action)")
                }
            }
            let table = n.machine.links
            let waiting = table.peers[Self.peer]?.waiting ?? []
            let users = table.peers[Self.peer]?.users ?? []
            let retrying = table.peers[Self.peer]?.retrying ?? [:]
            if !n.aLive && (waiting.contains(Self.a) || users.contains(Self.a) || retrying[Self.a] != nil) {
                failures.append("a detached manager is still on the link or waiting")
            }
            for (_, token) in retrying where !n.timers.contains(.reconnect(Self.peer, token: token)) {
                failures.append("a manager waits to try again with no timer")
            }
            if let entry = table.peers[Self.peer] {
                let involved = Set(entry.waiting + entry.users + entry.retrying.keys)
                if !entry.autoReconnect.isSubset(of: involved) || !entry.armed.isSubset(of: entry.autoReconnect) {
                    failures.append("a wish outlives its connect: \(entry)")
                }
                if entry.waiting.isEmpty, entry.users.isEmpty, entry.retrying.isEmpty, entry.link == nil {
                    failures.append("an unused entry is kept")
                }
            }
            for s in [Self.a, Self.b] where n.aLive || s != Self.a {
                let armed = table.peers[Self.peer]?.armed.contains(s) ?? false
                let actual = Belief(
                    on: users.contains(s), waiting: waiting.contains(s) || retrying[s] != nil, armed: armed)
                if n.belief[s]! != actual {
                    failures.append("\(s) believes \(n.belief[s]!), the system has it \(actual)")
                }
            }
            let wanted = !waiting.isEmpty && n.link == nil
            if n.targets.contains(Self.peer) != wanted {
                failures.append("the controller initiates: \(n.targets), someone waits: \(!waiting.isEmpty)")
            }
            if n.link != nil, users.isEmpty, waiting.isEmpty, !n.disconnecting {
                failures.append("a link is held up for nobody")
            }
            return failures
        }
        #expect(visited > 300_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
