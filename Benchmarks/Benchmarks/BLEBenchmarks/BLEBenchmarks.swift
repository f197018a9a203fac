import BLE
import BLEBench
import Benchmark

/// The figures of BLE.docc/Performance.md, each through the public API (`BLEBench`'s scenarios, which
/// `ble bench` runs too):
///
/// - one link streaming notifications (ATT_MTU 247, LE 1M, 251-octet LL payloads): wall-clock time and
///   allocations of exactly 1,000 notifications (scaling factor kilo, so the table shows them per notification),
///   and payload kB per wall-clock second;
/// - a room of 1,000 links (50 centrals with 20 sensors each, 20 octets at 10 Hz): 10 s of virtual time, with the
///   real-time factor (x100) and the share delivered (per mille);
/// - 24 hours of a connected heart-rate sensor notifying once a second.
///
/// Setup (devices coming up, scanning, connecting, subscribing) is outside each measurement.
let benchmarks: @Sendable () -> Void = {
    let payloadRate = BenchmarkMetric.custom("payload kB per wall s", polarity: .prefersLarger, useScalingFactor: false)
    let realTime = BenchmarkMetric.custom("x real time (x100)", polarity: .prefersLarger, useScalingFactor: false)
    let delivered = BenchmarkMetric.custom("delivered (per mille)", polarity: .prefersLarger, useScalingFactor: false)
    let perLink = BenchmarkMetric.custom("bytes per link", polarity: .prefersSmaller, useScalingFactor: false)

    // The phone takes the values through its peripheral delegate (as `ble bench host` does by default), and
    // through the async `notifications(for:)` stream.
    for receiver in LinkBenchmark.Receiver.allCases {
        Benchmark(
            "One link, 1,000 notifications (ATT_MTU 247, LE 1M, 251 B), \(receiver.rawValue)",
            configuration: .init(
                metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput, payloadRate], scalingFactor: .kilo,
                maxDuration: .seconds(60), maxIterations: 5)
        ) { benchmark in
            // The measurement window opens and closes on the radio's run loop, inside the run this closure
            // awaits; ordo-one's Benchmark is not Sendable.
            nonisolated(unsafe) let benchmark = benchmark
            let bench = LinkBenchmark(
                kind: .notifications, phy: .le1M, payload: 251, interval: .milliseconds(30), receiver: receiver)
            let m = try await bench.run(
                seconds: 60, seed: 1, values: 1_000,
                window: { open in open ? benchmark.startMeasurement() : benchmark.stopMeasurement() })
            benchmark.measurement(payloadRate, Int(m.bytesPerWallSecond / 1_000))
        }
    }

    Benchmark(
        "1,000 links (50 x 20), 20 B at 10 Hz, 10 s",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident, realTime, delivered, perLink],
            maxDuration: .seconds(600), maxIterations: 1)
    ) { benchmark in
        // The measurement window opens and closes on the radio's run loop, inside the run this closure awaits;
        // ordo-one's Benchmark is not Sendable.
        nonisolated(unsafe) let benchmark = benchmark
        let r = try await ScaleBenchmark(centrals: 50, peripheralsPerCentral: 20).run(
            seconds: 10, seed: 1, window: { open in open ? benchmark.startMeasurement() : benchmark.stopMeasurement() })
        benchmark.measurement(realTime, Int((r.realTimeFactor * 100).rounded()))
        benchmark.measurement(delivered, Int((r.deliveredShare * 1000).rounded()))
        benchmark.measurement(perLink, r.bytesPerLink ?? 0)
    }

    Benchmark(
        "Heart-rate sensor at 1 Hz for 24 h",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, delivered], maxDuration: .seconds(120), maxIterations: 3)
    ) { benchmark in
        // The measurement window opens and closes on the radio's run loop, inside the run this closure awaits;
        // ordo-one's Benchmark is not Sendable.
        nonisolated(unsafe) let benchmark = benchmark
        let r = try await ScaleBenchmark.heartRate.run(
            seconds: 86_400, seed: 1,
            window: { open in open ? benchmark.startMeasurement() : benchmark.stopMeasurement() })
        benchmark.measurement(delivered, Int((r.deliveredShare * 1000).rounded()))
    }
}
