import ArgumentParser
import BLE
import Foundation

/// Which attribute `read` and `write` work on: CHAR, a descriptor of CHAR, or a handle.
enum AttributeSelection: Sendable {
    case characteristic(AttributeReference)
    case descriptor(AttributeReference, of: AttributeReference)
    case handle(UInt16)

    /// Checks the combination: CHAR or --handle, and --descriptor only with CHAR.
    init(characteristic: String?, descriptor: String?, handle: String?) throws {
        if let handle {
            guard characteristic == nil else {
                throw ValidationError("give CHAR or --handle, not both (--handle \(handle) names the attribute)")
            }
            guard descriptor == nil else {
                throw ValidationError(
                    "--descriptor goes with CHAR, not with --handle (a descriptor has its own handle)")
            }
            self = .handle(try parseHandle(handle))
            return
        }
        guard let characteristic else {
            throw ValidationError("give CHAR (a characteristic's UUID or name) or --handle")
        }
        let reference = try parseCharacteristic(characteristic)
        guard let descriptor else {
            self = .characteristic(reference)
            return
        }
        self = .descriptor(try AttributeReference(descriptor, kind: .descriptor, what: "--descriptor"), of: reference)
    }

    /// The attribute on a connected peripheral, after the discovery it needs.
    func resolve(_ tool: CentralTool, on peripheral: Peripheral) async throws -> ValueAttribute {
        switch self {
        case .characteristic(let reference):
            return .characteristic(try await tool.findCharacteristic(reference, on: peripheral))
        case .descriptor(let reference, let characteristic):
            let c = try await tool.findCharacteristic(characteristic, on: peripheral)
            return .descriptor(try await tool.findDescriptor(reference, of: c, on: peripheral))
        case .handle(let handle):
            return try await tool.findAttribute(handle: handle, on: peripheral)
        }
    }
}

/// Reading and writing one attribute of a connected peripheral, as `read` and `write` do and the shell's
/// commands of the same names: each returns the lines to print, and throws the tool's error.
extension CentralTool {
    /// Reads the selected attribute; the line is the value in `style`'s format, or one JSON object.
    func readLine(_ selection: AttributeSelection, style: ValueLineStyle, on peripheral: Peripheral) async throws
        -> String
    {
        let format = style.format
        let attribute = try await selection.resolve(self, on: peripheral)
        let reading: ValueReading
        var extra: [(String, JSON)] = []
        if case .handle(let h) = selection { extra.append(("handle", .number(Int(h)))) }
        switch attribute {
        case .characteristic(let c):
            try require(.read, of: c, code: .readNotPermitted, for: "reading \(c.uuid.uuidString)")
            let value = try await run("reading \(c.uuid.uuidString)") {
                try await peripheral.readValue(for: c, timeout: nil)
            }
            // The hex alone needs no descriptor read.
            let presentation = format == .hex ? nil : try await presentationFormat(of: c, on: peripheral)
            reading = ValueReading(value, type: c.uuid, presentation: presentation)
        case .descriptor(let d):
            let value = try await run("reading \(attribute.label)") {
                try await peripheral.readValue(for: d, timeout: nil)
            }
            if let c = d.characteristic { extra.append(("characteristic", .string(c.uuid.uuidString))) }
            reading = ValueReading(value, type: d.uuid)
        }
        if style.json {
            if case .typed(let type) = format { return reading.json(extra: extra, typed: type).text }
            return reading.json(extra: extra).text
        }
        switch reading.rendered(format) {
        case .success(let text): return text
        case .failure(let error): throw ToolError(.failure, "\(attribute.label): \(error.message)")
        }
    }

