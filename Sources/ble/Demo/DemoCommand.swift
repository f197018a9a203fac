import ArgumentParser
import BLE
import Dispatch
import Logging

/// `ble demo`: a heart-rate sensor and a phone on a simulated radio walk the whole central flow.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "A phone and a heart-rate sensor on a simulated radio: scan, connect, discover, read, subscribe, write, disconnect.",
        discussion: """
            With SCENARIO 'background': two apps follow the sensor, one with the bluetooth-central background mode \
            and one without, and both leave the foreground; a tag advertising from an app in the background is \
            found by a scan for its service, not by its name. With 'door-lock': a lock app connects to a door \
            lock, the user leaves, the system ends the app, and hours later the user returns: the system \
            reconnects, relaunches the app in the background, and it unlocks the door within its wake budget. \
            With 'phone-restart': the door lock across a restart of the phone, in two processes: the first keeps \
            the app's pending connection in the phone's store and is killed with SIGKILL, the second starts the \
            phone again on that store, and the system reconnects and relaunches the app when the user comes home \
            ('--phase before' and '--phase after' run one process each, for a hand that does the killing). \
            Each step is one line with its virtual time.
            """)

    enum Scenario: String, ExpressibleByArgument, CaseIterable {
        case background
        case doorLock = "door-lock"
        case phoneRestart = "phone-restart"
    }

    @Argument(
        help: ArgumentHelp(
            "A scenario other than the central flow: background, door-lock, phone-restart.", valueName: "scenario"))
    var scenario: Scenario?

    @Flag(help: "Pace the simulation to wall-clock time instead of running as fast as possible.")
    var realtime = false

    @Option(help: "Seed of the simulated radio: the same seed gives the same run.")
    var seed: UInt64 = 42

    @Option(parsing: .unconditional, help: "Heart-rate measurements to receive before writing the control point.")
    var measurements = 5

    @Option(
        help: ArgumentHelp(
            "Record the link-layer packets on the simulated air to this file (pcap, for Wireshark).",
            valueName: "file"))
    var airCapture: String?

    @Option(
        help: ArgumentHelp(
            "phone-restart: run only this phase ('before': ends waiting to be killed; 'after': the restarted phone).",
            valueName: "phase"))
    var phase: PhoneRestartDemo.Phase?

    @Option(
        help: ArgumentHelp(
            "phone-restart: the phone's store (SQLite); by default a temporary file, removed at the end.",
            valueName: "file"))
    var store: String?

    @OptionGroup var log: LogOptions

    func validate() throws {
        try CommandLineNumbers.checkCount(measurements, option: "--measurements", minimum: 1)
        if scenario != .phoneRestart, phase != nil || store != nil {
            throw ValidationError("--phase and --store belong to the phone-restart scenario")
        }
        if phase != nil, store == nil {
            throw ValidationError("--phase needs --store: both phases must open the same store")
        }
        if scenario == .phoneRestart, phase == nil, realtime || airCapture != nil {
            throw ValidationError(
                "--realtime and --air-capture go with one phase of phone-restart (--phase), not the two-process run")
        }
    }

    func run() async throws {
        // What the stack notices goes to stderr, never into this command's output.
        log.install()
        if scenario == .phoneRestart, phase == nil {
            return try PhoneRestartDemo.both(store: store, seed: seed)
        }
        let radio = SimulatedRadio(seed: seed)
        if let airCapture {
            do {
                try radio.startAirCapture(to: airCapture)
            } catch {
                throw ToolError(.transport, "--air-capture: \(error)")
            }
        }
        defer { radio.stopAirCapture() }
        self.log.trace(radio, device: nil)
        let log = DemoLog(radio: radio, ordered: scenario != nil)
        let pacing: SimulationPacing = realtime ? .realtime : .asFastAsPossible
        switch scenario {
        case .background: return try await BackgroundDemo.run(radio: radio, log: log, seed: seed, pacing: pacing)
        case .doorLock: return try await DoorLockDemo.run(radio: radio, log: log, pacing: pacing)
        case .phoneRestart:
            // `validate` made sure of both.
            guard let phase, let store else { return }
            switch phase {
            case .before: return try await PhoneRestartDemo.before(radio: radio, store: store, log: log, pacing: pacing)
            case .after: return try await PhoneRestartDemo.after(radio: radio, store: store, log: log, pacing: pacing)
            }
        case nil: break
        }
        let sensorSystem = BluetoothSystem.simulated(on: radio, name: "HRM-Demo", position: RadioPosition(x: 2, y: 1))
        let phoneSystem = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 0, y: 0))
        let sensor = HeartRateSensor(system: sensorSystem, log: log, seed: seed)
        let phone = PhoneApp(system: phoneSystem, log: log, measurementsWanted: measurements)
        let limit = Duration.seconds(120)
        while !phone.isFinished && radio.now < limit {
            try await radio.run(for: .milliseconds(100), pacing: pacing)
        }
        withExtendedLifetime(sensor) {}
        guard phone.isFinished else {
            throw ValidationError("the demo did not finish within \(limit) of virtual time")
        }
    }
}
