import ArgumentParser
import BLE
import BLEBench
import Foundation

/// `ble bench`: measurements of the stack.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the stack: a link against the air-time model, the whole stack's speed, and many links.",
        subcommands: [LinkBenchCommand.self, HostBenchCommand.self, ScaleBenchCommand.self])
}

/// `ble bench link`: the link table.
struct LinkBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "link",
        abstract: "Throughput of one link in virtual time against the simulated radio's air-time model.",
        discussion: """
            For each kind of transfer (notifications, writes without response, acknowledged writes, indications), \
            PHY (LE 1M, LE 2M), LL payload (27, 251 bytes; ATT_MTU is 4 less) and connection interval (7.5, 15, \
            30, 50, 100 ms), two devices on a simulated radio run the transfer through the public API, and the \
            payload received per second of virtual time is set against the model: N · P · 8 / CI with \
            N = floor(CI / T_pair) for unacknowledged data, P · 8 / (2 · CI) for acknowledged data. The same seed \
            gives the same table.
            """)

    @Option(help: "Seconds of virtual time to measure each case (after one second of warm-up).")
    var seconds = 5

    @Option(help: "Seed of the simulated radio.")
    var seed: UInt64 = 1

    @Option(help: "Only this kind: notifications, writes-without-response, writes or indications.")
    var kind: String?

    @Flag(help: "One JSON object per case on stdout.")
    var json = false

    func validate() throws {
        try CommandLineNumbers.checkCount(seconds, option: "--seconds", minimum: 1)
        if seconds > 3600 { throw ValidationError("--seconds must be at most 3600, not \(seconds)") }
        if let kind, LinkBenchmark.Kind(rawValue: kind) == nil {
            throw ValidationError(
                "--kind must be one of \(LinkBenchmark.Kind.allCases.map(\.rawValue).joined(separator: ", ")), not '\(kind)'"
            )
        }
    }

    static let intervals: [Duration] = [
        .microseconds(7500), .milliseconds(15), .milliseconds(30), .milliseconds(50), .milliseconds(100),
    ]

    func run() async throws {
        let kinds = kind.flatMap(LinkBenchmark.Kind.init(rawValue:)).map { [$0] } ?? LinkBenchmark.Kind.allCases
        if !json {
            Output.line("kind                     PHY      LL  CI ms   measured kbit/s   model kbit/s   of model")
        }
        for kind in kinds {
            for phy in [LinkPHY.le1M, .le2M] {
                for payload in [27, 251] {
                    for interval in Self.intervals {
                        let bench = LinkBenchmark(kind: kind, phy: phy, payload: payload, interval: interval)
                        let measured = try await bench.measure(seconds: seconds, seed: seed)
                        Output.line(json ? Self.json(bench, measured) : Self.row(bench, measured))
                    }
                }
            }
        }
    }

    static func milliseconds(_ d: Duration) -> Double { Double(d.clampedNanoseconds) / 1e6 }

    static func row(_ bench: LinkBenchmark, _ measured: Double) -> String {
        let share = bench.model > 0 ? measured / bench.model * 100 : 0
        return [
            bench.kind.rawValue.padding(toLength: 24, withPad: " ", startingAt: 0),
            (bench.phy == .le1M ? "LE 1M" : "LE 2M").padding(toLength: 6, withPad: " ", startingAt: 0),
            String(format: "%5d", bench.payload),
            String(format: "%6.1f", milliseconds(bench.interval)),
            String(format: "%17.1f", measured),
            String(format: "%14.1f", bench.model),
            String(format: "%9.1f %%", share),
        ].joined(separator: " ")
    }

    static func json(_ bench: LinkBenchmark, _ measured: Double) -> String {
        JSON.object([
            ("kind", .string(bench.kind.rawValue)),
            ("phy", .string(bench.phy == .le1M ? "1M" : "2M")),
            ("llPayload", .number(bench.payload)),
            ("intervalMs", .double(milliseconds(bench.interval))),
            ("measuredKbps", .double((measured * 10).rounded() / 10)),
            ("modelKbps", .double((bench.model * 10).rounded() / 10)),
        ]).text
    }
}
