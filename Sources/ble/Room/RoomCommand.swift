import ArgumentParser
import BLE
import BLETransport
import BLETransportPosix
import Foundation
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `ble room`: the shared simulated room every `ble` process of the user attaches to (the `room` transport, the
/// tool's default).
struct RoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "room",
        abstract: "The shared simulated room: run it, or start, stop and ask about it in the background.",
        discussion: """
            The room is the simulated world of devices (HRM-Demo, Thermometer, DoorLock, Printer, Camera and three \
            beacons) on a radio that runs in real time, shared by every ble process of the user: each attaches as \
            a device of its own, with a virtual controller of its own, so a 'ble serve' in one terminal is found \
            by a 'ble explore' in another, and a value written by one command is read by the next. The first \
            command on the room transport starts it in the background; it stops by itself after --idle-timeout \
            seconds with no device attached.

            Its sockets are under $XDG_RUNTIME_DIR/swift-ble (or swift-ble-UID in the temporary folder): \
            room.sock (H4, one controller per connection), room.ctl (status and stop), with room.log beside. \
            Another host stack joins over H4 on TCP with --h4 tcp-server:HOST:PORT: each connection is a device \
            with a controller of its own, as RootCanal gives.
            """,
        subcommands: [RoomRunCommand.self, RoomStartCommand.self, RoomStopCommand.self, RoomStatusCommand.self],
        defaultSubcommand: RoomRunCommand.self)
}

/// The options that shape a room, for `run` and `start`.
struct RoomOptions: ParsableArguments {
    @Option(
        name: .customLong("h4"),
        help: ArgumentHelp(
            "Also take hosts over H4 on TCP here (tcp-server:HOST:PORT, PORT 0 for a free one); repeatable.",
            valueName: "spec"))
    var h4: [String] = []

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Stop after this many seconds with no device attached (0: never; default 600, or BLE_ROOM_IDLE_TIMEOUT).",
            valueName: "seconds"))
    var idleTimeout: Double?

    @Option(help: "Seed of the simulated radio.")
    var seed: UInt64 = 2024

    func validate() throws {
        if let idleTimeout { try CommandLineNumbers.checkSeconds(idleTimeout, option: "--idle-timeout") }
        _ = try listeners()
    }

    /// The `--h4` listeners.
    func listeners() throws -> [(host: String, port: Int)] {
        try h4.map { text in
            guard case .tcpServer(let host, let port)? = try? TransportSpec(parsing: text) else {
                throw ValidationError("--h4 '\(text)' is not tcp-server:HOST:PORT")
            }
            return (host, port)
        }
    }

    var idleSeconds: Double { idleTimeout ?? RoomClient.defaultIdleTimeout }

    /// The same options for a room started in the background.
    var arguments: [String] {
        h4.flatMap { ["--h4", $0] } + ["--idle-timeout", "\(idleSeconds)", "--seed", "\(seed)"]
    }
}

