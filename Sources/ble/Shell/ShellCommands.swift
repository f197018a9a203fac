import ArgumentParser
import BLE
import Foundation
import Synchronization

/// One of `ble shell`'s commands: parsed from the line's words by ArgumentParser (so `help read` and a wrong
/// option read as the tool's own commands do), then run against the session.
protocol ShellCommandLine: ParsableCommand {
    func run(in shell: ShellSession) async throws
    /// The options Tab offers after '-'.
    static var optionNames: [String] { get }
}

extension ShellCommandLine {
    static var optionNames: [String] { ["--help"] }
}

/// The shell's commands, in the order `help` lists them.
enum ShellCommands {
    static let all: [any ShellCommandLine.Type] = [
        ShellScan.self, ShellDevices.self, ShellConnect.self, ShellExplore.self, ShellRead.self, ShellWrite.self,
        ShellSubscribe.self, ShellUnsubscribe.self, ShellPair.self, ShellMTU.self, ShellRSSI.self, ShellInfo.self,
        ShellDisconnect.self, ShellUse.self, ShellLinks.self, ShellWait.self, ShellHelp.self, ShellQuit.self,
    ]

    static var names: [String] { all.compactMap { $0.configuration.commandName } + ["exit"] }

    static func named(_ name: String) -> (any ShellCommandLine.Type)? {
        let name = name == "exit" ? "quit" : name
        return all.first { $0.configuration.commandName == name }
    }

    static func parse<T: ShellCommandLine>(_ type: T.Type, _ arguments: [String]) throws -> any ShellCommandLine {
        try T.parse(negativeNumbersAsValues(arguments))
    }

    /// ArgumentParser reads a word such as "-1" as an option ('wait -1' said "Missing expected argument", 'scan -1'
    /// "Unknown option"): a negative number not after an option, with no option after it, gets "--" before it, so
    /// it reaches the command as its value and the command's own check says what is wrong with it.
    static func negativeNumbersAsValues(_ words: [String]) -> [String] {
        func isNegativeNumber(_ word: String) -> Bool { word.count > 1 && word.hasPrefix("-") && Double(word) != nil }
        guard let index = words.firstIndex(where: isNegativeNumber), !words.contains("--"),
            index == 0 || !words[index - 1].hasPrefix("-"),
            !words[(index + 1)...].contains(where: { $0.hasPrefix("-") && !isNegativeNumber($0) })
        else { return words }
        return Array(words[..<index]) + ["--"] + Array(words[index...])
    }

