import BLE
import Foundation
import Synchronization

/// Where the tool writes: results to stdout, each line written at once (so a pipe sees it as it is printed:
/// `ble serve` and `ble subscribe` are read live), errors to stderr.
enum Output {
    static func configure() {}

    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    static func line(_ text: String) {
        write(text + "\n")
    }

    /// Writes `text` as it is, in one system call. When standard output is closed (`ble scan | head -1`, once
    /// head has its line), the text is dropped, the command is told to end as a Ctrl-C ends it (links closed,
    /// captures and stores flushed), and the tool exits with 141 and says nothing, as a Unix tool killed by
    /// SIGPIPE does. Nothing on the way traps.
    static func write(_ text: String) {
        guard !isClosed else { return }
        do {
            try FileHandle.standardOutput.write(contentsOf: Data(text.utf8))
        } catch {
            closed.withLock { $0 = true }
            Interrupt.shared.fire()
        }
    }

    /// Writes `text` to standard error as it is (a prompt, a progress bar); dropped when standard error is closed,
    /// never a trap.
    static func stderr(_ text: String) {
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }

    /// A line on stderr: "ble: MESSAGE" for an error, or the message alone for a notice (`prefixed: false`).
    static func error(_ message: String, prefixed: Bool = true) {
        // Standard error closed too: nothing is left to tell.
        try? FileHandle.standardError.write(contentsOf: Data("\(prefixed ? "ble: " : "")\(message)\n".utf8))
    }

    /// Standard output was closed by its reader.
    static var isClosed: Bool { closed.withLock { $0 } }

    /// Looks, without writing, whether standard output's reader went away (a pipe's reader that closed shows as
    /// POLLERR on the write end): a command that prints nothing for a while (`ble serve | head -1` on a quiet
    /// device) ends then, not at its next line. True once closed.
    @discardableResult
    static func checkReader() -> Bool {
        if isClosed { return true }
        var descriptor = pollfd(fd: STDOUT_FILENO, events: Int16(POLLOUT), revents: 0)
        guard poll(&descriptor, 1, 0) > 0, descriptor.revents & Int16(POLLERR | POLLHUP) != 0 else { return false }
        // Only a pipe or a socket whose reader left: a terminal or a file never reports this.
        closed.withLock { $0 = true }
        Interrupt.shared.fire()
        return true
    }
    private static let closed = Mutex(false)

    /// The status a command ends with once its output closed: 128 + SIGPIPE, as a shell reports a tool that
    /// SIGPIPE ended.
    static let closedStatus: Int32 = 141
}

extension Data {
    /// Lower-case hex without separators, as every command prints values ("0848").
    var hex: String { hexString }
}

/// A JSON value built by hand, so keys keep the documented order and `null` is explicit.
indirect enum JSON {
    case string(String)
    case number(Int)
    /// A finite number with a fraction (non-finite ones are written as null).
    case double(Double)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    static func optional(_ text: String?) -> JSON { text.map(JSON.string) ?? .null }

    /// Compact, one line.
    var text: String {
        switch self {
        case .string(let s): return Self.quote(s)
        case .number(let n): return String(n)
        case .double(let d): return d.isFinite ? String(d) : "null"
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .array(let items): return "[" + items.map(\.text).joined(separator: ",") + "]"
        case .object(let fields):
            return "{" + fields.map { Self.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20: out += String(format: "\\u%04x", c.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension BluetoothUUID {
    /// The SIG name, or the name of one of the simulated world's custom services and characteristics.
    var displayName: String? { name ?? ToolNames.names[self] }

    /// "Heart Rate (180D)" or just the UUID.
    var labelled: String { displayName.map { "\($0) (\(uuidString))" } ?? uuidString }
}

/// Names the tool knows beyond BLECore's table of SIG names: the simulated world's custom UUIDs.
enum ToolNames {
    static let names: [BluetoothUUID: String] = [
        BluetoothUUID(0xFEAA): "Eddystone",
        DoorLockProfile.service: "Door Lock",
        DoorLockProfile.lockState: "Lock State",
        DoorLockProfile.lockCommand: "Lock Command",
        PrinterProfile.service: "Printer",
        PrinterProfile.printData: "Print Data",
        PrinterProfile.status: "Printer Status",
        SecureLockProfile.service: "Secure Lock",
        SecureLockProfile.lockState: "Lock State",
        SecureLockProfile.lockCommand: "Lock Command",
        CameraProfile.service: "Camera",
        CameraProfile.command: "Camera Command",
        CameraProfile.status: "Camera Status",
        WorldDevices.environmentService: "Environment Hub",
    ]

    /// Which of `names` are services (the rest are characteristics).
    static let services: Set<BluetoothUUID> = [
        BluetoothUUID(0xFEAA), DoorLockProfile.service, PrinterProfile.service, SecureLockProfile.service,
        CameraProfile.service, WorldDevices.environmentService,
    ]
}
