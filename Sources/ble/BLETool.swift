import ArgumentParser

/// `ble`: a command-line Bluetooth Low Energy tool in the spirit of LightBlue. It uses the public `BLE` API
/// only.
@main
struct BLETool: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ble",
        abstract: "Scan, explore and talk to Bluetooth Low Energy devices, or run a simulated world of them.",
        subcommands: [ScanCommand.self, ExploreCommand.self, ReadCommand.self, WriteCommand.self, SubscribeCommand.self,
                      ServeCommand.self, DemoCommand.self])
}
