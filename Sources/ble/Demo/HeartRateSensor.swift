import BLE
import BLECore
import Dispatch
import Foundation
import Synchronization

/// A heart-rate sensor written against the public `PeripheralManager` API, as firmware would be on a
/// phone: Heart Rate (0x180D) with Measurement (0x2A37, notify), Body Sensor Location (0x2A38, read) and
/// Control Point (0x2A39, write), Battery (0x180F) and Device Information (0x180A).
final class HeartRateSensor: PeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: every field is touched only on `queue`, the manager's delegate queue.
    let system: BluetoothSystem
    let log: DemoLog
    let queue = DispatchQueue(label: "demo.sensor")
    /// Set inside `queue.sync` in `init`, before any delegate callback (all of which arrive on `queue`).
    var manager: PeripheralManager!
    let measurement = MutableCharacteristic(
        type: .heartRateMeasurement, properties: [.notify], value: nil, permissions: [])
    let controlPoint = MutableCharacteristic(
        type: .heartRateControlPoint, properties: [.write], value: nil, permissions: [.writeable])
    let batteryLevel = MutableCharacteristic(
        type: .batteryLevel, properties: [.read, .notify], value: nil, permissions: [.readable])
    var servicesPending = 0
    var timer: ScheduledTimer?
    var random: LinearCongruential
    var energyExpended: UInt16 = 0

    init(system: BluetoothSystem, log: DemoLog, seed: UInt64) {
        self.system = system
        self.log = log
        self.random = LinearCongruential(seed: seed | 1)
        queue.sync { manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system) }
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let heartRate = MutableService(type: .heartRate, primary: true)
        let location = MutableCharacteristic(
            type: .bodySensorLocation, properties: [.read], value: Data([0x01]), permissions: [.readable])
        heartRate.characteristics = [measurement, location, controlPoint]
        let battery = MutableService(type: .battery, primary: true)
        battery.characteristics = [batteryLevel]
        let info = MutableService(type: .deviceInformation, primary: true)
        info.characteristics = [
            MutableCharacteristic(
                type: .manufacturerNameString, properties: [.read], value: Data("swift-ble".utf8),
                permissions: [.readable]),
            MutableCharacteristic(
                type: .modelNumberString, properties: [.read], value: Data("HRM-1".utf8), permissions: [.readable]),
        ]
        servicesPending = 3
        for service in [heartRate, battery, info] { peripheral.add(service) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
        if let error {
            log("sensor", "could not add \(service.uuid): \(error)")
            return
        }
        servicesPending -= 1
        if servicesPending == 0 {
            peripheral.startAdvertising(AdvertisementData(localName: "HRM-Demo", serviceUUIDs: [.heartRate, .battery]))
        }
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        log(
            "sensor",
            error.map { "could not advertise: \($0)" } ?? "advertising as HRM-Demo with Heart Rate and Battery")
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        guard characteristic.uuid == .heartRateMeasurement else { return }
        log("sensor", "a central subscribed to Heart Rate Measurement; notifying every second")
        scheduleMeasurement()
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        guard characteristic.uuid == .heartRateMeasurement else { return }
        timer?.cancel()
        timer = nil
        log("sensor", "the central unsubscribed; notifications stop")
    }

    func scheduleMeasurement() {
        timer = system.schedule(after: .seconds(1), on: queue) { [self] in
            guard timer != nil else { return }
            sendMeasurement()
            scheduleMeasurement()
        }
    }

    func sendMeasurement() {
        // Flags 0x08: 8-bit heart rate, energy expended present (Heart Rate Service 3.1.1).
        let bpm = UInt8(70 + random.nextHighBits() % 8)
        energyExpended &+= 1
        let value = Data([0x08, bpm, UInt8(energyExpended & 0xFF), UInt8(energyExpended >> 8)])
        _ = manager.updateValue(value, for: measurement, onSubscribedCentrals: nil)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        if request.characteristic.uuid == .batteryLevel {
            request.value = Data([95]).dropFirst(request.offset)
            peripheral.respond(to: request, withResult: .success)
        } else {
            peripheral.respond(to: request, withResult: .readNotPermitted)
        }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        guard first.characteristic.uuid == .heartRateControlPoint, let value = first.value, value == Data([0x01]) else {
            // Heart Rate Service 3.3.2: 0x80, Control Point value not supported.
            peripheral.respond(to: first, withResult: ATTErrorCode(rawValue: 0x80))
            return
        }
        energyExpended = 0
        log("sensor", "control point: reset energy expended")
        peripheral.respond(to: first, withResult: .success)
    }
}
