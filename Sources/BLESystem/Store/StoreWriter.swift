import Foundation
import GRDB
import Logging
import Synchronization

/// The store's writes, put on disk in the order they were made, and, for those that may wait, off the path
/// that made them.
///
/// ### Function
/// A write that may wait (names, last-seen times, GATT caches) is `submit`ted: it joins the writes waiting, in
/// order, and a run of the writer is started through `dispatch` (a serial queue of the store's own). A run puts
/// every write waiting on disk in one immediate transaction (group commit), each in a savepoint of its own, so
/// one that fails (a row another process removed meanwhile) is logged and costs only itself. A write that must
/// be on disk before its caller goes on (an identifier, a bond, a preserved record, a barrier: `flush`,
/// `close`) is performed by the caller with `perform`, after everything submitted before it: writes reach the
/// disk in the order they were made, whichever path made them.
///
/// ### Implementation
/// Runs never overlap: a run, and `perform`, hold `running` while they write. The queue of waiting writes has
/// a lock of its own, taken only to add or take writes, so a submitter never waits for the disk. Each write has
/// a sequence number; `committed` is the last one a run finished with (written, or failed and logged), which is
/// how the store knows whether what it holds in memory for a write can be let go of.
final class StoreWriter: Sendable {
    /// One write: what it does to the database, and what it is about, for the log when it fails.
    struct Write: Sendable {
        var sequence: UInt64
        var what: String
        var metadata: Logger.Metadata
        var body: @Sendable (Database) throws -> Void
        /// Runs whose transaction could not be made with this write in it (the file busy, say).
        var attempts = 0
    }

    /// Where every store's writer runs.
    private static let sharedQueue = DispatchQueue(label: "swift-ble.store-writers")

    /// How many runs a write waits through when their transaction cannot be made, before it is given up (and
    /// said so in the log).
    static let attemptLimit = 5
    /// How long a run waits before trying again a transaction that could not be made.
    static let retryDelay = 1.0

    private struct Queue {
        var waiting: [Write] = []
        var submitted: UInt64 = 0
        var committed: UInt64 = 0
        var runScheduled = false
        var closed = false
    }

    private let database: DatabaseQueue
    private let logger: Logger
    private let queue = Mutex(Queue())
    /// Held by whoever writes (a run, `perform`): one at a time, in order. A plain lock, as it is held across the
    /// write and returns what `perform`'s body returned.
    private let running = NSLock()
    /// Where runs are started, at once or after a delay in seconds.
    private let dispatch: @Sendable (Double, @escaping @Sendable () -> Void) -> Void
    /// Signalled after each run, for `waitUntilWritten`.
    private let progress = NSCondition()

    init(database: DatabaseQueue, logger: Logger) {
        self.database = database
        self.logger = logger
        // Every store's queue runs on one shared thread: a process with a thousand systems (a scale benchmark,
        // a gateway) would otherwise have Dispatch start threads for writers that have work at once. Each queue
        // keeps its own order.
        let serial = DispatchQueue(label: "swift-ble.store-writer", target: Self.sharedQueue)
        self.dispatch = { delay, work in
            if delay > 0 {
                serial.asyncAfter(deadline: .now() + delay, execute: work)
            } else {
                serial.async(execute: work)
            }
        }
    }

    /// The sequence number of the last write on disk (or failed and logged).
    var committed: UInt64 { queue.withLock { $0.committed } }

    /// Adds a write to those waiting and returns its sequence number; `startRun()` (outside the caller's locks)
    /// puts it on disk soon after. A writer closed already refuses it (nil), and says so in the log.
    func submit(
        _ what: String, metadata: Logger.Metadata = [:], _ body: @escaping @Sendable (Database) throws -> Void
    ) -> UInt64? {
        let sequence = queue.withLock { q -> UInt64? in
            guard !q.closed else { return nil }
            q.submitted += 1
            q.waiting.append(Write(sequence: q.submitted, what: what, metadata: metadata, body: body))
            return q.submitted
        }
        if sequence == nil {
            logger.error("\(what) was not written: the store is closed", metadata: metadata)
        }
        return sequence
    }

    /// Starts a run for what is waiting, unless one is already on its way.
    func startRun() {
        let start = queue.withLock { q -> Bool in
            guard !q.waiting.isEmpty, !q.runScheduled, !q.closed else { return false }
            q.runScheduled = true
            return true
        }
        if start { dispatch(0) { [self] in run() } }
    }

