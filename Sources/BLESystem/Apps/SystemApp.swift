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
///   `rules.queueing` says, until the app wakes or comes to the foreground (IOSRules.md 1.0, 3.3, 3.4, 4.1).
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

    /// One event for the app, with how it may be kept while the app is suspended.
    private struct Event: Sendable {
        var queue: DispatchQueue
        var key: DeliveryKey?
        var work: @Sendable () -> Void
    }

    private struct State {
        var backgroundModes: Set<AppBackgroundMode> = []
        var lifecycle = AppLifecycleState.foreground
        /// Counts launches: managers of an earlier one hear nothing.
        var generation: UInt64 = 0
        var launched = false
        /// The suspension to come (leaving the foreground, or the end of a wake).
        var suspension: (any ScheduledWork)?
        /// Events held while suspended.
        var held: [Event] = []
        /// When the app was last in the foreground (for the alerts of IOSRules.md 3.6).
        var lastForeground: Duration = .zero

        /// How many reports the app made (`lifecycleChanged`): each report's revision.
        var reports: UInt64 = 0

        var outstanding = 0
        var dropped = 0
        /// Drops since dropping last started (for the log line when the app catches up).
        var droppedInRun = 0
    }
    private let state = Mutex(State())
    private static let logger = Logger(label: "swift-ble.delivery")
    /// Told after every change of the lifecycle or the background modes (the system machine's rules follow the
    /// app), with where the app is then.
    private let observer = Mutex<(@Sendable (AppTable.App) -> Void)?>(nil)

    /// Sets who hears of the app's changes (the system).
    func observeLifecycle(_ handler: @escaping @Sendable (AppTable.App) -> Void) {
        observer.withLock { $0 = handler }
    }

    /// Reports where the app is now, under a revision taken with it (so that of two reports racing, the later
    /// one counts).
    private func lifecycleChanged() {
        let report = state.withLock { s -> AppTable.App in
            s.reports += 1
            return AppTable.App(
                lifecycle: s.lifecycle, modes: s.backgroundModes, lastForeground: s.lastForeground,
                revision: s.reports)
        }
        observer.withLock { $0 }?(report)
    }

    init(id: String, scheduler: any HostScheduler, rules: AppRules = AppRules()) {
        self.id = id
        self.scheduler = scheduler
        self.rules = rules
    }

    // MARK: Lifecycle

    public var backgroundModes: Set<AppBackgroundMode> { state.withLock { $0.backgroundModes } }

    /// Declares the app's background modes (its Info.plist: set once, before it runs in the background).
    public func setBackgroundModes(_ modes: Set<AppBackgroundMode>) {
        state.withLock { $0.backgroundModes = modes }
        lifecycleChanged()
    }

    public var lifecycle: AppLifecycleState { state.withLock { $0.lifecycle } }

    /// The current launch: a manager made now belongs to it.
    public var generation: UInt64 { state.withLock { $0.generation } }

    /// When the app was last in the foreground, in the system's time (now, if it is).
    public var lastForeground: Duration {
        state.withLock { $0.lifecycle == .foreground ? scheduler.now : $0.lastForeground }
    }

    /// Whether a launch must run the launch handler (never launched, or terminated since).
    public var needsLaunch: Bool { state.withLock { !$0.launched || $0.lifecycle == .notRunning } }

    /// The app runs in the foreground: launched (a new generation when it was not running), or brought back.
    /// Events held while it was suspended are delivered first, in order.
    public func enterForeground(launching: Bool) {
        state.withLock { s in
            if launching {
                if s.lifecycle == .notRunning { s.generation += 1 }
                s.launched = true
            }
            s.lifecycle = .foreground
            s.suspension?.cancel()
            s.suspension = nil
            // In the same lock section: an event delivered on another thread now comes after these.
            dispatch(take(&s), &s)
        }
        lifecycleChanged()
    }

    /// The app is launched into the background by the system (a relaunch for Bluetooth, IOSRules.md 5.15): a new
    /// generation, running for its wake budget.
    public func launchInBackground() {
        state.withLock { s in
            if s.lifecycle == .notRunning { s.generation += 1 }
            s.launched = true
            s.lifecycle = .background
            scheduleSuspension(&s, after: rules.wakeBudget)
        }
        lifecycleChanged()
    }

    /// The app leaves the foreground: it runs on for `rules.suspendAfter`, then it is suspended.
    public func enterBackground() {
        let changed = state.withLock { s -> Bool in
            guard s.lifecycle == .foreground else { return false }
            s.lifecycle = .background
            s.lastForeground = scheduler.now
            scheduleSuspension(&s, after: rules.suspendAfter)
            return true
        }
        if changed { lifecycleChanged() }
    }

    /// An app the system knows before it has run (a phone restarted with work preserved for it): not running
    /// until it is launched. Does nothing once the app has been launched.
    public func startNotRunning() {
        let changed = state.withLock { s -> Bool in
            guard !s.launched, s.lifecycle == .foreground else { return false }
            s.lifecycle = .notRunning
            return true
        }
        if changed { lifecycleChanged() }
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
        state.withLock { s in
            if s.lifecycle == .foreground { s.lastForeground = scheduler.now }
            s.lifecycle = .notRunning
            s.suspension?.cancel()
            s.suspension = nil
            s.held = []
            s.generation += 1
            s.reports += 1
            return AppTable.App(
                lifecycle: s.lifecycle, modes: s.backgroundModes, lastForeground: s.lastForeground,
                revision: s.reports)
        }
    }

    private func scheduleSuspension(_ s: inout State, after delay: Duration) {
        s.suspension?.cancel()
        let generation = s.generation
        s.suspension = scheduler.schedule(after: delay) { [weak self] in
            let suspended =
                self?.state.withLock { s -> Bool in
                    guard s.generation == generation, s.lifecycle == .background else { return false }
                    s.lifecycle = .suspended
                    s.suspension = nil
                    return true
                } ?? false
            if suspended { self?.lifecycleChanged() }
        }
    }

    // MARK: Delivery

    /// Events dropped so far because the app was more than `deliveryLimit` events behind.
    public var droppedEvents: Int { state.withLock { $0.dropped } }

    /// Events held for the app while it is suspended.
    public var heldEvents: Int { state.withLock { $0.held.count } }

    /// Runs `work` on `queue` as one event of this app's launch `generation`, by the rules above.
    ///
    /// - Parameters:
    ///   - queue: the queue of the manager the event is for.
    ///   - generation: the launch the event belongs to; an event of an earlier launch is dropped (nil: any).
    ///   - repeating: a notification or a duplicate discovery, dropped when the app is `deliveryLimit` events
    ///     behind.
    ///   - wakes: the role whose background mode lets the event wake the app from suspension (nil: it never
    ///     wakes it, like `peripheralIsReady(toSendWriteWithoutResponse:)`, IOSRules.md 3.10).
    ///   - key: events with one key replace each other while held (a characteristic's value, a device's
    ///     discovery), when `rules.queueing` says so.
    ///   - work: the event itself: the delegate call, run on `queue`.
    /// - Returns: whether the event was dispatched or held (false: dropped).
    @discardableResult
    public func deliver(
        on queue: DispatchQueue, generation: UInt64? = nil, repeating: Bool = false, wakes: AppWakeRole? = nil,
        key: DeliveryKey? = nil, _ work: @escaping @Sendable () -> Void
    ) -> Bool {
        let event = Event(queue: queue, key: key, work: work)
        var startedDropping = false
        var woke = false
        // Dispatched (or held) in the lock section that decides it, so that events reach the app's queues in the
        // order the system made them, whichever threads deliver them and bring the app back.
        let delivered = state.withLock { s -> Bool in
            if let generation, generation != s.generation { return false }
            switch s.lifecycle {
            case .notRunning:
                return false
            case .suspended:
                if let wakes, s.backgroundModes.contains(wakes.mode) {
                    woke = true
                    s.lifecycle = .background
                    scheduleSuspension(&s, after: rules.wakeBudget)
                    dispatch(take(&s) + [event], &s)
                    return true
                }
                if let key, rules.queueing == .latestValuePerCharacteristic {
                    s.held.removeAll { $0.key == key }
                }
            case .foreground, .background:
                break
            }
            // The bound: what is held for a suspended app, what is dispatched and not yet run for one that runs.
            let held = s.lifecycle == .suspended
            if repeating && (held ? s.held.count : s.outstanding) >= Self.deliveryLimit {
                s.dropped += 1
                s.droppedInRun += 1
                startedDropping = s.droppedInRun == 1
                return false
            }
            if held {
                s.held.append(event)
            } else {
                dispatch([event], &s)
            }
            return true
        }
        if startedDropping {
            Self.logger.warning(
                "an app is \(Self.deliveryLimit) events behind: its notifications and repeated discoveries are dropped until it catches up",
                metadata: ["app": "\(id)"])
        }
        if woke { lifecycleChanged() }
        return delivered
    }

    /// Takes what was held (the caller dispatches it, in order).
    private func take(_ s: inout State) -> [Event] {
        defer { s.held = [] }
        return s.held
    }

    /// Dispatches events in order, each counted outstanding until it has run. Called in a lock section of
    /// `state`: the scheduler's dispatch only enqueues (it takes no lock of ours), and each event takes `state`
    /// once it has run, on its queue.
    private func dispatch(_ events: [Event], _ s: inout State) {
        guard !events.isEmpty else { return }
        s.outstanding += events.count
        for event in events {
            scheduler.dispatch(on: event.queue) { [self] in
                event.work()
                let caughtUp = state.withLock { s -> Int? in
                    s.outstanding -= 1
                    guard s.droppedInRun > 0, s.outstanding < Self.deliveryLimit / 2 else { return nil }
                    defer { s.droppedInRun = 0 }
                    return s.droppedInRun
                }
                if let caughtUp {
                    Self.logger.warning(
                        "an app caught up after \(caughtUp) notifications and repeated discoveries were dropped",
                        metadata: ["app": "\(id)"])
                }
            }
        }
    }

    public static func == (a: SystemApp, b: SystemApp) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String { "<app \(id)>" }
}
