import ArgumentParser
import BLE
import Foundation
import Synchronization

// `ble shell`'s commands on the connected device's database and values: explore, read, write, subscribe,
// unsubscribe.

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