    /// Writes `writes` in order to the selected attribute: with response (a descriptor always), or as Write
    /// Commands paced by the link (`chunk`: split into pieces of ATT_MTU - 3 bytes).
    func write(
        _ writes: [Data], to selection: AttributeSelection, withoutResponse: Bool, chunk: Bool,
        on peripheral: Peripheral
    ) async throws -> WriteReport {
        let attribute = try await selection.resolve(self, on: peripheral)
        var report = WriteReport(attribute: attribute, values: writes, withoutResponse: withoutResponse)
        switch attribute {
        case .descriptor(let d):
            guard !withoutResponse else {
                throw ToolError(
                    .failure, "\(attribute.label) is a descriptor: it is written with response, not without")
            }
            for (index, value) in writes.enumerated() {
                try await Self.saying(index, of: writes) {
                    try await write(value, to: d, label: attribute.label, peripheral)
                }
            }
        case .characteristic(let c) where !withoutResponse:
            try require(.write, of: c, code: .writeNotPermitted, for: "writing \(c.uuid.uuidString)")
            for (index, value) in writes.enumerated() {
                try await Self.saying(index, of: writes) {
                    try await run("writing \(c.uuid.uuidString)") {
                        try await peripheral.writeValue(value, for: c, type: .withResponse, timeout: nil)
                    }
                }
            }
        case .characteristic(let c):
            (report.commands, report.waits) = try await writeWithoutResponse(writes, to: c, chunk: chunk, peripheral)
        }
        return report
    }

    /// Runs the write of value `index` of several: when it fails, the error says which value failed and which
    /// were written before it (the peer has applied those), so that nothing already done goes unsaid. One value
    /// alone needs no such note.
    static func saying(_ index: Int, of writes: [Data], _ write: () async throws -> Void) async throws {
        do {
            try await write()
        } catch is CancellationError where writes.count > 1 {
            // Stopped (Ctrl-C) part way: what the peer already applied is said before the command ends.
            Output.error(
                index == 0
                    ? "interrupted before value 1 of \(writes.count) was written"
                    : "interrupted: value\(index == 1 ? " 1 was" : "s 1 to \(index) were") written, of \(writes.count)")
            throw CancellationError()
        } catch let error as ToolError where writes.count > 1 {
            let done =
                index == 0
                ? "nothing was written before it"
                : index == 1
                    ? "value 1 (\(brief(writes[0]))) was written before it"
                    : "values 1 to \(index) were written before it"
            throw ToolError(
                error.kind,
                "\(error.message), at value \(index + 1) of \(writes.count) (\(brief(writes[index]))); \(done)")
        }
    }

    /// A value's hex, cut after 16 bytes.
    static func brief(_ value: Data) -> String {
        value.count <= 16 ? value.hex : value.prefix(16).hex + "… (\(value.count) bytes)"
    }

    /// A descriptor write; the Client Characteristic Configuration goes through `setNotifyValue`, the one way the
    /// API (as CoreBluetooth) writes it.
    func write(_ value: Data, to descriptor: Descriptor, label: String, _ peripheral: Peripheral) async throws {
        guard descriptor.uuid == .clientCharacteristicConfiguration else {
            try await run("writing \(label)") {
                try await peripheral.writeValue(value, for: descriptor, timeout: nil)
            }
            return
        }
        guard let c = descriptor.characteristic else {
            throw ToolError(.failure, "\(label) belongs to no characteristic")
        }
        let enable = try Self.cccdRequest(value, for: c)
        try await run("writing \(label)") {
            try await peripheral.setNotifyValue(enable, for: c, timeout: nil)
        }
    }

    /// Whether a Client Characteristic Configuration value asks to subscribe, or why the API cannot write it.
    static func cccdRequest(_ value: Data, for c: Characteristic) throws -> Bool {
        let hint = "0000 (off), 0100 (notifications) or 0200 (indications)"
        guard value.count == 2 else {
            throw ToolError(
                .failure,
                "a Client Characteristic Configuration value is 2 bytes, \(hint); this one has \(value.count)")
        }
        let notifies = c.properties.contains(.notify)
        let indicates = c.properties.contains(.indicate)
        switch UInt16(value[value.startIndex]) | UInt16(value[value.startIndex + 1]) << 8 {
        case 0x0000:
            return false
        case 0x0001 where notifies:
            return true
        case 0x0002 where indicates && !notifies:
            return true
        case 0x0002 where indicates:
            throw ToolError(
                .failure,
                "\(c.uuid.labelled) notifies and indicates; the API subscribes to its notifications (0100), so 0200 cannot be written"
            )
        case 0x0001, 0x0002:
            let has = c.properties.names.joined(separator: ", ")
            throw ToolError(
                .attError,
                "\(c.uuid.labelled) does not \(value.hex == "0100" ? "notify" : "indicate") (its properties: \(has.isEmpty ? "none" : has)), so it was not sent: \(ToolError.describe(.requestNotSupported))"
            )
        default:
            throw ToolError(.failure, "\(value.hex) is not a configuration the API writes: give \(hint)")
        }
    }

