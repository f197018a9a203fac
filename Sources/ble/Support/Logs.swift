import ArgumentParser
import BLE
import BLETransport
import Foundation
import Logging
import Synchronization

/// `-v`/`--verbose`, `BLE_LOG_LEVEL`, `--trace` and `--trace-secrets`: how much of what the stack notices the tool
/// shows, on stderr, one line each with its time. The library only logs through swift-log; the tool picks the
/// handler, once per process.
///
/// -v (the library's `debug`) shows a link's life (connected, ATT_MTU, pairing, encryption, disconnected with the
/// reason), -vv (`trace`) adds the GATT procedures with their results (discovery, reads, writes) and the peer's
/// requests, -vvv adds every HCI packet, decoded, as `--trace` prints them.
struct LogOptions: ParsableArguments {
    @Flag(
        name: .shortAndLong,
        help: ArgumentHelp(
            "Show what the stack notices on stderr: -v links, pairing and encryption; -vv also GATT requests and results; -vvv also every packet, as --trace (or BLE_LOG_LEVEL)."
        ))
    var verbose: Int

    @Flag(
        help: ArgumentHelp(
            "Print every HCI packet of this device on stderr as it passes, decoded (HCI, L2CAP, ATT, SMP), keys redacted."
        ))
    var trace = false

    @Flag(
        name: .customLong("trace-secrets"),
        help: "With --trace: show keys, random numbers and confirm values instead of <redacted>.")
    var traceSecrets = false

    static let levels = Logger.Level.allCases.map(\.rawValue)

    func validate() throws {
        if let text = ProcessInfo.processInfo.environment["BLE_LOG_LEVEL"], !text.isEmpty,
            Logger.Level(rawValue: text.lowercased()) == nil
        {
            throw ValidationError("BLE_LOG_LEVEL must be one of \(Self.levels.joined(separator: ", ")), not '\(text)'")
        }
    }

    /// Warnings by default; -v debug (the library logs a link's life there, as swift-log asks of libraries), -vv
    /// and more trace; BLE_LOG_LEVEL when given, unless -v asks for more.
    var level: Logger.Level {
        let fromFlags: Logger.Level = verbose >= 2 ? .trace : verbose == 1 ? .debug : .warning
        guard let text = ProcessInfo.processInfo.environment["BLE_LOG_LEVEL"],
            let level = Logger.Level(rawValue: text.lowercased())
        else { return fromFlags }
        return verbose > 0 ? min(level, fromFlags) : level
    }

    /// Whether packets are traced: `--trace`, `--trace-secrets` or -vvv.
    var tracesPackets: Bool { trace || traceSecrets || verbose >= 3 }

    /// Routes every logger of the process to stderr at `level`. Only the first call counts: swift-log allows one
    /// bootstrap per process.
    func install() {
        Logs.install(level)
    }

    /// The packet trace these options ask for, or nil.
    func packetTrace(naming device: String? = nil) -> LiveTrace? {
        tracesPackets ? LiveTrace(showsSecrets: traceSecrets, device: device) : nil
    }

    /// With the trace on, wraps every transport the shared registry opens so that its packets are traced (the
    /// shared room, TCP, serial, HCI sockets). Call after the transports are registered, before opening one.
    func traceTransports() {
        guard let trace = packetTrace() else { return }
        let registry = TransportRegistry.shared
        for kind in registry.registeredKinds {
            guard let inner = registry.opener(for: kind) else { continue }
            registry.register(kind) { spec in TracingTransport(wrapping: try await inner(spec), trace: trace) }
        }
    }

    /// With the trace on, traces the packets of `device` on a simulated radio (every device's, with its name on
    /// each line, when `device` is nil).
    func trace(_ radio: SimulatedRadio, device: String?) {
        guard let trace = packetTrace(naming: device == nil ? "" : nil) else { return }
        radio.setTraceHandler { _, name, direction, packet in
            guard device == nil || name == device else { return }
            trace.record(packet, direction == .hostToController ? .hostToController : .controllerToHost, from: name)
        }
    }
}

