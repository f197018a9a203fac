import ArgumentParser
import BLE
import BLEBench
import Foundation

/// `ble bench host`: how much payload the whole stack carries per wall-clock second.
struct HostBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "host",
        abstract: "Payload per wall-clock second of one link streaming notifications, the whole stack in one process.",
        discussion: """
            Two devices on a simulated radio (ATT_MTU 247, LE 1M, 251-byte LL payloads, a 30 ms interval): the \
            sensor keeps its notification queue full and the phone counts what arrives, through the public API \
            (its peripheral delegate, or with --receiver stream the async notifications(for:) stream). \
            Each run measures a window of virtual time after a second of warm-up and reads the wall clock around \
            it; the figure is payload bytes per wall-clock second, with the median of the runs. \
            Scripts/bumble_stream.py measures Bumble's whole stack the same way. With --format bumble-bench the \
            notifications are bumble-bench's GATT packets (its service, characteristic and packet layout), each \
            decoded by the receiver and checked for sequence: a format check, not a speed comparison.
            """)

    @Option(help: "Seconds of virtual time in each run's window (0.1...3600).")
    var seconds: Double = 20

    @Option(help: "Runs (1...100); the median is reported.")
    var runs = 3

    @Option(help: "Seed of the simulated radio.")
    var seed: UInt64 = 1

    @Option(help: "What the notifications carry: plain or bumble-bench.")
    var format = "plain"

    @Option(
        help: """
            How the phone takes the values: delegate (peripheral(_:didUpdateValueFor:error:), as Bumble's \
            callback in Scripts/bumble_stream.py) or stream (for try await in peripheral.notifications(for:)).
            """)
    var receiver = "delegate"

    @Flag(help: "One JSON object per run, then one for the median, on stdout.")
    var json = false

    func validate() throws {
        try CommandLineNumbers.checkSeconds(seconds, option: "--seconds", minimum: 0.1)
        if seconds > 3600 { throw ValidationError("--seconds must be at most 3600, not \(seconds)") }
        try CommandLineNumbers.checkCount(runs, option: "--runs", minimum: 1)
        if runs > 100 { throw ValidationError("--runs must be at most 100, not \(runs)") }
        if LinkBenchmark.Receiver(rawValue: receiver) == nil {
            throw ValidationError(
                "--receiver must be one of \(LinkBenchmark.Receiver.allCases.map(\.rawValue).joined(separator: ", ")), not '\(receiver)'"
            )
        }
        if PacketFormat(rawValue: format) == nil {
            throw ValidationError(
                "--format must be one of \(PacketFormat.allCases.map(\.rawValue).joined(separator: ", ")), not '\(format)'"
            )
        }
    }

    static func bench(format: PacketFormat, receiver: LinkBenchmark.Receiver = .delegate) -> LinkBenchmark {
        LinkBenchmark(
            kind: .notifications, phy: .le1M, payload: 251, interval: .milliseconds(30), format: format,
            receiver: receiver)
    }

    func run() async throws {
        let bench = Self.bench(
            format: PacketFormat(rawValue: format) ?? .plain,
            receiver: LinkBenchmark.Receiver(rawValue: receiver) ?? .delegate)
        if !json {
            Output.line("run   virtual s   wall s   values   in sequence   payload MB/s (wall)   kbit/s (virtual)")
        }
        var rates: [Double] = []
        for run in 1...runs {
            let m = try await bench.run(seconds: seconds, seed: seed)
            rates.append(m.bytesPerWallSecond)
            if json {
                Output.line(
                    JSON.object([
                        ("run", .number(run)), ("format", .string(format)), ("receiver", .string(receiver)),
                        ("virtualSeconds", .double(m.virtualSeconds)),
                        ("wallSeconds", .double(m.wallSeconds)), ("values", .number(m.values)),
                        // Only bumble-bench's packets carry a sequence number to check.
                        ("inSequence", bench.format == .plain ? .null : .number(m.inSequence)),
                        ("payloadBytes", .number(m.bytes)),
                        ("bytesPerWallSecond", .double(m.bytesPerWallSecond.rounded())),
                        ("virtualKbps", .double((m.virtualKbps * 10).rounded() / 10)),
                    ]).text)
            } else {
                let counted = bench.format == .plain ? "-" : "\(m.inSequence)"
                let sequence = String(repeating: " ", count: max(0, 13 - counted.count)) + counted
                Output.line(
                    String(
                        format: "%3d %11.1f %8.3f %8d %@ %21.2f %18.1f", run, m.virtualSeconds, m.wallSeconds,
                        m.values, sequence, m.bytesPerWallSecond / 1e6, m.virtualKbps))
            }
        }
        let median = rates.sorted()[rates.count / 2]
        if json {
            Output.line(JSON.object([("median", .bool(true)), ("bytesPerWallSecond", .double(median.rounded()))]).text)
        } else {
            Output.line(String(format: "median: %.2f MB/s of payload per wall-clock second", median / 1e6))
        }
    }
}

