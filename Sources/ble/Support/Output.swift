import BLE
import Foundation

/// Where the tool writes: results to stdout, each line written at once (so a pipe sees it as it is printed:
/// `ble serve` and `ble subscribe` are read live), errors to stderr.
enum Output {
    static func configure() {}

    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    static func line(_ text: String) {
        write(text + "\n")
    }

    /// Writes `text` as it is, in one system call.
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("ble: \(message)\n".utf8))
    }
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

/// Names the tool knows beyond BLECore's table: a few more SIG numbers and the world's custom UUIDs.
enum ToolNames {
    static let names: [BluetoothUUID: String] = [
        BluetoothUUID(0x2A21): "Measurement Interval",
        BluetoothUUID(0x2A1F): "Temperature Celsius",
        BluetoothUUID(0x2A20): "Temperature Fahrenheit",
        BluetoothUUID(0x2A6D): "Pressure",
        BluetoothUUID(0x2A6E): "Temperature",
        BluetoothUUID(0x2A6F): "Humidity",
        BluetoothUUID(0x2A76): "UV Index",
        BluetoothUUID(0x2A77): "Irradiance",
        BluetoothUUID(0x2A7B): "Dew Point",
        BluetoothUUID(0xFEAA): "Eddystone",
        DoorLockProfile.service: "Door Lock",
        DoorLockProfile.lockState: "Lock State",
        DoorLockProfile.lockCommand: "Lock Command",
        PrinterProfile.service: "Printer",
        PrinterProfile.printData: "Print Data",
        PrinterProfile.status: "Printer Status",
        WorldDevices.environmentService: "Environment Hub",
    ]
}