    /// Write Commands, each value one send (one command, or with `chunk` pieces of ATT_MTU - 3 bytes), paced by
    /// the link and finished once the peer's link layer acknowledged every one.
    func writeWithoutResponse(
        _ writes: [Data], to c: Characteristic, chunk: Bool, _ peripheral: Peripheral
    ) async throws -> (commands: Int, waits: Int) {
        try require(
            .writeWithoutResponse, of: c, code: .writeNotPermitted,
            for: "writing \(c.uuid.uuidString) without response")
        let size = max(1, peripheral.maximumWriteValueLength(for: .withoutResponse))
        if !chunk, let long = writes.first(where: { $0.count > size }) {
            throw ToolError(
                .failure,
                "a write without response carries at most \(size) bytes (ATT_MTU - 3) on this link; this value has \(long.count) (use --chunk to split it)"
            )
        }
        var sent = 0
        var waits = 0
        for (index, value) in writes.enumerated() {
            // An empty value is one empty Write Command.
            let piece = max(1, chunk ? size : value.count)
            var last: SendProgress?
            try await Self.saying(index, of: writes) {
                try await run("writing \(c.uuid.uuidString)") {
                    for try await step in peripheral.send(value, to: c, type: .withoutResponse, chunkSize: piece) {
                        last = step
                    }
                }
            }
            // The iteration ends quietly when the task is cancelled: only the last acknowledgement counts.
            guard let last, last.bytesAcknowledged == last.totalBytes else { throw CancellationError() }
            sent += max(1, (value.count + piece - 1) / piece)
            waits += last.timesWaitedForRoom
        }
        return (sent, waits)
    }
}

/// What a write did, as `write` prints it (text lines, or one JSON object).
struct WriteReport: Sendable {
    let attribute: ValueAttribute
    let values: [Data]
    let withoutResponse: Bool
    /// Write Commands sent, and how often the link had no room for the next (without response only).
    var commands = 0
    var waits = 0

    var total: Int { values.reduce(0) { $0 + $1.count } }

    /// "wrote 2 bytes to Measurement Interval (2A21)", after a line on the Write Commands sent.
    var lines: [String] {
        let wrote = "wrote \(total) byte\(total == 1 ? "" : "s") to \(attribute.label)"
        guard withoutResponse else { return [wrote] }
        return [
            "sent \(commands) write\(commands == 1 ? "" : "s") without response, waiting for room \(waits) time\(waits == 1 ? "" : "s")",
            wrote,
        ]
    }

    /// {"uuid", "name", "handle", "characteristic", "values", "bytes", "withoutResponse", "commands", "waits"}:
    /// "values" the hex of each write in order; "characteristic" the UUID a descriptor belongs to (else null);
    /// "commands" and "waits" numbers without response, else null.
    var json: JSON {
        let uuid: BluetoothUUID
        var owner: JSON = .null
        switch attribute {
        case .characteristic(let c): uuid = c.uuid
        case .descriptor(let d):
            uuid = d.uuid
            owner = .optional(d.characteristic?.uuid.uuidString)
        }
        return .object([
            ("uuid", .string(uuid.uuidString)),
            ("name", .optional(uuid.displayName)),
            ("handle", attribute.handle.map { .number(Int($0)) } ?? .null),
            ("characteristic", owner),
            ("values", .array(values.map { .string($0.hex) })),
            ("bytes", .number(total)),
            ("withoutResponse", .bool(withoutResponse)),
            ("commands", withoutResponse ? .number(commands) : .null),
            ("waits", withoutResponse ? .number(waits) : .null),
        ])
    }
}
