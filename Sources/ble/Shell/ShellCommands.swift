import ArgumentParser
import BLE
import Foundation
import Synchronization

/// One of `ble shell`'s commands: parsed from the line's words by ArgumentParser (so `help read` and a wrong
/// option read as the tool's own commands do), then run against the session.
protocol ShellCommandLine: ParsableCommand {
    func run(in shell: ShellSession) async throws
    /// The options Tab offers after '-'.
    static var optionNames: [String] { get }
}

extension ShellCommandLine {
    static var optionNames: [String] { ["--help"] }
}

/// The shell's commands, in the order `help` lists them.
enum ShellCommands {
    static let all: [any ShellCommandLine.Type] = [
        ShellScan.self, ShellDevices.self, ShellConnect.self, ShellExplore.self, ShellRead.self, ShellWrite.self,
        ShellSubscribe.self, ShellUnsubscribe.self, ShellPair.self, ShellMTU.self, ShellRSSI.self, ShellInfo.self,
        ShellDisconnect.self, ShellUse.self, ShellLinks.self, ShellWait.self, ShellHelp.self, ShellQuit.self,
    ]

    static var names: [String] { all.compactMap { $0.configuration.commandName } + ["exit"] }

    static func named(_ name: String) -> (any ShellCommandLine.Type)? {
        let name = name == "exit" ? "quit" : name
        return all.first { $0.configuration.commandName == name }
    }

    static func parse<T: ShellCommandLine>(_ type: T.Type, _ arguments: [String]) throws -> any ShellCommandLine {
        try T.parse(negativeNumbersAsValues(arguments))
    }

    /// ArgumentParser reads a word such as "-1" as an option ('wait -1' said "Missing expected argument", 'scan -1'
    /// "Unknown option"): a negative number not after an option, with no option after it, gets "--" before it, so
    /// it reaches the command as its value and the command's own check says what is wrong with it.
    static func negativeNumbersAsValues(_ words: [String]) -> [String] {
        func isNegativeNumber(_ word: String) -> Bool { word.count > 1 && word.hasPrefix("-") && Double(word) != nil }
        guard let index = words.firstIndex(where: isNegativeNumber), !words.contains("--"),
            index == 0 || !words[index - 1].hasPrefix("-"),
            !words[(index + 1)...].contains(where: { $0.hasPrefix("-") && !isNegativeNumber($0) })
        else { return words }
        return Array(words[..<index]) + ["--"] + Array(words[index...])
    }

    /// `help`: one line per command.
    static func summary() -> String {
        let rows = all.map { type -> (String, String) in
            // The options are for 'help COMMAND'; the list shows the arguments.
            let usage =
                type.usageString().replacing(#/ ?\[--[^\]]*\]/#, with: "")
                + (type.optionNames.count > 1 ? " [options]" : "")
            return (usage, type.configuration.abstract)
        }
        let width = min(44, rows.map(\.0.count).max() ?? 0)
        var lines = ["Commands ('help COMMAND' for its options; Tab completes commands, names and UUIDs):"]
        for (usage, abstract) in rows {
            if usage.count > width {
                lines.append("  \(usage)")
                lines.append("  " + String(repeating: " ", count: width) + "  \(abstract)")
            } else {
                lines.append("  " + usage.padding(toLength: width, withPad: " ", startingAt: 0) + "  \(abstract)")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func usageString<T: ParsableCommand>(_ type: T.Type) -> String { type.usageString() }
}

extension ParsableCommand {
    /// "read [<char>] [--descriptor <uuid>] ...": the usage without the "USAGE: " ArgumentParser puts first.
    static func usageString() -> String {
        let text = helpMessage(columns: 200)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("USAGE:") }) else {
            return configuration.commandName ?? ""
        }
        return line.dropFirst("USAGE:".count).trimmingCharacters(in: .whitespaces)
    }
}

// MARK: The shell itself

struct ShellWait: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "wait", abstract: "Wait SECONDS (in a script: for notifications to arrive).")

    @Argument(help: ArgumentHelp("How long.", valueName: "seconds"))
    var seconds: Double

    func validate() throws {
        try CommandLineNumbers.checkSeconds(seconds, option: "SECONDS")
    }

    func run(in shell: ShellSession) async throws {
        try await shell.tool.system.sleep(for: CommandLineNumbers.duration(seconds: seconds))
    }
}

struct ShellHelp: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "help", abstract: "List the commands, or show one command's options.")

    @Argument(help: ArgumentHelp("A command.", valueName: "command"))
    var command: String?

    func run(in shell: ShellSession) async throws {
        guard let command else {
            shell.terminal.print(ShellCommands.summary())
            return
        }
        guard let type = ShellCommands.named(command) else {
            throw ValidationError("no command '\(command)' ('help' lists them)")
        }
        shell.terminal.print(type.helpMessage(columns: ShellTerminal.columns()))
    }
}

struct ShellQuit: ShellCommandLine {
    static let configuration = CommandConfiguration(
        commandName: "quit", abstract: "Disconnect and leave (also 'exit', or Ctrl-D).")

    /// Handled by the loop before parsing; here for `help`.
    func run(in shell: ShellSession) async throws {}
}
