import BLETransport
import Dispatch
import Logging
import Synchronization

/// One app of a system: what its managers belong to, and where the rules for apps (background modes, a
/// lifecycle, delivery while suspended) attach. The same id on one system is the same app.
///
/// **Delivery.** Every event for the app's managers passes through `deliver`, in the order the system made
/// them, to the manager's queue. The app has a bound: at most `deliveryLimit` events dispatched and not yet run
/// (an app whose queue is stuck, or slower than the radio). Beyond it, events that repeat (notifications, and
/// discoveries of a scan that allows duplicates) are dropped: counted in `droppedEvents`, and logged once when
/// dropping starts and once, with the count, when the app has caught up. Every other event (connections,
/// operation results, state, requests from centrals to the app's services) always goes through. Most are bounded
/// by what the app asked for; a central's Write Commands and a device whose advertisement changes at every event
/// (with a coalescing scan) are bounded only by the peer, so an app whose queue is stuck for long can still grow
/// its backlog through them. In a simulation the radio waits for every dispatched event before time moves on, so
/// the bound is reached only against a real-time scheduler.
public final class SystemApp: Sendable, Hashable, CustomStringConvertible {
    public let id: String
    private let scheduler: any HostScheduler

    public static let deliveryLimit = 4_096

    private struct Delivery {
        var outstanding = 0
        var dropped = 0
        /// Drops since dropping last started (for the log line when the app catches up).
        var droppedInRun = 0
    }
    private let delivery = Mutex(Delivery())
    private static let logger = Logger(label: "swift-ble.delivery")

    init(id: String, scheduler: any HostScheduler) {
        self.id = id
        self.scheduler = scheduler
    }

    /// Events dropped so far because the app was more than `deliveryLimit` events behind.
    public var droppedEvents: Int { delivery.withLock { $0.dropped } }

    /// Runs `work` on `queue` as one event of this app. A `repeating` event (a notification, a duplicate
    /// discovery) is dropped when the app is `deliveryLimit` events behind; returns whether it was dispatched.
    @discardableResult
    public func deliver(on queue: DispatchQueue, repeating: Bool = false, _ work: @escaping @Sendable () -> Void)
        -> Bool
    {
        let (go, startedDropping) = delivery.withLock { d -> (Bool, Bool) in
            if repeating && d.outstanding >= Self.deliveryLimit {
                d.dropped += 1
                d.droppedInRun += 1
                return (false, d.droppedInRun == 1)
            }
            d.outstanding += 1
            return (true, false)
        }
        if startedDropping {
            Self.logger.warning(
                "an app is \(Self.deliveryLimit) events behind: its notifications and repeated discoveries are dropped until it catches up",
                metadata: ["app": "\(id)"])
        }
        guard go else { return false }
        scheduler.dispatch(on: queue) { [self] in
            work()
            let caughtUp = delivery.withLock { d -> Int? in
                d.outstanding -= 1
                guard d.droppedInRun > 0, d.outstanding < Self.deliveryLimit / 2 else { return nil }
                defer { d.droppedInRun = 0 }
                return d.droppedInRun
            }
            if let caughtUp {
                Self.logger.warning(
                    "an app caught up after \(caughtUp) notifications and repeated discoveries were dropped",
                    metadata: ["app": "\(id)"])
            }
        }
        return true
    }

    public static func == (a: SystemApp, b: SystemApp) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String { "<app \(id)>" }
}
