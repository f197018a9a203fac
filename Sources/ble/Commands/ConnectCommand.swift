import ArgumentParser
import BLE
import Foundation
import Synchronization

/// `ble connect`: connect to one device or several and stay connected, printing each change of each connection's
/// state (and, with `--subscribe`, each value); with `--reconnect`, come back after every loss by the library's
/// reconnection policy.
struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to devices and stay connected, printing each change of the connections' state.",
        discussion: """
            The targets are connected one after the other, each found by a scan of at most --timeout seconds; \
            then all stay connected at once. Each line starts with the time (UTC, ISO 8601 with milliseconds, as \
            subscribe, serve and the shell print it); a device connected says its ATT_MTU once the MTU exchange is \
            done. With --subscribe CHAR (a UUID or a name) each device's CHAR is subscribed to and every value \
            printed, as 'NAME: CHAR HEX  MEANING'; a device without CHAR (or whose CHAR neither notifies nor \
            indicates) is named on stderr and stays connected, and only when no device has it does the command \
            fail (status 7, or 5 when its CHAR cannot notify). With --json each line is one object instead: {"time", \
            "device", "identifier", "address", "event": "connected" | "disconnected" | "value" | "reconnection", \
            ...} with "mtu" for connected, "error" (or null) for disconnected, "characteristic", "name", "hex" and \
            "decoded" for a value, "text" for a reconnection step.

            Without --reconnect the command ends when every link is lost (exit 1 when a device went away, \
            whenever the command ends; exit 0 when it ends by --duration or an interrupt with every link up). \
            With --reconnect it connects again after every loss: by the device's identifier and, at the same \
            time, by scanning for its name (a device back under a new private address has a new identifier), so \
            the link comes back within about one advertising interval of the device's return; an attempt looks \
            for 5 minutes, with pauses of 1 s doubling up to 30 s between failed attempts, until interrupted or \
            --duration passes. Either way it ends with exit 2 when the controller goes away (the shared room \
            stopped, or the transport to another controller closed: it is never opened again).
            """)

    @Argument(
        help: ArgumentHelp(
            "The devices: addresses (AA:BB:CC:DD:EE:FF), peripheral identifiers (UUIDs), or advertised names.",
            valueName: "target"))
    var targets: [String]

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan for each target before giving up.", valueName: "seconds"))
    var timeout: Double = 10

    @Flag(help: "Connect again after every loss of a link, by the reconnection policy.")
    var reconnect = false

    @Option(
        help: ArgumentHelp("Subscribe to this characteristic on every device and print its values.", valueName: "char"))
    var subscribe: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to stay connected (0: until interrupted).", valueName: "seconds"))
    var duration: Double = 0

    @Flag(help: "Print one JSON object per line.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        for target in targets { try TargetMatcher.check(target) }
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout", zeroAllowed: false)
        try CommandLineNumbers.checkSeconds(duration, option: "--duration")
        if let subscribe { _ = try parseCharacteristic(subscribe, what: "--subscribe") }
    }

    /// How the wait for the end came out.
    private enum End: Sendable {
        case timeUp
        case allLost
        case failed(any Error)
    }

    func run() async throws {
        let targets = targets
        let reconnect = reconnect
        let scanLimit = CommandLineNumbers.duration(seconds: timeout)
        let limit = duration > 0 ? CommandLineNumbers.duration(seconds: duration) : nil
        let characteristic = try subscribe.map { try parseCharacteristic($0, what: "--subscribe") }
        let json = json
        try await CommandRun.flow(transport, interruptedIsSuccess: true, controllerWait: scanLimit) { tool in
            let several = targets.count > 1
            @Sendable func say(_ text: String, about peripheral: Peripheral? = nil, fields: [(String, JSON)] = []) {
                let time = Timestamp.now()
                guard !json else {
                    var head: [(String, JSON)] = [("time", .string(time))]
                    if let peripheral {
                        head += [
                            ("device", .optional(peripheral.name)),
                            ("identifier", .string(peripheral.identifier.uuidString)),
                            ("address", .string(peripheral.address.string)),
                        ]
                    }
                    Output.line(
                        JSON.object(
                            head
                                + (fields.isEmpty
                                    ? [("event", .string("reconnection")), ("text", .string(text))] : fields)
                        ).text)
                    return
                }
                let who = several ? peripheral.map { "\(Self.name($0)): " } ?? "" : ""
                Output.line("\(time) " + who + text)
            }
            // Listening before connecting, so that a link lost at once is heard (with --reconnect each kept
            // connection listens for itself).
            let ends = reconnect ? nil : tool.manager.disconnections
            var connected: [Peripheral] = []
            do {
                for target in targets {
                    let peripheral = try await tool.connect(toTarget: target, within: scanLimit)
                    // Two targets naming one device (its name and its address, say) are one link.
                    guard !connected.contains(where: { $0 === peripheral }) else { continue }
                    connected.append(peripheral)
                    // The MTU exchange starts with the link; a request queues behind it, so once one is answered
                    // the ATT_MTU is the exchanged one (printed too early, it was the default 23). Waited for two
                    // seconds at most, and never the command's failure: a peer whose GATT server is slow or
                    // broken is still connected, and says so with the MTU it has.
                    _ = try? await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { _ = try await peripheral.discoverServices(nil, timeout: nil) }
                        group.addTask { try await tool.system.sleep(for: .seconds(2)) }
                        defer { group.cancelAll() }
                        try await group.next()
                    }
                    say(
                        "connected to \(CentralTool.describe(peripheral)) (ATT_MTU \(peripheral.attMTU))",
                        about: json ? peripheral : nil,
                        fields: [("event", .string("connected")), ("mtu", .number(peripheral.attMTU))])
                }
            } catch {
                // A later target not found (or an interrupt): the links already made end politely.
                try? await tool.using(connected) {}
                throw error
            }
            let links = connected
            // The devices to subscribe on: those that have the characteristic.
            var subscribing: [Peripheral] = []
            if let characteristic {
                do {
                    subscribing = try await Self.checkSubscription(to: characteristic, on: links, tool: tool)
                } catch {
                    try? await tool.using(links) {}
                    throw error
                }
            }
            let subscribed = subscribing
            // Every link is up (and subscribed, if asked): from now on Ctrl-C is the way this command ends.
            tool.markStarted()
            let lost = LostLinks()
            try await tool.using(links) {
                let end: End = await withTaskGroup(of: End?.self) { group in
                    if let limit {
                        group.addTask {
                            do {
                                try await tool.system.sleep(for: limit)
                                return .timeUp
                            } catch {
                                return .failed(error)
                            }
                        }
                    }
                    for peripheral in links {
                        group.addTask {
                            do {
                                let has = subscribed.contains { $0 === peripheral }
                                try await Self.keep(
                                    peripheral, reconnect: reconnect, subscribe: has ? characteristic : nil, tool: tool,
                                    say: say)
                                return nil
                            } catch {
                                return .failed(error)
                            }
                        }
                    }
                    if let ends {
                        group.addTask {
                            for await end in ends where links.contains(where: { $0 === end.peripheral }) {
                                say(
                                    "disconnected\(end.error.map { ": \($0)" } ?? "")", about: end.peripheral,
                                    fields: [
                                        ("event", .string("disconnected")),
                                        ("error", .optional(end.error.map { "\($0)" })),
                                    ])
                                if lost.add(end.peripheral) == links.count { return .allLost }
                            }
                            return nil
                        }
                    }
                    defer { group.cancelAll() }
                    while let next = await group.next() {
                        if let next { return next }
                    }
                    // Nothing left to wait for: an interrupt cancelled every task.
                    return .timeUp
                }
                if case .failed(let error) = end { throw error }
                let gone = lost.names
                if !gone.isEmpty {
                    throw ToolError(.failure, "the link to \(gone.joined(separator: ", ")) was lost")
                }
            }
        }
    }

    /// How long one reconnection attempt looks for the device before the policy's pause.
    static let reconnectAttempt: Duration = .seconds(300)

    static func name(_ peripheral: Peripheral) -> String { peripheral.name ?? peripheral.identifier.uuidString }

    /// Keeps one device: with `reconnect`, by the reconnection policy, printing each change; with `subscribe`,
    /// subscribed on each link and printing each value. Returns when there is nothing more to do for it.
    private static func keep(
        _ peripheral: Peripheral, reconnect: Bool, subscribe: AttributeReference?, tool: CentralTool,
        say: @escaping @Sendable (String, Peripheral?, [(String, JSON)]) -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            if let subscribe {
                group.addTask { await listen(to: subscribe, on: peripheral, tool: tool, say: say) }
            }
            if reconnect {
                let back = ReconnectTarget(identifier: peripheral.identifier, name: peripheral.name)
                // Both ways at once: a device back at the address the system knows is connected directly, and one
                // back under a new private address (a new identifier) is found by its name as soon as it
                // advertises; each attempt listens for minutes, so a return is caught within an advertising
                // interval rather than after a pause between attempts.
                let options = ReconnectOptions(
                    steps: [.knownIdentifier, .scan], parallel: true, timeout: Self.reconnectAttempt)
                let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(30))
                // The first attempt finds the link made before: not news.
                var first = true
                for try await change in tool.manager.connections(to: back, policy: policy, options: options) {
                    switch change {
                    case .connecting where first: continue
                    case .connected where first: first = false
                    case .connected(let again):
                        tool.track(again)
                        say("\(change)", peripheral, [])
                        if let subscribe {
                            group.addTask { await listen(to: subscribe, on: again, tool: tool, say: say) }
                        }
                    default:
                        first = false
                        say("\(change)", peripheral, [])
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Checks, once every device is connected, which have `uuid` and let it notify or indicate: those are
    /// returned, and each other is named on stderr (it stays connected). When none has it, the command cannot do
    /// what it was asked and fails at once with the reason (of the only device, or of the first).
    static func checkSubscription(to uuid: AttributeReference, on peripherals: [Peripheral], tool: CentralTool)
        async throws -> [Peripheral]
    {
        var able: [Peripheral] = []
        var problems: [ToolError] = []
        for peripheral in peripherals {
            do {
                let c = try await tool.findCharacteristic(uuid, on: peripheral)
                try tool.requireSubscribable(
                    c, for: "subscribing to \(c.uuid.uuidString) of \(CentralTool.describe(peripheral))")
                able.append(peripheral)
            } catch let error as ToolError where error.kind == .noSuchCharacteristic || error.kind == .attError {
                problems.append(error)
            }
        }
        if able.isEmpty, let first = problems.first { throw first }
        for problem in problems { Output.error("\(problem.message); not subscribing there") }
        return able
    }

    /// Subscribes to `uuid` on the link up now and prints each value until the link ends. It never fails the
    /// command: a link lost ends it quietly (the loss is reported where links are watched), and anything else is
    /// printed as the device's line.
    private static func listen(
        to uuid: AttributeReference, on peripheral: Peripheral, tool: CentralTool,
        say: @escaping @Sendable (String, Peripheral?, [(String, JSON)]) -> Void
    ) async {
        do {
            let c = try await tool.findCharacteristic(uuid, on: peripheral)
            let presentation = try await tool.presentationFormat(of: c, on: peripheral)
            for try await value in peripheral.notifications(for: c) {
                let reading = ValueReading(value, type: c.uuid, presentation: presentation)
                say(
                    "\(c.uuid.uuidString) \(reading.hexAndMeaning)", peripheral,
                    [
                        ("event", .string("value")), ("characteristic", .string(c.uuid.uuidString)),
                        ("name", .optional(c.uuid.displayName)), ("hex", .string(value.hex)),
                        ("decoded", reading.decoded?.json ?? .null),
                    ])
            }
        } catch is CancellationError {
        } catch {
            guard peripheral.state == .connected, !Task.isCancelled else { return }
            say(
                "\(uuid): \(error)", peripheral, [("event", .string("error")), ("error", .string("\(uuid): \(error)"))])
        }
    }
}

/// The devices whose links were lost, in order.
final class LostLinks: Sendable {
    private let lost = Mutex<[Peripheral]>([])

    /// Records a loss; returns how many devices are lost now.
    func add(_ peripheral: Peripheral) -> Int {
        lost.withLock { list in
            if !list.contains(where: { $0 === peripheral }) { list.append(peripheral) }
            return list.count
        }
    }

    var names: [String] { lost.withLock { $0.map(ConnectCommand.name) } }
}
