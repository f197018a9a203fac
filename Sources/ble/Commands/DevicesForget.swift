import ArgumentParser
import BLE
import Foundation

/// `ble devices forget`.
struct DevicesForget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Forget a device (by identifier, address or name), or every device with --all.",
        discussion: """
            A forgotten device loses its identifier, its cached GATT database and its bond: the next scan reports \
            it under a new identifier, the next link discovers its database again and pairs again. A name forgets \
            every device of that name (compared without regard to case). Prints 'forgot IDENTIFIER (ADDRESS) NAME' \
            per device. A PEER that names no device the tool knows is an error (status 3). A ble process running \
            meanwhile keeps the device until it ends.
            """)

    @Argument(help: ArgumentHelp("The device: its identifier (UUID), address or name.", valueName: "peer"))
    var peer: String?

    @Flag(help: "Forget every device.")
    var all = false

    func validate() throws {
        switch (peer, all) {
        case (nil, false): throw ValidationError("give the device's PEER (identifier, address or name), or --all")
        case (_?, true): throw ValidationError("give PEER or --all, not both")
        case ("", false): throw ValidationError("PEER is empty: give an identifier, an address or a name")
        default: break
        }
    }

    func run() async throws {
        do {
            let path = try DevicesCommand.storePath()
            let known =
                try path.map { path throws(BluetoothError) in try BluetoothSystem.knownPeripherals(inStoreAt: path) }
                ?? []
            let chosen: [KnownPeripheral]
            if all {
                chosen = known
            } else {
                let text = peer ?? ""
                let identifier = UUID(uuidString: text)
                let address = BluetoothAddress(string: text)
                chosen = known.filter { device in
                    device.identifier == identifier || address.map { $0.bytes == device.address.bytes } == true
                        || device.name.map { $0.caseInsensitiveCompare(text) == .orderedSame } == true
                }
                guard !chosen.isEmpty else {
                    throw ToolError(.noSuchDevice, "the tool knows no device \(text) (ble devices lists them)").report()
                }
            }
            for device in chosen {
                guard let path, try BluetoothSystem.forgetPeripheral(device.identifier, inStoreAt: path) else {
                    continue
                }
                Output.line(
                    "forgot \(device.identifier.uuidString) (\(device.address.string)) \(device.name ?? "(no name)")")
            }
        } catch let error as BluetoothError {
            throw ToolError.storeUnavailable(error).report()
        }
    }
}
