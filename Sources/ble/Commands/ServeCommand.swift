import ArgumentParser
import BLE
import Foundation
import Synchronization

/// `ble serve`: our `PeripheralManager` publishing a profile.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Publish a GATT profile, advertise it, answer requests and print them as they arrive.",
        discussion: """
            PROFILE is heart-rate, battery, thermometer, door-lock, secure-lock, printer, camera, or a JSON file \
            describing a GATT database.
            heart-rate notifies a measurement every second while a central is subscribed and accepts 01 on the \
            control point (anything else is refused with 0x80); thermometer indicates a temperature every 2 s; \
            door-lock takes 01 (lock) or 00 (unlock) on its command characteristic and notifies its state; \
            secure-lock is the same lock on its own service (5EC10001-2B7D-4E8A-9C3F-6A1B2C3D4E5F) with its state \
            (5EC10002-...) readable and its command (5EC10003-...) writable only on an encrypted link, so a central \
            pairs first (ble pair, or any read, which pairs when refused); camera \
            is an underwater drone's: commands into an 18-byte buffer that drains a byte every 2 ms (a write request waits for \
            room, a write command's overflow is dropped), and a status of bytes taken and dropped. \
            Read-only values refuse writes with Write Not Permitted.

            Each event is printed as one line, starting with the time it was handled (UTC, ISO 8601 with \
            milliseconds: 2025-03-01T12:00:00.123Z), from 'advertising "NAME" as ADDRESS with services [...]' to \
            'stopped'. A central's events give its identifier, then: 'connected from ADDRESS (TYPE)', \
            'mtu N (updates carry up to M bytes)' after an MTU exchange, 'pairing started', 'paired (METHOD, \
            LE Secure Connections|legacy, authenticated|unauthenticated, key size N); bonded|not bonded', 'bonded', \
            'pairing failed: WHY', 'encrypted' (after pairing, or with a bond's keys), 'encryption failed: WHY', \
            'read UUID HEX' (fixed values included), 'write UUID HEX' (with '-> ERROR' when refused), 'subscribe \
            UUID notifications|indications', 'unsubscribe UUID', and 'disconnected (REASON)', also for the \
            centrals still connected when serving stops ('disconnected (this device stopped)'). Values sent to subscribers are printed as '* notify UUID HEX' or \
            '* indicate UUID HEX'; when the transmit queue is full, '* transmit queue full: waiting for room to \
            send' is printed and the values wait for peripheralManagerIsReady(toUpdateSubscribers:), in order, \
            nothing dropped ('* room again: sent N waiting updates').

            --updates FILE (or '-' for standard input, or a FIFO) drives the device from its own side once it \
            advertises, one line at a time as lines come:
              UUID HEX          set the characteristic's value (hex digits; spaces or colons may separate bytes) \
            and notify or indicate it to subscribed centrals
              UUID text:STRING  the same with STRING's UTF-8 bytes (everything after 'text:')
              sleep SECONDS     wait before the next line
              # comment         (and blank lines) skipped
            e.g. '2A37 0640' sends a heart rate of 64. A set with nobody subscribed prints '* set UUID HEX (no \
            central is subscribed: reads see it)'. A bad line (not this format, an unknown characteristic, a fixed \
            value) is reported on stderr as 'ble: --updates line N: WHY; skipped', and the rest go on; the end of \
            the input is printed as 'updates ended after N lines'. Serving goes on until interrupted or \
            --duration.

            The JSON file:
              {"name": "My Sensor", "advertise": ["180D"],
               "services": [{"uuid": "180D", "primary": true, "includes": [],
                 "characteristics": [{"uuid": "2A37", "properties": ["read", "write", "writeWithoutResponse", "notify", "indicate"],
                   "permissions": ["readable", "writeable"], "value": "0801" | null,
                   "descriptors": [{"uuid": "2901", "text": "Heart rate"}, {"uuid": "2904", "value": "0400ad27010000"}]}]}]}
            "advertise" defaults to the primary services and "permissions" to what the properties need. A \
            characteristic with only "read" and a hex "value" is fixed (the stack answers its reads); any other is \
            dynamic: reads answer its current value (the hex "value" or empty), writes replace it, and subscribers \
            are notified or indicated of each new value.
            The advertisement may also carry, at the top level: "manufacturerData" (hex, the company identifier \
            little-endian first), "serviceData" ({"FEAA": "hex"}: an Eddystone frame, say), "txPower" (dBm), \
            "iBeacon" ({"uuid", "major", "minor", "measuredPower"}), and "connectable": false (scannable, or \
            non-connectable). What does not fit the advertisement goes in the scan response. "appearance", \
            "interval" and "scanResponse" are refused: PeripheralManager.startAdvertising has no such fields.

            Pairing: the device pairs as --io-capability says (none by default: Just Works), with --mitm and \
            --sc-only as for 'ble pair'. A passkey it shows is printed as '* passkey: 123456 (type it on the other \
            device)'; one it must type is --passkey's (or refused); a numeric comparison prints its digits and is \
            confirmed, unless --no. The bonds it keeps are in its own store \
            ($XDG_STATE_HOME/swift-ble/NAME.sqlite).

            On the room transport (the default) the device joins the shared room, where other ble processes and \
            other host stacks find it; on virtual, a private copy of the room. Runs until interrupted (Ctrl-C) or \
            for --duration seconds.
            """)

    @Argument(
        help: ArgumentHelp(
            "heart-rate, battery, thermometer, door-lock, secure-lock, printer, camera, or a JSON file.",
            valueName: "profile"))
    var profile: String

    @Option(help: "The name to advertise (and the GAP Device Name).")
    var name: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Stop after this many seconds (default: run until interrupted).", valueName: "seconds"))
    var duration: Double?

    @Option(
        help: ArgumentHelp(
            "Lines of updates to push from the device's side ('UUID HEX', 'UUID text:...', 'sleep S'); '-': stdin.",
            valueName: "file"))
    var updates: String?

    @OptionGroup var pairing: PairingOptions

    func validate() throws {
        if pairing.passkey == "-" && updates == "-" {
            throw ValidationError("--passkey - and --updates - cannot both read standard input")
        }
        if let duration { try CommandLineNumbers.checkSeconds(duration, option: "--duration", zeroAllowed: false) }
        if let updates, updates != "-" {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: updates, isDirectory: &isFolder) else {
                throw ValidationError("--updates '\(updates)': no such file")
            }
            guard !isFolder.boolValue, FileManager.default.isReadableFile(atPath: updates) else {
                throw ValidationError("--updates '\(updates)' is not a readable file")
            }
        }
        // A profile file is checked here too, so that its error comes with this command's usage.
        if BuiltInProfiles.named(profile) == nil { _ = try JSONProfile.load(path: profile, name: name) }
    }

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        var definition: Profile
        if let builtIn = BuiltInProfiles.named(profile) {
            definition = builtIn
            if let name { definition.name = name }
        } else {
            definition = try JSONProfile.load(path: profile, name: name)
        }
        definition.configuration.pairing = pairing.configuration
        for warning in definition.warnings { Output.error(warning) }
        Output.configure()
        transport.log.install()
        Interrupt.shared.install()
        let limit: Duration? = duration.map { CommandLineNumbers.duration(seconds: $0) }
        let opened: Session?
        do {
            opened = try await Session.openUnlessStopped(
                transport, name: definition.deviceName, configuration: definition.configuration, exclusive: true,
                wait: limit)
        } catch {
            throw error.report()
        }
        guard let session = opened else {
            Interrupt.shared.endEchoedLine()
            throw ExitCode(Interrupt.shared.status)
        }
        // Held here for the whole run: the system holds its delegate weakly.
        let agent = PairingAgent(
            options: pairing, asking: .never(unanswered: true), log: { Output.line("\(Timestamp.now()) * \($0)") })
        session.system.pairingDelegate = agent
        let outcome = Outcome()
        let advertised = definition
        let system = session.system
        let updates = updates
        let radio = session.world?.radio
        let served = Mutex<ServedDevice?>(nil)
        // Set once it advertises: a stop signal after that is the way serving ends (0), before it an interruption.
        let started = Mutex(false)
        let device = ServedDevice(
            system: system, profile: definition, log: { Output.line("\(Timestamp.now()) \($0)") },
            onStarted: { [session] error in
                if let error {
                    // The served device tells the controller's going away as `.transportClosed`.
                    let gone = (error as? BluetoothError)?.code == .transportClosed
                    outcome.fail(
                        session.explained(
                            ToolError(error, doing: "serving \(advertised.deviceName)"), controllerGone: gone))
                    return
                }
                started.withLock { $0 = true }
                let services = advertised.servicesToAdvertise.map(\.uuidString).joined(separator: ", ")
                Output.line(
                    "\(Timestamp.now()) advertising \"\(advertised.name)\" as \(system.address?.string ?? "?")"
                        + " with services [\(services)]")
                // The device's own updates start once there is something to update.
                guard let updates, let device = served.withLock({ $0 }) else { return }
                let feed: @Sendable () async -> Void = { await Self.feed(updates, to: device) }
                if let radio { Task(executorPreference: radio, operation: feed) } else { Task(operation: feed) }
            })
        served.withLock { $0 = device }
        let result = try await session.run(until: outcome, limit: limit)
        let advertising = started.withLock { $0 }
        withExtendedLifetime(agent) {}
        device.stop()
        // The store closed, its write-ahead log folded in (see CommandRun).
        await session.system.shutDown()
        if Output.isClosed { throw ExitCode(Output.closedStatus) }
        if case .failure(let error)? = result { throw error.report() }
        // Stopped before it advertised: an interruption, as for every command before it does what it was asked.
        if result == nil, !advertising, Interrupt.shared.fired { throw ExitCode(Interrupt.shared.status) }
        Interrupt.shared.endEchoedLine()
        Output.line("\(Timestamp.now()) stopped")
        if Output.isClosed { throw ExitCode(Output.closedStatus) }
    }

    /// Applies `--updates` lines to the device in order, on its queue; reports a bad line on stderr and goes on.
    static func feed(_ path: String, to device: ServedDevice) async {
        var count = 0
        for await (number, text) in ServeUpdateFeed.lines(from: path) {
            count = number
            let update: ServeUpdate
            switch ServeUpdate.parse(text) {
            case .success(nil): continue
            case .success(let parsed?): update = parsed
            case .failure(let error):
                Output.error("--updates line \(number): \(error.message); skipped")
                continue
            }
            switch update {
            case .sleep(let duration):
                try? await device.system.sleep(for: duration)
            case .set(let uuid, let value):
                let problem = device.queue.sync { device.push(uuid, value) }
                if let problem { Output.error("--updates line \(number): \(problem.message); skipped") }
            }
        }
        device.log?("updates ended after \(count) line\(count == 1 ? "" : "s")")
    }
}
