import ArgumentParser
import BLE
import Foundation
import Synchronization

/// `ble shell`'s state between commands: the tool's central, the device it is connected to, its subscriptions
/// and the devices seen, for Tab; and the loop that runs one command per line.
final class ShellSession: Sendable {
    let tool: CentralTool
    let terminal: ShellTerminal
    /// Answers the pairings of this session's device (`ble shell`'s pairing options).
    let pairingAgent: PairingAgent?

    struct State {
        /// The device the commands act on, once `connect` reached it (or `use` chose it among the links).
        var peripheral: Peripheral?
        /// Every device connected in this session, in the order connected (bluetoothctl keeps several too).
        var links: [Peripheral] = []
        /// Running subscriptions, by device and characteristic: each a task printing values as they come.
        var subscriptionsByDevice: [UUID: [BluetoothUUID: Task<Void, Never>]] = [:]
        /// The current device's subscriptions.
        var subscriptions: [BluetoothUUID: Task<Void, Never>] {
            get { peripheral.map { subscriptionsByDevice[$0.identifier] ?? [:] } ?? [:] }
            set { if let peripheral { subscriptionsByDevice[peripheral.identifier] = newValue } }
        }
        /// The latest report of each device seen by `scan`, in the order first seen.
        var seen: [UUID: ScanReport] = [:]
        var seenOrder: [UUID] = []
        /// Stops the command running now (Ctrl-C).
        var stopCurrent: AsyncStream<Void>.Continuation?
        /// The exit status of the first command that failed, for a script.
        var firstFailure: Int32?
        /// The number of the line being run (from 1), which a script's error names.
        var lineNumber = 0
    }

    let state = Mutex(State())

    init(tool: CentralTool, terminal: ShellTerminal, pairingAgent: PairingAgent? = nil) {
        self.tool = tool
        self.terminal = terminal
        self.pairingAgent = pairingAgent
    }

    static let idlePrompt = "ble> "

    static func prompt(for peripheral: Peripheral?) -> String {
        guard let peripheral else { return idlePrompt }
        return "ble [\(peripheral.name ?? peripheral.address.string)]> "
    }

    /// A task beside the commands (a subscription's printer, the disconnection watcher). On a simulated radio it
    /// runs on the radio's executor, in the simulation's time: a plain `Task {}` runs on the global executor,
    /// where the radio does not wait for it, and with the radio as fast as possible (`BLE_SIM_SPEED=fast`) a
    /// script's `wait` could end, and its next command print, before the values that came during the wait.
    func background(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        if let radio = tool.system.virtualController?.radio {
            return Task(executorPreference: radio, operation: operation)
        }
        return Task(operation: operation)
    }

    // MARK: The loop

    /// Runs commands until `quit`, Ctrl-D or the end of the script; then ends the subscriptions and the link.
    /// Returns the exit status of the first command that failed (nil: none did).
    func run() async -> Int32? {
        terminal.enterRawMode()
        let lines = terminal.lines(
            completer: { [self] words, partial in completions(words, partial) },
            onInterrupt: { [self] in _ = state.withLock { $0.stopCurrent?.yield() } })
        let watcher = background { [self] in await watchDisconnections() }
        if terminal.interactive {
            terminal.print("swift-ble shell: 'help' lists the commands; Tab completes; Ctrl-D or 'quit' leaves.")
        }
        for await line in lines {
            state.withLock { $0.lineNumber += 1 }
            let words: [String]
            do {
                words = try ShellWords.split(line)
            } catch {
                fail(status: ExitCode.validationFailure.rawValue, error.message)
                continue
            }
            guard let name = words.first, !name.hasPrefix("#") else { continue }
            if name == "quit" || name == "exit" { break }
            await runInterruptibly(words)
        }
        await close()
        watcher.cancel()
        terminal.restore()
        return state.withLock { $0.firstFailure }
    }