    /// `help`: one line per command.
    static func summary() -> String {
        let rows = all.map { type -> (String, String) in
            // The options are for 'help COMMAND'; the list shows the arguments.
            let usage =
                type.usageString().replacing(#/ ?\[--[^\]]*\]/#, with: "")
                + (type.optionNames.count > 1 ? " [options]" : "")
            return (usage, type.configuration.abstract)
        }
        let width = min(44, rows.map(\.0.count).max() ?? 0)
        var lines = ["Commands ('help COMMAND' for its options; Tab completes commands, names and UUIDs):"]
        for (usage, abstract) in rows {
            if usage.count > width {
                lines.append("  \(usage)")
                lines.append("  " + String(repeating: " ", count: width) + "  \(abstract)")
            } else {
                lines.append("  " + usage.padding(toLength: width, withPad: " ", startingAt: 0) + "  \(abstract)")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func usageString<T: ParsableCommand>(_ type: T.Type) -> String { type.usageString() }
}

extension ParsableCommand {
    /// "read [<char>] [--descriptor <uuid>] ...": the usage without the "USAGE: " ArgumentParser puts first.
    static func usageString() -> String {
        let text = helpMessage(columns: 200)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("USAGE:") }) else {
            return configuration.commandName ?? ""
        }
        return line.dropFirst("USAGE:".count).trimmingCharacters(in: .whitespaces)
    }
}

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

    @Option(
        help: ArgumentHelp(
            "List each device once at the end in this order: rssi, name, address or seen.", valueName: "order"))
    var sort: ScanSort?

    @Flag(help: "Report every advertisement instead of each device once (and again when its data changes).")
    var duplicates = false

    @Flag(help: "Also print the raw AD structures of the advertisement and the scan response.")
    var raw = false

    @Flag(help: "One JSON object per line.")
    var json = false

    static var optionNames: [String] {
        ["--timeout"] + ScanFilterOptions.names + ["--sort", "--duplicates", "--raw", "--json", "--help"]
    }

    func validate() throws {
        try CommandLineNumbers.checkSeconds(
            timeout ?? seconds, option: timeout == nil ? "SECONDS" : "--timeout", zeroAllowed: false)
        if sort != nil, duplicates {
            throw ValidationError("--sort lists each device once, so it cannot be used with --duplicates")
        }
    }

    func run(in shell: ShellSession) async throws {
        let tool = shell.tool
        try await tool.ready()
        let services = try filters.serviceFilter()
        let filter = try filters.filter()
        let limit = CommandLineNumbers.duration(seconds: timeout ?? seconds)
        let output = ScanOutput(
            mode: sort == nil ? .lines : .sortedAtEnd, json: json, raw: raw, sort: sort ?? .seen,
            duplicates: duplicates, now: { tool.system.now },
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

// MARK: The database and its values

struct ShellExplore: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "explore", abstract: "Read every readable value and print the database as a tree.")

    @Flag(help: "Print one JSON object.")
    var json = false

    static var optionNames: [String] { ["--json", "--help"] }

    func run(in shell: ShellSession) async throws {
        let explorer = Explorer(tool: shell.tool, peripheral: try shell.connected())
        try await explorer.run()
        shell.terminal.print(json ? explorer.json().text : explorer.text())
    }
}

struct ShellRead: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read a characteristic (or --descriptor of it, or --handle) as `ble read` does.")

    @Argument(help: ArgumentHelp("The characteristic's UUID (not with --handle).", valueName: "char"))
    var characteristic: String?

    @Option(help: ArgumentHelp("Read this descriptor of CHAR (2901, 2902, 2904, ...).", valueName: "uuid"))
    var descriptor: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Read the attribute at this handle (0x0012 or 18).", valueName: "handle"))
    var handle: String?

    @Option(
        help: ArgumentHelp(
            "auto, hex, utf8, uint, int, float, json, or a type (u16, s32be, f32, sfloat, ...).", valueName: "format"))
    var format: ValueFormat = .auto

    @Flag(help: "Print one JSON object (as --format json).")
    var json = false

    static var optionNames: [String] { ["--descriptor", "--handle", "--format", "--json", "--help"] }

    func validate() throws {
        _ = try AttributeSelection(characteristic: characteristic, descriptor: descriptor, handle: handle)
    }

    func run(in shell: ShellSession) async throws {
        let selection = try AttributeSelection(characteristic: characteristic, descriptor: descriptor, handle: handle)
        let peripheral = try shell.connected()
        let style = ValueLineStyle(format: format, json: json)
        shell.terminal.print(try await shell.tool.readLine(selection, style: style, on: peripheral))
    }
}

struct ShellWrite: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Write HEX values (or --text, or --file) to a characteristic, descriptor or handle.")

    @Argument(help: ArgumentHelp("The characteristic's UUID (with --handle: the first HEX).", valueName: "char"))
    var characteristic: String?

    @Argument(help: ArgumentHelp("Values in hex (or as --format says); one write each.", valueName: "value"))
    var values: [String] = []

    @Option(
        help: ArgumentHelp(
            "How VALUEs are written: hex, utf8, bool, u8 ... u64, s8 ... s64 (be: big-endian), f32, f64, sfloat, medfloat32.",
            valueName: "format"))
    var format: ValueFormat?

    @Flag(help: "Print one JSON object when done.")
    var json = false

    @Option(help: ArgumentHelp("Write this text's UTF-8 bytes.", valueName: "string"))
    var text: String?

    @Option(help: ArgumentHelp("Write this file's bytes.", valueName: "path"))
    var file: String?

    @Option(help: ArgumentHelp("Write this descriptor of CHAR.", valueName: "uuid"))
    var descriptor: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Write the attribute at this handle instead of CHAR.", valueName: "handle"))
    var handle: String?

    @Flag(help: "Send Write Commands (no response) instead of Write Requests.")
    var withoutResponse = false

