import ArgumentParser
import BLE
import BLETransport
import BLETransportPosix
import Dispatch
import Foundation
import Synchronization

/// `--transport` and `--btsnoop`, which every command takes.
struct TransportOptions: ParsableArguments {
    @Option(
        name: .customLong("transport"),
        help: ArgumentHelp(
            "Which controller to use: 'room' (the default: the simulated room shared by every ble process, started when needed), 'virtual' (a private simulated room for this process alone), tcp-client:HOST:PORT, tcp-server:HOST:PORT, serial:DEVICE[,BAUD[,rtscts]], hci-socket:N or unix:PATH.",
            valueName: "spec"))
    var transportOption: String?

    /// The spec in force: `--transport`, else `BLE_TRANSPORT`, else `room`.
    var transport: String { transportOption ?? Self.environmentTransport ?? "room" }

    /// Where the spec came from, for error messages: the flag or the variable actually used.
    var transportSource: String {
        transportOption != nil ? "--transport" : Self.environmentTransport != nil ? "BLE_TRANSPORT" : "--transport"
    }

    static var environmentTransport: String? {
        ProcessInfo.processInfo.environment["BLE_TRANSPORT"].flatMap { $0.isEmpty ? nil : $0 }
    }

    @Option(name: .long, help: ArgumentHelp("Record the HCI traffic to this btsnoop file.", valueName: "file"))
    var btsnoop: String?

    @OptionGroup var log: LogOptions

    /// `BLE_SIM_SPEED=fast`: run the simulated world as fast as possible instead of in wall-clock time.
    static var simulationPacing: SimulationPacing {
        ProcessInfo.processInfo.environment["BLE_SIM_SPEED"] == "fast" ? .asFastAsPossible : .realtime
    }
}

/// What a command runs on: the tool's own `BluetoothSystem` and, on the virtual transport, the simulated world
/// around it, which this session drives.
final class Session: Sendable {
    let system: BluetoothSystem
    let world: World?
    let pacing: SimulationPacing
    /// The shared room's folder when the transport is `room`, else nil.
    let room: RoomPaths?

    private init(system: BluetoothSystem, world: World?, pacing: SimulationPacing, room: RoomPaths? = nil) {
        self.system = system
        self.world = world
        self.pacing = pacing
        self.room = room
    }

    /// Opens the transport. On `virtual`, builds the world and adds the tool's device to it under `name`;
    /// otherwise reaches the controller the spec names (the POSIX transports are registered here). With
    /// `--btsnoop`, the tool's own HCI traffic is recorded. `exclusive`: the device's store is this process's
    /// alone (a served device: two processes with one identity would answer as one device); refused when another
    /// process holds it.
    static func open(
        _ options: TransportOptions, name: String = "ble",
        configuration: BluetoothSystem.Configuration = .init(), exclusive: Bool = false
    ) async throws(ToolError) -> Session {
        let spec = options.transport
        var configuration = configuration
        configuration.storePath = try StateDirectory.storePath(forDevice: name)
        if exclusive, let path = configuration.storePath, try !StateDirectory.lockStore(path) {
            throw ToolError(
                .transport,
                "another process serves \"\(name)\" (its store \(path) is in use): stop it, or give this one another --name"
            )
        }
        // As an iPhone does: behind resolvable private addresses, with an identity kept in the device's store, so
        // a bond made by one run is recognised by the next whatever address the controller gives this one.
        configuration.privacy = try privacy(ProcessInfo.processInfo.environment["BLE_PRIVACY"])
        if spec == "virtual" {
            let world = World(seed: 2024)
            configuration.btsnoop = options.btsnoop
            do {
                let system = try world.addToolDevice(name: name, configuration: configuration)
                return Session(system: system, world: world, pacing: TransportOptions.simulationPacing)
            } catch let error as BluetoothError where error.code == .storeUnavailable {
                throw ToolError.storeUnavailable(error)
            } catch {
                throw ToolError(.transport, "--btsnoop \(options.btsnoop ?? ""): \(error)")
            }
        }
        // The tool, not the library, tells its user on stderr that it waits for a controller.
        PosixTransports.install(onListening: { spec in
            FileHandle.standardError.write(Data("ble: waiting for a controller to connect to \(spec)\n".utf8))
        })
        // The shared room: started in the background if it does not run, then reached as a device of its own.
        var connectSpec = spec
        var room: RoomPaths?
        if spec == "room" {
            let paths = RoomPaths.locate()
            room = paths
            let started = try await RoomClient.ensureRunning(paths).started
            if started, isatty(STDERR_FILENO) == 1 {
                FileHandle.standardError.write(
                    Data(
                        "ble: started the shared room (ble room status; it stops after a while with nobody in it)\n"
                            .utf8))
            }
            connectSpec = TransportSpec.unix(path: paths.socket).description
        }
        do {
            let system = try await BluetoothSystem.connect(
                transport: connectSpec, btsnoop: options.btsnoop, name: name, configuration: configuration)
            return Session(system: system, world: nil, pacing: .realtime, room: room)
        } catch let error as BluetoothError where error.code == .storeUnavailable {
            throw ToolError.storeUnavailable(error)
        } catch {
            // The library's message usually names the spec (once); say which flag or variable gave it, and add
            // the spec when the message does not name it (a controller that does not answer, say). A capture that
            // cannot be written is the btsnoop setting's fault, not the transport's.
            let message = (error as? BluetoothError)?.message ?? "\(error)"
            if message.hasPrefix("cannot record to ") {
                let source = options.btsnoop != nil ? "--btsnoop" : "BLE_BTSNOOP"
                throw ToolError(.transport, "\(source): \(message)")
            }
            let named = message.contains(spec) || message.contains("'") ? message : "\(spec): \(message)"
            throw ToolError(.transport, "\(options.transportSource): \(named)")
        }
    }

