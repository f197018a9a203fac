import DequeModule

/// A driver's ordered actions waiting to be performed, and who performs them: the bookkeeping a driver keeps
/// under its lock so that the actions its machine produced are performed in order, one drain at a time, in the
/// scheduler's serial domain (`HostScheduler.execute`). `HostDriver` and `SystemCore` each keep one.
///
/// A step appends the actions it produced and learns how they are to be performed: in the domain, a drain
/// starts at once (it performs everything appended so far, in order, even when a drain scheduled from outside
/// has not run yet); from outside, one drain is scheduled in the domain; while a drain is under way, it
/// performs them too.
public struct DomainOutbox<Action: Sendable>: Sendable {
    /// How the actions just appended are to be performed.
    public enum Start: Sendable {
        /// A drain under way (or already scheduled) performs them.
        case none
        /// The caller, in the domain, drains now.
        case now
        /// The caller schedules a drain in the domain (`scheduledDrainArrived` when it runs).
        case scheduled
    }

    private var actions: Deque<Action> = []
    private var draining = false
    private var drainScheduled = false

    public init() {}

    /// Appends `new`; says who performs them.
    public mutating func append(contentsOf new: [Action], inDomain: Bool) -> Start {
        actions.append(contentsOf: new)
        guard !draining, !actions.isEmpty else { return .none }
        if inDomain {
            draining = true
            return .now
        }
        guard !drainScheduled else { return .none }
        drainScheduled = true
        return .scheduled
    }

    /// A drain scheduled from outside the domain runs: whether it starts (false when a drain started in the
    /// domain meanwhile performed what waited, or is doing so).
    public mutating func scheduledDrainArrived() -> Bool {
        drainScheduled = false
        guard !draining, !actions.isEmpty else { return false }
        draining = true
        return true
    }

    /// The next action of the drain under way; nil ends the drain.
    public mutating func next() -> Action? {
        guard let action = actions.popFirst() else {
            draining = false
            return nil
        }
        return action
    }
}
