/// What `ble scan` measures of one device over a scan, from the reports it received: how many came, when the first
/// and the latest came, the signal strength (lowest, average, highest and the latest values) and the advertising
/// interval. A pure value: the times come in with the reports (the system's time, virtual on a simulated radio).
struct ScanStatistics: Sendable, Hashable {
    /// Reports received.
    private(set) var packets = 0
    /// When the first report came.
    let firstSeen: Duration
    /// When the latest report came.
    private(set) var lastSeen: Duration
    /// The lowest and highest RSSI measured, in dBm; nil while none was (127: the controller could not measure).
    private(set) var minimumRSSI: Int?
    private(set) var maximumRSSI: Int?
    private var rssiTotal = 0
    private var rssiCount = 0
    /// The latest RSSI values measured, oldest first, at most `historyLength`.
    private(set) var recentRSSI: [Int] = []
    /// The latest gaps between two reports that were two advertising events, at most `gapCount`.
    private var gaps: [Duration] = []
    /// When the latest advertising event began: its first report (a scan response follows within `shortestGap`).
    private var lastEvent: Duration

    /// How many RSSI values `recentRSSI` keeps.
    static let historyLength = 16
    /// How many gaps the interval is estimated from.
    static let gapCount = 32
    /// How many gaps it takes before an interval is estimated.
    static let gapsForAnEstimate = 3
    /// Reports closer than this are not two advertising events (an advertisement and its scan response, say):
    /// the shortest advertising interval is 20 ms, and each event is delayed by 0 to 10 ms more.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.4.2.2.1 (advInterval and advDelay).
    static let shortestGap: Duration = .milliseconds(10)
    /// A device not heard for this long (or for three of its intervals, when that is longer) is shown as gone.
    static let goneAfter: Duration = .seconds(5)

    /// The first report, at `time`.
    init(at time: Duration, rssi: Int) {
        firstSeen = time
        lastSeen = time
        lastEvent = time
        record(at: time, rssi: rssi)
    }

    /// One more report, at `time` (never earlier than the one before).
    mutating func record(at time: Duration, rssi: Int) {
        if packets > 0 {
            let gap = time - lastEvent
            if gap >= Self.shortestGap {
                gaps.append(gap)
                if gaps.count > Self.gapCount { gaps.removeFirst(gaps.count - Self.gapCount) }
                lastEvent = time
            }
        }
        packets += 1
        lastSeen = max(lastSeen, time)
        guard rssi != 127 else { return }
        minimumRSSI = min(minimumRSSI ?? rssi, rssi)
        maximumRSSI = max(maximumRSSI ?? rssi, rssi)
        rssiTotal += rssi
        rssiCount += 1
        recentRSSI.append(rssi)
        if recentRSSI.count > Self.historyLength { recentRSSI.removeFirst(recentRSSI.count - Self.historyLength) }
    }

    /// The mean of the RSSI values measured, in dBm.
    var averageRSSI: Double? { rssiCount == 0 ? nil : Double(rssiTotal) / Double(rssiCount) }

    /// The advertising interval as measured: the median of the gaps between reports that look like one interval
    /// apart (a scanner misses some events, which makes gaps of two or three intervals: those are left out). It
    /// includes the random advDelay, 5 ms on average. One gap shorter than the device's interval (a device
    /// that advertised faster for a moment) makes the estimate that shorter gap's. Nil until `gapsForAnEstimate` gaps were seen.
    var advertisingInterval: Duration? {
        guard gaps.count >= Self.gapsForAnEstimate else { return nil }
        let sorted = gaps.sorted()
        // A gap is advInterval plus advDelay (0 to 10 ms), or several of those when events were missed: the
        // shortest is one interval, and gaps up to half as long again are one interval too (for an interval of
        // 20 ms or more, advDelay never takes a gap that far, nor two intervals that near).
        let single = sorted.filter { $0 <= sorted[0] * 3 / 2 }
        return single[single.count / 2]
    }

    /// How long ago the latest report came, at `now`.
    func age(at now: Duration) -> Duration { max(now - lastSeen, .zero) }

    /// Whether the device looks gone at `now`: not heard for `goneAfter`, or for three of its intervals when
    /// that is longer.
    func isGone(at now: Duration) -> Bool {
        age(at: now) > max(Self.goneAfter, (advertisingInterval ?? .zero) * 3)
    }
}
