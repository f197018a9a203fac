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

    @Test func oneAppHasTheControllerToItselfAndHearsWhenItAdvertises() {
        var m = LinkTests.machine()
        let (id, asked) = Self.start(&m, Self.a, Self.foregroundA)
        #expect(asked == [.startAdvertising(Self.foregroundA)])
        let answered = m.advertisingAnswered(Self.foregroundA, .success(()))
        #expect(answered == [.advertisingStarted(id, nil)])
        // Overtaken by a later request: the later one answers for itself.
        #expect(m.advertisingAnswered(Self.foregroundA, .failure(HostError(.cancelled, "overtaken"))) == [])
    }

    @Test func twoAppsTakeTurnsOfASlot() throws {
        var m = LinkTests.machine()
        _ = Self.start(&m, Self.a, Self.foregroundA)
        _ = m.advertisingAnswered(Self.foregroundA, .success(()))
        let (idB, joined) = Self.start(&m, Self.b, Self.foregroundB)
        // The rotation is on the air: b is advertised for now, and its turn comes after the slot.
        #expect(joined.first == .advertisingStarted(idB, nil))
        let turn = try #require(Self.turn(after: joined))
        let next = m.timerFired(turn)
        #expect(next.first == .startAdvertising(Self.foregroundB))
        let following = try #require(Self.turn(after: next))
        #expect(m.timerFired(turn) == [])  // a turn over already
        #expect(m.timerFired(following).first == .startAdvertising(Self.foregroundA))
    }

    @Test func aLaterStartOvertakesOneWaitingAndAStopEndsIt() {
        var m = LinkTests.machine()
        let (first, _) = Self.start(&m, Self.a, Self.foregroundA)
        let (second, again) = Self.start(&m, Self.a, Self.backgroundA)
        #expect(
            again == [
                .advertisingStarted(first, HostError(.cancelled, "a later start replaced this one")),
                .startAdvertising(Self.backgroundA),
            ])
        let stopped = m.stopAdvertising(Self.a)
        #expect(
            stopped == [
                .advertisingStarted(second, HostError(.cancelled, "the advertising was stopped before it started")),
                .stopAdvertising,
            ])
        #expect(m.stopAdvertising(Self.a) == [])
    }

    /// The controller refuses an advertisement: the app whose start waits hears why, one advertising for a while
    /// is told it ended, and the next one left goes on the air.
    @Test func aRefusalTakesOutWhoeverAdvertisedThat() {
        var m = LinkTests.machine()
        _ = Self.start(&m, Self.a, Self.foregroundA)
        _ = m.advertisingAnswered(Self.foregroundA, .success(()))
        let (idB, _) = Self.start(&m, Self.b, Self.foregroundB)
        _ = m.advertisingInterrupted()  // a central connected: the rotation's advertisement goes on the air again
        let error = HostError(.hci(.commandDisallowed), "refused")
        let refused = m.advertisingAnswered(Self.foregroundA, .failure(error))
        #expect(refused == [.advertisingRefused(Self.a, error), .startAdvertising(Self.foregroundB)])
        #expect(m.advertising.entries.map(\.session) == [Self.b])
        _ = idB
        let (idA, _) = Self.start(&m, Self.a, Self.foregroundA)
        let waiting = m.advertisingAnswered(Self.foregroundB, .failure(error))
        #expect(waiting.contains(.advertisingRefused(Self.b, error)))
        let last = m.advertisingAnswered(Self.foregroundA, .failure(error))
        #expect(last == [.advertisingStarted(idA, error)])
        #expect(m.advertising.entries.isEmpty)
    }

    /// IOSRules.md 2.3–2.5, 2.13: out of the foreground, a `bluetooth-peripheral` app advertises its background form,
    /// and a foreground-only app leaves the air, its start waiting, until it is back.
    @Test func anAppOutOfTheForegroundAdvertisesItsBackgroundFormOrNothing() {
        var m = LinkTests.machine()
        let (id, _) = Self.start(&m, Self.a, Self.foregroundA, background: Self.backgroundA)
        let background = m.advertisingModesChanged([Self.a: .background])
        #expect(background == [.startAdvertising(Self.backgroundA)])
        let off = m.advertisingModesChanged([Self.a: .off])
        #expect(off == [.stopAdvertising])
        #expect(m.advertising.paused.map(\.session) == [Self.a])
        let back = m.advertisingModesChanged([Self.a: .foreground])
        #expect(back == [.startAdvertising(Self.foregroundA)])
        #expect(m.advertisingAnswered(Self.foregroundA, .success(())) == [.advertisingStarted(id, nil)])
    }

    @Test func aResetAnswersTheStartsWaitingAndEndsTheTurns() throws {
        var m = LinkTests.machine()
        let (idA, _) = Self.start(&m, Self.a, Self.foregroundA)
        let (idB, two) = Self.start(&m, Self.b, Self.foregroundB)
        let turn = try #require(Self.turn(after: two))
        let gone = HostError(.transportClosed, "gone")
        let reset = m.advertisingReset(gone)
        #expect(reset == [.advertisingStarted(idA, gone), .advertisingStarted(idB, gone)])
        #expect(m.timerFired(turn) == [])
        // A start after the reset has an id of its own.
        let (again, _) = Self.start(&m, Self.a, Self.foregroundA)
        #expect(again != idA && again != idB)
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

    /// Every sequence of six of twelve inputs (two apps starting and stopping, the first moving between the
    /// foreground, the background and off the air; the controller advertising as asked, refusing, or stopping for a
    /// central; the turn ending; a reset). After each step: every start is answered at most once, and one not
    /// answered is still in the table; the controller was last asked for an advertisement of the rotation, or to
    /// stop when there is none; the advertisement asked for is in the form its app's mode calls for; an app off the
    /// air is out of the rotation; a turn's timer runs exactly while two take turns.
    @Test func everySequenceAnswersEachStartOnceAndAdvertisesOnlyTheRotation() {
        enum Input: CaseIterable {
            case startA, startB, stopA, stopB, foregroundA, backgroundA, offA
            case advertises, refuses, central, turnEnds, reset
        }
        struct Node {
            var machine = LinkTests.machine()
            var modeA: AdvertisingMode = .foreground
            /// Starts made and not answered, by session.
            var waiting: [AdvertisingStartID: SessionID] = [:]
            var answered: Set<AdvertisingStartID> = []
            /// What the controller was last asked (nil: to stop, or nothing yet), and whether it is to answer.
            var asked: AdvertisingRequest?
            var unanswered = false
            var onAir = false
            /// The latest turn's timer started (an earlier one fires for nothing).
            var timer: SystemTimer?
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 6) { (n: inout Node, input: Input) in
            var failures: [String] = []
            var actions: [SystemAction] = []
            func start(_ s: SessionID) {
                let mode: AdvertisingMode = s == Self.a ? n.modeA : .foreground
                let (request, background) =
                    s == Self.a ? (Self.foregroundA, Self.backgroundA) : (Self.foregroundB, nil)
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
            case .startA: start(Self.a)
            case .startB: start(Self.b)
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
                guard let request = n.asked, n.unanswered else { return nil }
                n.unanswered = false
                n.onAir = input == .advertises
                // Refused: the controller advertises nothing until asked again.
                if input == .refuses { n.asked = nil }
                let result: Result<Void, HostError> =
                    input == .advertises ? .success(()) : .failure(HostError(.hci(.commandDisallowed), "refused"))
                actions = n.machine.advertisingAnswered(request, result)
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
                n.asked = nil
                n.unanswered = false
                n.onAir = false
            }
            for action in actions {
                switch action {
                case .startAdvertising(let request):
                    // A request overtakes the one before it, which the controller answers as cancelled (no change).
                    n.asked = request
                    n.unanswered = true
                    n.onAir = false
                case .stopAdvertising:
                    n.asked = nil
                    n.unanswered = false
                    n.onAir = false
                case .advertisingStarted(let id, _):
                    if n.waiting.removeValue(forKey: id) == nil { failures.append("start \(id) answered twice") }
                    n.answered.insert(id)
                case .advertisingRefused(let s, _):
                    if n.machine.advertising.entries.contains(where: { $0.session == s }) {
                        failures.append("\(s) told its advertising ended, but it is in the rotation")
                    }
                case .startTimer(let timer, after: AdvertisingTable.slot):
                    n.timer = timer
                default: failures.append("unexpected \(action)")
                }
            }
            let table = n.machine.advertising
            let pending = Set((table.entries + table.paused).compactMap(\.start))
            if pending != Set(n.waiting.keys) {
                failures.append(
                    "starts waiting: \(n.waiting.keys.sorted { $0.rawValue < $1.rawValue }), the table has \(pending)")
            }
            if let asked = n.asked {
                if !table.entries.contains(where: { $0.request == asked }) {
                    failures.append("the controller was asked for \(asked.data), which is not in the rotation")
                }
            } else if !table.entries.isEmpty {
                failures.append("the controller advertises nothing with \(table.entries.count) in the rotation")
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
                if !next.contains(where: { if case .startAdvertising = $0 { true } else { false } }) {
                    failures.append("\(table.entries.count) take turns, but no turn is coming")
                }
            }
            return failures
        }
        #expect(visited > 100_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
