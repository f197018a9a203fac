import BLECore
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The apps' advertisements on one legacy advertising set (`AdvertisingTable`, in the system machine): one app has
/// the controller to itself, several take turns of a second, a start is answered once the controller advertises,
/// a refusal takes out whoever advertised that, and an app out of the foreground advertises its background form or
/// nothing.
@Suite struct AdvertisingTests {
    static let a = LinkTests.a
    static let b = LinkTests.b

    static func request(_ name: UInt8, interval: UInt16 = 0x00A0) -> AdvertisingRequest {
        var parameters = AdvertisingParameters()
        parameters.intervalMin = interval
        parameters.intervalMax = interval
        return AdvertisingRequest(parameters: parameters, data: [2, 0x09, name], scanResponse: [])
    }

    static let foregroundA = request(0x41)
    static let backgroundA = request(0x61, interval: 0x0640)
    static let foregroundB = request(0x42)

    static func start(
        _ m: inout SystemMachine, _ session: SessionID, _ request: AdvertisingRequest,
        background: AdvertisingRequest? = nil, mode: AdvertisingMode = .foreground
    ) -> (AdvertisingStartID, [SystemAction]) {
        m.startAdvertising(session, request, background: background, mode: mode)
    }

    static func turn(after actions: [SystemAction]) -> SystemTimer? {
        for case .startTimer(let timer, after: AdvertisingTable.slot) in actions { return timer }
        return nil
    }

    /// What the controller was asked last in `actions`.
    static func asked(_ actions: [SystemAction]) -> AdvertisingRequest? {
        actions.reversed().lazy.compactMap { if case .startAdvertising(let r, _) = $0 { r } else { nil } }.first
    }

    /// The controller answers the latest request.
    static func answer(_ m: inout SystemMachine, _ result: Result<Void, HostError> = .success(())) -> [SystemAction] {
        m.advertisingAnswered(m.advertising.attempt, result)
    }

    @Test func oneAppHasTheControllerToItselfAndHearsWhenItAdvertises() {
        var m = LinkTests.machine()
        let (id, asked) = Self.start(&m, Self.a, Self.foregroundA)
        #expect(asked == [.startAdvertising(Self.foregroundA, attempt: 1)])
        #expect(Self.answer(&m) == [.advertisingStarted(id, nil)])
        // An answer to an earlier request (overtaken, or stopped since) changes nothing.
        #expect(m.advertisingAnswered(0, .failure(HostError(.hci(.commandDisallowed), "late"))) == [])
    }

    @Test func twoAppsTakeTurnsOfASlot() throws {
        var m = LinkTests.machine()
        _ = Self.start(&m, Self.a, Self.foregroundA)
        _ = Self.answer(&m)
        let (idB, joined) = Self.start(&m, Self.b, Self.foregroundB)
        // The rotation is on the air: b is advertised for now, and its turn comes after the slot.
        #expect(joined.first == .advertisingStarted(idB, nil))
        let turn = try #require(Self.turn(after: joined))
        let next = m.timerFired(turn)
        #expect(Self.asked(next) == Self.foregroundB)
        let following = try #require(Self.turn(after: next))
        #expect(m.timerFired(turn) == [])  // a turn over already
        #expect(Self.asked(m.timerFired(following)) == Self.foregroundA)
    }