    /// `BLE_PRIVACY`: unset or empty, a new private address every 15 minutes; `off`, the controller's own address;
    /// a number of seconds (at least 1), that period.
    static func privacy(_ setting: String?) throws(ToolError) -> PrivacyConfiguration? {
        guard let setting, !setting.isEmpty else { return PrivacyConfiguration() }
        if setting == "off" { return nil }
        guard let seconds = Double(setting), seconds.isFinite, seconds >= 1, seconds <= 86_400 else {
            throw ToolError(
                .failure,
                "BLE_PRIVACY=\(setting): expected 'off' or the seconds between private addresses (1 to 86400)")
        }
        return PrivacyConfiguration(rotationPeriod: .milliseconds(Int64(seconds * 1000)))
    }

    /// The error a command ends with, as its user should read it. On the shared room, a failure that came with
    /// the controller going away (the room was stopped or killed under the command) is the room's story, not the
    /// command's: it says so and where the room's log is. Otherwise `error` as it is.
    func explained(_ error: ToolError, controllerGone: Bool) -> ToolError {
        Self.explained(error, room: room, controllerGone: controllerGone)
    }

    /// As `explained(_:controllerGone:)`, with `controllerGone` asked again a moment later when it is false at
    /// first: a closing transport fails what was pending before the managers hear that the power is off.
    func explained(_ error: ToolError, controllerGone: @Sendable () -> Bool) async -> ToolError {
        guard room != nil else { return error }
        if controllerGone() { return explained(error, controllerGone: true) }
        try? await Task.sleep(for: .milliseconds(20))
        return explained(error, controllerGone: controllerGone())
    }

    static func explained(_ error: ToolError, room: RoomPaths?, controllerGone: Bool) -> ToolError {
        guard let room, controllerGone else { return error }
        return ToolError(.transport, "the shared room went away (log: \(room.log))")
    }

    /// Runs the world (or, over a real controller, waits) until `outcome` holds a result, SIGINT arrives, or
    /// `limit` of the system's time passes; then returns the outcome (nil when interrupted or out of time).
    func run(until outcome: Outcome, limit: Duration? = nil) async throws -> Result<Void, ToolError>? {
        let interrupt = Interrupt.shared
        let start = system.now
        while true {
            if let result = outcome.result { return result }
            if interrupt.fired { return nil }
            if let limit, system.now - start >= limit { return nil }
            if let radio = world?.radio {
                try await radio.run(for: pacing == .realtime ? .milliseconds(50) : .milliseconds(10), pacing: pacing)
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }
}

/// The result a command's callbacks hand back to its run loop; the first result set wins.
final class Outcome: Sendable {
    private let state = Mutex<Result<Void, ToolError>?>(nil)

    var result: Result<Void, ToolError>? { state.withLock { $0 } }

    func succeed() { set(.success(())) }
    func fail(_ error: ToolError) { set(.failure(error)) }

    private func set(_ result: Result<Void, ToolError>) {
        state.withLock { if $0 == nil { $0 = result } }
    }
}

/// SIGINT (Ctrl-C) as a flag the run loop polls, so commands stop cleanly.
final class Interrupt: Sendable {
    static let shared = Interrupt()
    private let flag = Mutex(false)

    var fired: Bool { flag.withLock { $0 } || StopSignal.received == SIGINT }

    /// Ends the command as Ctrl-C would (its output closed, say).
    func fire() {
        flag.withLock { $0 = true }
    }

    /// Installs the handler (idempotent).
    func install() {
        StopSignal.install([SIGINT])
    }
}

/// The signal that asked the tool to stop, set by a C signal handler that does nothing else, for run loops to
/// poll. The handler is in place when `install` returns, so a signal sent at once (a script that signals as soon
/// as the tool says it is ready) is never lost: a dispatch signal source, armed some time after it is resumed,
/// left a moment in which the signal, set to be ignored for the source's sake, was dropped.
enum StopSignal {
    /// The last stop signal's number, 0 before any.
    static var received: Int32 { stopSignalNumber.load(ordering: .relaxed) }

    static func install(_ numbers: [Int32]) {
        for number in numbers {
            signal(number) { stopSignalNumber.store($0, ordering: .relaxed) }
        }
    }
}

/// An atomic store is all a signal handler may do here (it is async-signal-safe).
private let stopSignalNumber = Atomic<Int32>(0)
