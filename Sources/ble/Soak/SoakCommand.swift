import ArgumentParser
import BLE
import Foundation

/// `ble soak`: a long run of several devices doing random work on the simulated radio, and its account.
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Simulated hours of centrals and peripherals doing random work; checks nothing was lost or hung.",
        discussion: """
            On a private simulated radio (whatever --transport says), CENTRALS centrals each visit random \
            peripherals of PERIPHERALS: connect, discover, then a few of reads, writes with response (short and \
            long), transfers without response, subscriptions to a counter notified once a second, pauses; a \
            peripheral wanders out of range now and then and its links are lost. The same seed gives the same \
            run. At the end: operations by kind, every acknowledged write checked byte for byte against what its \
            peripheral received, operations that never completed (90 s of virtual time after they started), and \
            the resident memory after each simulated hour, which must stay flat after the first, and its \
            anonymous part (heap and stacks, what a leak would grow; the rest is code and mapped files). Exit \
            status 0 \
            when nothing was lost or hung and memory stayed flat, 1 otherwise.
            """)

    @Option(parsing: .unconditional, help: "Simulated hours to run (at most 720).")
    var hours: Double = 24

    @Option(help: "Seed of the run.")
    var seed: UInt64 = 1

    @Option(help: "Centrals (1 to 20).")
    var centrals = 3

    @Option(help: "Peripherals (1 to 40).")
    var peripherals = 6

    @Flag(help: "The report as one JSON object.")
    var json = false

    func validate() throws {
        guard hours.isFinite, hours > 0, hours <= 720 else {
            throw ValidationError("--hours must be more than 0 and at most 720, not \(hours)")
        }
        guard (1...20).contains(centrals) else { throw ValidationError("--centrals must be 1 to 20, not \(centrals)") }
        guard (1...40).contains(peripherals) else {
            throw ValidationError("--peripherals must be 1 to 40, not \(peripherals)")
        }
    }

    func run() async throws {
        let report = try await SoakRun(hours: hours, seed: seed, centrals: centrals, peripherals: peripherals).run()
        if json {
            Output.line(Self.json(report))
        } else {
            for line in Self.text(report) { Output.line(line) }
        }
        if !report.passed { throw ExitCode(1) }
    }

    static func text(_ r: SoakRun.Report) -> [String] {
        var lines = [
            "soak: \(format(r.hours)) simulated hours, seed \(r.seed), \(r.centrals) centrals, \(r.peripherals) peripherals, \(String(format: "%.1f", r.wallSeconds)) s of wall time",
            "connections \(r.connections), links lost \(r.linksLost), peripherals out of range \(r.outOfRange) times",
            "operation           ok     failed",
        ]
        for (kind, counts) in r.operations.sorted(by: { $0.key < $1.key }) {
            lines.append(
                kind.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + String(format: "%7d %10d", counts.ok, counts.failed))
        }
        lines.append("acknowledged writes \(r.acknowledgedWrites), lost \(r.lostWrites.count)")
        lines += r.lostWrites.map { "  lost: \($0)" }
        lines.append("hung operations \(r.hung.count)")
        lines += r.hung.map { "  hung: \($0)" }
        let mib = r.residentPerHour.map { String(format: "%.1f", Double($0) / 1_048_576) }
        lines.append(
            "resident MiB per simulated hour: \(mib.joined(separator: " "))\(r.memoryFlat ? " (flat)" : " (growing)")")
        if r.anonymousPerHour.contains(where: { $0 > 0 }) {
            let anonymous = r.anonymousPerHour.map { String(format: "%.1f", Double($0) / 1_048_576) }
            lines.append("  of which anonymous (heap, stacks): \(anonymous.joined(separator: " "))")
        }
        lines.append(r.passed ? "passed" : "FAILED")
        return lines
    }

    static func json(_ r: SoakRun.Report) -> String {
        let operations = r.operations.sorted(by: { $0.key < $1.key }).map { kind, counts -> JSON in
            .object([("kind", .string(kind)), ("ok", .number(counts.ok)), ("failed", .number(counts.failed))])
        }
        let value: JSON = .object([
            ("hours", .double(r.hours)), ("seed", .string(String(r.seed))), ("centrals", .number(r.centrals)),
            ("peripherals", .number(r.peripherals)), ("wallSeconds", .double(r.wallSeconds)),
            ("connections", .number(r.connections)), ("linksLost", .number(r.linksLost)),
            ("outOfRange", .number(r.outOfRange)), ("operations", .array(operations)),
            ("acknowledgedWrites", .number(r.acknowledgedWrites)),
            ("lostWrites", .array(r.lostWrites.map { .string($0) })),
            ("hung", .array(r.hung.map { .string($0) })),
            ("residentBytesPerHour", .array(r.residentPerHour.map { .number($0) })),
            ("anonymousBytesPerHour", .array(r.anonymousPerHour.map { .number($0) })),
            ("memoryFlat", .bool(r.memoryFlat)), ("passed", .bool(r.passed)),
        ])
        return value.text
    }

    static func format(_ hours: Double) -> String {
        hours == hours.rounded() ? String(Int(hours)) : String(hours)
    }
}
