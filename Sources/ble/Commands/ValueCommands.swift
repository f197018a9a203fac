import ArgumentParser
import BLE
import Foundation

/// `ble read`: one characteristic's value, as hex.
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read a characteristic and print its value as hex.",
        discussion: "CHAR is a UUID (2A19, or the long form); when several characteristics share it, the first is read."
    )

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID.", valueName: "char"))
    var characteristic: String

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        _ = try parseUUID(characteristic, what: "CHAR")
    }

    func run() async throws {
        let uuid = try parseUUID(characteristic, what: "CHAR")
        let target = target
        try await CommandRun.flow(transport) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let c = try await tool.findCharacteristic(uuid, on: peripheral)
                try tool.require(.read, of: c, code: .readNotPermitted, for: "reading \(c.uuid.uuidString)")
                let value = try await tool.run("reading \(c.uuid.uuidString)") {
                    try await peripheral.readValue(for: c, timeout: nil)
                }
                Output.line(value.hex)
            }
        }
    }
}

/// `ble write`: values to a characteristic.
struct WriteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write",
        abstract: "Write hex values to a characteristic.",
        discussion: """
            Each HEX argument is one write, sent in order. Without --without-response a value (up to 512 bytes) \
            is written with a Write Request, or with the long-write procedure when it does not fit one, and the \
            peer's answer decides the exit status. With --without-response each value is one Write Command and \
            must fit ATT_MTU - 3 bytes (an error otherwise; --chunk splits a longer value into such pieces); each \
            is sent only when the link has room for it (canSendWriteWithoutResponse), so a bulk transfer is paced \
            by the link rather than dropped.
            """)

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID.", valueName: "char"))
    var characteristic: String

    @Argument(
        help: ArgumentHelp(
            "Values: hex digits, optionally separated by spaces or colons; one write each.",
            valueName: "hex"))
    var values: [String]

    @Flag(help: "Send Write Commands (no response) instead of Write Requests.")
    var withoutResponse = false

    @Flag(help: "With --without-response: split each value into pieces of ATT_MTU - 3 bytes.")
    var chunk = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        if values.isEmpty { throw ValidationError("give the value to write (HEX)") }
        if chunk && !withoutResponse { throw ValidationError("--chunk goes with --without-response") }
        _ = try parseUUID(characteristic, what: "CHAR")
        for text in values {
            guard let value = Data(hexArgument: text) else { throw ValidationError("HEX '\(text)' is not hex digits") }
            if !withoutResponse && value.count > 512 {
                throw ValidationError("a value is at most 512 bytes; this one has \(value.count)")
            }
        }
    }

    func run() async throws {
        let uuid = try parseUUID(characteristic, what: "CHAR")
        var data: [Data] = []
        for text in values {
            guard let value = Data(hexArgument: text) else { throw ValidationError("HEX '\(text)' is not hex digits") }
            if !withoutResponse && value.count > 512 {
                throw ValidationError("a value is at most 512 bytes; this one has \(value.count)")
            }
            data.append(value)
        }
        let target = target
        let withoutResponse = withoutResponse
        let chunk = chunk
        let writes = data
        let total = writes.reduce(0) { $0 + $1.count }
        guard withoutResponse else {
            try await CommandRun.flow(transport) { tool in
                let peripheral = try await tool.connect(to: target)
                try await tool.using(peripheral) {
                    let c = try await tool.findCharacteristic(uuid, on: peripheral)
                    try tool.require(.write, of: c, code: .writeNotPermitted, for: "writing \(c.uuid.uuidString)")
                    for value in writes {
                        try await tool.run("writing \(c.uuid.uuidString)") {
                            try await peripheral.writeValue(value, for: c, type: .withResponse, timeout: nil)
                        }
                    }
                    Output.line("wrote \(total) byte\(total == 1 ? "" : "s") to \(c.uuid.labelled)")
                }
            }
            return
        }
        try await CommandRun.flow(transport) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let c = try await tool.findCharacteristic(uuid, on: peripheral)
                try tool.require(
                    .writeWithoutResponse, of: c, code: .writeNotPermitted,
                    for: "writing \(c.uuid.uuidString) without response")
                let size = max(1, peripheral.maximumWriteValueLength(for: .withoutResponse))
                if !chunk, let long = writes.first(where: { $0.count > size }) {
                    throw ToolError(
                        .failure,
                        "a write without response carries at most \(size) bytes (ATT_MTU - 3) on this link; this value has \(long.count) (use --chunk to split it)"
                    )
                }
                // Each value is one send: one Write Command, or with --chunk pieces of at most ATT_MTU - 3 bytes,
                // paced by the link and finished once the peer's link layer acknowledged every one.
                var sent = 0
                var waits = 0
                for value in writes {
                    // An empty value is one empty Write Command.
                    let piece = max(1, chunk ? size : value.count)
                    var last: SendProgress?
                    try await tool.run("writing \(c.uuid.uuidString)") {
                        for try await step in peripheral.send(value, to: c, type: .withoutResponse, chunkSize: piece) {
                            last = step
                        }
                    }
                    // The iteration ends quietly when the task is cancelled: only the last acknowledgement counts.
                    guard let last, last.bytesAcknowledged == last.totalBytes else { throw CancellationError() }
                    sent += max(1, (value.count + piece - 1) / piece)
                    waits += last.timesWaitedForRoom
                }
                Output.line(
                    "sent \(sent) write\(sent == 1 ? "" : "s") without response, waiting for room \(waits) time\(waits == 1 ? "" : "s")"
                )
                Output.line("wrote \(total) byte\(total == 1 ? "" : "s") to \(c.uuid.labelled)")
            }
        }
    }
}

/// `ble subscribe`: notifications or indications as hex lines.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Subscribe to a characteristic's notifications or indications and print one hex line per value.",
        discussion: "Stops after --count values (unsubscribing and disconnecting), or runs until interrupted.")

    @OptionGroup var target: TargetOptions

    @Argument(help: ArgumentHelp("The characteristic's UUID.", valueName: "char"))
    var characteristic: String

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Stop after this many values (0: until interrupted).", valueName: "n"))
    var count: Int = 0

    func validate() throws {
        _ = try parseUUID(characteristic, what: "CHAR")
        try CommandLineNumbers.checkCount(count, option: "--count", minimum: 0)
    }

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        let uuid = try parseUUID(characteristic, what: "CHAR")
        let target = target
        let count = count
        try await CommandRun.flow(transport, interruptedIsSuccess: true) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let c = try await tool.findCharacteristic(uuid, on: peripheral)
                guard c.properties.contains(.notify) || c.properties.contains(.indicate) else {
                    throw ToolError(.noSuchCharacteristic, "\(c.uuid.labelled) neither notifies nor indicates")
                }
                var received = 0
                try await tool.run("subscribing to \(c.uuid.uuidString)") {
                    for try await value in peripheral.notifications(for: c) {
                        received += 1
                        Output.line(value.hex)
                        guard count > 0, received == count else { continue }
                        // Unsubscribe before the stream ends, so the stream has nothing left to undo.
                        try? await peripheral.setNotifyValue(false, for: c, timeout: .seconds(5))
                        break
                    }
                }
            }
        }
    }
}