    @Test func aLaterStartOvertakesOneWaitingAndAStopEndsIt() {
        var m = LinkTests.machine()
        let (first, _) = Self.start(&m, Self.a, Self.foregroundA)
        let (second, again) = Self.start(&m, Self.a, Self.backgroundA)
        #expect(
            again == [
                .advertisingStarted(first, HostError(.cancelled, "a later start replaced this one")),
                .startAdvertising(Self.backgroundA, attempt: 2),
            ])
        // The first request's success comes after the second was asked: it does not answer the second.
        #expect(m.advertisingAnswered(1, .success(())) == [])
        let stopped = m.stopAdvertising(Self.a)
        #expect(
            stopped == [
                .advertisingStarted(second, HostError(.cancelled, "the advertising was stopped before it started")),
                .stopAdvertising,
            ])
        #expect(m.stopAdvertising(Self.a) == [])
        #expect(m.advertisingAnswered(2, .success(())) == [])
        #expect(!m.advertising.advertising)
    }

    /// The controller refuses an advertisement: the app whose start waits hears why, one advertising for a while
    /// is told it ended (by the start that put it on the air), and the next one left goes on the air.
    @Test func aRefusalTakesOutWhoeverAdvertisedThat() {
        var m = LinkTests.machine()
        let (idA, _) = Self.start(&m, Self.a, Self.foregroundA)
        _ = Self.answer(&m)
        let (idB, _) = Self.start(&m, Self.b, Self.foregroundB)
        _ = m.advertisingInterrupted()  // a central connected: the rotation's advertisement goes on the air again
        let error = HostError(.hci(.commandDisallowed), "refused")
        let refused = Self.answer(&m, .failure(error))
        #expect(
            refused.prefix(2) == [.advertisingRefused(idA, error), .startAdvertising(Self.foregroundB, attempt: 3)])
        #expect(m.advertising.entries.map(\.session) == [Self.b])
        let (again, _) = Self.start(&m, Self.a, Self.foregroundA)
        // b's start was answered when it joined the rotation on the air: its end is told by that start.
        let gone = Self.answer(&m, .failure(error))
        #expect(gone.first == .advertisingRefused(idB, error))
        #expect(m.advertising.entries.map(\.session) == [Self.a])
        let last = Self.answer(&m, .failure(error))
        #expect(last.first == .advertisingStarted(again, error))
        #expect(m.advertising.entries.isEmpty)
    }

    /// Two apps advertising the same bytes are refused together, and the turn goes to the one after the refused
    /// current, not back to the first.
    @Test func aRefusalOfIdenticalAdvertisementsKeepsTheTurnInOrder() throws {
        var m = LinkTests.machine()
        let c = SessionID(rawValue: 3)
        let d = SessionID(rawValue: 4)
        _ = m.opened(c, app: "three")
        _ = m.opened(d, app: "four")
        let foregroundD = Self.request(0x44)
        _ = Self.start(&m, Self.a, Self.foregroundA)
        _ = Self.answer(&m)
        _ = Self.start(&m, Self.b, Self.foregroundB)
        _ = Self.start(&m, c, Self.foregroundA)  // the same bytes as a's
        let (_, last) = Self.start(&m, d, foregroundD)
        // Two turns: b's, then c's.
        let toB = m.timerFired(try #require(Self.turn(after: last)))
        let toC = m.timerFired(try #require(Self.turn(after: toB)))
        #expect(Self.asked(toC) == Self.foregroundA)
        let refused = Self.answer(&m, .failure(HostError(.hci(.commandDisallowed), "refused")))
        #expect(m.advertising.entries.map(\.session) == [Self.b, d])
        #expect(Self.asked(refused) == foregroundD)
    }

    /// IOSRules.md 2.3–2.5, 2.13: out of the foreground, a `bluetooth-peripheral` app advertises its background form,
    /// and a foreground-only app leaves the air, its start waiting, until it is back.
    @Test func anAppOutOfTheForegroundAdvertisesItsBackgroundFormOrNothing() {
        var m = LinkTests.machine()
        let (id, _) = Self.start(&m, Self.a, Self.foregroundA, background: Self.backgroundA)
        let background = m.advertisingModesChanged([Self.a: .background])
        #expect(Self.asked(background) == Self.backgroundA)
        let off = m.advertisingModesChanged([Self.a: .off])
        #expect(off == [.stopAdvertising])
        #expect(m.advertising.paused.map(\.session) == [Self.a])
        let back = m.advertisingModesChanged([Self.a: .foreground])
        #expect(Self.asked(back) == Self.foregroundA)
        #expect(Self.answer(&m) == [.advertisingStarted(id, nil)])
    }

    /// A start made while the app is out of the foreground (its lifecycle moved as it asked) takes what it
    /// advertised before off the air too.
    @Test func aStartOffTheAirTakesTheEarlierAdvertisementOffToo() {
        var m = LinkTests.machine()
        _ = Self.start(&m, Self.a, Self.foregroundA)
        _ = Self.answer(&m)
        let (id, off) = Self.start(&m, Self.a, Self.foregroundA, mode: .off)
        #expect(off == [.stopAdvertising])
        #expect(m.advertising.entries.isEmpty)
        #expect(m.advertising.paused.map(\.start) == [id])
    }

    /// A reset answers every start waiting and stops a controller that was asked to advertise (the request may
    /// still be on its way to it).
    @Test func aResetAnswersTheStartsWaitingStopsTheControllerAndEndsTheTurns() throws {
        var m = LinkTests.machine()
        let (idA, _) = Self.start(&m, Self.a, Self.foregroundA)
        let (idB, two) = Self.start(&m, Self.b, Self.foregroundB)
        let turn = try #require(Self.turn(after: two))
        let gone = HostError(.transportClosed, "gone")
        let reset = m.advertisingReset(gone)
        #expect(reset == [.advertisingStarted(idA, gone), .advertisingStarted(idB, gone), .stopAdvertising])
        #expect(m.timerFired(turn) == [])
        #expect(m.advertisingReset(gone) == [])
        // A start after the reset has an id of its own, and the first request's late answer changes nothing.
        let (again, _) = Self.start(&m, Self.a, Self.foregroundA)
        #expect(again != idA && again != idB)
        #expect(m.advertisingAnswered(1, .success(())) == [])
    }

    @Test func aRestoredManagerTakesTheAdvertisementOverAndAClosedOneStops() {
        var m = LinkTests.machine()
        let (id, _) = Self.start(&m, Self.a, Self.foregroundA)
        let restored = SessionID(rawValue: 3)
        #expect(m.advertisingTransferred(from: Self.a, to: restored) == [id])
        #expect(m.advertising.entries.map(\.session) == [restored])
        _ = m.replaced(Self.a, by: restored, app: "one")
        let closed = m.closed(restored)
        #expect(
            closed == [
                .advertisingStarted(id, HostError(.cancelled, "the advertising was stopped before it started")),
                .stopAdvertising,
            ])
    }

    /// Every sequence of six of fourteen inputs (two apps starting and stopping, the second with its own bytes
    /// or the first's; the first moving between the foreground, the background and off the air; the controller
    /// answering the latest request (advertising or refusing) or a late answer to an earlier one arriving, or
    /// stopping for a central; the turn ending; a reset). After each step: every start is answered at most once,
    /// and one not answered is still in the table; the controller was last asked for the advertisement whose
    /// turn it is, or to stop when none is in the rotation; that advertisement is in the form its app's mode calls
    /// for; an app off the air is out of the rotation; while two take turns the latest turn's timer brings the
    /// next.
    @Test func everySequenceAnswersEachStartOnceAndAdvertisesOnlyTheRotation() {
        enum Input: CaseIterable {
            case startA, startB, startBSame, stopA, stopB, foregroundA, backgroundA, offA
            case advertises, refuses, lateAnswer, central, turnEnds, reset
        }
        struct Node {
            var machine = LinkTests.machine()
            var modeA: AdvertisingMode = .foreground
            /// Starts made and not answered, by session.
            var waiting: [AdvertisingStartID: SessionID] = [:]
            var answered: Set<AdvertisingStartID> = []
            /// What the controller was last asked (nil: to stop, or nothing yet), its number, and whether it is to
            /// answer; an earlier number it may still answer.
            var asked: AdvertisingRequest?
            var attempt: UInt64 = 0
            var unanswered = false
            var earlier: UInt64?
            var onAir = false
            /// The latest turn's timer started (an earlier one fires for nothing).
            var timer: SystemTimer?
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 6) { (n: inout Node, input: Input) in
            var failures: [String] = []
            var actions: [SystemAction] = []
            func start(_ s: SessionID, _ request: AdvertisingRequest, _ background: AdvertisingRequest?) {
                let mode: AdvertisingMode = s == Self.a ? n.modeA : .foreground
                let (id, new) = n.machine.startAdvertising(s, request, background: background, mode: mode)
                if n.waiting[id] != nil || n.answered.contains(id) { failures.append("start id \(id) reused") }
                n.waiting[id] = s
                actions = new
            }
            func modeA(_ mode: AdvertisingMode) {
                n.modeA = mode
                actions = n.machine.advertisingModesChanged([Self.a: mode])
            }
            switch input {
            case .startA: start(Self.a, Self.foregroundA, Self.backgroundA)
            case .startB: start(Self.b, Self.foregroundB, nil)
            case .startBSame: start(Self.b, Self.foregroundA, nil)
            case .stopA: actions = n.machine.stopAdvertising(Self.a)
            case .stopB: actions = n.machine.stopAdvertising(Self.b)
            case .foregroundA:
                guard n.modeA != .foreground else { return nil }
                modeA(.foreground)
            case .backgroundA:
                guard n.modeA != .background else { return nil }
                modeA(.background)
            case .offA:
                guard n.modeA != .off else { return nil }
                modeA(.off)
            case .advertises, .refuses:
                guard n.asked != nil, n.unanswered else { return nil }
                n.unanswered = false
                n.onAir = input == .advertises
                // Refused: the controller advertises nothing until asked again.
                if input == .refuses { n.asked = nil }
                let result: Result<Void, HostError> =
                    input == .advertises ? .success(()) : .failure(HostError(.hci(.commandDisallowed), "refused"))
                actions = n.machine.advertisingAnswered(n.attempt, result)
            case .lateAnswer:
                guard let earlier = n.earlier else { return nil }
                n.earlier = nil
                actions = n.machine.advertisingAnswered(earlier, .failure(HostError(.hci(.commandDisallowed), "late")))
                if !actions.isEmpty { failures.append("a late answer changed something: \(actions)") }
            case .central:
                guard n.onAir else { return nil }
                n.onAir = false
                actions = n.machine.advertisingInterrupted()
            case .turnEnds:
                guard let timer = n.timer else { return nil }
                n.timer = nil
                actions = n.machine.timerFired(timer)
            case .reset:
                actions = n.machine.advertisingReset(HostError(.transportClosed, "gone"))
                n.onAir = false
            }
            for action in actions {
                switch action {
                case .startAdvertising(let request, let attempt):
                    if n.unanswered { n.earlier = n.attempt }
                    n.asked = request
                    n.attempt = attempt
                    n.unanswered = true
                    n.onAir = false
                case .stopAdvertising:
                    if n.unanswered { n.earlier = n.attempt }
                    n.asked = nil
                    n.unanswered = false
                    n.onAir = false
                case .advertisingStarted(let id, _):
                    if n.waiting.removeValue(forKey: id) == nil { failures.append("start \(id) answered twice") }
                    n.answered.insert(id)
                case .advertisingRefused(let id, _):
                    if n.machine.advertising.entries.contains(where: { $0.origin == id }) {
                        failures.append("start \(id)'s advertising told it ended, but it is in the rotation")
                    }
                case .startTimer(let timer, after: AdvertisingTable.slot):
                    n.timer = timer
                default: failures.append("unexpected \(action)")
                }
            }
            let table = n.machine.advertising
            let pending = Set((table.entries + table.paused).compactMap(\.start))
            if pending != Set(n.waiting.keys) {
                failures.append("starts waiting: \(n.waiting.keys.map(\.rawValue).sorted()), the table has \(pending)")
            }
            if table.entries.isEmpty {
                if n.asked != nil, n.unanswered || n.onAir {
                    failures.append("the controller advertises \(n.asked!.data) for nobody")
                }
            } else if n.asked != table.entries[table.current].request {
                failures.append("the controller was asked for \(n.asked?.data ?? []), not the current turn's")
            }
            for entry in table.entries where entry.session == Self.a {
                let form = n.modeA == .background ? Self.backgroundA : Self.foregroundA
                if entry.request != form { failures.append("a advertises \(entry.request.data) in \(n.modeA)") }
                if n.modeA == .off { failures.append("a is on the air while off") }
            }
            if table.entries.count > 1 {
                // The latest timer is the live one: when it fires, the next advertisement has the air.
                var probe = n.machine
                let next = n.timer.map { probe.timerFired($0) } ?? []
                if Self.asked(next) == nil {
                    failures.append("\(table.entries.count) take turns, but no turn is coming")
                }
            }
            return failures
        }
        #expect(visited > 300_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