/// `ble bench scale`: many links in one room, each notifying a small value at a steady rate.
struct ScaleBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Real-time factor of a room of links, each peripheral notifying at a steady rate.",
        discussion: """
            Each case is CENTRALSxPERIPHERALS: that many phones, each connected to that many sensors of its own, \
            every sensor notifying --value-length octets --rate times a second once subscribed. After the links \
            are up and a second of warm-up, the radio runs --seconds of virtual time; the figure is virtual \
            seconds per wall-clock second, with the share of the values delivered and the memory the links took \
            (resident set growth while they came up, per link). The default sweep is 1x10, 1x100, 10x20, 50x20 \
            and 1x1000. A connected heart-rate sensor for a day: --case 1x1 --rate 1 --value-length 2 \
            --interval-ms 30 --seconds 86400.
            """)

    @Option(name: .customLong("case"), help: "A case CENTRALSxPERIPHERALS (repeatable), such as 50x20.")
    var cases: [String] = []

    @Option(help: "Seconds of virtual time measured in each case (0.1 ... a year).")
    var seconds: Double = 10

    @Option(help: "Notifications per second of each sensor (0.01...1000).")
    var rate: Double = 10

    @Option(help: "Octets of each notification (1...244).")
    var valueLength = 20

    @Option(help: "Connection interval in milliseconds (7.5...4000).")
    var intervalMs: Double = 50

    @Option(help: "Seed of the simulated radio.")
    var seed: UInt64 = 1

    @Flag(help: "One JSON object per case on stdout.")
    var json = false

    static let defaultCases = ["1x10", "1x100", "10x20", "50x20", "1x1000"]

    static func parseCase(_ text: String) -> (centrals: Int, peripherals: Int)? {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let c = Int(parts[0]), let p = Int(parts[1]), (1...1000).contains(c),
            (1...2000).contains(p), c * p <= 20_000
        else { return nil }
        return (c, p)
    }

    func validate() throws {
        try CommandLineNumbers.checkSeconds(seconds, option: "--seconds", minimum: 0.1)
        guard rate.isFinite, (0.01...1000).contains(rate) else {
            throw ValidationError("--rate must be a number from 0.01 to 1000, not \(rate)")
        }
        guard (1...244).contains(valueLength) else {
            throw ValidationError("--value-length must be from 1 to 244, not \(valueLength)")
        }
        guard intervalMs.isFinite, (7.5...4000).contains(intervalMs) else {
            throw ValidationError("--interval-ms must be a number from 7.5 to 4000, not \(intervalMs)")
        }
        for text in cases where Self.parseCase(text) == nil {
            throw ValidationError(
                "--case must be CENTRALSxPERIPHERALS (1...1000 x 1...2000, at most 20000 links), not '\(text)'")
        }
    }

    func run() async throws {
        if !json {
            Output.line(
                "case       links  subscribed   virtual s    wall s   x real time   delivered   setup s   KiB/link")
        }
        let interval = Duration.microseconds(Int64((intervalMs * 1000).rounded()))
        for text in cases.isEmpty ? Self.defaultCases : cases {
            guard let (c, p) = Self.parseCase(text) else { continue }
            let bench = ScaleBenchmark(
                centrals: c, peripheralsPerCentral: p, rate: rate, valueLength: valueLength, interval: interval)
            let r = try await bench.run(seconds: seconds, seed: seed)
            if json {
                Output.line(
                    JSON.object([
                        ("case", .string(text)), ("centrals", .number(c)), ("peripheralsPerCentral", .number(p)),
                        ("links", .number(r.links)), ("subscribed", .number(r.subscribed)), ("sent", .number(r.sent)),
                        ("received", .number(r.received)), ("expected", .number(r.expected)),
                        ("virtualSeconds", .double(r.virtualSeconds)), ("wallSeconds", .double(r.wallSeconds)),
                        ("realTimeFactor", .double((r.realTimeFactor * 100).rounded() / 100)),
                        ("delivered", .double((r.deliveredShare * 10000).rounded() / 10000)),
                        ("setupWallSeconds", .double(r.setupWallSeconds)),
                        ("bytesPerLink", r.bytesPerLink.map(JSON.number) ?? .null),
                    ]).text)
            } else {
                let kib = r.bytesPerLink.map { String(format: "%.1f", Double($0) / 1024) } ?? "-"
                Output.line(
                    text.padding(toLength: 9, withPad: " ", startingAt: 0)
                        + String(
                            format: " %6d %11d %11.1f %9.3f %13.2f %10.1f %% %9.2f ", r.links, r.subscribed,
                            r.virtualSeconds, r.wallSeconds, r.realTimeFactor, r.deliveredShare * 100,
                            r.setupWallSeconds) + String(repeating: " ", count: max(0, 10 - kib.count)) + kib)
            }
        }
    }
}