    /// Runs one command, which Ctrl-C stops (its pending requests end as cancelled).
    private func runInterruptibly(_ words: [String]) async {
        let (stopped, stop) = AsyncStream<Void>.makeStream()
        state.withLock { $0.stopCurrent = stop }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in await execute(words) }
            group.addTask {
                for await _ in stopped { return }
            }
            await group.next()
            group.cancelAll()
        }
        state.withLock { $0.stopCurrent = nil }
        stop.finish()
    }

    /// Parses and runs one command line, printing what it gives or why it failed.
    private func execute(_ words: [String]) async {
        guard let type = ShellCommands.named(words[0]) else {
            let near = TargetMatcher(text: words[0]).nearMisses(among: Set(ShellCommands.names))
            fail(
                status: ExitCode.validationFailure.rawValue,
                "no command '\(words[0])'" + (near.isEmpty ? "" : "; did you mean \(near[0])?") + " ('help' lists them)"
            )
            return
        }
        let command: any ShellCommandLine
        do {
            command = try ShellCommands.parse(type, Array(words.dropFirst()))
        } catch {
            if type.exitCode(for: error) == .success {
                terminal.print(type.fullMessage(for: error))
            } else {
                fail(
                    status: ExitCode.validationFailure.rawValue,
                    "\(words[0]): \(type.message(for: error))\n\(type.usageString())")
            }
            return
        }
        do {
            try await command.run(in: self)
        } catch let error as ToolError {
            fail(status: error.kind.rawValue, error.message)
        } catch is CancellationError {
            terminal.print("interrupted")
        } catch let error as ValidationError {
            fail(status: ExitCode.validationFailure.rawValue, "\(words[0]): \(error.message)")
        } catch {
            fail(status: ToolError.Kind.failure.rawValue, "\(words[0]): \(error)")
        }
    }

    /// A failure of the command on the line being run: a script's error names its line, as a compiler's does.
    func fail(status: Int32, _ message: String) {
        let line = state.withLock { s in
            if s.firstFailure == nil { s.firstFailure = status }
            return s.lineNumber
        }
        terminal.printError(terminal.interactive ? message : "line \(line): \(message)")
    }

    // MARK: The link

    /// The connected device, or the error a command that needs one gives.
    func connected() throws -> Peripheral {
        guard let peripheral = state.withLock({ $0.peripheral }), peripheral.state == .connected else {
            throw ToolError(.disconnected, "not connected: 'connect TARGET' first")
        }
        return peripheral
    }

    /// Records the device the commands act on (or none) and shows it in the prompt; a device not among the links
    /// joins them.
    func setConnected(_ peripheral: Peripheral?) {
        state.withLock { s in
            s.peripheral = peripheral
            if let peripheral, !s.links.contains(where: { $0 === peripheral }) { s.links.append(peripheral) }
        }
        terminal.setPrompt(Self.prompt(for: peripheral))
    }

    /// The linked device `text` names (its name, in any case, its address or its identifier), if any.
    func linked(_ text: String) -> Peripheral? {
        state.withLock { s in
            s.links.first { p in
                p.name?.lowercased() == text.lowercased() || p.address.string.lowercased() == text.lowercased()
                    || p.identifier.uuidString.lowercased() == text.lowercased()
            }
        }
    }

    /// Whether more than one device is linked (values then name their device).
    var severalLinks: Bool { state.withLock { $0.links.count > 1 } }

    /// Ends the subscriptions' tasks of `peripheral` (the current device when nil): the link's end or an
    /// unsubscribe has already stopped the values.
    func endSubscriptions(of peripheral: Peripheral? = nil) {
        let tasks = state.withLock { s -> [Task<Void, Never>] in
            guard let id = (peripheral ?? s.peripheral)?.identifier else { return [] }
            defer { s.subscriptionsByDevice[id] = nil }
            return Array((s.subscriptionsByDevice[id] ?? [:]).values)
        }
        for task in tasks { task.cancel() }
    }

    /// Takes `peripheral` off the links; when it was the current device, the last other link becomes current.
    private func unlink(_ peripheral: Peripheral) {
        endSubscriptions(of: peripheral)
        let (wasCurrent, next) = state.withLock { s -> (Bool, Peripheral?) in
            s.links.removeAll { $0 === peripheral }
            return (s.peripheral === peripheral, s.links.last)
        }
        if wasCurrent { setConnected(next) }
    }

    /// Disconnects politely, waiting at most two seconds of the system's time for a peer that vanished.
    func disconnect(_ peripheral: Peripheral) async {
        endSubscriptions(of: peripheral)
        _ = try? await tool.using(peripheral) {}
        unlink(peripheral)
    }

    /// At the end: subscriptions stopped, every link closed.
    private func close() async {
        for peripheral in state.withLock({ $0.links }) { await disconnect(peripheral) }
        endSubscriptions()
    }

    /// Says when a link goes down by itself (the peer left, the link was lost), at once, above the prompt, with
    /// the time.
    private func watchDisconnections() async {
        for await event in tool.manager.disconnections {
            let linked = state.withLock { s in s.links.contains { $0 === event.peripheral } }
            guard linked, let error = event.error else { continue }
            unlink(event.peripheral)
            terminal.print(
                "\(Timestamp.now()) disconnected from \(CentralTool.describe(event.peripheral)): \(error)")
        }
    }

    // MARK: Devices seen

    /// Keeps the latest report of a device, for `devices` and Tab.
    func remember(_ report: ScanReport) {
        state.withLock { s in
            if s.seen[report.identifier] == nil { s.seenOrder.append(report.identifier) }
            s.seen[report.identifier] = report
        }
    }

    var seenReports: [ScanReport] {
        state.withLock { s in s.seenOrder.compactMap { s.seen[$0] } }
    }

    // MARK: Completion

    /// Each UUID and each name among `uuids`, once, sorted (UUIDs, then names): what Tab offers for CHAR.
    static func uuidsAndNames(_ uuids: [BluetoothUUID]) -> [String] {
        let unique = Set(uuids)
        return unique.map(\.uuidString).sorted() + Set(unique.compactMap(\.displayName)).sorted()
    }

    /// Tab's candidates: command names first, then what the command takes at that place: device names and
    /// addresses for `connect`, the connected device's characteristic UUIDs and names for `read`, `write`,
    /// `subscribe` and `unsubscribe`, descriptor UUIDs and names after `--descriptor`, formats after `--format`, options after '-'.
    func completions(_ words: [String], _ partial: String) -> [String] {
        func matching(_ candidates: [String]) -> [String] {
            candidates.filter { $0.lowercased().hasPrefix(partial.lowercased()) }
        }
        guard let command = words.first else { return matching(ShellCommands.names) }
        guard let type = ShellCommands.named(command) else { return [] }
        if partial.hasPrefix("-") { return matching(type.optionNames) }
        let previous = words.count > 1 ? words.last : nil
        let (peripheral, reports, subscribed) = state.withLock { s in
            (s.peripheral, s.seenOrder.compactMap { s.seen[$0] }, Array(s.subscriptions.keys))
        }
        let characteristics = (peripheral?.services ?? []).flatMap { $0.characteristics ?? [] }
        switch previous {
        case "--format":
            return matching(ValueFormat.completions)
        case "--descriptor":
            let uuids = characteristics.flatMap { ($0.descriptors ?? []).map(\.uuid) }
            return matching(Self.uuidsAndNames(uuids))
        case "--handle":
            let handles = characteristics.flatMap { c in
                [c.valueHandle].compactMap { $0 } + (c.descriptors ?? []).compactMap(\.handle)
            }
            return matching(handles.map { ValueDecoding.hex16(Int($0)) })
        default:
            break
        }
        // Only the first argument is completed (a value to write is the user's to type).
        guard words.count == 1 else { return [] }
        switch command {
        case "help":
            return matching(ShellCommands.names)
        case "connect":
            let names = reports.compactMap(\.name) + reports.map(\.address.string)
            return matching(names)
        case "use", "disconnect":
            let links = state.withLock { $0.links }
            return matching(links.map { $0.name ?? $0.address.string })
        case "unsubscribe":
            return matching(Self.uuidsAndNames(subscribed))
        case "read", "write", "subscribe":
            return matching(Self.uuidsAndNames(characteristics.map(\.uuid)))
        default:
            return []
        }
    }
}
