import BLETransport
import Dispatch
import Logging
import Synchronization

/// A Bluetooth background mode an app declares (its Info.plist's `UIBackgroundModes`).
public enum AppBackgroundMode: String, Sendable, Hashable, CaseIterable {
    /// `bluetooth-central`: the app is woken for its central managers' and peripherals' events.
    case bluetoothCentral = "bluetooth-central"
    /// `bluetooth-peripheral`: the app is woken for reads, writes and subscriptions of its published services.
    case bluetoothPeripheral = "bluetooth-peripheral"
}

/// Where an app is in its life (UIKit's application states, as the Bluetooth rules see them).
public enum AppLifecycleState: String, Sendable, Hashable {
    /// Not launched, or terminated: it has no managers and hears nothing.
    case notRunning
    /// On screen: every event is delivered at once.
    case foreground
    /// Running off screen: after leaving the foreground (until it is suspended), or woken for an event (for its
    /// wake budget).
    case background
    /// Not running code: events are queued, or wake it when its background modes say so.
    case suspended
}

/// Why an app stopped running.
public enum AppTermination: String, Sendable, Hashable {
    /// The system ended it (memory pressure): state restoration relaunches it.
    case bySystem
    /// The user swiped it away: nothing relaunches it.
    case byUser
    /// It crashed: state restoration relaunches it.
    case crash
}

/// Which background mode an event wakes a suspended app for.
public enum AppWakeRole: Sendable, Hashable {
    /// An event of a central manager or a peripheral (`bluetooth-central`).
    case central
    /// A read, write or subscription request to a published service (`bluetooth-peripheral`).
    case peripheral

    var mode: AppBackgroundMode {
        switch self {
        case .central: .bluetoothCentral
        case .peripheral: .bluetoothPeripheral
        }
    }
}

/// What a held event replaces while its app is suspended: the same object's same attribute (a characteristic's
/// value), or the same object's discovery (attribute 0).
public struct DeliveryKey: Sendable, Hashable {
    public var object: ObjectIdentifier
    public var attribute: UInt16
    public init(_ object: AnyObject, attribute: UInt16 = 0) {
        self.object = ObjectIdentifier(object)
        self.attribute = attribute
    }
}

/// The timing of the rules for apps out of the foreground (IOSRules.md sections 3 and 4), settings of a system.
public struct AppRules: Sendable, Hashable {
    /// How events are kept for a suspended app that they do not wake (IOSRules.md 3.4: not documented).
    public enum Queueing: Sendable, Hashable {
        /// Every event, in order.
        case everyEvent
        /// Every event in order, except that a newer value of one characteristic (or a newer discovery of one
        /// device) replaces the older one, which is dropped: the default.
        case latestValuePerCharacteristic
    }

    /// How long an app that left the foreground runs before it is suspended (IOSRules.md 3.1: "shortly after";
    /// the figure is not published).
    public var suspendAfter: Duration
    /// How long an app woken for a Bluetooth event runs before it is suspended again (IOSRules.md 4.1: "around
    /// 10 seconds").
    public var wakeBudget: Duration
    public var queueing: Queueing
    /// The controller's scan interval and window while every scanning app is out of the foreground (IOSRules.md
    /// 1.2 and 1.3: longer, by figures not published). In the foreground: 60 ms and 30 ms.
    public var backgroundScanInterval: Duration
    public var backgroundScanWindow: Duration
    /// The advertising interval of a `bluetooth-peripheral` app out of the foreground (IOSRules.md 2.5 and 2.10:
    /// less often, about 200 ms once measured). In the foreground: 100 ms.
    public var backgroundAdvertisingInterval: Duration

    public init(
        suspendAfter: Duration = .seconds(5), wakeBudget: Duration = .seconds(10),
        queueing: Queueing = .latestValuePerCharacteristic, backgroundScanInterval: Duration = .milliseconds(300),
        backgroundScanWindow: Duration = .milliseconds(30), backgroundAdvertisingInterval: Duration = .milliseconds(200)
    ) {
        self.suspendAfter = suspendAfter
        self.wakeBudget = wakeBudget
        self.queueing = queueing
        self.backgroundScanInterval = backgroundScanInterval
        self.backgroundScanWindow = backgroundScanWindow
        self.backgroundAdvertisingInterval = backgroundAdvertisingInterval
    }
}

