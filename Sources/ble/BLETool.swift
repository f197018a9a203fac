import ArgumentParser

/// `ble`: a command-line Bluetooth Low Energy tool in the spirit of LightBlue. It uses the public `BLE` API
/// only.
@main
struct BLETool: AsyncParsableCommand {
    /// The tool's version (`ble --version`): the package's, raised with each wave of work.
    static let version = "0.2.0"

    static let configuration = CommandConfiguration(
        commandName: "ble",
        abstract: "Scan, explore and talk to Bluetooth Low Energy devices, or run a simulated world of them.",
        discussion: """
            The default transport, 'virtual', is a simulated room: a heart-rate sensor (HRM-Demo), a health \
            thermometer (Thermometer), a door lock (DoorLock), a printer (Printer) and three devices that only \
            advertise (an iBeacon, an Eddystone beacon, Environment Hub). It runs in wall-clock time, as real \
            devices do; BLE_SIM_SPEED=fast runs it as fast as possible (tests, scripts).

            Environment: BLE_TRANSPORT (the default --transport), BLE_SIM_SPEED=fast.

            Exit status: 0 success; 1 other failure; 2 transport unavailable or not powered on; 3 no such device \
            (nothing matched TARGET within --timeout); 4 not connectable or the connection failed; 5 the peer \
            refused with an ATT error; 6 timeout; 7 no such characteristic, or it does not allow the operation; \
            8 the link dropped; 64 bad arguments; 130 interrupted. Failures print one line to stderr.
            """,
        version: BLETool.version,
        subcommands: [
            ScanCommand.self, ExploreCommand.self, ReadCommand.self, WriteCommand.self, SubscribeCommand.self,
            ServeCommand.self, ConnectCommand.self, SendCommand.self, DevicesCommand.self, DemoCommand.self,
            ControllerCommand.self,
            BenchCommand.self,
        ])
}