/// The one bootstrap of the process.
enum Logs {
    private static let installed = Mutex<Bool>(false)

    static func install(_ level: Logger.Level) {
        let first = installed.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in ToolLogHandler(label: label, logLevel: level) }
    }
}

/// Standard error, one whole line per write, in the order lines are made (logs and traces share it).
enum Diagnostics {
    private static let lock = Mutex(())

    static func line(_ text: String) {
        lock.withLock { _ in
            // Standard error closed: nothing is left to tell.
            try? FileHandle.standardError.write(contentsOf: Data((text + "\n").utf8))
        }
    }
}

/// A log line as the tool prints it: `2026-03-01T12:00:00.123Z info host[ble]: 0x0040 ATT_MTU 517`, the time in
/// UTC with milliseconds (as `ble serve` and `ble subscribe` print theirs), the level, the logger's label without
/// the library's prefix and, in brackets, the device the line is about (its host's name); other metadata after
/// the message as `key=value`.
struct ToolLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, logLevel: Logger.Level) {
        self.label = label.hasPrefix("swift-ble.") ? String(label.dropFirst("swift-ble.".count)) : label
        self.logLevel = logLevel
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        Diagnostics.line(Self.format(event, label: label, metadata: metadata, at: Date()))
    }

    static func format(_ event: LogEvent, label: String, metadata: Logger.Metadata, at date: Date) -> String {
        var all = metadata
        for (key, value) in event.metadata ?? [:] { all[key] = value }
        let device = all.removeValue(forKey: "host").map { "[\($0)]" } ?? ""
        let rest = all.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        return "\(Timestamp.format(date)) \(event.level) \(label)\(device): \(event.message)\(rest)"
    }
}

/// Packets decoded as they pass, printed on stderr: `TIME H>C 0x0040 ATT Read Request handle 0x0003`.
final class LiveTrace: Sendable {
    /// One decoder per device: each puts its own links' fragments together (two devices' handles may be equal).
    private let decoders: Mutex<[String: PacketTrace]> = Mutex([:])
    private let showsSecrets: Bool
    /// nil: one device, not named on each line; "": several, each line names its own.
    private let device: String?

    init(showsSecrets: Bool, device: String?) {
        self.showsSecrets = showsSecrets
        self.device = device
    }

    func record(_ packet: HCIPacket, _ direction: PacketTrace.Direction, from name: String? = nil) {
        let line = decoders.withLock { decoders in
            decoders[name ?? "", default: PacketTrace(showsSecrets: showsSecrets)].describe(
                packet, direction: direction)
        }
        let who = device == nil ? "" : "[\(name ?? "")] "
        Diagnostics.line("\(Timestamp.now()) \(who)\(Self.format(line, direction))")
    }

    /// "H>C 0x0040 ATT Read Request handle 0x0003", the handle column blank for packets of no link.
    static func format(_ line: PacketTrace.Line, _ direction: PacketTrace.Direction) -> String {
        "\(direction.label) \(line.handle.map(\.description) ?? "      ") \(line.text)"
    }
}

/// A transport whose packets a `LiveTrace` sees on their way, both ways, before the host or the controller does.
final class TracingTransport: HCITransport {
    let wrapped: any HCITransport
    let trace: LiveTrace

    init(wrapping transport: any HCITransport, trace: LiveTrace) {
        self.wrapped = transport
        self.trace = trace
    }

    func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        wrapped.setReceiver { [trace] event in
            if case .packet(let packet) = event { trace.record(packet, .controllerToHost) }
            receiver(event)
        }
    }

    func send(_ packet: HCIPacket) {
        trace.record(packet, .hostToController)
        wrapped.send(packet)
    }

    func close() { wrapped.close() }
}
