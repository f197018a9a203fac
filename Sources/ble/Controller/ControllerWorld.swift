import BLE

/// The simulated world around the exposed controller: the same room the other commands scan (`World`), with
/// one more controller at the origin that has no host of ours; whatever connects over TCP is its host.
final class ControllerWorld: Sendable {
    let world: World
    let controller: VirtualController
    let summary = "HRM-Demo, Thermometer, DoorLock, Printer, iBeacon, Eddystone, Environment Hub"

    init(seed: UInt64, address: BluetoothAddress) {
        world = World(seed: seed)
        controller = world.radio.addController(
            name: "controller", address: address, position: RadioPosition(x: 0, y: 0))
    }

    var radio: SimulatedRadio { world.radio }
}
