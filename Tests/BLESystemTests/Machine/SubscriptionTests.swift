import BLEATT
import BLECore
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The Client Characteristic Configuration descriptors of shared links (`SubscriptionTable`, in the system
/// machine): written when what the sessions on the link want together differs from what the peer accepted, a
/// refusal taking the wish back, a session leaving ending only what it alone wanted.
@Suite struct SubscriptionTests {
    static let a = LinkTests.a
    static let b = LinkTests.b
    static let handle = ConnectionHandle(7)
    static let cccd = AttributeHandle(12)

    /// Both sessions on the link to `LinkTests.peer`.
    static func machine() -> SystemMachine {
        var m = LinkTests.machine()
        _ = m.connect(a, to: LinkTests.peer)
        _ = m.connect(b, to: LinkTests.peer)
        _ = m.linkConnected(LinkTests.link(7), securing: false)
        return m
    }

    static func writes(_ actions: [SystemAction]) -> [(UInt16, DescriptorWriteID?)] {
        actions.compactMap { action in
            guard case .writeDescriptor(handle, cccd, let value, let id) = action else { return nil }
            return (value, id)
        }
    }

    @Test func theDescriptorIsWrittenOnlyWhenWhatEveryoneWantsChanges() {
        var m = Self.machine()
        let (first, w1) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle)
        guard case .writing(let id) = first else {
            Issue.record("no write: \(first)")
            return
        }
        #expect(Self.writes(w1).map(\.0) == [1])
        let answered = m.subscriptionWritten(id, error: nil)
        #expect(answered == [.subscriptionWritten(id, nil)])
        let (second, w2) = m.subscribe(Self.b, 1, descriptor: Self.cccd, on: Self.handle)
        #expect(second == .done)
        #expect(w2 == [])
        let (aOff, w3) = m.subscribe(Self.a, 0, descriptor: Self.cccd, on: Self.handle)
        #expect(aOff == .done)  // b still wants notifications
        #expect(w3 == [])
        let (bOff, w4) = m.subscribe(Self.b, 0, descriptor: Self.cccd, on: Self.handle)
        guard case .writing = bOff else {
            Issue.record("no write: \(bOff)")
            return
        }
        #expect(Self.writes(w4).map(\.0) == [0])
    }

    @Test func aRefusalTakesTheWishBackSoALaterAttemptWritesAgain() {
        var m = Self.machine()
        let (first, _) = m.subscribe(Self.a, 2, descriptor: Self.cccd, on: Self.handle)
        guard case .writing(let id) = first else {
            Issue.record("no write: \(first)")
            return
        }
        let refusal = HostError(.att(.insufficientAuthentication), "refused")
        let answered = m.subscriptionWritten(id, error: refusal)
        #expect(answered == [.subscriptionWritten(id, refusal)])
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
        let (again, w) = m.subscribe(Self.a, 2, descriptor: Self.cccd, on: Self.handle)
        guard case .writing = again else {
            Issue.record("no write: \(again)")
            return
        }
        #expect(Self.writes(w).map(\.0) == [2])
    }

    @Test func aSessionNotOnTheLinkIsRefused() {
        var m = LinkTests.machine()
        _ = m.connect(Self.a, to: LinkTests.peer)
        _ = m.linkConnected(LinkTests.link(7), securing: false)
        let (answer, actions) = m.subscribe(Self.b, 1, descriptor: Self.cccd, on: Self.handle)
        #expect(answer == .notOnLink)
        #expect(actions == [])
    }

    /// One session leaves a link the other stays on (a cancel, or going away): what only it wanted ends on the
    /// peer, written on the system's account; what both wanted stays.
    @Test func aSessionLeavingEndsOnlyWhatItAloneWanted() {
        for leave in [0, 1] {
            var m = Self.machine()
            let other = AttributeHandle(20)
            if case .writing(let id) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle).0 {
                _ = m.subscriptionWritten(id, error: nil)
            }
            if case .writing(let id) = m.subscribe(Self.a, 2, descriptor: other, on: Self.handle).0 {
                _ = m.subscriptionWritten(id, error: nil)
            }
            _ = m.subscribe(Self.b, 1, descriptor: Self.cccd, on: Self.handle)  // the same: nothing written
            let actions = leave == 0 ? m.cancelConnection(Self.a, from: LinkTests.peer).1 : m.closed(Self.a)
            #expect(actions == [.writeDescriptor(Self.handle, other, 0, nil)], "leave \(leave)")
            #expect(m.subscriptions.wish(of: Self.b, descriptor: Self.cccd, on: Self.handle) == 1)
        }
    }

    @Test func aRestoredSessionTakesOverTheWishesAndTheWritesInFlight() {
        var m = Self.machine()
        let (answer, _) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle)
        guard case .writing(let id) = answer else {
            Issue.record("no write: \(answer)")
            return
        }
        let restored = SessionID(rawValue: 3)
        m.linksTransferred(from: Self.a, to: restored)
        _ = m.subscriptionWritten(id, error: HostError(.att(.writeNotPermitted), "no"))
        #expect(m.subscriptions.wish(of: restored, descriptor: Self.cccd, on: Self.handle) == nil)
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
        let (second, _) = m.subscribe(restored, 1, descriptor: Self.cccd, on: Self.handle)
        guard case .writing = second else {
            Issue.record("no write: \(second)")
            return
        }
    }

    @Test func aLinkThatGoesDownTakesItsSubscriptionsWithItAndItsWritesAreStillAnswered() {
        var m = Self.machine()
        let (answer, _) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle)
        guard case .writing(let id) = answer else {
            Issue.record("no write: \(answer)")
            return
        }
        _ = m.linkDisconnected(Self.handle, reason: .connectionTimeout)
        let lost = HostError(.disconnected, "the link went down")
        let answered = m.subscriptionWritten(id, error: lost)
        #expect(answered == [.subscriptionWritten(id, lost)])
        #expect(m.subscriptions.writesInFlight == 0)
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
    }

    /// Every sequence of six of nine inputs (two sessions asking for nothing, notifications or indications,
    /// the peer accepting or refusing the oldest write on its way, a session leaving the link): every write
    /// asked for with an id is answered once, and, until the peer refuses one, whenever no write is on its way
    /// the peer holds exactly what the sessions on the link want together (this fails when a wish made while a
    /// write is on its way is compared with what the peer accepted before).
    @Test func everySequenceLeavesThePeerHoldingWhatTheSessionsWantTogether() {
        enum Input: CaseIterable { case aNotify, aIndicate, aOff, bNotify, bOff, accept, refuse, aLeaves, bLeaves }
        struct Node {
            var machine = SubscriptionTests.machine()
            var peer: UInt16 = 0
            var inFlight: [(DescriptorWriteID, UInt16)] = []
            var answered: Set<UInt64> = []
            var on: Set<SessionID> = [SubscriptionTests.a, SubscriptionTests.b]
            /// A write was refused: the peer may hold what nobody wants until the next change (the peer said no).
            var refused = false
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 6) { (n: inout Node, input: Input) in
            var failures: [String] = []
            var actions: [SystemAction] = []
            func ask(_ s: SessionID, _ value: UInt16) {
                let (answer, new) = n.machine.subscribe(s, value, descriptor: Self.cccd, on: Self.handle)
                actions = new
                if answer == .notOnLink, n.on.contains(s) { failures.append("\(s) refused while on the link") }
            }
            switch input {
            case .aNotify: ask(Self.a, 1)
            case .aIndicate: ask(Self.a, 2)
            case .aOff: ask(Self.a, 0)
            case .bNotify: ask(Self.b, 1)
            case .bOff: ask(Self.b, 0)
            case .accept:
                guard !n.inFlight.isEmpty else { return nil }
                let (id, value) = n.inFlight.removeFirst()
                n.peer = value
                actions = n.machine.subscriptionWritten(id, error: nil)
            case .refuse:
                guard !n.inFlight.isEmpty else { return nil }
                let (id, _) = n.inFlight.removeFirst()
                n.refused = true
                actions = n.machine.subscriptionWritten(id, error: HostError(.att(.writeNotPermitted), "no"))
            case .aLeaves, .bLeaves:
                let s = input == .aLeaves ? Self.a : Self.b
                // Only while the other stays: the last one's leaving ends the link.
                guard n.on.contains(s), n.on.count == 2 else { return nil }
                n.on.remove(s)
                actions = n.machine.cancelConnection(s, from: LinkTests.peer).1
            }
            for action in actions {
                switch action {
                case .writeDescriptor(_, _, let value, let id?): n.inFlight.append((id, value))
                case .writeDescriptor(_, _, let value, nil): n.peer = value
                case .subscriptionWritten(let id, _):
                    if !n.answered.insert(id.rawValue).inserted { failures.append("write \(id) answered twice") }
                default: failures.append("unexpected \(action)")
                }
            }
            if n.inFlight.isEmpty, !n.refused {
                let wanted = n.on.reduce(UInt16(0)) {
                    $0 | (n.machine.subscriptions.wish(of: $1, descriptor: Self.cccd, on: Self.handle) ?? 0)
                }
                if n.peer != wanted { failures.append("the peer holds \(n.peer), the sessions want \(wanted)") }
            }
            return failures
        }
        #expect(visited > 100_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
