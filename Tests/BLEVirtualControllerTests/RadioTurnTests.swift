import Foundation
import Synchronization
import Testing

@testable import BLEVirtualController

/// The radio as the serial domain of the hosts on it (`execute`): work from inside its turn runs at once, work
/// from other threads during a run waits for the loop between two events, and outside a run the caller takes
/// the turn, which a run then waits for.
@Suite struct RadioTurnTests {
    /// What happened, in order, from any thread.
    final class Log: Sendable {
        private let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    /// Waits (at most 60 s of wall time) on this thread until `condition` holds; whether it did. For a thread of
    /// the test's own, never the pool's: the run the test starts needs the pool.
    static func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while !condition() {
            guard Date() < deadline else { return false }
            usleep(1_000)
        }
        return true
    }

    /// Waits (at most 60 s) for `semaphore` on a thread of its own, not on the pool's.
    static func wait(_ semaphore: DispatchSemaphore) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: semaphore.wait(timeout: .now() + 60) == .success) }
        }
    }

    @Test func workFromInsideTheTurnRunsAtOnce() async throws {
        let radio = SimulatedRadio(seed: 1)
        let log = Log()
        radio.schedule(after: .milliseconds(1)) {
            log.add("event, in turn \(radio.isExecuting)")
            radio.execute { log.add("executed, in turn \(radio.isExecuting)") }
            log.add("event goes on")
        }
        try await radio.run(for: .milliseconds(2))
        #expect(log.all == ["event, in turn true", "executed, in turn true", "event goes on"])
        #expect(!radio.isExecuting)
    }

    @Test func workFromAnotherThreadDuringARunWaitsForTheLoopBetweenEvents() async throws {
        let radio = SimulatedRadio(seed: 2)
        let log = Log()
        radio.schedule(after: .milliseconds(1)) {
            // Another thread executes work while this event is under way: it waits, and this event ends first.
            let handed = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                radio.execute { log.add("executed, in turn \(radio.isExecuting)") }
                handed.signal()
            }
            _ = handed.wait(timeout: .now() + 60)
            log.add("first event ends")
        }
        radio.schedule(after: .milliseconds(2)) { log.add("second event") }
        try await radio.run(for: .milliseconds(3))
        #expect(log.all == ["first event ends", "executed, in turn true", "second event"])
    }

    @Test func outsideARunTheCallerTakesTheTurnAndTimeStands() {
        let radio = SimulatedRadio(seed: 3)
        let log = Log()
        let before = radio.now
        radio.execute {
            log.add("executed, in turn \(radio.isExecuting)")
            radio.execute { log.add("nested, at once") }
        }
        log.add("returned")
        #expect(log.all == ["executed, in turn true", "nested, at once", "returned"])
        #expect(radio.now == before)
        #expect(!radio.isExecuting)
    }

    @Test func theHolderRunsWhatOthersExecutedMeanwhileAndARunWaitsForIt() async throws {
        let radio = SimulatedRadio(seed: 4)
        let log = Log()
        radio.schedule(after: .milliseconds(1)) { log.add("event") }
        let run = Mutex<Task<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        // All the waiting happens on threads of the test's own: the pool may be busy with other tests.
        Thread.detachNewThread {
            radio.execute {
                log.add("holder starts")
                // Another thread's work waits for the holder, which runs it before it lets the turn go.
                let returned = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    radio.execute { log.add("another's work") }
                    log.add("another's execute returned")
                    returned.signal()
                }
                _ = returned.wait(timeout: .now() + 60)
                // A run waits for the turn. Started on a queue of its own: the pool may be busy with other tests
                // for longer than any bound.
                run.withLock {
                    $0 = Task(executorPreference: QueueExecutor()) { try await radio.run(for: .milliseconds(2)) }
                }
                log.add("run waits: \(Self.eventually { radio.runIsWaitingForTheTurn })")
            }
            log.add("holder returns")
            done.signal()
        }
        #expect(await Self.wait(done))
        try await run.withLock { $0 }?.value
        // The holder let the turn go to the run once the lane was empty; the run's event and the holder's return
        // then race, and either may be logged first.
        let entries = log.all
        #expect(
            entries.filter { $0 != "holder returns" } == [
                "holder starts", "another's execute returned", "run waits: true", "another's work", "event",
            ])
        #expect(entries.firstIndex(of: "holder returns")! > entries.firstIndex(of: "another's work")!)
    }
}

/// Runs a task's jobs on a serial queue of its own (Dispatch's threads, not the cooperative pool's).
final class QueueExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "test.radio-turn.run")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
