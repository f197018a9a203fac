import ArgumentParser
import BLE
import Foundation
import Synchronization

// `ble shell`'s commands that find devices and hold links to them: scan, devices, connect, disconnect, use,
// links; and those about a link: pair, mtu, rssi, info.

// MARK: Scanning and connecting

struct ShellScan: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for SECONDS (5 by default), one line per device found, as 'ble scan' prints them.",
        discussion: """
            The filters and formats are those of 'ble scan' outside a terminal: each new or changed device as a \
            line after the time it came (every report with --duplicates), or each device once at the end with \
            --sort, with its statistics; --json for JSON objects, --raw for the AD structures.
            """)

    @Argument(help: ArgumentHelp("How long to scan.", valueName: "seconds"))
    var seconds: Double = 5

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan, as SECONDS (which it replaces).", valueName: "seconds"))
    var timeout: Double?

    @OptionGroup var filters: ScanFilterOptions

    @OptionGroup var printing: ScanPrintOptions

    static var optionNames: [String] {
        ["--timeout"] + ScanFilterOptions.names + ScanPrintOptions.names + ["--help"]
    }

    func validate() throws {
        try CommandLineNumbers.checkSeconds(
            timeout ?? seconds, option: timeout == nil ? "SECONDS" : "--timeout", zeroAllowed: false)
    }

    func run(in shell: ShellSession) async throws {
        let tool = shell.tool
        try await tool.ready()
        let services = try filters.serviceFilter()
        let filter = try filters.filter()
        let limit = CommandLineNumbers.duration(seconds: timeout ?? seconds)
        let output = ScanOutput(
            mode: printing.sort == nil ? .lines : .sortedAtEnd, json: printing.json, raw: printing.raw,
            sort: printing.sort ?? .seen, duplicates: printing.duplicates, now: { tool.system.now },
            write: { text in shell.terminal.print(text.hasSuffix("\n") ? String(text.dropLast()) : text) })
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await discovery in tool.manager.scan(
                        withServices: services, options: .init(allowDuplicates: true))
                    {
                        let report = ScanReport(discovery, on: tool.system)
                        // `devices` shows the latest of each, whatever the filters.
                        shell.remember(report)
                        if filter.admits(report) { output.received(report) }
                    }
                }
                group.addTask { try await tool.system.sleep(for: limit) }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch {
            output.abandon()
            throw error
        }
        output.finish()
        let count = output.count
        shell.terminal.print("scan done: \(count) device\(count == 1 ? "" : "s") found")
    }
}

struct ShellDevices: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "devices", abstract: "The devices scans have found, with their latest signal strength.")

    func run(in shell: ShellSession) async throws {
        let reports = shell.seenReports
        guard !reports.isEmpty else {
            shell.terminal.print("no devices seen yet: 'scan' first")
            return
        }
        shell.terminal.print(
            reports.map { r in
                "\(r.address.string)  \(r.identifier.uuidString)  \(r.rssi) dBm  \(r.name.map { "\"\($0)\"" } ?? "(no name)")"
            }.joined(separator: "\n"))
    }
}

struct ShellConnect: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a device (name, address or identifier) and discover its database.")

    @Argument(help: ArgumentHelp("An advertised name, an address or a peripheral identifier.", valueName: "target"))
    var target: String

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan for the target before giving up.", valueName: "seconds"))
    var timeout: Double = 10

    static var optionNames: [String] { ["--timeout", "--help"] }

    func validate() throws {
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout", zeroAllowed: false)
    }

    func run(in shell: ShellSession) async throws {
        // Several devices stay connected; one already linked is chosen again instead.
        if let linked = shell.linked(target), linked.state == .connected {
            shell.setConnected(linked)
            shell.terminal.print("using \(CentralTool.describe(linked)) (already connected)")
            return
        }
        let tool = shell.tool
        let peripheral = try await tool.connect(
            toTarget: target, within: CommandLineNumbers.duration(seconds: timeout))
        // The whole database, once: Tab completes its UUIDs, and each command after this finds its attribute
        // without asking the peer again. The prompt names the device once that is done (or failed).
        shell.state.withLock { $0.peripheral = peripheral }
        defer { if shell.state.withLock({ $0.peripheral === peripheral }) { shell.setConnected(peripheral) } }
        try await tool.discoverEverything(peripheral)
        let services = peripheral.services ?? []
        let characteristics = services.reduce(0) { $0 + ($1.characteristics?.count ?? 0) }
        shell.terminal.print(
            "connected to \(CentralTool.describe(peripheral)), ATT MTU \(peripheral.attMTU); "
                + "\(services.count) service\(services.count == 1 ? "" : "s"), "
                + "\(characteristics) characteristic\(characteristics == 1 ? "" : "s")")
    }
}

struct ShellDisconnect: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "disconnect",
        abstract: "End the current device's link (or TARGET's) and its subscriptions; another link becomes current.")

    @Argument(help: ArgumentHelp("A connected device: its name, address or identifier.", valueName: "target"))
    var target: String?

    func run(in shell: ShellSession) async throws {
        let peripheral = try target.map { try ShellUse.link(named: $0, in: shell) } ?? shell.connected()
        await shell.disconnect(peripheral)
        shell.terminal.print("disconnected from \(CentralTool.describe(peripheral))")
    }
}

