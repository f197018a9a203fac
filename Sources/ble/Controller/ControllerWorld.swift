import BLE

/// The simulated world around the exposed controller: a heart-rate sensor (our host and `PeripheralManager`)
/// advertising as HRM-Demo a couple of metres away.
///
/// A stand-in until the shared world of the other `ble` commands is available; it reuses the demo's sensor.
final class ControllerWorld: Sendable {
    let sensor: HeartRateSensor
    let summary = "HRM-Demo (heart-rate sensor)"

    init(radio: SimulatedRadio, seed: UInt64) {
        let system = BluetoothSystem.simulated(on: radio, name: "HRM-Demo", position: RadioPosition(x: 2, y: 1))
        sensor = HeartRateSensor(system: system, log: DemoLog(radio: radio), seed: seed)
    }
}
