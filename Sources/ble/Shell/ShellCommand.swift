import ArgumentParser
import BLE
import Foundation
import Synchronization

/// `ble shell`: an interactive session, in the spirit of bluetoothctl and Bumble's console, that keeps its
/// connection between commands.
struct ShellCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell",
        abstract: "An interactive session: scan, connect, explore, read, write, subscribe, mtu, rssi, disconnect.",
        discussion: """
            At a terminal, the shell reads commands at a prompt with line editing (arrows, Home/End, Ctrl-A/E/K/U/W, \
            Ctrl-L), a history (Up/Down, Ctrl-R to search it; kept in the tool's state folder, shell_history), and \
            Tab completion of \
            commands, device names and addresses seen by 'scan', the connected device's characteristic and \
            descriptor UUIDs, formats and options. Notifications and every other line are printed above the \
            prompt without disturbing what is being typed. Ctrl-C stops the running command (or clears the line); \
            Ctrl-D on an empty line or 'quit' disconnects and leaves. 'help' lists the commands and 'help COMMAND' \
            shows a command's options; values are read, written and shown as 'ble read', 'ble write' and 'ble \
            subscribe' do. 'pair' pairs with the connected device as the pairing options say (--io-capability, \
            --passkey, --mitm, --sc-only, --yes/--no for a numeric comparison; the shell never prompts for them). \
            Several devices stay connected: 'connect' another keeps the first, 'use TARGET' chooses the one the \
            commands act on, 'links' lists them.

            Driven by a script (standard input not a terminal), it reads one command per line with no prompt or \
            editing, runs each to its end before the next ('wait SECONDS' lets notifications arrive), skips blank \
            lines and lines starting with '#', prints failures to stderr as 'ble: line N: MESSAGE' and goes on; at the end \
            of the input it disconnects and exits with the status of the first command that failed (the tool's \
            statuses; 64 for a command it could not parse), or 0.
            """)

    @OptionGroup var pairing: PairingOptions

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        if pairing.passkey == "-" {
            throw ValidationError("--passkey - cannot be used: the shell reads its commands there")
        }
    }

    func run() async throws {
        let interactive = ShellTerminal.standardStreamsAreTerminals
        let historyPath = interactive ? ShellHistory.path() : nil
        let terminal = ShellTerminal(
            interactive: interactive, prompt: ShellSession.idlePrompt,
            history: historyPath.map(ShellHistory.load) ?? [])
        let failure = FirstFailure()
        // However the session ends (a SIGINT sent to the process ends it without waiting for the shell's task),
        // the terminal is given back.
        defer { terminal.restore() }
        var configuration = BluetoothSystem.Configuration()
        configuration.pairing = pairing.configuration
        // The shell reads its commands from standard input: the pairing's questions take the options' answers
        // (a numeric comparison without --yes is refused), never a prompt.
        let agent = PairingAgent(
            options: pairing, asking: .never(unanswered: false), log: { terminal.print($0) })
        // However the session ends (quit, a stop signal, the controller gone), this session's lines are kept.
        defer { if let historyPath { ShellHistory.append(terminal.addedHistory, to: historyPath) } }
        // A failure that ends the session is told below the prompt, not on its line.
        let session: @Sendable (CentralTool) async throws -> Void = { tool in
            tool.system.pairingDelegate = agent
            let shell = ShellSession(tool: tool, terminal: terminal, pairingAgent: agent)
            failure.set(await shell.run())
        }
        try await CommandRun.flow(
            transport, configuration: configuration, beforeReport: { terminal.restore() }, session)
        if !interactive, let status = failure.status { throw ExitCode(status) }
    }
}

/// The status a script's run ends with, handed out of the session's task.
final class FirstFailure: Sendable {
    private let value = Mutex<Int32?>(nil)
    var status: Int32? { value.withLock { $0 } }
    func set(_ status: Int32?) { value.withLock { $0 = status } }
}

/// The shell's history file: one line per entry, readable by the user alone. Each shell appends the lines it
/// added when it ends (as bash's `histappend`), so two shells at once both keep theirs; the file is cut back to
/// the last `LineEditing.historyLimit` entries when it has grown to twice that.
enum ShellHistory {
    static func path() -> String? {
        (try? StateDirectory.folder()).flatMap { $0 }.map { $0 + "/shell_history" }
    }

    static func load(_ path: String) -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }

    static func append(_ added: [String], to path: String) {
        guard !added.isEmpty else { return }
        let text = added.joined(separator: "\n") + "\n"
        // One write with O_APPEND: another shell's lines, appended at the same time, are not overwritten.
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o600)
        let written =
            descriptor < 0
            ? -1 : text.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        if descriptor >= 0 { close(descriptor) }
        // A history that cannot be saved costs the next session its Up arrow, nothing else: said, not fatal.
        guard written == text.utf8.count else {
            Output.error("the shell's history could not be saved to \(path)")
            return
        }
        let all = load(path)
        guard all.count >= 2 * LineEditing.historyLimit else { return }
        let kept = all.suffix(LineEditing.historyLimit).joined(separator: "\n") + "\n"
        let temporary = path + ".\(getpid())"
        if FileManager.default.createFile(
            atPath: temporary, contents: Data(kept.utf8), attributes: [.posixPermissions: 0o600])
        {
            rename(temporary, path)
        }
    }
}