    @Flag(help: "With --without-response: split each value into pieces of ATT_MTU - 3 bytes.")
    var chunk = false

    static var optionNames: [String] {
        [
            "--format", "--text", "--file", "--descriptor", "--handle", "--without-response", "--chunk", "--json",
            "--help",
        ]
    }

    /// The attribute and the values, checked as `ble write` checks them.
    func parsed() throws -> (AttributeSelection, [Data]) {
        var positional = values
        var char = characteristic
        if handle != nil, let first = char {
            positional.insert(first, at: 0)
            char = nil
        }
        if chunk && !withoutResponse { throw ValidationError("--chunk goes with --without-response") }
        let selection = try AttributeSelection(characteristic: char, descriptor: descriptor, handle: handle)
        var writes: [[Data]] = []
        let type: ValueType
        do {
            type = try (format ?? .auto).typeForWriting()
        } catch {
            throw ValidationError(error.message)
        }
        if format != nil, text != nil || file != nil {
            throw ValidationError("--format says how VALUEs are written, not --text or --file")
        }
        if !positional.isEmpty { writes.append(try positional.map { try WriteCommand.encode($0, as: type) }) }
        if let text {
            guard !text.isEmpty else { throw ValidationError("--text is empty: nothing to write") }
            writes.append([Data(text.utf8)])
        }
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("--file '\(file)' cannot be read")
            }
            guard !data.isEmpty else { throw ValidationError("--file '\(file)' is empty: nothing to write") }
            writes.append([data])
        }
        guard writes.count == 1, let values = writes.first else {
            throw ValidationError(
                writes.isEmpty
                    ? "give the value to write: HEX, --text STRING or --file PATH"
                    : "give the value one way: HEX, --text or --file, not several")
        }
        if !withoutResponse, let long = values.first(where: { $0.count > 512 }) {
            throw ValidationError("a value is at most 512 bytes; this one has \(long.count)")
        }
        return (selection, values)
    }

    func validate() throws { _ = try parsed() }

    func run(in shell: ShellSession) async throws {
        let (selection, values) = try parsed()
        let peripheral = try shell.connected()
        let report = try await shell.tool.write(
            values, to: selection, withoutResponse: withoutResponse, chunk: chunk, on: peripheral)
        shell.terminal.print(json ? report.json.text : report.lines.joined(separator: "\n"))
    }
}

struct ShellSubscribe: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Print a characteristic's notifications or indications as they arrive, until 'unsubscribe'.")

    @Argument(help: ArgumentHelp("The characteristic: its UUID or its name.", valueName: "char"))
    var characteristic: String

    @Option(
        help: ArgumentHelp(
            "auto, hex, utf8, uint, int, float, json, or a type (u16, s32be, f32, sfloat, ...).", valueName: "format"))
    var format: ValueFormat = .auto

    @Flag(help: "One JSON object per value (as --format json).")
    var json = false

    @Flag(help: "Read the value once and print it before the first notification.")
    var readFirst = false

    @Flag(help: "Subscribe to indications when the characteristic offers both.")
    var indicate = false

    static var optionNames: [String] { ["--format", "--json", "--read-first", "--indicate", "--help"] }

    func validate() throws { _ = try parseCharacteristic(characteristic) }

    func run(in shell: ShellSession) async throws {
        let reference = try parseCharacteristic(characteristic)
        let tool = shell.tool
        let peripheral = try shell.connected()
        let c = try await tool.findCharacteristic(reference, on: peripheral)
        guard shell.state.withLock({ $0.subscriptions[c.uuid] == nil }) else {
            throw ToolError(.failure, "already subscribed to \(c.uuid.labelled)")
        }
        try tool.requireSubscribable(c, for: "subscribing to \(c.uuid.uuidString)")
        let style = ValueLineStyle(format: format, json: json)
        let presentation = style.format == .hex ? nil : try await tool.presentationFormat(of: c, on: peripheral)
        if readFirst {
            try tool.require(.read, of: c, code: .readNotPermitted, for: "--read-first: reading \(c.uuid.uuidString)")
            let value = try await tool.run("reading \(c.uuid.uuidString)") {
                try await peripheral.readValue(for: c, timeout: nil)
            }
            let reading = ValueReading(value, type: c.uuid, presentation: presentation)
            shell.terminal.print(SubscribeCommand.line(reading, kind: "read", at: Timestamp.now(), style: style))
        }
        let kind: ValueUpdate.Kind = indicate ? .indication : .notification
        try await tool.subscribe(to: c, kind: kind, on: peripheral)
        let updates = peripheral.valueUpdates(for: c)
        let terminal = shell.terminal
        let task = shell.background {
            do {
                for try await update in updates {
                    let reading = ValueReading(update.value, type: c.uuid, presentation: presentation)
                    var line = SubscribeCommand.line(
                        reading, kind: SubscribeCommand.kindName(update.kind), at: Timestamp.now(), style: style,
                        naming: true)
                    // With several devices connected, the device after the time, as `ble connect` names it.
                    if shell.severalLinks, !style.json, let space = line.firstIndex(of: " ") {
                        line.insert(contentsOf: " \(peripheral.name ?? peripheral.address.string):", at: space)
                    }
                    terminal.print(line)
                }
            } catch {
                // A link that went down says so itself; anything else ends this subscription alone.
                if peripheral.state == .connected {
                    terminal.printError("the subscription to \(c.uuid.labelled) ended: \(error)")
                }
            }
        }
        shell.state.withLock { $0.subscriptions[c.uuid] = task }
        shell.terminal.print(SubscribeCommand.subscribedNotice(c, kind: kind))
    }
}

