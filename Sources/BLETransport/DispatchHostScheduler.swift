import BLECore
import Dispatch
import Synchronization

/// A wall-clock `HostScheduler` on Dispatch, for hosts driving real controllers.
public final class DispatchHostScheduler: HostScheduler {
    private let origin = ContinuousClock.now
    private let timerQueue: DispatchQueue

    public init(label: String = "ble.host.timers") {
        self.timerQueue = DispatchQueue(label: label)
    }

    public var now: Duration { ContinuousClock.now - origin }

    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let item = DispatchWorkItem(block: work)
        timerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.clampedNanoseconds)), execute: item)
        return DispatchScheduledWork(item: item)
    }

    public func dispatch(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }
}

// DispatchWorkItem is thread-safe for cancel(); it is not annotated Sendable on Linux.
private struct DispatchScheduledWork: ScheduledWork, @unchecked Sendable {
    let item: DispatchWorkItem
    func cancel() { item.cancel() }
}
