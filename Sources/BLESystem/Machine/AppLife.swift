/// One app's life as the system runs it (IOSRules.md 1.0, 3.1–3.4, 4.1): where it is (foreground, background,
/// suspended, not running), which launch it is in, the suspension to come, what is held for it while it is
/// suspended, and the bound on what it has been sent and not yet run.
///
/// A value: its `SystemApp` steps it under its lock and performs the actions it returns (timers on the
/// system's scheduler, events dispatched to the managers' queues, reports to the system machine, log lines).
/// `Payload` is what an event carries to the app (the delivery's work and queue; a number in tests); the value
/// never looks inside it.
///
/// - Foreground or background: an event is sent at once.
/// - Suspended: an event of a role the app has a background mode for wakes it (`.background` for
///   `rules.wakeBudget`), after what was held; any other event is held (a newer one with the same key replaces the
///   older under `.latestValuePerCharacteristic`) until the app wakes, comes to the foreground or is launched in
///   the background.
/// - Not running, or an event of an earlier launch: dropped.
/// - At most `limit` events held, or sent and not yet run: beyond it a repeating event (a notification, a
///   duplicate discovery) is dropped and counted; every other event goes through.
package struct AppLife<Payload> {
    /// What `SystemApp` does for a step, in order.
    package enum Action {
        /// Send these events to the app, in order; each counts as outstanding until `ran()`.
        case send([Payload])
        /// Arm the suspension timer (replacing any armed one); when it fires, step `suspensionFired(token)`.
        case armSuspension(after: Duration, token: UInt64)
        /// Disarm the suspension timer.
        case disarmSuspension
        /// The app moved in its lifecycle or declared its modes: the system machine's rules follow it.
        case report(AppTable.App)
        /// Repeating events started to be dropped (said once per run of drops).
        case startedDropping
        /// The app caught up after this many repeating events were dropped.
        case caughtUp(dropped: Int)
    }

    /// What became of one event (`deliver`). The usual outcomes carry no list, so that an event of the
    /// notification path makes no array here.
    package enum Delivery {
        /// Send it at once (it counts as outstanding until `ran()`).
        case send(Payload)
        /// Held for the suspended app.
        case held
        /// Not delivered: an earlier launch's, an app not running, or a repeating event past the bound
        /// (`startedDropping`: this one began a run of drops).
        case dropped(startedDropping: Bool)
        /// It woke the suspended app: the timer, what was held and this one, the report.
        case woke([Action])

        /// Whether it was sent or held.
        package var delivered: Bool {
            switch self {
            case .send, .held, .woke: true
            case .dropped: false
            }
        }

        /// The outcome as actions.
        package var actions: [Action] {
            switch self {
            case .send(let payload): [.send([payload])]
            case .held, .dropped(startedDropping: false): []
            case .dropped(startedDropping: true): [.startedDropping]
            case .woke(let actions): actions
            }
        }
    }

    /// One event held for a suspended app.
    struct Held {
        var payload: Payload
        var key: DeliveryKey?
    }

    package let rules: AppRules
    /// The bound on held events, and on events sent and not yet run.
    package let limit: Int

    package private(set) var backgroundModes: Set<AppBackgroundMode> = []
    package private(set) var lifecycle = AppLifecycleState.foreground
    /// Counts launches: managers of an earlier one hear nothing.
    package private(set) var generation: UInt64 = 0
    package private(set) var launched = false
    /// When the app last left the foreground (for the alerts of IOSRules.md 3.6).
    package private(set) var lastForeground: Duration = .zero
    /// The armed suspension's token (nil: none armed); a timer that fires with another token is stale.
    private var suspension: UInt64?
    private var tokens: UInt64 = 0
    private var held: [Held] = []
    /// How many reports the app made: each report's revision, so that of two racing the later counts.
    private var reports: UInt64 = 0
    private var outstanding = 0
    package private(set) var dropped = 0
    /// Drops since dropping last started (for the line when the app catches up).
    private var droppedInRun = 0

    package init(rules: AppRules, limit: Int) {
        self.rules = rules
        self.limit = limit
    }

    /// Events held while suspended.
    package var heldCount: Int { held.count }

    /// Whether a launch must run the launch handler (never launched, or terminated since).
    package var needsLaunch: Bool { !launched || lifecycle == .notRunning }

    /// When the app was last in the foreground, given the time now (now, if it is).
    package func lastForeground(now: Duration) -> Duration { lifecycle == .foreground ? now : lastForeground }

    // MARK: Lifecycle

    /// Declares the app's background modes.
    package mutating func setBackgroundModes(_ modes: Set<AppBackgroundMode>) -> [Action] {
        backgroundModes = modes
        return [report()]
    }

    /// The app runs in the foreground: launched (a new generation when it was not running), or brought back.
    /// What was held is sent first, in order.
    package mutating func enterForeground(launching: Bool) -> [Action] {
        if launching {
            if lifecycle == .notRunning { generation += 1 }
            launched = true
        }
        lifecycle = .foreground
        var actions: [Action] = []
        if suspension != nil {
            suspension = nil
            actions.append(.disarmSuspension)
        }
        actions += send(takeHeld())
        actions.append(report())
        return actions
    }

    /// The system launches the app into the background (a relaunch for Bluetooth, IOSRules.md 5.15): a new
    /// generation when it was not running, running for its wake budget; what was held for a suspended one is
    /// sent first, as for a wake.
    package mutating func launchInBackground() -> [Action] {
        if lifecycle == .notRunning { generation += 1 }
        launched = true
        lifecycle = .background
        let armed = arm(after: rules.wakeBudget)
        return [armed] + send(takeHeld()) + [report()]
    }

    /// The app leaves the foreground at `now`: it runs on for `rules.suspendAfter`, then it is suspended.
    package mutating func enterBackground(now: Duration) -> [Action] {
        guard lifecycle == .foreground else { return [] }
        lifecycle = .background
        lastForeground = now
        return [arm(after: rules.suspendAfter), report()]
    }

    /// An app the system knows before it has run (a phone restarted with work preserved for it): not running
    /// until it is launched. Nothing once the app has been launched.
    package mutating func startNotRunning() -> [Action] {
        guard !launched, lifecycle == .foreground else { return [] }
        lifecycle = .notRunning
        return [report()]
    }

    /// The app stops running at `now`: what was held is dropped, and so is everything of its launch. Returns
    /// its report apart (the system steps it with the end of the app's managers) and the timer to disarm.
    package mutating func stop(now: Duration) -> (report: AppTable.App, disarm: Bool) {
        if lifecycle == .foreground { lastForeground = now }
        lifecycle = .notRunning
        let disarm = suspension != nil
        suspension = nil
        held = []
        generation += 1
        return (nextReport(), disarm)
    }

    /// The suspension timer armed with `token` fired: a running app in the background is suspended.
    package mutating func suspensionFired(_ token: UInt64) -> [Action] {
        guard suspension == token else { return [] }
        suspension = nil
        guard lifecycle == .background else { return [] }
        lifecycle = .suspended
        return [report()]
    }

    // MARK: Delivery

    /// One event for the app's launch `generation` (nil: any): sent, held or dropped by the rules above.
    package mutating func deliver(
        _ payload: Payload, generation: UInt64? = nil, repeating: Bool = false, wakes: AppWakeRole? = nil,
        key: DeliveryKey? = nil
    ) -> Delivery {
        if let generation, generation != self.generation { return .dropped(startedDropping: false) }
        switch lifecycle {
        case .notRunning:
            return .dropped(startedDropping: false)
        case .suspended:
            if let wakes, backgroundModes.contains(wakes.mode) {
                lifecycle = .background
                let armed = arm(after: rules.wakeBudget)
                return .woke([armed] + send(takeHeld() + [payload]) + [report()])
            }
            if let key, rules.queueing == .latestValuePerCharacteristic {
                held.removeAll { $0.key == key }
            }
        case .foreground, .background:
            break
        }
        // The bound: what is held for a suspended app, what is sent and not yet run for one that runs.
        let holding = lifecycle == .suspended
        if repeating && (holding ? held.count : outstanding) >= limit {
            dropped += 1
            droppedInRun += 1
            return .dropped(startedDropping: droppedInRun == 1)
        }
        if holding {
            held.append(Held(payload: payload, key: key))
            return .held
        }
        outstanding += 1
        return .send(payload)
    }

    /// An event sent to the app has run.
    package mutating func ran() -> [Action] {
        outstanding -= 1
        guard droppedInRun > 0, outstanding < limit / 2 else { return [] }
        defer { droppedInRun = 0 }
        return [.caughtUp(dropped: droppedInRun)]
    }

    // MARK: Parts

    private mutating func send(_ payloads: [Payload]) -> [Action] {
        guard !payloads.isEmpty else { return [] }
        outstanding += payloads.count
        return [.send(payloads)]
    }

    private mutating func takeHeld() -> [Payload] {
        defer { held = [] }
        return held.map(\.payload)
    }

    private mutating func arm(after delay: Duration) -> Action {
        tokens += 1
        suspension = tokens
        return .armSuspension(after: delay, token: tokens)
    }

    /// Where the app is now, under the next revision.
    private mutating func nextReport() -> AppTable.App {
        reports += 1
        return AppTable.App(
            lifecycle: lifecycle, modes: backgroundModes, lastForeground: lastForeground, revision: reports)
    }

    private mutating func report() -> Action { .report(nextReport()) }
}