struct ShellUnsubscribe: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "unsubscribe", abstract: "Stop a subscription (every one when CHAR is not given).")

    @Argument(help: ArgumentHelp("The characteristic: its UUID or its name.", valueName: "char"))
    var characteristic: String?

    func validate() throws { if let characteristic { _ = try parseCharacteristic(characteristic) } }

    func run(in shell: ShellSession) async throws {
        let peripheral = try shell.connected()
        let running = shell.state.withLock { $0.subscriptions }
        let uuids: [BluetoothUUID]
        if let characteristic {
            let reference = try parseCharacteristic(characteristic)
            let uuid =
                try reference.uuid
                ?? reference.pick(among: running.keys.sorted(), on: "the subscriptions")
            guard running[uuid] != nil else { throw ToolError(.failure, "not subscribed to \(uuid.labelled)") }
            uuids = [uuid]
        } else {
            guard !running.isEmpty else { throw ToolError(.failure, "no subscriptions") }
            uuids = running.keys.sorted()
        }
        for uuid in uuids {
            let c = try await shell.tool.findCharacteristic(uuid, on: peripheral)
            try await shell.tool.run("unsubscribing from \(uuid.uuidString)") {
                try await peripheral.setNotifyValue(false, for: c, timeout: nil)
            }
            shell.state.withLock { $0.subscriptions.removeValue(forKey: uuid) }?.cancel()
            shell.terminal.print("unsubscribed from \(uuid.labelled)")
        }
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

// MARK: The shell itself

struct ShellWait: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "wait", abstract: "Wait SECONDS (in a script: for notifications to arrive).")

    @Argument(help: ArgumentHelp("How long.", valueName: "seconds"))
    var seconds: Double

    func validate() throws {
        try CommandLineNumbers.checkSeconds(seconds, option: "SECONDS")
    }

    func run(in shell: ShellSession) async throws {
        try await shell.tool.system.sleep(for: CommandLineNumbers.duration(seconds: seconds))
    }
}

struct ShellHelp: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "help", abstract: "List the commands, or show one command's options.")

    @Argument(help: ArgumentHelp("A command.", valueName: "command"))
    var command: String?

    func run(in shell: ShellSession) async throws {
        guard let command else {
            shell.terminal.print(ShellCommands.summary())
            return
        }
        guard let type = ShellCommands.named(command) else {
            throw ValidationError("no command '\(command)' ('help' lists them)")
        }
        shell.terminal.print(type.helpMessage(columns: ShellTerminal.columns()))
    }
}

struct ShellQuit: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "quit", abstract: "Disconnect and leave (also 'exit', or Ctrl-D).")

    /// Handled by the loop before parsing; here for `help`.
    func run(in shell: ShellSession) async throws {}
}
