import BLECore
import Dispatch
import Synchronization

/// A wall-clock `HostScheduler` on Dispatch, for hosts driving real controllers. Its serial queue is the
/// controller's serial domain (`execute`): timers fire there, and work an app's thread hands over runs there,
/// never on the app's thread.
public final class DispatchHostScheduler: HostScheduler {
    private let origin = ContinuousClock.now
    /// The serial domain: timers and executed work.
    private let queue: DispatchQueue
    /// Marks `queue`, so that work already on it runs at once.
    private let key = DispatchSpecificKey<ObjectIdentifier>()

    public init(label: String = "ble.host.timers") {
        self.queue = DispatchQueue(label: label)
        queue.setSpecific(key: key, value: ObjectIdentifier(self))
    }

    public var now: Duration { ContinuousClock.now - origin }

    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let item = DispatchWorkItem(block: work)
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.clampedNanoseconds)), execute: item)
        return DispatchScheduledWork(item: item)
    }

    public func dispatch(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    public func execute(_ work: @escaping @Sendable () -> Void) {
        if isExecuting { work() } else { queue.async(execute: work) }
    }

    public var isExecuting: Bool { DispatchQueue.getSpecific(key: key) == ObjectIdentifier(self) }
}

// DispatchWorkItem is thread-safe for cancel(); it is not annotated Sendable on Linux.
private struct DispatchScheduledWork: ScheduledWork, @unchecked Sendable {
    let item: DispatchWorkItem
    func cancel() { item.cancel() }
}
