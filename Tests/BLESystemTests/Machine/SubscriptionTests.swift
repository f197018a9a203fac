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

    /// What a session's request came to: the write it makes itself, or the one it joined.
    static func written(_ answer: SubscriptionAnswer) -> (DescriptorWriteID, UInt16?)? {
        switch answer {
        case .write(let id, let value): (id, value)
        case .joined(let id): (id, nil)
        case .done, .notOnLink: nil
        }
    }

    /// The write a request was answered with (its own, or the one it joined); records an issue when there is none.
    static func expectWrite(_ answer: SubscriptionAnswer) -> DescriptorWriteID? {
        guard let (id, _) = written(answer) else {
            Issue.record("no write: \(answer)")
            return nil
        }
        return id
    }

    @Test func theDescriptorIsWrittenOnlyWhenWhatEveryoneWantsChanges() {
        var m = Self.machine()
        let (first, a1) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle)
        guard case .write(let id, 1) = first else {
            Issue.record("no write: \(first)")
            return
        }
        #expect(a1 == [])  // the caller writes it
        // A second session asking for the same while the write is on its way waits for it.
        let (joined, _) = m.subscribe(Self.b, 1, descriptor: Self.cccd, on: Self.handle)
        #expect(joined == .joined(id))
        let answered = m.subscriptionWritten(id, error: nil)
        #expect(answered == [.subscriptionWritten(id, nil)])
        let (aOff, a3) = m.subscribe(Self.a, 0, descriptor: Self.cccd, on: Self.handle)
        #expect(aOff == .done)  // b still wants notifications
        #expect(a3 == [])
        let (bOff, _) = m.subscribe(Self.b, 0, descriptor: Self.cccd, on: Self.handle)
        guard case .write(_, 0) = bOff else {
            Issue.record("no write of 0: \(bOff)")
            return
        }
    }

    @Test func aRefusalTakesTheWishBackSoALaterAttemptWritesAgain() {
        var m = Self.machine()
        let (first, _) = m.subscribe(Self.a, 2, descriptor: Self.cccd, on: Self.handle)
        guard let id = Self.expectWrite(first) else { return }
        let refusal = HostError(.att(.insufficientAuthentication), "refused")
        let answered = m.subscriptionWritten(id, error: refusal)
        #expect(answered == [.subscriptionWritten(id, refusal)])
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
        let (again, _) = m.subscribe(Self.a, 2, descriptor: Self.cccd, on: Self.handle)
        guard case .write(_, 2) = again else {
            Issue.record("no write: \(again)")
            return
        }
    }

    /// A session that asked again while its first write was on its way keeps its newer wish when the first is
    /// refused (the review's toggle: on, off, on, the first refused, must not end with the peer told off).
    @Test func aRefusalLeavesANewerWishStanding() {
        var m = Self.machine()
        let w1 = Self.written(m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle).0)!.0
        let w2 = Self.written(m.subscribe(Self.a, 0, descriptor: Self.cccd, on: Self.handle).0)!.0
        let w3 = Self.written(m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle).0)!.0
        _ = m.subscriptionWritten(w1, error: HostError(.att(.unlikelyError), "busy"))
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == 1)
        _ = m.subscriptionWritten(w2, error: nil)
        let last = m.subscriptionWritten(w3, error: nil)
        #expect(last == [.subscriptionWritten(w3, nil)])  // nothing written after: the peer holds 1, as wanted
        // Both refused: the wish is what it was before the first.
        var n = Self.machine()
        let v1 = Self.written(n.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle).0)!.0
        let v2 = Self.written(n.subscribe(Self.a, 0, descriptor: Self.cccd, on: Self.handle).0)!.0
        _ = n.subscriptionWritten(v1, error: HostError(.att(.writeNotPermitted), "no"))
        _ = n.subscriptionWritten(v2, error: HostError(.att(.writeNotPermitted), "no"))
        #expect(n.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
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
            if let (id, _) = Self.written(m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle).0) {
                _ = m.subscriptionWritten(id, error: nil)
            }
            if let (id, _) = Self.written(m.subscribe(Self.a, 2, descriptor: other, on: Self.handle).0) {
                _ = m.subscriptionWritten(id, error: nil)
            }
            _ = m.subscribe(Self.b, 1, descriptor: Self.cccd, on: Self.handle)  // the same: nothing written
            let actions = leave == 0 ? m.cancelConnection(Self.a, from: LinkTests.peer).1 : m.closed(Self.a)
            guard case .writeDescriptor(Self.handle, other, 0, let id)? = actions.first, actions.count == 1 else {
                Issue.record("leave \(leave): \(actions)")
                continue
            }
            #expect(m.subscriptions.wish(of: Self.b, descriptor: Self.cccd, on: Self.handle) == 1)
            // A wish for what that write writes waits for it, rather than being told it is done.
            let (joined, _) = m.subscribe(Self.b, 0, descriptor: other, on: Self.handle)
            #expect(joined == .joined(id))
        }
    }

    @Test func aRestoredSessionTakesOverTheWishesAndTheWritesInFlight() {
        var m = Self.machine()
        let (answer, _) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle)
        guard let id = Self.expectWrite(answer) else { return }
        let restored = SessionID(rawValue: 3)
        m.linksTransferred(from: Self.a, to: restored)
        _ = m.subscriptionWritten(id, error: HostError(.att(.writeNotPermitted), "no"))
        #expect(m.subscriptions.wish(of: restored, descriptor: Self.cccd, on: Self.handle) == nil)
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
        let (second, _) = m.subscribe(restored, 1, descriptor: Self.cccd, on: Self.handle)
        guard case .write = second else {
            Issue.record("no write: \(second)")
            return
        }
    }

    @Test func aLinkThatGoesDownTakesItsSubscriptionsWithItAndItsWritesAreStillAnswered() {
        var m = Self.machine()
        let (answer, _) = m.subscribe(Self.a, 1, descriptor: Self.cccd, on: Self.handle)
        guard let id = Self.expectWrite(answer) else { return }
        _ = m.linkDisconnected(Self.handle, reason: .connectionTimeout)
        let lost = HostError(.disconnected, "the link went down")
        let answered = m.subscriptionWritten(id, error: lost)
        #expect(answered == [.subscriptionWritten(id, lost)])
        #expect(m.subscriptions.writesInFlight == 0)
        #expect(m.subscriptions.wish(of: Self.a, descriptor: Self.cccd, on: Self.handle) == nil)
    }

    /// Every sequence of six of nine inputs (two sessions asking for nothing, notifications or indications,
    /// the peer accepting or refusing the oldest write on its way, a session leaving the link). After each step:
    /// every write is answered once; whenever no write is on its way, each session's wish in the table is what
    /// its app was last told it has (what its last request that succeeded asked, refusals changing nothing), and,
    /// until the peer refuses a write, the peer holds exactly what the sessions on the link want together.
    @Test func everySequenceLeavesThePeerHoldingWhatTheSessionsWantTogether() {
        enum Input: CaseIterable { case aNotify, aIndicate, aOff, bNotify, bOff, accept, refuse, aLeaves, bLeaves }
        struct Node {
            var machine = SubscriptionTests.machine()
            var peer: UInt16 = 0
            /// Writes on their way, oldest first, with their values.
            var inFlight: [(DescriptorWriteID, UInt16)] = []
            /// Who waits for each write, with what it asked.
            var waiting: [UInt64: [(SessionID, UInt16)]] = [:]
            var answered: Set<UInt64> = []
            /// What each app was last told it has.
            var told: [SessionID: UInt16] = [SubscriptionTests.a: 0, SubscriptionTests.b: 0]
            var on: Set<SessionID> = [SubscriptionTests.a, SubscriptionTests.b]
            var refused = false
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 6) { (n: inout Node, input: Input) in
            var failures: [String] = []
            var actions: [SystemAction] = []
            func ask(_ s: SessionID, _ value: UInt16) {
                guard n.on.contains(s) else { return }
                let (answer, new) = n.machine.subscribe(s, value, descriptor: Self.cccd, on: Self.handle)
                actions = new
                switch answer {
                case .done: n.told[s] = value
                case .notOnLink: failures.append("\(s) refused while on the link")
                case .write(let id, let written):
                    n.inFlight.append((id, written))
                    n.waiting[id.rawValue, default: []].append((s, value))
                case .joined(let id): n.waiting[id.rawValue, default: []].append((s, value))
                }
            }
            switch input {
            case .aNotify: ask(Self.a, 1)
            case .aIndicate: ask(Self.a, 2)
            case .aOff: ask(Self.a, 0)
            case .bNotify: ask(Self.b, 1)
            case .bOff: ask(Self.b, 0)
            case .accept, .refuse:
                guard !n.inFlight.isEmpty else { return nil }
                let (id, value) = n.inFlight.removeFirst()
                if input == .accept { n.peer = value } else { n.refused = true }
                let error = input == .accept ? nil : HostError(.att(.writeNotPermitted), "no")
                actions = n.machine.subscriptionWritten(id, error: error)
            case .aLeaves, .bLeaves:
                let s = input == .aLeaves ? Self.a : Self.b
                // Only while the other stays: the last one's leaving ends the link.
                guard n.on.contains(s), n.on.count == 2 else { return nil }
                n.on.remove(s)
                actions = n.machine.cancelConnection(s, from: LinkTests.peer).1
            }
            for action in actions {
                switch action {
                case .writeDescriptor(_, _, let value, let id): n.inFlight.append((id, value))
                case .subscriptionWritten(let id, let error):
                    if !n.answered.insert(id.rawValue).inserted { failures.append("write \(id) answered twice") }
                    for (s, value) in n.waiting.removeValue(forKey: id.rawValue) ?? [] where error == nil {
                        n.told[s] = value
                    }
                default: failures.append("unexpected \(action)")
                }
            }
            if n.inFlight.isEmpty {
                for s in n.on {
                    let wish = n.machine.subscriptions.wish(of: s, descriptor: Self.cccd, on: Self.handle) ?? 0
                    if wish != n.told[s]! { failures.append("\(s) wishes \(wish), its app was told \(n.told[s]!)") }
                }
                let wanted = n.on.reduce(UInt16(0)) {
                    $0 | (n.machine.subscriptions.wish(of: $1, descriptor: Self.cccd, on: Self.handle) ?? 0)
                }
                if !n.refused, n.peer != wanted {
                    failures.append("the peer holds \(n.peer), the sessions want \(wanted)")
                }
            }
            return failures
        }
        #expect(visited > 100_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
