import BLECore
import BLEVirtualController
import Foundation
import Logging

extension BluetoothSystem {
    /// A simulated device with a chosen identity address: a public address (what a device with an IEEE-assigned
    /// address reports) or a random static one. `simulated(on:name:position:configuration:)` derives a random
    /// static address from the radio's seed and the name instead.
    ///
    /// Not part of CoreBluetooth: tools such as `ble` use it to build a simulated room whose devices show
    /// both kinds of address.
    public static func simulated(
        on radio: SimulatedRadio, name: String, address: BluetoothAddress,
        position: RadioPosition = RadioPosition(x: 0, y: 0),
        configuration: Configuration = Configuration()
    ) -> BluetoothSystem {
        do {
            return try makeSimulated(
                on: radio, name: name, address: address, position: position, configuration: configuration)
        } catch {
            logger.error("\(name) runs unrecorded: \(error)")
            var unrecorded = configuration
            unrecorded.btsnoop = nil
            // `try!` cannot trap: without a btsnoop file, making a simulated system throws nothing.
            return try! makeSimulated(
                on: radio, name: name, address: address, position: position, configuration: unrecorded)
        }
    }
}
