import ArgumentParser
import BLE
import Foundation

/// `ble connect`: connect and stay connected, printing each change of the connection's state; with
/// `--reconnect`, come back after every loss by the library's reconnection policy.
struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a device and stay connected, printing each change of the connection's state.",
        discussion: """
            Without --reconnect the command ends when the link is lost (exit 0 when it ends by --duration or \
            an interrupt, 1 when the device went away). With --reconnect it connects again after every loss: \
            by the device's identifier, or by scanning for its name, with pauses of 1 s doubling up to 30 s \
            between failed attempts, until interrupted or --duration passes.
            """)

    @OptionGroup var target: TargetOptions

    @Flag(help: "Connect again after every loss of the link, by the reconnection policy.")
    var reconnect = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to stay connected (0: until interrupted).", valueName: "seconds"))
    var duration: Double = 0

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        try CommandLineNumbers.checkSeconds(duration, option: "--duration")
    }

    func run() async throws {
        let target = target
        let reconnect = reconnect
        let limit = duration > 0 ? CommandLineNumbers.duration(seconds: duration) : nil
        try await CommandRun.flow(transport, interruptedIsSuccess: true) { tool in
            let start = tool.system.now
            @Sendable func say(_ text: String) {
                let s = (tool.system.now - start).inSeconds
                Output.line(String(format: "[%8.3f s] ", s) + text)
            }
            // Listening before connecting, so that a link lost at once is heard (with --reconnect the kept
            // connection listens for itself).
            let ends = reconnect ? nil : tool.manager.disconnections
            let peripheral = try await tool.connect(to: target)
            say("connected to \(CentralTool.describe(peripheral)) (ATT_MTU \(peripheral.attMTU))")
            try await tool.using(peripheral) {
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    if let limit {
                        group.addTask {
                            try await tool.system.sleep(for: limit)
                            return true
                        }
                    }
                    group.addTask {
                        if reconnect {
                            let back = ReconnectTarget(identifier: peripheral.identifier, name: peripheral.name)
                            let options = ReconnectOptions(
                                steps: [.knownIdentifier, .scan], stepTimeout: .seconds(10), timeout: .seconds(25))
                            let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(30))
                            // The first attempt finds the link made above: not news.
                            var first = true
                            for try await change in tool.manager.connections(
                                to: back, policy: policy, options: options)
                            {
                                switch change {
                                case .connecting where first: continue
                                case .connected where first: first = false
                                default:
                                    first = false
                                    say("\(change)")
                                }
                            }
                            return true
                        }
                        guard let ends else { return true }
                        for await end in ends where end.peripheral === peripheral {
                            say("disconnected\(end.error.map { ": \($0)" } ?? "")")
                            return false
                        }
                        return true
                    }
                    defer { group.cancelAll() }
                    let ended = try await group.next() ?? true
                    if !ended {
                        throw ToolError(.failure, "the link to \(CentralTool.describe(peripheral)) was lost")
                    }
                }
            }
        }
    }
}
