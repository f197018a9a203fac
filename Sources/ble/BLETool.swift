import ArgumentParser
import Foundation

/// `ble`: a command-line Bluetooth Low Energy tool in the spirit of LightBlue. It uses the public `BLE` API
/// only.
@main
struct BLETool: AsyncParsableCommand {
    /// The tool's version (`ble --version`): the package's, raised with each wave of work.
    static let version = "0.2.0"

    /// A reader that goes away (`ble scan | head -1`) is seen by the next write as EPIPE rather than as SIGPIPE,
    /// which would end the process at once: the command then ends as Ctrl-C ends it, links closed and captures
    /// flushed, and exits with 141 (`Output.write`).
    ///
    /// A `ToolError` that reaches the top is reported as every failure is: its one line and its kind's status (a
    /// command that threw it before its run loop, say), never ArgumentParser's `Error:` and status 1. A word that
    /// names no subcommand gets a suggestion, as the shell gives one.
    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        let arguments = Array(CommandLine.arguments.dropFirst())
        if let problem = unknownSubcommand(in: arguments) ?? EnvironmentCheck.problem() {
            Output.error(problem)
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        // After Ctrl-C at a terminal, whatever comes next (the shell's prompt) starts a line of its own: said
        // before each way out, since exiting skips a defer.
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            Interrupt.shared.endEchoedLine()
            // A command that wrote into a pipe its reader closed (ble btsnoop FILE | head) ends as SIGPIPE would.
            if Output.isClosed { Foundation.exit(Output.closedStatus) }
        } catch let error as ToolError {
            Interrupt.shared.endEchoedLine()
            Foundation.exit(error.report().rawValue)
        } catch {
            Interrupt.shared.endEchoedLine()
            exit(withError: error)
        }
    }

    /// The message for a first word (or the word after `help`) that is no subcommand: `ble scna`, `ble help nope`.
    static func unknownSubcommand(in arguments: [String]) -> String? {
        let names = configuration.subcommands.map { $0.configuration.commandName ?? "" }
        var words = arguments[...]
        if words.first == "help" { words = words.dropFirst() }
        guard let word = words.first, !word.hasPrefix("-"), !names.contains(word) else { return nil }
        let near = TargetMatcher(text: word).nearMisses(among: Set(names))
        let suggestion = near.first.map { "; did you mean \($0)?" } ?? ""
        return "no command '\(word)'\(suggestion) ('ble --help' lists them)"
    }

    static let configuration = CommandConfiguration(
        commandName: "ble",
        abstract: "Scan, explore and talk to Bluetooth Low Energy devices, or run a simulated world of them.",
        discussion: """
            The default transport, 'room', is a simulated room shared by every ble process of the user (see \
            'ble room'): a heart-rate sensor (HRM-Demo), a health thermometer (Thermometer), a door lock \
            (DoorLock), a printer (Printer), a camera (Camera) and three devices that only advertise (an iBeacon, \
            an Eddystone beacon, Environment Hub); the first command starts it. It runs in wall-clock time, as real \
            devices do. 'virtual' is a private copy of the room for one process, deterministic; \
            BLE_SIM_SPEED=fast runs it as fast as possible (tests, scripts).

            Environment: BLE_TRANSPORT (the default --transport), BLE_SIM_SPEED=fast, BLE_ROOM_IDLE_TIMEOUT, \
            BLE_PRIVACY (off, or seconds between private addresses), BLE_LOG_LEVEL, \
            XDG_RUNTIME_DIR (where the room's sockets are), XDG_STATE_HOME (where the tool's stores are).

            Exit status: 0 success; 1 other failure; 2 transport or store unavailable, or not powered on; 3 no \
            such device (nothing matched TARGET within --timeout); 4 not connectable or the connection failed; 5 \
            the peer refused with an ATT error, or the characteristic's properties do not allow the operation; 6 \
            timeout; 7 no such characteristic or descriptor; 8 the link dropped; 9 pairing failed or was refused; \
            10 no such bond; 64 bad arguments or environment; 130, 143, 131 stopped by SIGINT (Ctrl-C), SIGTERM, \
            SIGQUIT (Ctrl-\\); 141 the output was closed. Failures print one line to stderr.
            """,
        version: BLETool.version,
        subcommands: [
            ScanCommand.self, ExploreCommand.self, ReadCommand.self, WriteCommand.self, SubscribeCommand.self,
            ServeCommand.self, ShellCommand.self, ConnectCommand.self, SendCommand.self, PairCommand.self,
            BondsCommand.self, DevicesCommand.self, IdentitiesCommand.self,
            DemoCommand.self,
            RoomCommand.self, ControllerCommand.self,
            BenchCommand.self, SoakCommand.self, BTSnoopCommand.self,
        ])
}
