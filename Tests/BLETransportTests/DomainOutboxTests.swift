import BLETransport
import Testing

/// Who performs a driver's actions: a step in the domain drains at once, one from outside schedules one drain,
/// and a drain under way performs what is appended meanwhile, in order.
@Suite struct DomainOutboxTests {
    @Test func fromOutsideOneDrainIsScheduledAndPerformsEverythingInOrder() {
        var outbox = DomainOutbox<Int>()
        let starts = [
            outbox.append(contentsOf: [1], inDomain: false), outbox.append(contentsOf: [2], inDomain: false),
        ]
        #expect(starts == [.scheduled, .none])
        let arrived = outbox.scheduledDrainArrived()
        let first = outbox.next()
        let meanwhile = outbox.append(contentsOf: [3], inDomain: true)  // the drain under way takes it
        let rest = [outbox.next(), outbox.next(), outbox.next()]
        #expect(arrived && first == 1 && meanwhile == .none)
        #expect(rest == [2, 3, nil])
        let nothing = outbox.append(contentsOf: [], inDomain: false)
        #expect(nothing == .none)
    }

    @Test func inTheDomainADrainStartsAtOnceAheadOfOneScheduledFromOutside() {
        var outbox = DomainOutbox<Int>()
        let starts = [
            outbox.append(contentsOf: [1], inDomain: false), outbox.append(contentsOf: [2], inDomain: true),
        ]
        #expect(starts == [.scheduled, .now])
        let drained = [outbox.next(), outbox.next(), outbox.next()]
        #expect(drained == [1, 2, nil])
        // The drain scheduled from outside finds nothing left to do; the next step from outside schedules anew.
        let arrived = outbox.scheduledDrainArrived()
        let next = outbox.append(contentsOf: [4], inDomain: false)
        #expect(!arrived && next == .scheduled)
    }
}
