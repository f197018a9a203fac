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
        case background, fire, staleFire, foreground, launch, launchInBackground, stop, startNotRunning, ran
    }

    /// The reference the walk checks `AppLife` against, written from the rules rather than from the code: where
    /// the app is and in which launch, what is held and in which order, what is outstanding, which timer is
    /// armed and for how long, and when a report is due.
    struct Model {
        var life: Life
        var modes: Set<AppBackgroundMode>
        var rules: AppRules
        var lifecycle = AppLifecycleState.foreground
        var generation: UInt64 = 0
        var launched = false
        /// A generation that ended (a manager of it may still deliver).
        var earlier: UInt64?
        var held: [(id: Int, key: DeliveryKey?)] = []
        var outstanding = 0
        var next = 1
        var lastSent = 0
        var revision: UInt64 = 0
        var armed: UInt64?
        var stale: UInt64?

        mutating func newGeneration() {
            earlier = generation
            generation += 1
        }

        /// What a step must do besides sending: arm the timer for this long, disarm it, report.
        struct Expected {
            var sent: [Int] = []
            var arm: Duration?
            var report = false
            /// For an event: whether it is sent or held.
            var delivered = false
        }

        mutating func deliver(
            key: DeliveryKey?, repeating: Bool, wakes: AppWakeRole?, generation tag: UInt64?
        ) -> (Expected, Life.Delivery) {
            let id = next
            next += 1
            let delivery = life.deliver(id, generation: tag, repeating: repeating, wakes: wakes, key: key)
            var expected = Expected()
            if let tag, tag != generation { return (expected, delivery) }
            switch lifecycle {
            case .notRunning: break
            case .suspended where wakes.map { modes.contains($0.mode) } == true:
                lifecycle = .background
                expected = Expected(sent: held.map(\.id) + [id], arm: rules.wakeBudget, report: true, delivered: true)
                held = []
            case .suspended:
                if rules.queueing == .latestValuePerCharacteristic, let key { held.removeAll { $0.key == key } }
                if !(repeating && held.count >= life.limit) {
                    held.append((id, key))
                    expected.delivered = true
                }
            case .foreground, .background:
                if !(repeating && outstanding >= life.limit) {
                    expected.sent = [id]
                    expected.delivered = true
                }
            }
            return (expected, delivery)
        }

        mutating func step(_ input: Input) -> String? {
            var actions: [Life.Action] = []
            var expected = Expected()
            switch input {
            case .event, .eventA, .repeatingA, .wakeCentral, .wakePeripheral, .stale:
                let (e, delivery): (Expected, Life.Delivery)
                switch input {
                case .event: (e, delivery) = deliver(key: nil, repeating: false, wakes: nil, generation: generation)
                case .eventA:
                    (e, delivery) = deliver(key: AppLifeTests.a, repeating: false, wakes: nil, generation: nil)
                case .repeatingA:
                    (e, delivery) = deliver(key: AppLifeTests.a, repeating: true, wakes: nil, generation: nil)
                case .wakeCentral:
                    (e, delivery) = deliver(key: AppLifeTests.b, repeating: false, wakes: .central, generation: nil)
                case .wakePeripheral:
                    (e, delivery) = deliver(key: nil, repeating: false, wakes: .peripheral, generation: nil)
                default:
                    guard let earlier else { return nil }
                    (e, delivery) = deliver(key: nil, repeating: false, wakes: .central, generation: earlier)
                }
                expected = e
                actions = delivery.actions.filter { if case .startedDropping = $0 { false } else { true } }
                if delivery.delivered != e.delivered {
                    return "delivered \(delivery.delivered), expected \(e.delivered)"
                }
            case .background:
                actions = life.enterBackground(now: .seconds(1))
                if lifecycle == .foreground {
                    lifecycle = .background
                    expected = Expected(arm: rules.suspendAfter, report: true)
                }
            case .fire:
                guard let token = armed else { return nil }
                actions = life.suspensionFired(token)
                armed = nil
                if lifecycle == .background {
                    lifecycle = .suspended
                    expected.report = true
                }
            case .staleFire:
                guard let token = stale else { return nil }
                actions = life.suspensionFired(token)
            case .foreground, .launch:
                actions = life.enterForeground(launching: input == .launch)
                if input == .launch {
                    if lifecycle == .notRunning { newGeneration() }
                    launched = true
                }
                lifecycle = .foreground
                expected = Expected(sent: held.map(\.id), report: true)
                held = []
                if armed != nil {
                    stale = armed
                    armed = nil
                }
            case .launchInBackground:
                actions = life.launchInBackground()
                if lifecycle == .notRunning { newGeneration() }
                launched = true
                lifecycle = .background
                expected = Expected(sent: held.map(\.id), arm: rules.wakeBudget, report: true)
                held = []
            case .stop:
                let (report, disarm) = life.stop(now: .seconds(2))
                if report.revision <= revision { return "a report's revision went back" }
                revision = report.revision
                if disarm != (armed != nil) { return "stop disarmed \(disarm) with \(String(describing: armed)) armed" }
                if armed != nil {
                    stale = armed
                    armed = nil
                }
                lifecycle = .notRunning
                newGeneration()
                held = []
            case .startNotRunning:
                actions = life.startNotRunning()
                if !launched && lifecycle == .foreground {
                    lifecycle = .notRunning
                    expected.report = true
                }
            case .ran:
                guard outstanding > 0 else { return nil }
                actions = life.ran().filter { if case .caughtUp = $0 { false } else { true } }
                outstanding -= 1
            }
            let sent = AppLifeTests.sent(actions)
            if sent != expected.sent { return "sent \(sent), expected \(expected.sent)" }
            for id in sent {
                if id <= lastSent { return "\(id) sent after \(lastSent): out of order" }
                lastSent = id
            }
            outstanding += sent.count
            var reports = 0
            var arms: [Duration] = []
            for action in actions {
                switch action {
                case .report(let report):
                    reports += 1
                    if report.revision <= revision { return "a report's revision went back" }
                    revision = report.revision
                    if report.lifecycle != lifecycle { return "reported \(report.lifecycle), expected \(lifecycle)" }
                case .armSuspension(let after, let token):
                    arms.append(after)
                    if let armed { stale = armed }
                    armed = token
                case .disarmSuspension: break
                case .send, .startedDropping, .caughtUp: break
                }
            }
            if reports != (expected.report ? 1 : 0) { return "\(reports) reports, expected \(expected.report ? 1 : 0)" }
            if arms != (expected.arm.map { [$0] } ?? []) {
                return "armed \(arms), expected \(String(describing: expected.arm))"
            }
            if life.lifecycle != lifecycle { return "is \(life.lifecycle), expected \(lifecycle)" }
            if life.generation != generation { return "in launch \(life.generation), expected \(generation)" }
            if life.heldCount != held.count { return "holds \(life.heldCount), expected \(held.count)" }
            return nil
        }
    }

    /// Every sequence of five inputs, from an app in the foreground, with either queueing and either mode: the
    /// value agrees with the reference on what is sent when and what is held, where the app is and in which
    /// launch, the timer and its length, and each report; it sends in the order events were made, wakes only for
    /// its mode's role, never sends an earlier launch's event, and reports with rising revisions.
    @Test(arguments: [AppRules.Queueing.latestValuePerCharacteristic, .everyEvent])
    func everySequenceOfFiveInputsKeepsTheRules(_ queueing: AppRules.Queueing) {
        var rules = Self.rules
        rules.queueing = queueing
        let depth = 5
        var failures: [String] = []
        var walked = 0
        for modes: Set<AppBackgroundMode> in [[], [.bluetoothCentral]] {
            var start = Model(life: Life(rules: rules, limit: 2), modes: modes, rules: rules)
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
