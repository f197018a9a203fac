import BLECore
import BLESystem
import BLEVirtualController

extension BluetoothSystem {
    /// A simulated device with a chosen identity address: a public address (what a device with an IEEE-assigned
    /// address reports) or a random static one. `simulated(on:name:position:configuration:)` derives a random
    /// static address from the radio's seed and the name instead.
    ///
    /// Not part of CoreBluetooth: tools such as `ble` use it to build a simulated room whose devices show
    /// both kinds of address.
    public static func simulated(on radio: SimulatedRadio, name: String, address: BluetoothAddress,
                                 position: RadioPosition = RadioPosition(x: 0, y: 0),
                                 configuration: Configuration = Configuration()) -> BluetoothSystem {
        let controller = radio.addController(name: name, address: address, position: position,
                                             txPower: configuration.txPower,
                                             aclBufferLength: configuration.aclBufferLength,
                                             aclBufferCount: configuration.aclBufferCount)
        let core = SystemCore(name: name, transport: controller.hostTransport, scheduler: radio,
                              configuration: configuration.hostConfiguration(name: name))
        return BluetoothSystem(core: core, virtualController: controller)
    }
}
