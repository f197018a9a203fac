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

    @OptionGroup(title: "Link preferences") var link: LinkOptions

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
        options.link.apply(to: &configuration)
        configuration.storePath = try StateDirectory.storePath(forDevice: name)
        if let path = configuration.storePath, try !StateDirectory.lockStore(path, exclusive: exclusive) {
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
                options.log.trace(world.radio, device: name)
                return Session(system: system, world: world, pacing: TransportOptions.simulationPacing)
            } catch let error as BluetoothError where error.code == .storeUnavailable {
                throw ToolError.storeUnavailable(error)
            } catch {
                throw ToolError(.transport, "--btsnoop \(options.btsnoop ?? ""): \(error)")
            }
        }
        // The tool, not the library, tells its user on stderr that it waits for a controller.
        PosixTransports.install(onListening: { spec in
            Output.stderr("ble: waiting for a controller to connect to \(spec)\n")
        })
        options.log.traceTransports()
        // The shared room: started in the background if it does not run, then reached as a device of its own.
        var connectSpec = spec
        var room: RoomPaths?
        if spec == "room" {
            let paths = RoomPaths.locate()
            room = paths
            let started = try await RoomClient.ensureRunning(paths).started
            if started, isatty(STDERR_FILENO) == 1 {
                Output.stderr(
                    "ble: started the shared room (ble room status; it stops after a while with nobody in it)\n")
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
            var named = message.contains(spec) || message.contains("'") ? message : "\(spec): \(message)"
            // The library lists its own kinds; the tool has two more of its own, the default first.
            named = named.replacingOccurrences(of: "Use virtual, ", with: "Use room (the default), virtual, ")
            throw ToolError(.transport, "\(options.transportSource): \(named)")
        }
    }

    /// Opens as `open` does, but stops waiting when a stop signal comes (nil: the command ends with the signal's
    /// status) and, on a `tcp-server:` transport, once `wait` has passed with no controller connected (`--timeout`
    /// where the command has one): that transport waits for a controller that may never come. The opening goes on
    /// being cancelled in the background; the process ends meanwhile.
    static func openUnlessStopped(
        _ options: TransportOptions, name: String = "ble",
        configuration: BluetoothSystem.Configuration = .init(), exclusive: Bool = false, wait: Duration? = nil
    ) async throws(ToolError) -> Session? {
        let spec = options.transport
        let deadline = spec.hasPrefix("tcp-server:") ? wait.map { ContinuousClock.now + $0 } : nil
        let opened = Mutex<Result<Session, ToolError>?>(nil)
        let opening = Task {
            let result: Result<Session, ToolError>
            do throws(ToolError) {
                result = .success(
                    try await open(options, name: name, configuration: configuration, exclusive: exclusive))
            } catch {
                result = .failure(error)
            }
            opened.withLock { $0 = result }
        }
        while true {
            if let result = opened.withLock({ $0 }) { return try result.get() }
            if Interrupt.shared.fired {
                opening.cancel()
                return nil
            }
            if let deadline, let wait, ContinuousClock.now >= deadline {
                opening.cancel()
                throw ToolError(
                    .transport,
                    "\(options.transportSource) \(spec): no controller connected within \(CentralTool.seconds(wait))")
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// `BLE_PRIVACY`: unset or empty, a new private address every 15 minutes; `off`, the controller's own address;
    /// a number of seconds (at least 1), that period.
    static func privacy(_ setting: String?) throws(ToolError) -> PrivacyConfiguration? {
        guard let setting, !setting.isEmpty else { return PrivacyConfiguration() }
        if setting == "off" { return nil }
        guard let seconds = Double(setting), seconds.isFinite, seconds >= 1, seconds <= 86_400 else {
            throw ToolError(
                .usage,
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
            Output.checkReader()
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

extension Session {
    /// Runs the world (or, over a real controller, waits) until `done` holds or `limit` of the system's time
    /// passes, whatever the stop signals: a command that was stopped lets its last steps (links closed politely,
    /// a shell's terminal restored) happen.
    func settle(within limit: Duration, until done: () -> Bool) async {
        let start = system.now
        while !done(), system.now - start < limit {
            if let radio = world?.radio {
                do {
                    try await radio.run(for: .milliseconds(10), pacing: pacing)
                } catch {
                    return
                }
            } else {
                try? await Task.sleep(for: .milliseconds(5))
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
