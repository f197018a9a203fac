import BLECore
import HeapModule

/// Virtual time for the simulated radio: nanoseconds since the radio started, as a plain integer.
///
/// Every spec time the link layer deals in (0.625 ms advertising units, 1.25 ms connection units, air times in
/// microseconds) is a whole number of nanoseconds, so integer arithmetic is exact and runs are reproducible.
/// The public API speaks `Duration`; the conversions are `VirtualTime.duration(_:)` and `VirtualTime.nanos(_:)`.
enum VirtualTime {
    static let microsecond: Int64 = 1_000
    static let millisecond: Int64 = 1_000_000
    static let second: Int64 = 1_000_000_000

    static func duration(_ nanos: Int64) -> Duration { .nanoseconds(nanos) }

    /// Whole nanoseconds of a `Duration` (`Duration.clampedNanoseconds`: negative is zero, far is `Int64.max / 2`).
    static func nanos(_ duration: Duration) -> Int64 { duration.clampedNanoseconds }

    /// `time + delay`, saturating at `Int64.max` (a time that far away never comes).
    static func after(_ time: Int64, _ delay: Int64) -> Int64 {
        let (sum, overflow) = time.addingReportingOverflow(delay)
        return overflow ? Int64.max : sum
    }
}

/// The clock and agenda of a simulation: the current virtual time and a min-heap of pending events ordered by
/// (time, sequence number).
///
/// The sequence number is handed out in insertion order, so two events due at the same instant run in the order
/// they were scheduled: ties never depend on heap internals, which keeps runs deterministic. `cancel(_:)` records
/// the sequence number, and a cancelled entry is dropped when it surfaces or, once cancelled entries make up half
/// of the agenda, when the heap is rebuilt without them (linear, so a cancel costs amortised constant time): a
/// host that starts and cancels timers by the thousand (a transaction timer per request, on every link) leaves no
/// agenda growing with timers that will never fire. Link-layer timers avoid even that by carrying a generation that
/// the owner compares.
struct VirtualClock<Payload> {
    struct Entry: Comparable {
        var time: Int64
        var sequence: UInt64
        var payload: Payload

        static func < (a: Entry, b: Entry) -> Bool {
            a.time != b.time ? a.time < b.time : a.sequence < b.sequence
        }
        static func == (a: Entry, b: Entry) -> Bool { a.time == b.time && a.sequence == b.sequence }
    }

    /// The current virtual time in nanoseconds; it never moves backwards.
    private(set) var now: Int64 = 0
    private var heap = Heap<Entry>()
    private var nextSequence: UInt64 = 0
    private var cancelled = Set<UInt64>()

    var pendingCount: Int { heap.count - cancelled.count }

    /// Schedules `payload` at absolute time `time` (clamped to now) and returns its sequence number.
    @discardableResult
    mutating func schedule(at time: Int64, _ payload: Payload) -> UInt64 {
        let sequence = nextSequence
        nextSequence &+= 1
        heap.insert(Entry(time: max(time, now), sequence: sequence, payload: payload))
        return sequence
    }

    /// Marks the event with this sequence number as cancelled; it will be skipped.
    mutating func cancel(_ sequence: UInt64) {
        guard sequence < nextSequence, cancelled.insert(sequence).inserted else { return }
        if cancelled.count >= Self.compactionFloor, cancelled.count * 2 >= heap.count { compact() }
    }

    /// Below this many cancelled entries the heap is not rebuilt: they surface soon enough.
    static var compactionFloor: Int { 64 }

    /// Rebuilds the heap without the cancelled entries (a cancelled sequence number whose entry already ran is
    /// forgotten too). The order of what remains is (time, sequence), as before.
    private mutating func compact() {
        let live = heap.unordered.filter { !cancelled.contains($0.sequence) }
        heap = Heap(live)
        cancelled.removeAll(keepingCapacity: true)
    }

    /// Time of the earliest live event, discarding cancelled entries on the way.
    mutating func nextTime() -> Int64? {
        while let first = heap.min {
            if cancelled.isEmpty || !cancelled.contains(first.sequence) { return first.time }
            cancelled.remove(first.sequence)
            _ = heap.removeMin()
        }
        return nil
    }

    /// Removes the earliest live event if it is due at or before `deadline`, and moves the clock to its time.
    mutating func popDue(notAfter deadline: Int64) -> Entry? {
        guard let time = nextTime(), time <= deadline else { return nil }
        let entry = heap.removeMin()
        now = max(now, entry.time)
        return entry
    }

    /// Moves the clock forward to `time` (never backwards).
    mutating func advance(to time: Int64) {
        now = max(now, time)
    }
}

/// The simulation's only source of randomness: a xoshiro256** generator seeded by SplitMix64.
///
/// xoshiro256** is Blackman and Vigna's public-domain design, and this is our own transcription; its four words
/// are the first four draws of BLECore's SplitMix64 (`SeededRandom`) from the seed. Every random choice of a run
/// (advertising delays, RSSI jitter, packet loss, derived addresses, LE Rand) draws from one instance in event
/// order, so a seed fixes the whole run.
struct SimulationRandom: RandomNumberGenerator {
    private var s0: UInt64, s1: UInt64, s2: UInt64, s3: UInt64

    init(seed: UInt64) {
        var seeding = SeededRandom(seed: seed)
        s0 = seeding.next()
        s1 = seeding.next()
        s2 = seeding.next()
        s3 = seeding.next()
    }

    mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = (s3 << 45) | (s3 >> 19)
        return result
    }

    /// A uniform value in `0...upperBound`.
    mutating func uniform(through upperBound: UInt64) -> UInt64 {
        upperBound == .max ? next() : next(upperBound: upperBound + 1)
    }

    /// A uniform `Double` in `[0, 1)`.
    mutating func unit() -> Double {
        Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }
}
