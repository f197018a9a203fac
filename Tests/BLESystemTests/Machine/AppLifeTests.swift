import Testing

@testable import BLESystem

/// One app's life as the system runs it (`AppLife`): when it is suspended and woken, what is held for it and in
/// which order it comes, what an earlier launch or a stopped app hears (nothing), and the bound (IOSRules.md
/// 1.0, 3.1–3.4, 4.1). At the value's level: no scheduler, no queue; events are numbers.
@Suite struct AppLifeTests {
    typealias Life = AppLife<Int>

    static let rules = AppRules(suspendAfter: .seconds(5), wakeBudget: .seconds(10))
    static let a = DeliveryKey(Marker.a)
    static let b = DeliveryKey(Marker.b)

    /// Two objects whose identities make two delivery keys.
    final class Marker: Sendable {
        static let a = Marker()
        static let b = Marker()
    }

    static func sent(_ actions: [Life.Action]) -> [Int] {
        actions.flatMap { action -> [Int] in
            if case .send(let payloads) = action { return payloads }
            return []
        }
    }

    static func armed(_ actions: [Life.Action]) -> (after: Duration, token: UInt64)? {
        for case .armSuspension(let after, let token) in actions { return (after, token) }
        return nil
    }

    @Test func leavingTheForegroundSuspendsLaterAndHeldEventsComeBackInOrder() throws {
        var life = Life(rules: Self.rules, limit: 100)
        #expect(Self.sent(life.deliver(1).actions) == [1], "in the foreground: at once")
        let away = life.enterBackground(now: .seconds(7))
        let timer = try #require(Self.armed(away))
        #expect(timer.after == .seconds(5))
        #expect(life.lastForeground == .seconds(7))
        #expect(Self.sent(life.deliver(2).actions) == [2], "in the background: at once")
        #expect(life.suspensionFired(timer.token).contains { if case .report = $0 { true } else { false } })
        #expect(life.lifecycle == .suspended)
        // Suspended: held, a newer value of one characteristic replacing the older (the default queueing).
        let three = life.deliver(3, key: Self.a)
        #expect(three.delivered && three.actions.isEmpty)
        _ = life.deliver(4, key: Self.b)
        _ = life.deliver(5, key: Self.a)
        _ = life.deliver(6)
        #expect(life.heldCount == 3)
        #expect(Self.sent(life.enterForeground(launching: false)) == [4, 5, 6])
        #expect(life.heldCount == 0)
    }

    @Test func aSuspendedAppIsWokenOnlyForTheRoleOfItsMode() throws {
        var life = Life(rules: Self.rules, limit: 100)
        _ = life.setBackgroundModes([.bluetoothCentral])
        let timer = try #require(Self.armed(life.enterBackground(now: .zero)))
        _ = life.suspensionFired(timer.token)
        _ = life.deliver(1, wakes: nil)
        let peripheral = life.deliver(2, wakes: .peripheral)
        #expect(peripheral.actions.isEmpty && life.lifecycle == .suspended, "no bluetooth-peripheral: held")
        let central = life.deliver(3, wakes: .central)
        #expect(life.lifecycle == .background)
        #expect(Self.sent(central.actions) == [1, 2, 3], "what was held first, then the waking event")
        let budget = try #require(Self.armed(central.actions))
        #expect(budget.after == .seconds(10))
        // The old timer, had it fired late, changes nothing; the wake's does.
        #expect(life.suspensionFired(timer.token).isEmpty)
        _ = life.suspensionFired(budget.token)
        #expect(life.lifecycle == .suspended)
    }

    @Test func nothingReachesAnEarlierLaunchOrAStoppedApp() {
        var life = Life(rules: Self.rules, limit: 100)
        _ = life.enterForeground(launching: true)
        let first = life.generation
        _ = life.stop(now: .seconds(1))
        #expect(life.lifecycle == .notRunning)
        #expect(!life.deliver(1).delivered, "not running")
        _ = life.enterForeground(launching: true)
        #expect(life.generation != first)
        #expect(!life.deliver(2, generation: first).delivered, "a manager of the earlier launch")
        #expect(Self.sent(life.deliver(3, generation: life.generation).actions) == [3])
    }

