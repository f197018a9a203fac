import BLE

/// The simulated world around the exposed controller: the same room the other commands scan (`World`), with
/// one more controller at the origin that has no host of ours; whatever connects over TCP is its host.
final class ControllerWorld: Sendable {
    let world: World
    let controller: VirtualController
    /// The devices around it, from the room's own list (so none is left out of the banner).
    let summary = WorldDevices.all.map(\.profile.deviceName).joined(separator: ", ")

    init(seed: UInt64, address: BluetoothAddress) {
        world = World(seed: seed)
        controller = world.radio.addController(
            name: "controller", address: address, position: RadioPosition(x: 0, y: 0))
    }

    var radio: SimulatedRadio { world.radio }
}
