import Synchronization

extension HostScheduler {
    /// Suspends the calling task for `duration` of this scheduler's time: virtual time on a simulated radio (so a
    /// task on the radio's executor waits as the radio's devices do), wall-clock time on a real controller's
    /// scheduler (`Task.sleep` measures wall-clock time, which a simulation does not follow). Throws
    /// `CancellationError` at once if the task is or becomes cancelled.
    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        let sleeper = SchedulerSleeper()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                sleeper.start(continuation)
                sleeper.armed(schedule(after: max(duration, .zero)) { sleeper.finish(nil) })
            }
        } onCancel: {
            sleeper.finish(CancellationError())
        }
    }
}

/// One `sleep(for:)`: resumed exactly once, by its timer or by cancellation, whichever comes first.
private final class SchedulerSleeper: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, any Error>?
        var work: (any ScheduledWork)?
        /// Set once it finished: nil error for the timer, the error for a cancellation.
        var finished: Result<Void, any Error>?
    }
    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<Void, any Error>) {
        let early = state.withLock { s -> Result<Void, any Error>? in
            if let finished = s.finished { return finished }
            s.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func armed(_ work: any ScheduledWork) {
        let cancelled = state.withLock { s -> Bool in
            if s.finished != nil { return true }
            s.work = work
            return false
        }
        if cancelled { work.cancel() }
    }

    func finish(_ error: (any Error)?) {
        let result: Result<Void, any Error> = error.map { .failure($0) } ?? .success(())
        let (continuation, work) = state.withLock {
            s -> (CheckedContinuation<Void, any Error>?, (any ScheduledWork)?) in
            guard s.finished == nil else { return (nil, nil) }
            s.finished = result
            defer {
                s.continuation = nil
                s.work = nil
            }
            return (s.continuation, s.work)
        }
        if error != nil { work?.cancel() }
        continuation?.resume(with: result)
    }
}