/// One app of a system: what its managers belong to, its background modes and lifecycle, and the delivery of
/// its events by the rules for apps out of the foreground. The same id on one system is the same app.
///
/// The rules below are `AppLife`'s (Machine/AppLife.swift), a value this class steps under its lock; the class
/// performs what the value returns: the suspension timer on the system's scheduler, events dispatched to the
/// managers' queues, reports to the system machine, log lines.
///
/// **Lifecycle.** An app is made `.foreground` (a process that is running). `launch` runs its launch handler
/// (the first time, and after a termination) and brings it to the foreground; `moveToBackground` leaves it
/// running for `rules.suspendAfter`, then suspends it; `terminate` ends it: its managers are let go of by the
/// system (their scans, links, services and advertising end) and nothing reaches them again, even a manager
/// something else still holds. Each launch is a new generation; a manager belongs to the generation it was made
/// in.
///
/// **Delivery.** Every event for the app's managers passes through `deliver`, in the order the system made
/// them, to the manager's queue.
/// - Foreground or background: at once.
/// - Suspended: an event of a role the app has a background mode for wakes it (`.background` for
///   `rules.wakeBudget`, then suspended again), after the events queued so far; any other event is queued, as
///   `rules.queueing` says, until the app wakes, comes to the foreground or is launched in the background
///   (IOSRules.md 1.0, 3.3, 3.4, 4.1).
/// - Not running, or a manager of an earlier launch: dropped.
///
/// The app has a bound: at most `deliveryLimit` events dispatched and not yet run (an app whose queue is stuck,
/// or slower than the radio), or queued while suspended. Beyond it, events that repeat (notifications, and
/// discoveries of a scan that allows duplicates) are dropped: counted in `droppedEvents`, and logged once when
/// dropping starts and once, with the count, when the app has caught up. Every other event (connections,
/// operation results, state, requests from centrals to the app's services) always goes through. In a
/// simulation the radio waits for every dispatched event before time moves on, so the dispatch bound is reached
/// only against a real-time scheduler.
public final class SystemApp: Sendable, Hashable, CustomStringConvertible {
    public let id: String
    private let scheduler: any HostScheduler
    public let rules: AppRules

    public static let deliveryLimit = 4_096

    /// One event for the app: the work, and the queue it runs on.
    private struct Event: Sendable {
        var queue: DispatchQueue
        var work: @Sendable () -> Void
    }

    /// The app's life (`AppLife`, Machine/AppLife.swift) and the suspension timer armed for it, with its token.
    private struct State {
        var life: AppLife<Event>
        var suspension: (token: UInt64, work: any ScheduledWork)?
    }
    private let state: Mutex<State>
    private static let logger = Logger(label: "swift-ble.delivery")
    /// Told after every change of the lifecycle or the background modes (the system machine's rules follow the
    /// app), with where the app is then.
    private let observer = Mutex<(@Sendable (AppTable.App) -> Void)?>(nil)

    /// Sets who hears of the app's changes (the system).
    func observeLifecycle(_ handler: @escaping @Sendable (AppTable.App) -> Void) {
        observer.withLock { $0 = handler }
    }

    init(id: String, scheduler: any HostScheduler, rules: AppRules = AppRules()) {
        self.id = id
        self.scheduler = scheduler
        self.rules = rules
        self.state = Mutex(State(life: AppLife(rules: rules, limit: Self.deliveryLimit)))
    }

    // MARK: Lifecycle

    public var backgroundModes: Set<AppBackgroundMode> { state.withLock { $0.life.backgroundModes } }

    /// Declares the app's background modes (its Info.plist: set once, before it runs in the background).
    public func setBackgroundModes(_ modes: Set<AppBackgroundMode>) {
        step { $0.life.setBackgroundModes(modes) }
    }

    public var lifecycle: AppLifecycleState { state.withLock { $0.life.lifecycle } }

    /// The current launch: a manager made now belongs to it.
    public var generation: UInt64 { state.withLock { $0.life.generation } }

    /// When the app was last in the foreground, in the system's time (now, if it is).
    public var lastForeground: Duration { state.withLock { $0.life.lastForeground(now: scheduler.now) } }

    /// Whether a launch must run the launch handler (never launched, or terminated since).
    public var needsLaunch: Bool { state.withLock { $0.life.needsLaunch } }

    /// The app runs in the foreground: launched (a new generation when it was not running), or brought back.
    /// Events held while it was suspended are delivered first, in order.
    public func enterForeground(launching: Bool) {
        step { $0.life.enterForeground(launching: launching) }
    }

    /// The app is launched into the background by the system (a relaunch for Bluetooth): a new generation,
    /// running for its wake budget.
    public func launchInBackground() {
        step { $0.life.launchInBackground() }
    }

    /// The app leaves the foreground: it runs on for `rules.suspendAfter`, then it is suspended.
    public func enterBackground() {
        let now = scheduler.now
        step { $0.life.enterBackground(now: now) }
    }

    /// An app the system knows before it has run (a phone restarted with work preserved for it): not running
    /// until it is launched. Does nothing once the app has been launched.
    public func startNotRunning() {
        step { $0.life.startNotRunning() }
    }

    /// The app stops running: what was held for it is dropped, and so is everything its managers would hear.
    public func terminate() {
        let report = stop()
        observer.withLock { $0 }?(report)
    }

