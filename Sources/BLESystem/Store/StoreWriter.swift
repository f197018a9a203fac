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
    }

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
    /// Where runs are started.
    private let dispatch: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// Signalled after each run, for `waitUntilWritten`.
    private let progress = NSCondition()

    init(database: DatabaseQueue, logger: Logger) {
        self.database = database
        self.logger = logger
        let serial = DispatchQueue(label: "swift-ble.store-writer")
        self.dispatch = { work in serial.async(execute: work) }
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
        if start { dispatch { [self] in run() } }
    }

    /// Puts everything submitted so far on disk, then performs `body` (which makes its own transactions), and
    /// returns what it returned: the caller goes on once both are on disk.
    func perform<T>(_ body: (Database) throws -> T) throws -> T {
        try running.withLock {
            writeWaiting()
            return try database.writeWithoutTransaction(body)
        }
    }

    /// Puts everything submitted so far on disk before returning.
    func drain() {
        running.withLock { writeWaiting() }
    }

    /// Drains, and refuses writes from now on: the database may then be closed.
    func close() {
        running.withLock {
            writeWaiting()
            queue.withLock { $0.closed = true }
        }
    }

    /// Waits (at most `timeout`) until every write submitted before the call is on disk or failed; returns
    /// whether they are. For tests of what the writer does by itself.
    func waitUntilWritten(timeout: Duration) -> Bool {
        let target = queue.withLock { $0.submitted }
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds))
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

    /// Takes every write waiting and puts them on disk in one transaction. Called with `running` held.
    private func writeWaiting() {
        let batch = queue.withLock { q -> [Write] in
            defer { q.waiting = [] }
            return q.waiting
        }
        guard let last = batch.last else { return }
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
        } catch {
            logger.error(
                "writes waiting for the store could not be made (another process may hold it)",
                metadata: ["error": "\(SystemStore.words(error))", "writes": "\(batch.count)"])
        }
        queue.withLock { $0.committed = last.sequence }
        progress.lock()
        progress.broadcast()
        progress.unlock()
    }
}