/// `ble room` / `ble room run`: runs the room in this process, in the foreground, until Ctrl-C, `ble room stop`
/// or the idle timeout.
struct RoomRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run the shared room in the foreground (the default).")

    @OptionGroup var room: RoomOptions

    @Flag(help: .hidden)
    var daemon = false

    @OptionGroup var log: LogOptions

    func run() async throws {
        log.install()
        if daemon {
            // A session of its own: the terminal's Ctrl-C and hang-up are not the room's business. Started by a
            // command it leads one already (`DaemonProcess`); started by hand, it is let go of the terminal here
            // when it can be (a process group's leader, as a shell makes it, cannot).
            if getsid(0) != getpid() { _ = setsid() }
            signal(SIGHUP, SIG_IGN)
        }
        // A log on a closed pipe (`ble room | head`) must not end the room with its sockets left behind.
        signal(SIGPIPE, SIG_IGN)
        let paths = try RoomPaths.preparedForCommand()
        // One room per user: the lock is held for the room's life (the system lets it go when the process ends,
        // however it ends). A room that is stopping is waited for a little.
        let lock = open(paths.lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else {
            throw ToolError(.transport, "cannot open \(paths.lock): \(String(cString: strerror(errno)))").report()
        }
        var locked = flock(lock, LOCK_EX | LOCK_NB) == 0
        for _ in 0..<50 where !locked {
            try? await Task.sleep(for: .milliseconds(100))
            locked = flock(lock, LOCK_EX | LOCK_NB) == 0
        }
        guard locked else {
            let pid = (try? String(contentsOfFile: paths.pid, encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines)
            throw ToolError(
                .transport, "a room is already running\(pid.map { " (pid \($0))" } ?? "") on unix:\(paths.socket)"
            ).report()
        }
        // Sockets left by a room that ended without cleaning up: nobody owns them now.
        unlink(paths.socket)
        unlink(paths.control)
        // The pid is written before the control socket listens: `ble room start` returns once the control socket
        // answers, and whoever it told the room is up may look for the pid at once (test_room once found none).
        try? "\(getpid())\n".write(toFile: paths.pid, atomically: true, encoding: .utf8)
        let idle = room.idleSeconds
        let daemon = RoomDaemon(
            seed: room.seed, paths: paths, idleTimeout: idle > 0 ? CommandLineNumbers.duration(seconds: idle) : nil)
        log.trace(daemon.world.radio, device: nil)
        var listeners: [H4Listener] = []
        let control: any Channel
        do {
            let unixListener = try await H4Listener.bind(.unix(path: paths.socket)) { [daemon] link in
                daemon.attach(link, via: "unix")
            }
            listeners.append(unixListener)
            daemon.listening(on: unixListener.address.description)
            for (host, port) in try room.listeners() {
                let tcp = try await H4Listener.bind(.tcp(host: host, port: port)) { [daemon] link in
                    daemon.attach(link, via: "h4 from \(link.peer ?? "?")")
                }
                listeners.append(tcp)
                daemon.listening(on: tcp.address.description)
            }
            control = try await RoomControl.listen(at: paths.control) { [daemon] request in daemon.answer(request) }
        } catch {
            for listener in listeners { listener.close() }
            unlink(paths.socket)
            unlink(paths.pid)
            throw ToolError(.transport, "the room cannot listen: \(error)").report()
        }
        // A stop signal (SIGINT, SIGTERM, SIGQUIT, SIGHUP) stops the room (its run loop polls them), from before the
        // lines that say it runs: Ctrl-\ no longer starts the crash backtracer and leaves the socket behind.
        StopSignal.install(Interrupt.signals)
        for listener in listeners {
            roomLog("listening on \(listener.address)")
        }
        roomLog(
            "room running (pid \(getpid()), world: \(WorldDevices.all.map(\.profile.deviceName).joined(separator: ", "))\(idle > 0 ? ", stops after \(Int(idle)) s idle" : ""))"
        )
        let reason: String
        do {
            reason = try await daemon.run()
        } catch {
            reason = "\(error)"
        }
        for listener in listeners { listener.close() }
        control.close(promise: nil)
        daemon.detachAll()
        unlink(paths.socket)
        unlink(paths.control)
        unlink(paths.pid)
        roomLog("room stopped (\(reason))")
        close(lock)
        // Stopped by a signal: 128 plus its number, as every command; idle or asked to stop (ble room stop): 0.
        let signal = StopSignal.received
        if signal != 0 { throw ExitCode(128 + signal) }
    }
}

extension RoomPaths {
    /// The room's folder, made and checked, for a command: a problem is the command's one error line.
    static func preparedForCommand() throws -> RoomPaths {
        let paths = RoomPaths.locate()
        do {
            try paths.prepare()
        } catch {
            throw error.report()
        }
        return paths
    }
}

/// `ble room start`: starts the room in the background unless one runs.
struct RoomStartCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start", abstract: "Start the shared room in the background (if it is not running).")

    @OptionGroup var room: RoomOptions

    func run() async throws {
        let paths = RoomPaths.locate()
        let status: [String: Any]
        let started: Bool
        do {
            (status, started) = try await RoomClient.ensureRunning(paths, arguments: room.arguments)
        } catch {
            throw error.report()
        }
        let pid = status["pid"].map { "\($0)" } ?? "?"
        let listening = (status["listening"] as? [String])?.joined(separator: ", ") ?? "unix:\(paths.socket)"
        print(
            started ? "room started (pid \(pid)) on \(listening)" : "room already running (pid \(pid)) on \(listening)")
        // A running room keeps the listeners it started with: --h4 ones it lacks need a restart.
        let held = (status["listening"] as? [String]) ?? []
        let missing = room.h4.filter { asked in !held.contains { Self.listener($0, serves: asked) } }
        if !started, !missing.isEmpty {
            let has = held.filter { !$0.hasPrefix("unix:") }
            let now = has.isEmpty ? "with no --h4 listener" : "with --h4 \(has.joined(separator: ", "))"
            throw ToolError(
                .transport,
                "the running room was started \(now), not \(missing.joined(separator: ", ")): stop it first (ble room stop), then start it with the --h4 options you want"
            ).report()
        }
    }

    /// Whether a listener the room has (`tcp-server:127.0.0.1:34321`) is the one `asked` names; port 0 (any
    /// port) matches any port on the same host.
    static func listener(_ held: String, serves asked: String) -> Bool {
        if held == asked { return true }
        guard asked.hasSuffix(":0"), asked.hasPrefix("tcp-server:") else { return false }
        return held.hasPrefix(String(asked.dropLast(1)))
    }
}

/// `ble room stop`: tells the room to stop and waits until it has.
struct RoomStopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stop", abstract: "Stop the shared room.")

    func run() async throws {
        let paths = try RoomPaths.preparedForCommand()
        guard (try? await RoomControl.ask("stop", at: paths.control)) != nil else {
            print("no room is running")
            return
        }
        // Gone once its lock is free (the process has ended or let go), within a bound.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let lock = open(paths.lock, O_RDWR)
            if lock < 0 { break }
            let free = flock(lock, LOCK_EX | LOCK_NB) == 0
            close(lock)
            if free {
                print("room stopped")
                return
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        throw ToolError(.timeout, "the room was asked to stop but still runs after 10 s (log: \(paths.log))").report()
    }
}

/// `ble room status`: whether the room runs, and its devices.
struct RoomStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Say whether the shared room runs, where, and which devices are attached.")

    @Flag(help: "The status as one JSON object.")
    var json = false

    func run() async throws {
        let paths = try RoomPaths.preparedForCommand()
        guard let (line, status) = await RoomClient.statusAnswer(paths) else {
            print(json ? #"{"running":false}"# : "no room is running (unix:\(paths.socket))")
            throw ExitCode(1)
        }
        if json { return print(line) }
        print("room running (pid \(status["pid"] ?? "?"), up \(status["uptime"] ?? 0) s)")
        for spec in status["listening"] as? [String] ?? [] { print("  listening on \(spec)") }
        print("  world: \((status["world"] as? [String] ?? []).joined(separator: ", "))")
        let devices = status["devices"] as? [[String: Any]] ?? []
        print("  \(devices.count) attached device\(devices.count == 1 ? "" : "s")")
        for d in devices {
            print("    \(d["index"] ?? "?")  \(d["address"] ?? "?")  \(d["via"] ?? "?")  since \(d["since"] ?? "?")")
        }
    }
}
