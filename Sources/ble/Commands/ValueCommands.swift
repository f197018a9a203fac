import ArgumentParser
import BLE
import Foundation

/// `ble read`: one value, as hex and what it means.
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read a characteristic's value (or a descriptor's, or an attribute's by handle) and print it.",
        discussion: """
            CHAR is a UUID (2A19, or the long form); when several characteristics share it, the first is read. \
            --descriptor UUID reads that descriptor of CHAR instead (2901 user description, 2902 client \
            configuration, 2904 presentation format, or any other); --handle H reads the characteristic value or \
            descriptor at attribute handle H (0x0012 or 18) among everything discovered, in place of CHAR.

            By default the line is the value in hex, then, after two spaces, what it means when the tool knows: by \
            the characteristic's Characteristic Presentation Format descriptor (0x2904: format, exponent, unit) \
            when it has one, else by the SIG-assigned format of its type (Battery Level, Heart Rate Measurement, \
            Temperature, ...). With --format: hex (the hex alone), utf8 (the bytes as text), uint or int (a \
            little-endian integer of 1 to 8 bytes), float (IEEE 754 of 4 or 8 bytes, or IEEE 11073 SFLOAT/FLOAT \
            when the 0x2904 descriptor says medfloat16/medfloat32), or json: one object
              {"uuid", "name", "hex", "decoded", "utf8", "uint", "int", "presentation"}
            ("handle" first with --handle, "characteristic" first for a descriptor); "decoded" is the meaning (a \
            number, a string or text) or null, "utf8", "uint" and "int" are null when the bytes are not that, \
            "presentation" is the 0x2904 descriptor ({"format", "exponent", "unit", "unitSymbol", "namespace", \
            "description"}) or null. A value that does not fit the format asked for is an error (status 1).
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID (not with --handle).", valueName: "char"))
    var characteristic: String?

    @Option(help: ArgumentHelp("Read this descriptor of CHAR (2901, 2902, 2904, ...).", valueName: "uuid"))
    var descriptor: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Read the attribute at this handle instead of CHAR (0x0012 or 18).", valueName: "handle"))
    var handle: String?

    @Option(help: ArgumentHelp("How to print the value.", valueName: "format"))
    var format: ValueFormat = .auto

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        _ = try AttributeSelection(characteristic: characteristic, descriptor: descriptor, handle: handle)
    }

    func run() async throws {
        let selection = try AttributeSelection(characteristic: characteristic, descriptor: descriptor, handle: handle)
        let target = target
        let format = format
        try await CommandRun.flow(transport, controllerWait: target.timeoutDuration) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                Output.line(try await tool.readLine(selection, format: format, on: peripheral))
            }
        }
    }
}

/// `ble write`: values to a characteristic, a descriptor, or the attribute at a handle.
struct WriteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Write values to a characteristic (or a descriptor, or an attribute by handle).",
        discussion: """
            The value is given one way: HEX arguments (one write each, sent in order), --text STRING (its UTF-8 \
            bytes), --file PATH (the file's bytes), or --stdin, or '-' as HEX (the bytes of standard input until \
            it ends). A missing or unreadable file is a usage error; an empty file, empty standard input or an \
            empty --text is refused (write an empty value as HEX '').

            --descriptor UUID writes that descriptor of CHAR instead (2901, or any other writable one). The Client \
            Characteristic Configuration (2902) is written as the API writes it, by subscribing: 0100 enables \
            notifications (CHAR must notify), 0200 indications (CHAR must indicate and not notify: the API prefers \
            notifications), 0000 disables both; the subscription ends with this command's link. --handle H writes \
            the characteristic value or descriptor at attribute handle H (0x0012 or 18) in place of CHAR; then \
            the first HEX follows H: ble write TARGET --handle 0x0012 0100.

            Without --without-response a value (up to 512 bytes) is written with a Write Request, or with the \
            long-write procedure when it does not fit one, and the peer's answer decides the exit status. With \
            --without-response each value is one Write Command and must fit ATT_MTU - 3 bytes (an error \
            otherwise; --chunk splits a longer value into such pieces); each is sent only when the link has room \
            for it (canSendWriteWithoutResponse), so a bulk transfer is paced by the link rather than dropped.
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID (with --handle: the first HEX).", valueName: "char"))
    var characteristic: String?

    @Argument(
        help: ArgumentHelp(
            "Values: hex digits, optionally separated by spaces or colons; one write each. '-': standard input.",
            valueName: "hex"))
    var values: [String] = []

    @Option(help: ArgumentHelp("Write this text's UTF-8 bytes.", valueName: "string"))
    var text: String?

    @Option(help: ArgumentHelp("Write this file's bytes.", valueName: "path"))
    var file: String?

    @Flag(name: .customLong("stdin"), help: "Write the bytes of standard input (as '-' does).")
    var fromStandardInput = false

    @Option(help: ArgumentHelp("Write this descriptor of CHAR (2901, 2902, ...).", valueName: "uuid"))
    var descriptor: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Write the attribute at this handle instead of CHAR (0x0012 or 18).", valueName: "handle"))
    var handle: String?

    @Flag(help: "Send Write Commands (no response) instead of Write Requests.")
    var withoutResponse = false

    @Flag(help: "With --without-response: split each value into pieces of ATT_MTU - 3 bytes.")
    var chunk = false

    @OptionGroup var transport: TransportOptions

    /// Where the value comes from.
    enum Source {
        case hex([String])
        case text(String)
        case file(String)
        case standardInput
    }

    /// The attribute and the value's source, checked: one source, and CHAR or --handle.
    func parsed() throws -> (AttributeSelection, Source) {
        var positional = values
        var char = characteristic
        // With --handle, what ArgumentParser took for CHAR is the first value.
        if handle != nil, let first = char {
            positional.insert(first, at: 0)
            char = nil
        }
        let selection = try AttributeSelection(characteristic: char, descriptor: descriptor, handle: handle)
        var sources: [Source] = []
        if positional == ["-"] {
            sources.append(.standardInput)
        } else if positional.contains("-") {
            throw ValidationError("'-' (standard input) is the only value when it is given")
        } else if !positional.isEmpty {
            sources.append(.hex(positional))
        }
        if let text { sources.append(.text(text)) }
        if let file { sources.append(.file(file)) }
        if fromStandardInput { sources.append(.standardInput) }
        guard sources.count <= 1 else {
            throw ValidationError("give the value one way: HEX, --text, --file or --stdin ('-'), not several")
        }
        guard let source = sources.first else {
            throw ValidationError("give the value to write: HEX, --text STRING, --file PATH or --stdin ('-')")
        }
        return (selection, source)
    }

    func validate() throws {
        if chunk && !withoutResponse { throw ValidationError("--chunk goes with --without-response") }
        let (selection, source) = try parsed()
        if case .descriptor = selection, withoutResponse {
            throw ValidationError("--without-response writes a characteristic; a descriptor is written with response")
        }
        switch source {
        case .hex(let texts):
            for text in texts { try check(try Self.hex(text)) }
        case .text(let string):
            guard !string.isEmpty else {
                throw ValidationError("--text is empty: nothing to write (write an empty value as HEX '')")
            }
            try check(Data(string.utf8))
        case .file(let path):
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                throw ValidationError("--file '\(path)': no such file")
            }
            guard !isFolder.boolValue, FileManager.default.isReadableFile(atPath: path) else {
                throw ValidationError("--file '\(path)' is not a readable file")
            }
        case .standardInput:
            break
        }
    }

    static func hex(_ text: String) throws -> Data {
        guard let value = Data(lenientHex: text) else {
            let digits = text.filter(\.isHexDigit)
            if digits.count % 2 == 1, text.allSatisfy({ $0.isHexDigit || $0 == " " || $0 == ":" || $0 == "-" }) {
                throw ValidationError(
                    "HEX '\(text)' has an odd number of digits (\(digits.count)): each byte is two (00 to ff)")
            }
            throw ValidationError("HEX '\(text)' is not hex digits")
        }
        return value
    }

    private func check(_ value: Data) throws {
        if !withoutResponse && value.count > 512 {
            throw ValidationError("a value is at most 512 bytes; this one has \(value.count)")
        }
    }

    /// The values to write, read before connecting (a file or standard input is read to its end).
    func load(_ source: Source) throws -> [Data] {
        let data: Data
        let origin: String
        switch source {
        case .hex(let texts):
            return try texts.map { try Self.hex($0) }
        case .text(let string):
            return [Data(string.utf8)]
        case .file(let path):
            origin = "--file '\(path)'"
            do {
                data = try FileHandle(forReadingFrom: URL(fileURLWithPath: path)).readToEnd() ?? Data()
            } catch {
                throw ToolError(.failure, "\(origin) cannot be read: \(error.localizedDescription)")
            }
        case .standardInput:
            origin = "standard input"
            do {
                data = try FileHandle.standardInput.readToEnd() ?? Data()
            } catch {
                throw ToolError(.failure, "standard input cannot be read: \(error.localizedDescription)")
            }
        }
        guard !data.isEmpty else {
            throw ToolError(.failure, "\(origin) is empty: nothing to write (write an empty value as HEX '')")
        }
        if !withoutResponse && data.count > 512 {
            throw ToolError(
                .failure,
                "\(origin) has \(data.count) bytes; a value is at most 512 (use `ble send` for more)"
            )
        }
        return [data]
    }

    func run() async throws {
        let (selection, source) = try parsed()
        let writes: [Data]
        do {
            writes = try load(source)
        } catch let error as ToolError {
            throw error.report()
        }
        let target = target
        let withoutResponse = withoutResponse
        let chunk = chunk
        try await CommandRun.flow(transport, controllerWait: target.timeoutDuration) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let lines = try await tool.write(
                    writes, to: selection, withoutResponse: withoutResponse, chunk: chunk, on: peripheral)
                for line in lines { Output.line(line) }
            }
        }
    }
}

