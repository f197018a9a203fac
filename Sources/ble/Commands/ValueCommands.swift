import ArgumentParser
import BLE
import Foundation

/// `ble read`: one value, as hex and what it means.
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read a characteristic's value (or a descriptor's, or an attribute's by handle) and print it.",
        discussion: """
            CHAR is a UUID (2A19, 0x2A19, or the long form) or a name ('Battery Level', 'battery level', or the \
            start of its words: battery); when several characteristics share it, the first is read, and a name \
            that fits several characteristics of the device is an error that lists them. --descriptor D reads \
            that descriptor of CHAR instead (2901 user description, 2902 client configuration, 2904 presentation \
            format, or its name); --handle H reads the characteristic value or descriptor at attribute handle H \
            (0x0012 or 18) among everything discovered, in place of CHAR.

            By default the line is the value in hex, then, after two spaces, what it means when the tool knows: by \
            the characteristic's Characteristic Presentation Format descriptor (0x2904: format, exponent, unit) \
            when it has one, else by the SIG-assigned format of its type (Battery Level, Heart Rate Measurement, \
            Temperature, ...); a value it does not know that is printable UTF-8 text is followed by that text in \
            quotes. With --format: hex (the hex alone), utf8 (the bytes as text), uint or int (a little-endian \
            integer of 1 to 8 bytes), float (IEEE 754 of 4 or 8 bytes, or IEEE 11073 SFLOAT/FLOAT when the 0x2904 \
            descriptor says medfloat16/medfloat32), a type as `write` takes it (u8 ... u64, s8 ... s64, be for \
            big-endian: u16be, f32, f64, sfloat, medfloat32, bool; a value of several elements prints them with \
            commas: 1,2,3), or json. With --json (or --format json): one object
              {"uuid", "name", "hex", "decoded", "utf8", "uint", "int", "presentation"}
            ("handle" first with --handle, "characteristic" first for a descriptor; "format" and "value" last with \
            a typed --format); "decoded" is {"text", "value", "unit", ...} or null, "utf8", "uint" and "int" are \
            null when the bytes are not that (a value of 7 or 8 bytes gives them as exact decimal strings), \
            "presentation" is the 0x2904 descriptor or null. A value that does not fit the format asked for is an \
            error (status 1).
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID or name (not with --handle).", valueName: "char"))
    var characteristic: String?

    @Option(help: ArgumentHelp("Read this descriptor of CHAR (2901, 2902, 2904, ...).", valueName: "uuid"))
    var descriptor: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Read the attribute at this handle instead of CHAR (0x0012 or 18).", valueName: "handle"))
    var handle: String?

    @Option(
        help: ArgumentHelp(
            "How to print the value: auto, hex, utf8, uint, int, float, json, or a type (u16, s32be, f32, sfloat, bool, ...).",
            valueName: "format"))
    var format: ValueFormat = .auto

    @Flag(help: "Print one JSON object (as --format json; with a type, its value too).")
    var json = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        _ = try AttributeSelection(characteristic: characteristic, descriptor: descriptor, handle: handle)
    }

    func run() async throws {
        let selection = try AttributeSelection(characteristic: characteristic, descriptor: descriptor, handle: handle)
        let target = target
        let style = ValueLineStyle(format: format, json: json)
        try await CommandRun.flow(transport, controllerWait: target.timeoutDuration) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                Output.line(try await tool.readLine(selection, style: style, on: peripheral))
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
            CHAR is a UUID (2A21, 0x2A21, the long form) or a name (Measurement Interval, 'measurement \
            interval', any case). The value is given one way: VALUE arguments (one write each, sent in order), \
            --text STRING (its UTF-8 bytes; text that is not valid UTF-8 is refused), --file PATH (the file's \
            bytes), or --stdin, or '-' as VALUE. A missing or unreadable file is a usage error; an empty file, \
            empty standard input or an empty --text is refused (write an empty value as HEX '').

            VALUE is hex digits (optionally separated by spaces or colons) unless --format says otherwise: utf8 \
            (text), bool (true, false, 1, 0), an integer type u8, u16, u24, u32, u48, u64 or s8 ... s64 \
            (little-endian; add be for big-endian: u16be), f32 or f64 (IEEE 754), or sfloat or medfloat32 (IEEE \
            11073 SFLOAT and FLOAT, written exactly: 36.5, or NaN, NRes, +INF, -INF). Integers are decimal or \
            0x-prefixed hex; commas put several numbers in one value (--format u16 1,2,3 writes six bytes). A \
            value out of range or not in the format is a usage error that says why. Standard input ('-' or \
            --stdin) is its bytes as they are; with --format it is text instead, one VALUE per line (echo 0102 | \
            ble write DEV CHAR --format hex -).

            --descriptor UUID writes that descriptor of CHAR instead (2901, or any other writable one). The Client \
            Characteristic Configuration (2902) is written as the API writes it, by subscribing: 0100 enables \
            notifications (CHAR must notify), 0200 indications (CHAR must indicate and not notify: the API prefers \
            notifications), 0000 disables both; the subscription ends with this command's link. --handle H writes \
            the characteristic value or descriptor at attribute handle H (0x0012 or 18) in place of CHAR; then \
            the first VALUE follows H: ble write TARGET --handle 0x0012 0100.

            Without --without-response a value (up to 512 bytes) is written with a Write Request, or with the \
            long-write procedure when it does not fit one, and the peer's answer decides the exit status. With \
            --without-response each value is one Write Command and must fit ATT_MTU - 3 bytes (an error \
            otherwise; --chunk splits a longer value into such pieces); each is sent only when the link has room \
            for it (canSendWriteWithoutResponse), so a bulk transfer is paced by the link rather than dropped.

            --json prints one object when done: {"uuid", "name", "handle", "characteristic", "values", "bytes", \
            "withoutResponse", "commands", "waits"}.
            """)

    @OptionGroup var target: TargetOptions

    @Argument(
        help: ArgumentHelp(
            "The characteristic's UUID or name (with --handle: the first VALUE).", valueName: "char"))
    var characteristic: String?

    // Negative numbers (--format s16 -2) are values, not options: what is not an option of the command comes here,
    // and `parsed()` refuses what still looks like one.
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp(
            "Values: hex digits (or as --format says); one write each. '-': standard input.",
            valueName: "value"))
    var values: [String] = []

    @Option(
        help: ArgumentHelp(
            "How VALUEs (and standard input) are written: hex, utf8, bool, u8 ... u64, s8 ... s64 (be: big-endian), f32, f64, sfloat, medfloat32.",
            valueName: "format"))
    var format: ValueFormat?

    @Option(help: ArgumentHelp("Write this text's UTF-8 bytes.", valueName: "string"))
    var text: String?

    @Option(help: ArgumentHelp("Write this file's bytes.", valueName: "path"))
    var file: String?

    @Flag(name: .customLong("stdin"), help: "Write standard input (its bytes; with --format, one VALUE a line).")
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

    @Flag(help: "Print one JSON object when done.")
    var json = false

    @OptionGroup var transport: TransportOptions

    /// Where the value comes from.
    enum Source {
        case values([String])
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
        // '--' (the end of the options) may come before the values.
        if let end = positional.firstIndex(of: "--") { positional.remove(at: end) }
        if let option = positional.first(where: {
            $0.hasPrefix("--")
                || ($0.hasPrefix("-") && $0.dropFirst().first?.isLetter == true && ValueType.parseFloat($0) == nil)
        }) {
            throw ValidationError("unknown option '\(option)'")
        }
        let selection = try AttributeSelection(characteristic: char, descriptor: descriptor, handle: handle)
        var sources: [Source] = []
        if positional == ["-"] {
            sources.append(.standardInput)
        } else if positional.contains("-") {
            throw ValidationError("'-' (standard input) is the only value when it is given")
        } else if !positional.isEmpty {
            sources.append(.values(positional))
        }
        if let text { sources.append(.text(text)) }
        if let file { sources.append(.file(file)) }
        if fromStandardInput { sources.append(.standardInput) }
        guard sources.count <= 1 else {
            throw ValidationError("give the value one way: VALUE, --text, --file or --stdin ('-'), not several")
        }
        guard let source = sources.first else {
            throw ValidationError("give the value to write: VALUE, --text STRING, --file PATH or --stdin ('-')")
        }
        if format != nil, text != nil || file != nil {
            throw ValidationError("--format says how VALUEs and standard input are written, not --text or --file")
        }
        return (selection, source)
    }

    /// The type VALUEs are written in (hex unless --format says).
    func valueType() throws -> ValueType {
        do {
            return try (format ?? .auto).typeForWriting()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func validate() throws {
        if chunk && !withoutResponse { throw ValidationError("--chunk goes with --without-response") }
        let (selection, source) = try parsed()
        let type = try valueType()
        if case .descriptor = selection, withoutResponse {
            throw ValidationError("--without-response writes a characteristic; a descriptor is written with response")
        }
        switch source {
        case .values(let texts):
            for text in texts { try check(try Self.encode(text, as: type)) }
        case .text(let string):
            guard !string.isEmpty else {
                throw ValidationError("--text is empty: nothing to write (write an empty value as HEX '')")
            }
            if let bytes = RawArguments.bytes(ofMangled: string) {
                throw ValidationError("--text is not valid UTF-8 text: give its bytes as hex instead (\(bytes.hex))")
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

    /// One VALUE in `type`; the error names it (a HEX with an odd number of digits says so).
    static func encode(_ text: String, as type: ValueType) throws -> Data {
        do {
            return try type.encode(text)
        } catch {
            guard type == .hex else { throw ValidationError("VALUE \(error.message)") }
            let digits = text.filter(\.isHexDigit)
            if digits.count % 2 == 1, text.allSatisfy({ $0.isHexDigit || $0 == " " || $0 == ":" || $0 == "-" }) {
                throw ValidationError(
                    "HEX '\(text)' has an odd number of digits (\(digits.count)): each byte is two (00 to ff)")
            }
            throw ValidationError("HEX '\(text)' is not hex digits")
        }
    }

    static func hex(_ text: String) throws -> Data { try encode(text, as: .hex) }

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
        case .values(let texts):
            let type = try valueType()
            return try texts.map { try Self.encode($0, as: type) }
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
        if format != nil {
            // Text in the format, one value a line.
            return try Self.values(inText: data, as: try valueType(), withoutResponse: withoutResponse)
        }
        if !withoutResponse && data.count > 512 {
            throw ToolError(
                .failure,
                "\(origin) has \(data.count) bytes; a value is at most 512 (use `ble send` for more)"
            )
        }
        return [data]
    }

    /// Standard input read as text: one VALUE a line (blank lines skipped), each a usage error when it does not
    /// parse, naming its line.
    static func values(inText data: Data, as type: ValueType, withoutResponse: Bool) throws -> [Data] {
        guard let text = String(data: data, encoding: .utf8) else {
            throw ToolError(.usage, "standard input is not text: with --format it holds one VALUE a line")
        }
        var out: [Data] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let value = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !value.isEmpty else { continue }
            do {
                out.append(try type.encode(value))
            } catch {
                throw ToolError(.usage, "standard input line \(index + 1): \(error.message)")
            }
            if !withoutResponse, let last = out.last, last.count > 512 {
                throw ToolError(
                    .usage, "standard input line \(index + 1): a value is at most 512 bytes; this one has \(last.count)"
                )
            }
        }
        guard !out.isEmpty else { throw ToolError(.failure, "standard input has no value: nothing to write") }
        return out
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
        let json = json
        try await CommandRun.flow(transport, controllerWait: target.timeoutDuration) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let report = try await tool.write(
                    writes, to: selection, withoutResponse: withoutResponse, chunk: chunk, on: peripheral)
                if json {
                    Output.line(report.json.text)
                } else {
                    for line in report.lines { Output.line(line) }
                }
            }
        }
    }
}