    /// Puts everything submitted so far on disk, then performs `body` (which makes its own transactions), and
    /// returns what it returned: the caller goes on once both are on disk.
    func perform<T>(_ body: (Database) throws -> T) throws -> T {
        try running.withLock {
            // Nothing reaches the disk before what was handed over earlier.
            guard writeWaiting() else {
                throw DatabaseError(resultCode: .SQLITE_BUSY, message: "earlier writes could not be made yet")
            }
            return try database.writeWithoutTransaction(body)
        }
    }

    /// Puts everything submitted so far on disk before returning.
    func drain() {
        running.withLock { _ = writeWaiting() }
    }

    /// Drains, and refuses writes from now on: the database may then be closed.
    func close() {
        running.withLock {
            writeWaiting()
            let lost = queue.withLock { q -> Int in
                q.closed = true
                defer { q.waiting = [] }
                return q.waiting.count
            }
            if lost > 0 {
                logger.error(
                    "writes that could not be made are lost with the store's close", metadata: ["writes": "\(lost)"])
            }
        }
    }

    /// Waits (at most `timeout`) until every write submitted before the call is on disk or failed; returns
    /// whether they are. For tests of what the writer does by itself.
    func waitUntilWritten(timeout: Duration) -> Bool {
        let target = queue.withLock { $0.submitted }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let deadline = Date().addingTimeInterval(seconds)
        progress.lock()
        defer { progress.unlock() }
        while committed < target {
            guard progress.wait(until: deadline) else { return committed >= target }
        }
        return true
    }

    private func run() {
        running.withLock {
            queue.withLock { $0.runScheduled = false }
            writeWaiting()
        }
    }

    /// Takes every write waiting and puts them on disk in one transaction. Called with `running` held. A write
    /// that fails in its savepoint is logged and done with; when the transaction itself cannot be made (another
    /// process holds the file past the busy timeout, say), the writes go back to the head of the queue and a run
    /// tries again a second later, up to `attemptLimit` runs, after which they are given up and logged.
    @discardableResult
    private func writeWaiting() -> Bool {
        let batch = queue.withLock { q -> [Write] in
            defer { q.waiting = [] }
            return q.waiting
        }
        guard !batch.isEmpty else { return true }
        do {
            try database.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    for write in batch {
                        do {
                            try db.inSavepoint {
                                try write.body(db)
                                return .commit
                            }
                        } catch {
                            var metadata = write.metadata
                            metadata["error"] = "\(SystemStore.words(error))"
                            logger.error("\(write.what) could not be written", metadata: metadata)
                        }
                    }
                    return .commit
                }
            }
            // The statements GRDB prepared and cached for the run, and SQLite's caches, are let go: a process with
            // a thousand stores (a scale benchmark, a gateway) kept some 12 KiB for each, and a run is not hot.
            database.releaseMemory()
            finished(through: batch.last!.sequence)
            return true
        } catch {
            let again = batch.map { write -> Write in
                var write = write
                write.attempts += 1
                return write
            }
            let kept = again.filter { $0.attempts < Self.attemptLimit }
            let dropped = again.count - kept.count
            logger.error(
                dropped == 0
                    ? "writes waiting for the store could not be made yet: they are tried again in a second"
                    : "writes waiting for the store could not be made: \(dropped) are given up",
                metadata: ["error": "\(SystemStore.words(error))", "writes": "\(batch.count)"])
            let retry = queue.withLock { q -> Bool in
                q.waiting = kept + q.waiting
                guard !kept.isEmpty, !q.runScheduled, !q.closed else { return false }
                q.runScheduled = true
                return true
            }
            if let lastDropped = again.last(where: { $0.attempts >= Self.attemptLimit }), kept.isEmpty {
                finished(through: lastDropped.sequence)
            }
            if retry { dispatch(Self.retryDelay) { [self] in run() } }
            return false
        }
    }

    /// Every write up to `sequence` is on disk (or given up, and logged).
    private func finished(through sequence: UInt64) {
        queue.withLock { $0.committed = max($0.committed, sequence) }
        progress.lock()
        progress.broadcast()
        progress.unlock()
    }
}
