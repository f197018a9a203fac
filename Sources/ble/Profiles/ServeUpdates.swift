import BLE
import Foundation

/// One line of `ble serve --updates`: what the served device is told to do from its own side.
///
/// The format, one instruction a line:
///   `UUID HEX`          set the characteristic's value to these bytes (hex digits, spaces or colons allowed
///                       between them) and notify or indicate it to the subscribed centrals;
///   `UUID text:STRING`  the same with STRING's UTF-8 bytes (everything after "text:", spaces kept);
///   `sleep SECONDS`     wait this long (the system's time) before the next line;
///   blank lines and lines starting with `#` are skipped.
enum ServeUpdate: Equatable, Sendable {
    case set(BluetoothUUID, Data)
    case sleep(Duration)

    /// The instruction on `line`, nil for a blank line or a comment, or why the line is not one.
    static func parse(_ line: String) -> Result<ServeUpdate?, ServeUpdateError> {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed.hasPrefix("#") { return .success(nil) }
        let head = trimmed.prefix { !$0.isWhitespace }
        let rest = trimmed.dropFirst(head.count).drop { $0.isWhitespace }
        if head == "sleep" {
            guard let seconds = Double(rest), seconds.isFinite, seconds >= 0,
                seconds <= CommandLineNumbers.maximumSeconds
            else {
                return .failure(ServeUpdateError("sleep takes seconds (0 to a year), not '\(rest)'"))
            }
            return .success(.sleep(CommandLineNumbers.duration(seconds: seconds)))
        }
        guard let uuid = BluetoothUUID(string: String(head)) else {
            return .failure(
                ServeUpdateError(
                    "'\(head)' is not a characteristic UUID (a line is 'UUID HEX', 'UUID text:...' or 'sleep S')"))
        }
        guard !rest.isEmpty else {
            return .failure(ServeUpdateError("\(uuid.uuidString) has no value (give HEX or text:...)"))
        }
        if rest.hasPrefix("text:") {
            // The text as written after "text:", up to the line's end (only the line break is not part of it).
            guard let marker = line.range(of: "text:") else { return .failure(ServeUpdateError("no text")) }
            return .success(.set(uuid, Data(line[marker.upperBound...].utf8)))
        }
        guard let value = Data(lenientHex: String(rest)) else {
            return .failure(ServeUpdateError("'\(rest)' is not hex digits (for text, write text:...)"))
        }
        guard value.count <= 512 else {
            return .failure(ServeUpdateError("a value is at most 512 bytes; this one has \(value.count)"))
        }
        return .success(.set(uuid, value))
    }
}

/// Why an updates line was skipped.
struct ServeUpdateError: Error, Equatable, Sendable {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Reads `--updates` lines (a file, a FIFO, or standard input for "-") on a thread of its own, as they come, and
/// hands them on in order with their line numbers; the stream ends with the input.
enum ServeUpdateFeed {
    static func lines(from path: String) -> AsyncStream<(number: Int, text: String)> {
        let (stream, continuation) = AsyncStream<(number: Int, text: String)>.makeStream()
        let thread = Thread {
            let file: UnsafeMutablePointer<FILE>? = path == "-" ? fdopen(STDIN_FILENO, "r") : fopen(path, "r")
            guard let file else {
                Output.error("--updates '\(path)' cannot be opened: \(String(cString: strerror(errno)))")
                continuation.finish()
                return
            }
            var buffer: UnsafeMutablePointer<CChar>?
            var capacity = 0
            var number = 0
            while getline(&buffer, &capacity, file) >= 0, let buffer {
                number += 1
                var text = String(cString: buffer)
                while let last = text.unicodeScalars.last, last == "\n" || last == "\r" {
                    text.unicodeScalars.removeLast()
                }
                continuation.yield((number, text))
            }
            free(buffer)
            if path != "-" { fclose(file) }
            continuation.finish()
        }
        thread.name = "ble.serve.updates"
        thread.start()
        return stream
    }
}
