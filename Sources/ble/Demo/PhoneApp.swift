import BLE
import Dispatch
import Foundation
import Synchronization

/// The whole central flow of a phone app, written against the public `CentralManager`/`Peripheral` API: scan for
/// Heart Rate, connect, discover, read the body sensor location, subscribe to measurements, write the
/// control point, unsubscribe, disconnect.
final class PhoneApp: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    // @unchecked: the fields below are touched only on `queue`; `finished` is a Mutex.
    let log: DemoLog
    let queue = DispatchQueue(label: "demo.phone")
    let measurementsWanted: Int
    /// Set inside `queue.sync` in `init`, before any delegate callback (all of which arrive on `queue`).
    var central: CentralManager!
    var sensor: Peripheral?
    var characteristicsPending = 0
    var measurements = 0
    private let finished = Mutex(false)

    init(system: BluetoothSystem, log: DemoLog, measurementsWanted: Int) {
        self.log = log
        self.measurementsWanted = measurementsWanted
        queue.sync { central = CentralManager(delegate: self, queue: queue, options: nil, system: system) }
    }

    var isFinished: Bool { finished.withLock { $0 } }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        log("phone", "state \(central.state)")
        guard central.state == .poweredOn else { return }
        central.scanForPeripherals(withServices: [.heartRate], options: nil)
        log("phone", "scanning for peripherals advertising Heart Rate (180D)")
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int
    ) {
        guard sensor == nil else { return }
        let services = (advertisementData.serviceUUIDs ?? []).map(\.uuidString).joined(separator: ", ")
        log(
            "phone",
            "discovered \(advertisementData.localName ?? peripheral.name ?? "unnamed") rssi \(rssi) dBm services [\(services)]"
        )
        sensor = peripheral
        central.stopScan()
        log("phone", "stopped scanning")
        peripheral.delegate = self
        central.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        log("phone", "connected to \(peripheral.name ?? "peripheral")")
        peripheral.discoverServices(nil)
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        log("phone", "failed to connect: \(error.map { "\($0)" } ?? "no reason")")
        finished.withLock { $0 = true }
    }

    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        log("phone", "disconnected" + (error.map { ": \($0)" } ?? ""))
        finished.withLock { $0 = true }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        if let error { return fail("service discovery failed: \(error)") }
        let services = peripheral.services ?? []
        log("phone", "services: " + services.map { describe($0.uuid) }.joined(separator: ", "))
        let wanted = services.filter { [.heartRate, .battery, .deviceInformation].contains($0.uuid) }
        characteristicsPending = wanted.count
        for service in wanted { peripheral.discoverCharacteristics(nil, for: service) }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        if let error { return fail("characteristic discovery failed: \(error)") }
        let list = (service.characteristics ?? []).map { "\(describe($0.uuid)) \($0.properties)" }
        log(
            "phone",
            "characteristics of \(service.uuid.name ?? service.uuid.uuidString): " + list.joined(separator: ", "))
        characteristicsPending -= 1
        guard characteristicsPending == 0 else { return }
        if let location = characteristic(.bodySensorLocation, in: peripheral) {
            peripheral.readValue(for: location)
        }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        if let error { return fail("reading \(characteristic.uuid.uuidString) failed: \(error)") }
        guard let value = characteristic.value else { return }
        switch characteristic.uuid {
        case .bodySensorLocation:
            log("phone", "body sensor location: \(Self.locationName(value.first ?? 0xFF)) (\(value.hexString))")
            if let measurement = self.characteristic(.heartRateMeasurement, in: peripheral) {
                peripheral.setNotifyValue(true, for: measurement)
            }
        case .heartRateMeasurement:
            guard measurements < measurementsWanted else { return }
            measurements += 1
            log(
                "phone",
                "heart rate \(Self.decodeMeasurement(value)) (measurement \(measurements) of \(measurementsWanted))")
            if measurements == measurementsWanted,
                let control = self.characteristic(.heartRateControlPoint, in: peripheral)
            {
                peripheral.writeValue(Data([0x01]), for: control, type: .withResponse)
            }
        default:
            break
        }
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if let error { return fail("changing notifications failed: \(error)") }
        if characteristic.isNotifying {
            log("phone", "subscribed to \(describe(characteristic.uuid))")
        } else {
            log("phone", "unsubscribed from \(describe(characteristic.uuid))")
            central.cancelPeripheralConnection(peripheral)
        }
    }

    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        if let error { return fail("writing the control point failed: \(error)") }
        log("phone", "wrote 01 (reset energy expended) to \(describe(characteristic.uuid))")
        if let measurement = self.characteristic(.heartRateMeasurement, in: peripheral) {
            peripheral.setNotifyValue(false, for: measurement)
        }
    }

    // MARK: Helpers

    func fail(_ message: String) {
        log("phone", message)
        if let sensor { central.cancelPeripheralConnection(sensor) } else { finished.withLock { $0 = true } }
    }

    func characteristic(_ uuid: BluetoothUUID, in peripheral: Peripheral) -> Characteristic? {
        for service in peripheral.services ?? [] {
            if let c = service.characteristics?.first(where: { $0.uuid == uuid }) { return c }
        }
        return nil
    }

    func describe(_ uuid: BluetoothUUID) -> String {
        uuid.name.map { "\($0) (\(uuid.uuidString))" } ?? uuid.uuidString
    }

    /// Heart Rate Measurement (Heart Rate Service 3.1): flags, 8- or 16-bit rate, then optional fields.
    static func decodeMeasurement(_ value: Data) -> String {
        let bytes = [UInt8](value)
        guard let flags = bytes.first else { return "(empty)" }
        let wide = flags & 0x01 != 0
        guard bytes.count >= (wide ? 3 : 2) else { return "(malformed)" }
        let bpm = wide ? Int(bytes[1]) | Int(bytes[2]) << 8 : Int(bytes[1])
        var text = "\(bpm) bpm"
        var index = wide ? 3 : 2
        if flags & 0x08 != 0, bytes.count >= index + 2 {
            text += ", energy expended \(Int(bytes[index]) | Int(bytes[index + 1]) << 8) kJ"
            index += 2
        }
        return text
    }

    static func locationName(_ code: UInt8) -> String {
        ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"].indices.contains(Int(code))
            ? ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"][Int(code)] : "unknown"
    }
}
