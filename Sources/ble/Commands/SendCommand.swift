import ArgumentParser
import BLE
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `ble send`: a file of any length to a characteristic, in chunks, paced by the link (and by an interval the
/// device's documentation asks for), with a progress bar on a terminal and the rate achieved at the end.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a file to a characteristic in chunks, with progress and the rate achieved.",
        discussion: """
            With response (the default) each chunk is a Write Request the device answers; --without-response \
            sends Write Commands paced by the link's room. The transfer is done when the device acknowledged \
            every chunk (its responses, or its link layer). FILE '-' reads standard input. CHAR is a UUID or a \
            name. With --json the summary is one object: {"uuid", "name", "bytes", "seconds", "bytesPerSecond", \
            "withoutResponse"}.
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic: its UUID or its name.", valueName: "char"))
    var characteristic: String

    @Argument(help: ArgumentHelp("The file to send ('-': standard input).", valueName: "file"))
    var file: String

    @Flag(help: "Send Write Commands (no response) instead of Write Requests.")
    var withoutResponse = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Bytes per chunk, 1 to 512 (default: the link's maximum write length).", valueName: "n"))
    var chunk: Int?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Milliseconds between chunks, counted from the previous one's arrival.", valueName: "ms"))
    var interval: Double = 0

    @Flag(help: "Print the summary as one JSON object.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        _ = try parseCharacteristic(characteristic)
        if let chunk { try CommandLineNumbers.checkCount(chunk, option: "--chunk", minimum: 1) }
        if let chunk, chunk > 512 { throw ValidationError("--chunk must be at most 512 bytes, not \(chunk)") }
        guard interval.isFinite, interval >= 0, interval <= 60_000, interval == 0 || interval >= 1 else {
            throw ValidationError("--interval must be 0, or 1 to 60000 milliseconds, not \(interval)")
        }
        var isFolder: ObjCBool = false
        if file != "-" {
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), !isFolder.boolValue,
                FileManager.default.isReadableFile(atPath: file)
            else { throw ValidationError("FILE '\(file)' is not a readable file") }
        }
    }

    func run() async throws {
        let uuid = try parseCharacteristic(characteristic)
        let data: Data
        do {
            let handle =
                file == "-" ? FileHandle.standardInput : try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
            data = try handle.readToEnd() ?? Data()
        } catch {
            throw ToolError(.failure, "FILE '\(file)' cannot be read: \(error.localizedDescription)")
        }
        // As `write --file` of an empty file: nothing to send is refused before connecting.
        guard !data.isEmpty else {
            throw ToolError(.failure, "\(file == "-" ? "standard input" : "FILE '\(file)'") is empty: nothing to send")
        }
        let target = target
        let type: CharacteristicWriteType = withoutResponse ? .withoutResponse : .withResponse
        let chunk = chunk
        let pause: Duration? = interval > 0 ? CommandLineNumbers.duration(seconds: interval / 1000) : nil
        let showBar = isatty(STDERR_FILENO) == 1
        let json = json
        try await CommandRun.flow(transport, controllerWait: target.timeoutDuration) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let c = try await tool.findCharacteristic(uuid, on: peripheral)
                if type == .withResponse {
                    try tool.require(.write, of: c, code: .writeNotPermitted, for: "writing \(c.uuid.uuidString)")
                } else {
                    try tool.require(
                        .writeWithoutResponse, of: c, code: .writeNotPermitted,
                        for: "writing \(c.uuid.uuidString) without response")
                }
                let start = tool.system.now
                var last: SendProgress?
                // What the device acknowledged is said whatever ends the transfer: a refusal, a lost link, Ctrl-C.
                func acknowledged() -> String {
                    let bytes = last?.bytesAcknowledged ?? 0
                    return "\(bytes) of \(data.count) bytes acknowledged"
                }
                do {
                    try await tool.run("sending to \(c.uuid.uuidString)") {
                        for try await step in peripheral.send(
                            data, to: c, type: type, chunkSize: chunk, interval: pause)
                        {
                            last = step
                            if showBar { Self.drawBar(step, elapsed: tool.system.now - start) }
                        }
                    }
                } catch let error as ToolError {
                    if showBar { Output.stderr("\r\u{1B}[2K") }
                    throw ToolError(error.kind, "\(error.message) (\(acknowledged()) before)")
                } catch {
                    if showBar { Output.stderr("\r\u{1B}[2K") }
                    Output.error("interrupted: \(acknowledged())")
                    throw error
                }
                // Wipe the bar: what stays is the summary.
                if showBar { Output.stderr("\r\u{1B}[2K") }
                guard let last, last.bytesAcknowledged == last.totalBytes else {
                    // The iteration ends quietly when the task is cancelled (out of time or stopped).
                    Output.error("interrupted: \(acknowledged())")
                    throw CancellationError()
                }
                let elapsed = tool.system.now - start
                if json {
                    let seconds = elapsed.inSeconds
                    Output.line(
                        JSON.object([
                            ("uuid", .string(c.uuid.uuidString)), ("name", .optional(c.uuid.displayName)),
                            ("bytes", .number(data.count)), ("seconds", .double(seconds)),
                            ("bytesPerSecond", seconds > 0 ? .double(Double(data.count) / seconds) : .null),
                            ("withoutResponse", .bool(type == .withoutResponse)),
                        ]).text)
                    return
                }
                Output.line(
                    "sent \(data.count) byte\(data.count == 1 ? "" : "s") to \(c.uuid.labelled) in \(Self.format(elapsed)) (\(Self.rate(data.count, elapsed)))"
                )
            }
        }
    }

    /// One line of progress on stderr, redrawn in place.
    static func drawBar(_ step: SendProgress, elapsed: Duration) {
        let width = 30
        let fraction = step.totalBytes == 0 ? 1 : Double(step.bytesAcknowledged) / Double(step.totalBytes)
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        let text = String(
            format: "\r[%@] %3d%% %d/%d B %@", bar, Int(fraction * 100), step.bytesAcknowledged, step.totalBytes,
            rate(step.bytesAcknowledged, elapsed))
        Output.stderr(text)
    }

    static func format(_ d: Duration) -> String { String(format: "%.3f s", d.inSeconds) }

    static func rate(_ bytes: Int, _ elapsed: Duration) -> String {
        let s = elapsed.inSeconds
        guard s > 0 else { return "-- B/s" }
        let perSecond = Double(bytes) / s
        return perSecond >= 1000 ? String(format: "%.1f kB/s", perSecond / 1000) : String(format: "%.0f B/s", perSecond)
    }
}
