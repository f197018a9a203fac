import ArgumentParser
import BLE
import BLECore
import BLETransport
import BLETransportPosix
import Dispatch
import Foundation
import Logging
import Synchronization

/// `ble controller tcp-server:HOST:PORT`: one virtual controller of the simulated world, reachable over H4/TCP
/// so that another host stack (Bumble's, BlueZ's through a bridge) can use our radio.
///
/// The world is the simulated room the other commands use (`World`: a heart-rate sensor, a thermometer, a door
/// lock, a printer and beacons, each our own host and `PeripheralManager`); the exposed controller sits at the
/// origin with no host of ours: whatever connects to the port is its host. The radio runs in real time.
/// The command frames packets and nothing else: bytes from the host are H4-decoded and handed to the
/// controller's HCI transport, and what the controller emits is H4-encoded back.
struct ControllerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "controller",
        abstract: "Expose one virtual controller of the simulated world over H4/TCP for another host stack.",
        discussion: """
            Listens on HOST:PORT (PORT 0 picks a free port; the line 'listening on tcp-server:HOST:PORT' gives \
            it) and serves one host at a time; the controller keeps its state when a host leaves (a new host \
            should send HCI Reset). Around the controller is the simulated room the other commands use: \
            HRM-Demo, Thermometer, DoorLock, Printer and three beacons. Stop with Ctrl-C (SIGINT, status 130) or \
            SIGTERM (status 143).
            """)

    @Argument(help: "Where to listen: tcp-server:HOST:PORT (HOST an IPv4 address).")
    var transport: String

    @Option(help: "Seed of the simulated radio (the other commands' room uses 2024).")
    var seed: UInt64 = 2024

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Record the HCI traffic between the connected host and the controller to this btsnoop file (the host's view: its commands and data sent, the controller's events and data received).",
            valueName: "file"))
    var btsnoop: String?

    /// The controller's public address (what HCI Read BD_ADDR reports).
    static let controllerAddress = BluetoothAddress(bytes: [0x5A, 0x11, 0xB1, 0xE0, 0x00, 0x01])

    @OptionGroup var log: LogOptions

    func validate() throws {
        _ = try Self.parse(transport)
    }

    /// Splits `tcp-server:HOST:PORT`.
    static func parse(_ spec: String) throws -> (host: String, port: UInt16) {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, parts[0] == "tcp-server", !parts[1].isEmpty, let port = UInt16(parts[2]) else {
            throw ValidationError("'\(spec)' is not tcp-server:HOST:PORT")
        }
        return (parts[1], port)
    }

    func run() async throws {
        // What the stack notices goes to stderr, never into this command's output.
        log.install()
        let (host, port) = try Self.parse(transport)
        let world = ControllerWorld(seed: seed, address: Self.controllerAddress)
        let radio = world.radio
        log.trace(radio, device: nil)
        let controller = world.controller

        let listener: TCPServerTransport
        do {
            listener = try await TCPServerTransport.bind(
                host: host, port: Int(port), whenBusy: .failCommands(.controllerBusy))
        } catch {
            // The spec is right but its port cannot be had (in use, say): the transport's failure, not a usage error.
            throw ToolError(.transport, "\(transport): \(error)")
        }
        // The controller's HCI, seen from the host's side (recorded as the host would record it).
        let writer: BTSnoopWriter?
        do {
            writer = try btsnoop.map { try BTSnoopWriter(path: $0) }
        } catch {
            throw ToolError(.transport, "--btsnoop \(btsnoop ?? ""): \(error)")
        }
        let link: any HCITransport =
            writer.map { RecordingTransport(wrapping: controller.hostTransport, writer: $0) }
            ?? controller.hostTransport
        // The host connected now, if any: the controller's packets go to it (and are dropped between hosts, as
        // a controller with nobody on its UART would lose them).
        let current = Mutex<H4StreamTransport?>(nil)
        link.setReceiver { event in
            switch event {
            case .packet(let packet): current.withLock { $0 }?.send(packet)
            case .closed(let reason): say("controller: closed\(reason.map { ": \($0)" } ?? "")")
            }
        }
        // Before the line that says it listens: whoever waits for that line may signal at once.
        StopSignal.install(Interrupt.signals)
        say(
            "listening on tcp-server:\(host):\(listener.port) (controller \(controller.address), world: \(world.summary))"
        )

        // One host at a time; the next is accepted when it leaves. Meanwhile the listener answers another
        // host's first command with Controller Busy (0x3A), then closes its connection.
        let hosts = Task {
            while !Task.isCancelled {
                let hostLink = try await listener.accept()
                let gone = AsyncStream<Void>.makeStream()
                current.withLock { $0 = hostLink }
                say("host connected from \(hostLink.peer ?? "?")")
                hostLink.setReceiver { event in
                    switch event {
                    case .packet(let packet): link.send(packet)
                    case .closed:
                        current.withLock { if $0 === hostLink { $0 = nil } }
                        say("host disconnected")
                        gone.continuation.finish()
                    }
                }
                for await _ in gone.stream {}
            }
        }
        // Short steps keep a host's packets from waiting for the next scheduled radio event, until a stop signal
        // (SIGINT, SIGTERM, SIGQUIT, SIGHUP) or the output's reader leaving (looked at every 50 steps).
        var steps = 0
        while StopSignal.received == 0 {
            try await radio.run(for: .milliseconds(2), pacing: .realtime)
            steps += 1
            if steps % 50 == 0, Output.checkReader() { break }
        }
        let signal = StopSignal.received
        hosts.cancel()
        listener.close()
        writer?.close()
        withExtendedLifetime((world, link)) {}
        // Nobody reads: ends quietly, as a tool SIGPIPE ends (141).
        if signal == 0 { Foundation.exit(Output.closedStatus) }
        say("stopped (\(StopSignal.name(signal)))")
        // 128 + the signal's number, as a shell reports a tool the signal ended.
        Foundation.exit(128 + signal)
    }
}

/// Writes one line to standard output at once (unbuffered: a test may be waiting for it on a pipe).
private func say(_ line: String) {
    try? FileHandle.standardOutput.write(contentsOf: Data((line + "\n").utf8))
}