/// `ble subscribe`: notifications or indications, one line each.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a characteristic's notifications or indications and print one line per value.",
        discussion: """
            Each line is the time the value arrived (UTC, ISO 8601 with milliseconds: \
            2025-03-01T12:00:00.123Z), 'notify' or 'indicate' (how it came), and the value as `read` prints it: \
            the hex, then what it means when the tool knows (by the characteristic's 0x2904 Presentation Format \
            descriptor, else by its type); --format hex|utf8|uint|int|float renders the value that way instead (a \
            value that does not fit is shown as hex with the reason). With --json (or --format json) each line is \
            one object: {"time", "characteristic", "kind": "notify" | "indicate", "hex", "decoded"} ("decoded" \
            null when the tool does not know the value's meaning).
            Stops after --count values (unsubscribing and disconnecting), or runs until interrupted.
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID.", valueName: "char"))
    var characteristic: String

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Stop after this many values (0: until interrupted).", valueName: "n"))
    var count: Int = 0

    @Option(help: ArgumentHelp("How to print each value.", valueName: "format"))
    var format: ValueFormat = .auto

    @Flag(help: "Print one JSON object per value (as --format json).")
    var json = false

    func validate() throws {
        _ = try parseUUID(characteristic, what: "CHAR")
        try CommandLineNumbers.checkCount(count, option: "--count", minimum: 0)
    }

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        let uuid = try parseUUID(characteristic, what: "CHAR")
        let target = target
        let count = count
        let format = json ? .json : format
        try await CommandRun.flow(
            transport, interruptedIsSuccess: true, controllerWait: target.timeoutDuration
        ) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let c = try await tool.findCharacteristic(uuid, on: peripheral)
                try tool.requireSubscribable(c, for: "subscribing to \(c.uuid.uuidString)")
                let presentation = format == .hex ? nil : try await tool.presentationFormat(of: c, on: peripheral)
                var received = 0
                tool.markStarted()
                try await tool.run("subscribing to \(c.uuid.uuidString)") {
                    for try await update in peripheral.valueUpdates(for: c) {
                        received += 1
                        let reading = ValueReading(update.value, type: c.uuid, presentation: presentation)
                        Output.line(Self.line(reading, kind: update.kind, at: Timestamp.now(), format: format))
                        guard count > 0, received == count else { continue }
                        // Unsubscribe before the stream ends, so the stream has nothing left to undo.
                        try? await peripheral.setNotifyValue(false, for: c, timeout: .seconds(5))
                        break
                    }
                }
            }
        }
    }

    /// One value's line: "TIME notify HEX  MEANING", or its JSON object.
    /// One value's line. `naming`: the text names the characteristic after the time (the shell, where several
    /// subscriptions print between commands; JSON always names it).
    static func line(
        _ reading: ValueReading, kind: ValueUpdate.Kind, at time: String, format: ValueFormat, naming: Bool = false
    ) -> String {
        var kindName = kind == .notification ? "notify" : "indicate"
        guard format != .json else {
            return JSON.object([
                ("time", .string(time)),
                ("characteristic", .string(reading.type.uuidString)),
                ("kind", .string(kindName)),
                ("hex", .string(reading.value.hex)),
                ("decoded", reading.decoded?.json ?? .null),
            ]).text
        }
        if naming { kindName = "\(reading.type.labelled) \(kindName)" }
        switch reading.rendered(format) {
        case .success(let text): return "\(time) \(kindName) \(text)"
        case .failure(let error): return "\(time) \(kindName) \(reading.value.hex)  (\(error.message))"
        }
    }
}

/// Times as the tool prints them: UTC, ISO 8601 with milliseconds ("2025-03-01T12:00:00.123Z"), from the wall
/// clock when the tool handled the event.
enum Timestamp {
    static func now() -> String { format(Date()) }

    static func format(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(milliseconds % 1000))
    }
}