    @Test func repeatingEventsBeyondTheBoundAreDroppedAndCounted() {
        var life = Life(rules: Self.rules, limit: 4)
        for n in 1...4 { _ = life.deliver(n, repeating: true) }
        let fifth = life.deliver(5, repeating: true)
        #expect(!fifth.delivered)
        #expect(fifth.actions.contains { if case .startedDropping = $0 { true } else { false } })
        #expect(life.deliver(6, repeating: true).actions.isEmpty, "said once per run of drops")
        #expect(Self.sent(life.deliver(7).actions) == [7], "an event that does not repeat always goes")
        #expect(life.dropped == 2)
        // Caught up once fewer than half the bound are outstanding.
        #expect(life.ran().isEmpty && life.ran().isEmpty && life.ran().isEmpty)
        let caught = life.ran()
        #expect(caught.contains { if case .caughtUp(dropped: 2) = $0 { true } else { false } }, "\(caught)")
    }

    // MARK: Every sequence

    enum Input: CaseIterable {
        case event, eventA, repeatingA, wakeCentral, wakePeripheral, stale
        case background, fire, staleFire, foreground, launch, launchInBackground, stop, ran
    }

    /// The reference the walk checks `AppLife` against: what was held, in order, and what is outstanding.
    struct Model {
        var life: Life
        var modes: Set<AppBackgroundMode>
        var queueing: AppRules.Queueing
        var held: [(id: Int, key: DeliveryKey?)] = []
        var outstanding = 0
        var next = 1
        var lastSent = 0
        var revision: UInt64 = 0
        var armed: UInt64?
        var stale: UInt64?

