import Dispatch
import Synchronization

/// One async operation's single result: the bridge between an event delivered on a manager's queue and the
/// task awaiting it.
///
/// Every way to finish — the event, a timeout, task cancellation, a link loss, power-off — goes through
/// `resume(_:)`, and only the first one counts: the continuation is resumed exactly once, whichever thread
/// gets there first, and later attempts return false. A result that arrives before the task has started to
/// wait is kept until it does. A timeout runs on the system's scheduler (virtual time in a simulation), so it
/// is as deterministic as the events.
final class Waiter<Value: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, any Error>)
        /// Finished; the result is kept until a task waits for it (nil once handed over).
        case finished(Result<Value, any Error>?)
    }

    private let state = Mutex<State>(.pending)
    private let timer = Mutex<ScheduledTimer?>(nil)
    /// Run once when the waiter finishes by timeout or cancellation (not by its event): e.g. cancel the
    /// connection a timed-out connect started.
    private let onAbandon = Mutex<(@Sendable (any Error) -> Void)?>(nil)

    init() {}

    var isFinished: Bool {
        state.withLock { if case .finished = $0 { return true } else { return false } }
    }

    /// Finishes the waiter; returns false (doing nothing) when it had already finished.
    @discardableResult
    func resume(_ result: Result<Value, any Error>) -> Bool {
        let (won, continuation) = state.withLock { s -> (Bool, CheckedContinuation<Value, any Error>?) in
            switch s {
            case .pending:
                s = .finished(result)
                return (true, nil)
            case .waiting(let c):
                s = .finished(nil)
                return (true, c)
            case .finished:
                return (false, nil)
            }
        }
        guard won else { return false }
        timer.withLock { t in
            t?.cancel()
            t = nil
        }
        continuation?.resume(with: result)
        return true
    }

    func fail(_ error: any Error) { resume(.failure(error)) }

    /// What to do when the waiter is abandoned by timeout or cancellation.
    func onAbandon(_ action: @escaping @Sendable (any Error) -> Void) {
        onAbandon.withLock { $0 = action }
    }

    /// Ends the wait with `error` from outside the event path (timeout, cancellation) and runs the abandon
    /// action if that was what finished it.
    func abandon(_ error: any Error) {
        guard resume(.failure(error)) else { return }
        onAbandon.withLock { a -> (@Sendable (any Error) -> Void)? in
            defer { a = nil }
            return a
        }?(error)
    }

    /// Arms a timeout in `system`'s time: when it fires first, the waiter fails with `BluetoothError(.timeout)`
    /// saying `what` did not complete. Nil arms nothing.
    func arm(timeout: Duration?, system: BluetoothSystem, queue: DispatchQueue, what: @autoclosure () -> String) {
        guard let timeout else { return }
        let error = BluetoothError(.timeout, "\(what()) did not complete within \(timeout)")
        let scheduled = system.schedule(after: max(timeout, .zero), on: queue) { [weak self] in self?.abandon(error) }
        timer.withLock { $0 = scheduled }
        // Finished before the timer was stored: `resume` could not cancel it, so cancel it here.
        if isFinished {
            timer.withLock { t in
                t?.cancel()
                t = nil
            }
        }
    }

    /// Waits for the result. Cancelling the task finishes the waiter with `CancellationError` (and runs the
    /// abandon action).
    func value() async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let ready = state.withLock { s -> Result<Value, any Error>? in
                    switch s {
                    case .pending:
                        s = .waiting(continuation)
                        return nil
                    case .finished(let result):
                        s = .finished(nil)
                        return result ?? .failure(BluetoothError(.unknown, "the result was already taken"))
                    case .waiting:
                        return .failure(BluetoothError(.unknown, "two tasks waited for one operation"))
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            abandon(CancellationError())
        }
    }
}

/// Waiters finished by a repeated event rather than one completion (a state change, "ready to send", a
/// connection), kept in registration order.
struct WaiterSet<Value: Sendable> {
    private var waiters: [Waiter<Value>] = []

    mutating func insert(_ waiter: Waiter<Value>) {
        waiters.removeAll { $0.isFinished }
        waiters.append(waiter)
    }

    mutating func remove(_ waiter: Waiter<Value>) {
        waiters.removeAll { $0 === waiter }
    }

    /// Takes every waiter out, to be finished outside the lock that guards the set.
    mutating func takeAll() -> [Waiter<Value>] {
        defer { waiters.removeAll() }
        return waiters
    }

    var isEmpty: Bool { waiters.isEmpty }
}

/// The tasks awaiting a manager's `.poweredOn` (`waitUntilPoweredOn`), kept in the manager's state under its
/// lock: a wait registered as the state changes either sees the new state or is among those the change's
/// delivery finishes, never neither.
struct PoweredOnWaits {
    private var waiting: [Waiter<Void>] = []

    /// Registers `waiter` given the manager's state `now`: returns how it ends at once (a final state, or the
    /// app's end), or nil when it waits (kept here).
    mutating func register(_ waiter: Waiter<Void>, state now: ManagerState, abandoned: BluetoothError?) -> Ending? {
        if let abandoned { return .abandoned(abandoned) }
        switch now {
        case .poweredOn, .poweredOff, .unsupported, .unauthorized: return .state(now)
        case .unknown, .resetting:
            waiting.removeAll { $0.isFinished }
            waiting.append(waiter)
            return nil
        }
    }

    /// The waits a change to `state` ends, taken out: every one for a final state, none for `.unknown` or
    /// `.resetting`.
    mutating func take(at state: ManagerState) -> [Waiter<Void>] {
        switch state {
        case .poweredOn, .poweredOff, .unsupported, .unauthorized: take()
        case .unknown, .resetting: []
        }
    }

    /// Every wait, taken out.
    mutating func take() -> [Waiter<Void>] {
        defer { waiting.removeAll() }
        return waiting
    }

    /// How a wait ends: with the manager's final state, or because its app ended.
    enum Ending {
        case state(ManagerState)
        case abandoned(BluetoothError)
    }

    /// Finishes `waits`: done at `.poweredOn`, failed with the state's reason otherwise.
    static func finish(_ waits: [Waiter<Void>], _ ending: Ending, system: BluetoothSystem) {
        guard !waits.isEmpty else { return }
        let result: Result<Void, any Error> =
            switch ending {
            case .state(.poweredOn): .success(())
            case .state(let state): .failure(BluetoothError.notPoweredOn(state, system: system))
            case .abandoned(let error): .failure(error)
            }
        for w in waits { w.resume(result) }
    }
}

extension Waiter where Value == Void {
    /// The wait behind both managers' `waitUntilPoweredOn`: `register` keeps it with the manager's state, or
    /// finishes it at once for a state that is already final; otherwise the state's change finishes it, or the
    /// timeout.
    static func untilPoweredOn(
        register: (Waiter<Void>) -> Void, system: BluetoothSystem, queue: DispatchQueue, timeout: Duration?
    ) async throws {
        try Task.checkCancellation()
        let waiter = Waiter<Void>()
        register(waiter)
        waiter.arm(timeout: timeout, system: system, queue: queue, what: "waitUntilPoweredOn")
        try await waiter.value()
    }
}