struct ShellUse: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "use", abstract: "Make a connected device the one the commands act on ('links' lists them).")

    @Argument(help: ArgumentHelp("A connected device: its name, address or identifier.", valueName: "target"))
    var target: String

    func run(in shell: ShellSession) async throws {
        let peripheral = try Self.link(named: target, in: shell)
        shell.setConnected(peripheral)
        shell.terminal.print("using \(CentralTool.describe(peripheral))")
    }

    /// The linked device `text` names, or the error that lists the links.
    static func link(named text: String, in shell: ShellSession) throws -> Peripheral {
        if let linked = shell.linked(text), linked.state == .connected { return linked }
        let links = shell.state.withLock { $0.links }.map(CentralTool.describe)
        throw ToolError(
            .noSuchDevice,
            links.isEmpty
                ? "no device is connected: 'connect TARGET' first"
                : "'\(text)' is none of the connected devices: \(links.joined(separator: ", "))")
    }
}

struct ShellLinks: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "links", abstract: "The connected devices; '*' marks the one the commands act on.")

    func run(in shell: ShellSession) async throws {
        let (links, current) = shell.state.withLock { ($0.links, $0.peripheral) }
        guard !links.isEmpty else {
            shell.terminal.print("no device is connected")
            return
        }
        shell.terminal.print(
            links.map { "\($0 === current ? "*" : " ") \(CentralTool.describe($0))  \($0.identifier.uuidString)" }
                .joined(separator: "\n"))
    }
}

// MARK: The link

struct ShellPair: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with the connected device (as 'ble shell's pairing options say) and bond.")

    @Flag(help: "Print one JSON object.")
    var json = false

    static var optionNames: [String] { ["--json", "--help"] }

    func run(in shell: ShellSession) async throws {
        let p = try shell.connected()
        let result: PairingResult
        do {
            result = try await p.pair(timeout: nil)
        } catch let error as BluetoothError {
            throw PairCommand.failure(error, agent: shell.pairingAgent, peripheral: p)
        }
        let identity = shell.tool.system.bonds.first { $0.identifier == result.peer }?.identityAddress
        shell.terminal.print(
            PairCommand.lines(result, peripheral: p, identity: identity, json: json).joined(separator: "\n"))
    }
}

struct ShellMTU: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "mtu", abstract: "The link's ATT MTU and the longest write of each kind.")

    func run(in shell: ShellSession) async throws {
        let p = try shell.connected()
        shell.terminal.print(
            "ATT MTU \(p.attMTU): a write without response carries up to \(p.maximumWriteValueLength(for: .withoutResponse)) bytes, "
                + "a write with response up to \(p.maximumWriteValueLength(for: .withResponse))")
    }
}

struct ShellRSSI: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "rssi",
        abstract: "Read the link's signal strength; --watch reads it every S seconds (until Ctrl-C, or --count).")

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Read every S seconds, each line with its time, until Ctrl-C.", valueName: "seconds"))
    var watch: Double?

    @Option(parsing: .unconditional, help: ArgumentHelp("With --watch: stop after N readings.", valueName: "n"))
    var count: Int?

    static var optionNames: [String] { ["--watch", "--count", "--help"] }

    func validate() throws {
        if let watch { try CommandLineNumbers.checkSeconds(watch, option: "--watch", zeroAllowed: false) }
        if let count {
            guard watch != nil else { throw ValidationError("--count goes with --watch") }
            try CommandLineNumbers.checkCount(count, option: "--count", minimum: 1)
        }
    }

    func run(in shell: ShellSession) async throws {
        let p = try shell.connected()
        guard let watch else {
            let rssi = try await shell.tool.run("reading the RSSI") { try await p.readRSSI(timeout: nil) }
            shell.terminal.print("\(rssi) dBm")
            return
        }
        // As nRF Connect's RSSI graph, in lines: one reading each period, with its time, until Ctrl-C.
        var readings = 0
        while count.map({ readings < $0 }) ?? true {
            if readings > 0 { try await shell.tool.system.sleep(for: CommandLineNumbers.duration(seconds: watch)) }
            let rssi = try await shell.tool.run("reading the RSSI") { try await p.readRSSI(timeout: nil) }
            shell.terminal.print("\(Timestamp.now()) \(rssi) dBm")
            readings += 1
        }
    }
}

struct ShellInfo: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "info", abstract: "The connected device, its link and its subscriptions.")

    /// "30 ms", "7.5 ms".
    static func milliseconds(_ d: Duration) -> String {
        let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        return ms == ms.rounded() ? "\(Int(ms)) ms" : "\(ms) ms"
    }

    func run(in shell: ShellSession) async throws {
        let p = try shell.connected()
        let subscribed = shell.state.withLock { $0.subscriptions.keys.sorted() }
        var lines = [
            "connected to \(CentralTool.describe(p)), identifier \(p.identifier.uuidString)",
            "ATT MTU \(p.attMTU)",
        ]
        // The link as the LL procedures left it, and its security, as bluetoothctl's `info` shows them.
        if let link = p.link {
            lines.append(
                "interval \(Self.milliseconds(link.interval)), latency \(link.peripheralLatency), supervision timeout \(Self.milliseconds(link.supervisionTimeout))"
            )
            lines.append(
                "PHY \(link.txPHY) (tx) / \(link.rxPHY) (rx), LL payload \(link.maxTxOctets) (tx) / \(link.maxRxOctets) (rx) octets"
            )
            lines.append(link.isEncrypted ? "encrypted" : "not encrypted")
        }
        if let bond = shell.tool.system.bonds.first(where: { $0.identifier == p.identifier }) {
            lines.append(
                "bonded: \(bond.secureConnections ? "Secure Connections" : "legacy"), \(bond.authenticated ? "authenticated" : "unauthenticated"), key size \(bond.keySize)"
            )
        } else {
            lines.append("not bonded")
        }
        lines.append(
            subscribed.isEmpty
                ? "no subscriptions" : "subscribed to " + subscribed.map(\.labelled).joined(separator: ", "))
        shell.terminal.print(lines.joined(separator: "\n"))
    }
}
