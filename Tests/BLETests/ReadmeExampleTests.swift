import BLE
import Foundation
import Synchronization
import Testing

// The heart-rate central that the README showed before its example became the battery reader (which the
// readme-example target now builds as printed and Scripts/check-readme.py runs): the delegate-style flow with a
// subscription, run on the simulated radio against a heart-rate sensor.

private final class HeartRateApp: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    var central: CentralManager!
    var sensor: Peripheral?
    let beats = Mutex<[Int]>([])

    init(system: BluetoothSystem, queue: DispatchQueue) {
        central = CentralManager(delegate: self, queue: queue, options: nil, system: system)
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        guard central.state == .poweredOn else { return }
        central.scanForPeripherals(withServices: [.heartRate], options: nil)
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int
    ) {
        sensor = peripheral
        central.stopScan()
        peripheral.delegate = self
        central.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        peripheral.discoverServices([.heartRate])
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        for service in peripheral.services ?? [] { peripheral.discoverCharacteristics(nil, for: service) }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        for c in service.characteristics ?? [] where c.uuid == .heartRateMeasurement {
            peripheral.setNotifyValue(true, for: c)
        }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        guard let value = characteristic.value, value.count >= 2 else { return }
        beats.withLock { $0.append(Int(value[1])) }  // the example printed "\(value[1]) bpm"
    }
}

/// A sensor notifying 60, 61, 62, ... bpm every second while subscribed.
private final class ReadmeSensor: PeripheralManagerDelegate, @unchecked Sendable {
    let system: BluetoothSystem
    let queue: DispatchQueue
    var manager: PeripheralManager!
    let measurement = MutableCharacteristic(
        type: .heartRateMeasurement, properties: [.notify], value: nil, permissions: [])
    var bpm: UInt8 = 60
    var subscribed = false

    init(system: BluetoothSystem, queue: DispatchQueue) {
        self.system = system
        self.queue = queue
        manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system)
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = MutableService(type: .heartRate, primary: true)
        service.characteristics = [measurement]
        peripheral.add(service)
        peripheral.startAdvertising(AdvertisementData(localName: "sensor", serviceUUIDs: [.heartRate]))
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        subscribed = true
        tick()
    }

    func tick() {
        system.schedule(after: .seconds(1), on: queue) { [self] in
            guard subscribed else { return }
            _ = manager.updateValue(Data([0x00, bpm]), for: measurement, onSubscribedCentrals: nil)
            bpm += 1
            tick()
        }
    }
}

@Test func theReadmeExampleReceivesHeartRates() async throws {
    let radio = SimulatedRadio(seed: 42)
    let phone = BluetoothSystem.simulated(on: radio, name: "phone")
    let sensorSystem = BluetoothSystem.simulated(on: radio, name: "sensor", position: RadioPosition(x: 3, y: 0))
    let sensorQueue = DispatchQueue(label: "sensor")
    let appQueue = DispatchQueue(label: "app")
    let sensor = sensorQueue.sync { ReadmeSensor(system: sensorSystem, queue: sensorQueue) }
    let app = appQueue.sync { HeartRateApp(system: phone, queue: appQueue) }
    try await radio.run(for: .seconds(30))
    let beats = app.beats.withLock { $0 }
    // Subscribed within the first seconds, then one measurement a second, in order, none lost.
    #expect(beats.count >= 25)
    #expect(beats == Array(60..<(60 + beats.count)))
    withExtendedLifetime(sensor) {}
}
