import ArgumentParser
import BLE
import Foundation

/// `ble serve`: our `PeripheralManager` publishing a profile.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Publish a GATT profile, advertise it, answer requests and print them as they arrive.",
        discussion: """
            PROFILE is heart-rate, battery, thermometer, door-lock, printer, camera, or a JSON file describing a GATT \
            database.
            heart-rate notifies a measurement every second while a central is subscribed and accepts 01 on the \
            control point (anything else is refused with 0x80); thermometer indicates a temperature every 2 s; \
            door-lock takes 01 (lock) or 00 (unlock) on its command characteristic and notifies its state; camera \
            is seed 004's: commands into an 18-byte buffer that drains a byte every 2 ms (a write request waits for \
            room, a write command's overflow is dropped), and a status of bytes taken and dropped. \
            Read-only values refuse writes with Write Not Permitted.

            Each request is printed as one line: the central's identifier, the operation (read, write, subscribe, \
            unsubscribe), the characteristic's UUID and the value in hex; values sent to subscribers are printed as \
            '* notify UUID HEX' or '* indicate UUID HEX'.

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

            On the virtual transport the device joins the simulated room. Runs until interrupted (Ctrl-C) or \
            for --duration seconds.
            """)

    @Argument(
        help: ArgumentHelp(
            "heart-rate, battery, thermometer, door-lock, printer, camera, or a JSON file.", valueName: "profile"))
    var profile: String

    @Option(help: "The name to advertise (and the GAP Device Name).")
    var name: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Stop after this many seconds (default: run until interrupted).", valueName: "seconds"))
    var duration: Double?

    func validate() throws {
        if let duration { try CommandLineNumbers.checkSeconds(duration, option: "--duration", zeroAllowed: false) }
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
        Output.configure()
        transport.log.install()
        Interrupt.shared.install()
        let session: Session
        do {
            session = try await Session.open(
                transport, name: definition.deviceName,
                configuration: definition.configuration)
        } catch {
            throw error.report()
        }
        let outcome = Outcome()
        let advertised = definition
        let system = session.system
        let device = ServedDevice(
            system: system, profile: definition, log: { Output.line($0) },
            onStarted: { error in
                if let error {
                    outcome.fail(ToolError(error, doing: "serving \(advertised.deviceName)"))
                    return
                }
                let services = advertised.servicesToAdvertise.map(\.uuidString).joined(separator: ", ")
                Output.line(
                    "advertising \"\(advertised.name)\" as \(system.address?.string ?? "?") with services [\(services)]"
                )
            })
        let limit: Duration? = duration.map { CommandLineNumbers.duration(seconds: $0) }
        let result = try await session.run(until: outcome, limit: limit)
        device.stop()
        if case .failure(let error)? = result { throw error.report() }
        Output.line("stopped")
    }
}
