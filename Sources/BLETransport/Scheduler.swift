import Dispatch

/// A cancellable piece of scheduled work.
public protocol ScheduledWork: Sendable {
    /// Cancels the work if it has not run yet; cancelling twice, or after it ran, does nothing.
    func cancel()
}

/// Time, timers and callback dispatch for one host and the managers above it.
///
/// The host never reads a clock or starts a timer itself: everything time-related goes through this, so the
/// same host runs on wall-clock time over a real controller and on virtual time over the simulated radio.
/// In a simulation the radio implements this, and `dispatch` is counted: virtual time does not move while a
/// dispatched callback, or host work it triggered, is still outstanding. That is what makes a simulated run
/// deterministic.
public protocol HostScheduler: Sendable {
    /// Time since this scheduler's origin (process start for wall-clock schedulers, radio start in a
    /// simulation).
    var now: Duration { get }
    /// Runs `work` once, `delay` from now, unless cancelled first. Never runs it before returning, whatever the
    /// delay: a host schedules while holding its lock.
    @discardableResult
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork
    /// Runs `work` asynchronously on `queue` (a manager's delegate queue). Never runs it before returning, and
    /// takes no lock of its caller's: the system dispatches an app's events while holding its lock, so that they
    /// reach the queue in the order it decided them.
    func dispatch(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)
    /// Runs `work` in the controller's serial domain, where the host and the system above it do their work: at
    /// once when the caller is already in it (an event, a timer, or a callback or task the radio runs in turn),
    /// otherwise as soon as the domain is free; never at the same time as other work of the domain, and in the
    /// order the calls were made from any one thread. A real controller's domain is a serial queue, so an
    /// app's thread never runs the work itself; a simulated radio's is its turn (see `SimulatedRadio`).
    func execute(_ work: @escaping @Sendable () -> Void)
    /// Whether the calling thread is in the serial domain now.
    var isExecuting: Bool { get }
}

extension HostScheduler {
    /// A scheduler without a domain of its own (a test's) runs the work at once, on the caller's thread.
    public func execute(_ work: @escaping @Sendable () -> Void) { work() }
    public var isExecuting: Bool { true }
}