/// The command line as the system gave it: Swift decodes each argument as UTF-8 and puts U+FFFD where the bytes
/// are not UTF-8, so the tool looks at the bytes to tell text mangled so from text that means it.
enum RawArguments {
    /// The bytes `argument` was decoded from when they are not UTF-8 (one argument, or the part after '=' in
    /// `--text=...`); nil when it came as valid UTF-8.
    static func bytes(ofMangled argument: String) -> Data? {
        guard argument.unicodeScalars.contains("\u{FFFD}") else { return nil }
        for i in 0..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[i] else { continue }
            let bytes = Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map {
                UInt8(bitPattern: $0)
            }
            guard String(validating: bytes, as: UTF8.self) == nil else { continue }
            let lossy = String(decoding: bytes, as: UTF8.self)
            if lossy == argument { return Data(bytes) }
            if lossy.hasSuffix("=" + argument) { return Data(bytes.suffix(from: bytes.count - argument.utf8.count)) }
        }
        return nil
    }
}

/// `ble subscribe`: notifications or indications, one line each.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a characteristic's notifications or indications and print one line per value.",
        discussion: """
            CHAR is a UUID or a name (Heart Rate Measurement, 'heart rate m', any case). Once subscribed it says \
            so at once ('subscribed to Heart Rate Measurement (2A37) (notifications)'; on stderr with --json, so \
            that standard output holds only values). Each line is then the time the value arrived (UTC, ISO 8601 \
            with milliseconds: 2025-03-01T12:00:00.123Z), 'notify' or 'indicate' (how it came), and the value as \
            `read` prints it: the hex, then what it means when the tool knows; --format hex|utf8|uint|int|float or \
            a type (u16, s32be, f32, sfloat, ...) renders it that way instead (a value that does not fit is shown \
            as hex with the reason). --read-first reads the value once before subscribing and prints it as a line \
            marked 'read'. --indicate subscribes to indications when CHAR offers both (the API, as CoreBluetooth, \
            prefers notifications); CHAR must indicate. With --json (or --format json) each line is one object: {"time", "characteristic", \
            "name", "kind": "read" | "notify" | "indicate", "hex", "decoded"} ("decoded" as `read --json` has it, \
            or null), and "format" and "value" with a typed --format.
            Stops after --count values (unsubscribing and disconnecting), or runs until interrupted.
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic: its UUID or its name.", valueName: "char"))
    var characteristic: String

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Stop after this many values (0: until interrupted).", valueName: "n"))
    var count: Int = 0

    @Option(
        help: ArgumentHelp(
            "How to print each value (auto, hex, utf8, u16, s32be, f32, sfloat, json, ...).", valueName: "format"))
    var format: ValueFormat = .auto

    @Flag(help: "Print one JSON object per value (as --format json).")
    var json = false

    @Flag(help: "Read the value once and print it before the first notification.")
    var readFirst = false

    @Flag(help: "Subscribe to indications when the characteristic offers both (notifications by default).")
    var indicate = false

    func validate() throws {
        _ = try parseCharacteristic(characteristic)
        try CommandLineNumbers.checkCount(count, option: "--count", minimum: 0)
    }

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        let reference = try parseCharacteristic(characteristic)
        let target = target
        let count = count
        let readFirst = readFirst
        let kind: ValueUpdate.Kind = indicate ? .indication : .notification
        let style = ValueLineStyle(format: format, json: json)
        try await CommandRun.flow(
            transport, interruptedIsSuccess: true, controllerWait: target.timeoutDuration
        ) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let c = try await tool.findCharacteristic(reference, on: peripheral)
                try tool.requireSubscribable(c, for: "subscribing to \(c.uuid.uuidString)")
                let presentation =
                    style.format == .hex ? nil : try await tool.presentationFormat(of: c, on: peripheral)
                if readFirst {
                    try tool.require(
                        .read, of: c, code: .readNotPermitted, for: "--read-first: reading \(c.uuid.uuidString)")
                    let value = try await tool.run("reading \(c.uuid.uuidString)") {
                        try await peripheral.readValue(for: c, timeout: nil)
                    }
                    let reading = ValueReading(value, type: c.uuid, presentation: presentation)
                    Output.line(Self.line(reading, kind: "read", at: Timestamp.now(), style: style))
                }
                try await tool.subscribe(to: c, kind: kind, on: peripheral)
                let notice = Self.subscribedNotice(c, kind: kind)
                if style.json { Output.error(notice, prefixed: false) } else { Output.line(notice) }
                var received = 0
                tool.markStarted()
                try await tool.run("subscribing to \(c.uuid.uuidString)") {
                    for try await update in peripheral.valueUpdates(for: c) {
                        received += 1
                        let reading = ValueReading(update.value, type: c.uuid, presentation: presentation)
                        Output.line(
                            Self.line(reading, kind: Self.kindName(update.kind), at: Timestamp.now(), style: style))
                        guard count > 0, received == count else { continue }
                        // Unsubscribe before the stream ends, so the stream has nothing left to undo.
                        try? await peripheral.setNotifyValue(false, for: c, timeout: .seconds(5))
                        break
                    }
                }
            }
        }
    }

    /// "subscribed to Heart Rate Measurement (2A37) (notifications)", as the shell says it.
    static func subscribedNotice(_ c: Characteristic, kind: ValueUpdate.Kind = .notification) -> String {
        let indications = kind == .indication || !c.properties.contains(.notify)
        return "subscribed to \(c.uuid.labelled) (\(indications ? "indications" : "notifications"))"
    }

    static func kindName(_ kind: ValueUpdate.Kind) -> String { kind == .notification ? "notify" : "indicate" }

    /// One value's line: "TIME notify HEX  MEANING", or its JSON object.
    /// One value's line. `naming`: the text names the characteristic after the time (the shell, where several
    /// subscriptions print between commands; JSON always names it).
    static func line(
        _ reading: ValueReading, kind: String, at time: String, style: ValueLineStyle, naming: Bool = false
    ) -> String {
        guard !style.json else {
            var fields: [(String, JSON)] = [
                ("time", .string(time)),
                ("characteristic", .string(reading.type.uuidString)),
                ("name", .optional(reading.type.displayName)),
                ("kind", .string(kind)),
                ("hex", .string(reading.value.hex)),
                ("decoded", reading.decoded?.json ?? .null),
            ]
            if case .typed(let type) = style.format {
                fields.append(("format", .string(type.description)))
                fields.append(("value", (try? type.decode(reading.value).get()).map(type.json) ?? .null))
            }
            return JSON.object(fields).text
        }
        let kind = naming ? "\(reading.type.labelled) \(kind)" : kind
        switch reading.rendered(style.format) {
        case .success(let text): return "\(time) \(kind) \(text)"
        case .failure(let error): return "\(time) \(kind) \(reading.value.hex)  (\(error.message))"
        }
    }
}

/// How a stream of values is printed: text in a format, or JSON objects (with a typed format's value in them).
struct ValueLineStyle: Sendable {
    var format: ValueFormat
    var json: Bool

    /// `--json`, or `--format json`, asks for JSON; a typed `--format` with `--json` adds its value to each object.
    init(format: ValueFormat, json: Bool) {
        self.json = json || format == .json
        self.format = format == .json ? .auto : format
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

extension CentralTool {
    /// Subscribes to `c` (its indications with `.indication`, which it must offer), confirmed before returning so
    /// that a refusal is the command's error; a stream made afterwards finds it subscribed.
    func subscribe(to c: Characteristic, kind: ValueUpdate.Kind, on peripheral: Peripheral) async throws {
        if kind == .indication, !c.properties.contains(.indicate) {
            // What its properties do not allow: status 5, as for every such refusal.
            let has = c.properties.names.joined(separator: ", ")
            throw ToolError(
                .attError,
                "\(c.uuid.labelled) does not indicate (its properties: \(has.isEmpty ? "none" : has)), so it was not sent: \(ToolError.describe(.requestNotSupported))"
            )
        }
        try await run("subscribing to \(c.uuid.uuidString)") {
            // By default the API chooses: notifications, or indications when that is all CHAR offers.
            if kind == .indication {
                try await peripheral.setNotifyValue(true, for: c, preferring: .indication, timeout: nil)
            } else {
                try await peripheral.setNotifyValue(true, for: c, timeout: nil)
            }
        }
    }
}