    /// Stops the app as `terminate` does, and returns its report rather than telling the observer: the system
    /// steps it with the end of the app's managers (`SystemCore.terminate`), so that the managers it ends are
    /// not first moved to the modes of an app not running.
    func stop() -> AppTable.App {
        let now = scheduler.now
        return state.withLock { s in
            let (report, disarm) = s.life.stop(now: now)
            if disarm {
                s.suspension?.work.cancel()
                s.suspension = nil
            }
            return report
        }
    }

    // MARK: Delivery

    /// Events dropped so far because the app was more than `deliveryLimit` events behind.
    public var droppedEvents: Int { state.withLock { $0.life.dropped } }

    /// Events held for the app while it is suspended.
    public var heldEvents: Int { state.withLock { $0.life.heldCount } }

    /// Runs `work` on `queue` as one event of this app's launch `generation`, by the rules above.
    ///
    /// - Parameters:
    ///   - queue: the queue of the manager the event is for.
    ///   - generation: the launch the event belongs to; an event of an earlier launch is dropped (nil: any).
    ///   - repeating: a notification or a duplicate discovery, dropped when the app is `deliveryLimit` events
    ///     behind.
    ///   - wakes: the role whose background mode lets the event wake the app from suspension (nil: it never
    ///     wakes it, like `peripheralIsReady(toSendWriteWithoutResponse:)`).
    ///   - key: events with one key replace each other while held (a characteristic's value, a device's
    ///     discovery), when `rules.queueing` says so.
    ///   - work: the event itself: the delegate call, run on `queue`.
    /// - Returns: whether the event was dispatched or held (false: dropped).
    @discardableResult
    public func deliver(
        on queue: DispatchQueue, generation: UInt64? = nil, repeating: Bool = false, wakes: AppWakeRole? = nil,
        key: DeliveryKey? = nil, _ work: @escaping @Sendable () -> Void
    ) -> Bool {
        // The usual outcomes in one lock section with no list made; a wake through `perform`.
        let event = Event(queue: queue, work: work)
        let (delivered, after) = state.withLock { s -> (Bool, [AppLife<Event>.Action]) in
            let delivery = s.life.deliver(event, generation: generation, repeating: repeating, wakes: wakes, key: key)
            switch delivery {
            case .send(let event):
                dispatch(event)
                return (true, [])
            case .held, .dropped(startedDropping: false): return (delivery.delivered, [])
            case .dropped(startedDropping: true): return (false, [.startedDropping])
            case .woke(let actions): return (true, perform(actions, &s))
            }
        }
        if !after.isEmpty { tell(after) }
        return delivered
    }

    /// Steps the app's life and performs what it returns: events dispatched and timers armed in the lock section
    /// that decided them, so that events reach the app's queues in the order the system made them, whichever
    /// threads deliver them and bring the app back (the scheduler's dispatch and schedule only enqueue, taking
    /// no lock of ours); reports and log lines after it.
    private func step(_ body: (inout State) -> [AppLife<Event>.Action]) {
        let after = state.withLock { s in perform(body(&s), &s) }
        if !after.isEmpty { tell(after) }
    }

    /// Performs the actions of a step inside its lock section (timers and dispatch); returns the rest.
    private func perform(_ actions: [AppLife<Event>.Action], _ s: inout State) -> [AppLife<Event>.Action] {
        var after: [AppLife<Event>.Action] = []
        for action in actions {
            switch action {
            case .send(let events): for event in events { dispatch(event) }
            case .armSuspension(let delay, let token):
                s.suspension?.work.cancel()
                let work = scheduler.schedule(after: delay) { [weak self] in self?.suspensionFired(token) }
                s.suspension = (token, work)
            case .disarmSuspension:
                s.suspension?.work.cancel()
                s.suspension = nil
            case .report, .startedDropping, .caughtUp: after.append(action)
            }
        }
        return after
    }

    /// The suspension timer armed with `token` fired (a spent timer is let go of, so none is cancelled later).
    private func suspensionFired(_ token: UInt64) {
        step { s in
            if s.suspension?.token == token { s.suspension = nil }
            return s.life.suspensionFired(token)
        }
    }

    /// Reports and log lines, after the lock section.
    private func tell(_ after: [AppLife<Event>.Action]) {
        for action in after {
            switch action {
            case .report(let report): observer.withLock { $0 }?(report)
            case .startedDropping:
                Self.logger.warning(
                    "an app is \(Self.deliveryLimit) events behind: its notifications and repeated discoveries are dropped until it catches up",
                    metadata: ["app": "\(id)"])
            case .caughtUp(let dropped):
                Self.logger.warning(
                    "an app caught up after \(dropped) notifications and repeated discoveries were dropped",
                    metadata: ["app": "\(id)"])
            case .send, .armSuspension, .disarmSuspension: break
            }
        }
    }

    /// Dispatches one event; it steps `ran()` once it has run, on its queue.
    private func dispatch(_ event: Event) {
        scheduler.dispatch(on: event.queue) { [self] in
            event.work()
            step { $0.life.ran() }
        }
    }

    public static func == (a: SystemApp, b: SystemApp) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String { "<app \(id)>" }
}
