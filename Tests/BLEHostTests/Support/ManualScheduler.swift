import BLETransport
import Dispatch
import Synchronization

/// A `HostScheduler` on virtual time that only moves when a test says so.
///
/// Timers fire in order of their due time (ties in the order they were scheduled), each with `now` set to its
/// due time, outside the scheduler's lock, so a timer may schedule another: one due within the advanced span
/// fires in the same `advance`. `dispatch(on:)` runs the work at once, on the caller's thread.
final class ManualScheduler: HostScheduler {
    private struct Entry {
        var due: Duration
        var serial: UInt64
        var work: @Sendable () -> Void
    }

    private struct State {
        var now: Duration = .zero
        var serial: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
    }

    private let state = Mutex(State())

    var now: Duration { state.withLock { $0.now } }

    /// How many timers are scheduled and not yet fired or cancelled.
    var pendingTimers: Int { state.withLock { $0.entries.count } }

    @discardableResult
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let serial = state.withLock { state -> UInt64 in
            state.serial += 1
            state.entries[state.serial] = Entry(due: state.now + max(delay, .zero), serial: state.serial, work: work)
            return state.serial
        }
        return Cancellation(scheduler: self, serial: serial)
    }

    func dispatch(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        // As the contract says: never before returning.
        queue.async(execute: work)
    }

    /// Moves time forward by `span`, firing every timer due by then, in order.
    func advance(by span: Duration) {
        let target = state.withLock { $0.now + span }
        while true {
            let next: Entry? = state.withLock { state in
                guard
                    let entry = state.entries.values.filter({ $0.due <= target })
                        .min(by: { ($0.due, $0.serial) < ($1.due, $1.serial) })
                else { return nil }
                state.entries[entry.serial] = nil
                state.now = max(state.now, entry.due)
                return entry
            }
            guard let next else { break }
            next.work()
        }
        state.withLock { $0.now = max($0.now, target) }
    }

    fileprivate func cancel(_ serial: UInt64) {
        state.withLock { _ = $0.entries.removeValue(forKey: serial) }
    }

    private struct Cancellation: ScheduledWork {
        let scheduler: ManualScheduler
        let serial: UInt64
        func cancel() { scheduler.cancel(serial) }
    }
}