        mutating func step(_ input: Input) -> String? {
            let before = life.lifecycle
            var actions: [Life.Action] = []
            var expected: [Int]?
            func deliver(key: DeliveryKey?, repeating: Bool, wakes: AppWakeRole?, generation: UInt64?) -> String? {
                let id = next
                next += 1
                let result = life.deliver(id, generation: generation, repeating: repeating, wakes: wakes, key: key)
                actions = result.actions
                let current = generation == nil || generation == life.generation
                switch before {
                case _ where !current:
                    if result.delivered { return "an event of an earlier launch was delivered" }
                    expected = []
                case .notRunning:
                    if result.delivered { return "an event reached an app not running" }
                    expected = []
                case .suspended where wakes.map { modes.contains($0.mode) } == true:
                    if life.lifecycle != .background { return "not woken for its mode's role" }
                    expected = held.map(\.id) + [id]
                    held = []
                case .suspended:
                    if life.lifecycle != .suspended { return "woken for a role it has no mode for" }
                    if queueing == .latestValuePerCharacteristic, let key { held.removeAll { $0.key == key } }
                    if repeating && held.count >= life.limit {
                        if result.delivered { return "held beyond the bound" }
                    } else {
                        if !result.delivered { return "an event for a suspended app was lost" }
                        held.append((id, key))
                    }
                    expected = []
                case .foreground, .background:
                    if repeating && outstanding >= life.limit {
                        if result.delivered { return "sent beyond the bound" }
                        expected = []
                    } else {
                        expected = [id]
                    }
                }
                return nil
            }
            switch input {
            case .event:
                if let e = deliver(key: nil, repeating: false, wakes: nil, generation: life.generation) { return e }
            case .eventA:
                if let e = deliver(key: AppLifeTests.a, repeating: false, wakes: nil, generation: nil) { return e }
            case .repeatingA:
                if let e = deliver(key: AppLifeTests.a, repeating: true, wakes: nil, generation: nil) { return e }
            case .wakeCentral:
                if let e = deliver(key: AppLifeTests.b, repeating: false, wakes: .central, generation: nil) { return e }
            case .wakePeripheral:
                if let e = deliver(key: nil, repeating: false, wakes: .peripheral, generation: nil) { return e }
            case .stale:
                guard life.generation > 0 else { return nil }
                if let e = deliver(key: nil, repeating: false, wakes: .central, generation: life.generation - 1) {
                    return e
                }
            case .background:
                actions = life.enterBackground(now: .seconds(1))
                expected = []
            case .fire:
                guard let token = armed else { return nil }
                actions = life.suspensionFired(token)
                if before == .background, life.lifecycle != .suspended { return "the timer did not suspend" }
                expected = []
            case .staleFire:
                guard let token = stale else { return nil }
                actions = life.suspensionFired(token)
                if life.lifecycle != before { return "a stale timer changed the app" }
                expected = []
            case .foreground:
                actions = life.enterForeground(launching: false)
                expected = held.map(\.id)
                held = []
            case .launch:
                actions = life.enterForeground(launching: true)
                expected = held.map(\.id)
                held = []
            case .launchInBackground:
                actions = life.launchInBackground()
                expected = held.map(\.id)
                held = []
            case .stop:
                let (report, disarm) = life.stop(now: .seconds(2))
                if report.revision <= revision { return "a report's revision went back" }
                revision = report.revision
                if disarm {
                    stale = armed
                    armed = nil
                }
                held = []
                expected = []
                if life.heldCount != 0 { return "a stopped app kept what was held" }
            case .ran:
                guard outstanding > 0 else { return nil }
                actions = life.ran()
                outstanding -= 1
                expected = []
            }
            let sent = AppLifeTests.sent(actions)
            if let expected, sent != expected { return "sent \(sent), expected \(expected)" }
            for id in sent {
                if id <= lastSent { return "\(id) sent after \(lastSent): out of order" }
                lastSent = id
            }
            outstanding += sent.count
            for action in actions {
                switch action {
                case .report(let report):
                    if report.revision <= revision { return "a report's revision went back" }
                    revision = report.revision
                    if report.lifecycle != life.lifecycle { return "a report that is not where the app is" }
                case .armSuspension(_, let token):
                    if let armed { stale = armed }
                    armed = token
                case .disarmSuspension:
                    stale = armed
                    armed = nil
                case .send, .startedDropping, .caughtUp: break
                }
            }
            if life.lifecycle != .suspended && life.heldCount != 0 { return "held for an app that runs" }
            if life.heldCount != held.count { return "holds \(life.heldCount), expected \(held.count)" }
            return nil
        }
    }

    /// Every sequence of five inputs, from an app in the foreground, with either queueing and either mode: the
    /// value agrees with the reference on what is sent when and what is held, sends in the order events were
    /// made, wakes only for its mode's role, never sends an earlier launch's event, and reports with rising
    /// revisions.
    @Test(arguments: [AppRules.Queueing.latestValuePerCharacteristic, .everyEvent])
    func everySequenceOfFiveInputsKeepsTheRules(_ queueing: AppRules.Queueing) {
        var rules = Self.rules
        rules.queueing = queueing
        let depth = 5
        var failures: [String] = []
        var walked = 0
        for modes: Set<AppBackgroundMode> in [[], [.bluetoothCentral]] {
            var start = Model(life: Life(rules: rules, limit: 2), modes: modes, queueing: queueing)
            _ = start.life.setBackgroundModes(modes)
            start.revision = 1
            // Depth first, on a stack of its own (a recursion this deep overflows a test thread's stack in debug).
            var stack: [(model: Model, path: [Input])] = [(start, [])]
            while let (model, path) = stack.popLast(), failures.count < 5 {
                guard path.count < depth else {
                    walked += 1
                    continue
                }
                for input in Input.allCases {
                    var next = model
                    if let failure = next.step(input) {
                        failures.append("\(modes) \(path + [input]): \(failure)")
                        continue
                    }
                    stack.append((next, path + [input]))
                }
            }
        }
        #expect(failures.isEmpty, "\(failures)")
        let sequences = (0..<depth).reduce(1) { count, _ in count * Input.allCases.count }
        #expect(walked == 2 * sequences)
    }
}
