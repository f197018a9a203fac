import BLETransport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real controller's serial domain: work handed over from an app's thread runs on the scheduler's queue, in
/// the order it was handed over, never on the app's thread; work from inside the domain (a timer) runs at once.
@Suite struct DispatchExecutorTests {
    @Test func workFromAnAppsThreadRunsOnTheDomainInOrderAndNotOnTheCaller() async {
        let scheduler = DispatchHostScheduler(label: "test.executor")
        let log = Mutex<[String]>([])
        #expect(!scheduler.isExecuting)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let caller = pthread_self()
            for n in 0..<100 {
                scheduler.execute {
                    let onCaller = pthread_equal(pthread_self(), caller) != 0
                    log.withLock { $0.append("\(n) in domain \(scheduler.isExecuting), on caller \(onCaller)") }
                    if n == 99 { done.resume() }
                }
            }
        }
        #expect(log.withLock { $0 } == (0..<100).map { "\($0) in domain true, on caller false" })
    }

    @Test func aTimersWorkIsInTheDomainAndWhatItExecutesRunsAtOnce() async {
        let scheduler = DispatchHostScheduler(label: "test.executor.timer")
        let log = Mutex<[String]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            scheduler.schedule(after: .milliseconds(1)) {
                log.withLock { $0.append("timer in domain \(scheduler.isExecuting)") }
                scheduler.execute { log.withLock { $0.append("executed at once") } }
                log.withLock { $0.append("timer goes on") }
                done.resume()
            }
        }
        #expect(log.withLock { $0 } == ["timer in domain true", "executed at once", "timer goes on"])
    }
}
