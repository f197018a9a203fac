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

    // Inlinable, so that each driver's outbox is specialized for its actions: called through the generic entry
    // points across the module boundary, every packet paid a metadata lookup and witness-table calls (measured:
    // 5 % of `ble bench host`).
    @usableFromInline var actions: Deque<Action> = []
    @usableFromInline var draining = false
    @usableFromInline var drainScheduled = false

    @inlinable public init() {}

    /// Appends `new`; says who performs them.
    @inlinable public mutating func append(contentsOf new: [Action], inDomain: Bool) -> Start {
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

    /// Puts `first` before everything waiting and appends `last`; says who performs them, as `append` does.
    @inlinable public mutating func prepend(_ first: [Action], then last: [Action], inDomain: Bool) -> Start {
        actions.prepend(contentsOf: first)
        return append(contentsOf: last, inDomain: inDomain)
    }

    /// For a caller in the domain with work of its own that steps: what it appends meanwhile waits, and the caller
    /// drains (`next` until nil) after its work. False when a drain is under way already (it performs them).
    @inlinable public mutating func hold() -> Bool {
        guard !draining else { return false }
        draining = true
        return true
    }

    /// Changes each waiting action to what `transform` makes of it, in place.
    @inlinable public mutating func transform(_ transform: (Action) -> Action) {
        for i in actions.indices { actions[i] = transform(actions[i]) }
    }

    /// For a caller in the domain with work of its own to perform first (the busiest events, which would
    /// otherwise be queued and taken straight back): when nothing waits and nobody drains, the caller becomes
    /// the drainer, performs its work, then drains (`next` until nil), so whatever its work causes is queued
    /// behind it, as if it had been queued. False: the caller queues its work instead.
    @inlinable public mutating func beginDirect(inDomain: Bool) -> Bool {
        guard inDomain, !draining, actions.isEmpty else { return false }
        draining = true
        return true
    }

    /// A drain scheduled from outside the domain runs: whether it starts (false when a drain started in the
    /// domain meanwhile performed what waited, or is doing so).
    @inlinable public mutating func scheduledDrainArrived() -> Bool {
        drainScheduled = false
        guard !draining, !actions.isEmpty else { return false }
        draining = true
        return true
    }

    /// The next action of the drain under way; nil ends the drain.
    @inlinable public mutating func next() -> Action? {
        guard let action = actions.popFirst() else {
            draining = false
            return nil
        }
        return action
    }
}
