import BLE
import BLECore
import BLEProfiles
import Foundation

/// The profiles `ble serve` offers by name, and the building blocks the world's devices share.
enum BuiltInProfiles {
    static let names = ["heart-rate", "battery", "thermometer", "door-lock", "secure-lock", "printer", "camera"]

    static func named(_ name: String) -> Profile? {
        switch name {
        case "heart-rate": HeartRateProfile.make(name: "HRM-Demo")
        case "battery": BatteryProfile.make(name: "Battery-Demo")
        case "thermometer": ThermometerProfile.make(name: "Thermometer")
        case "door-lock": DoorLockProfile.make(name: "DoorLock")
        case "secure-lock": SecureLockProfile.make(name: "SecureLock")
        case "printer": PrinterProfile.make(name: "Printer")
        case "camera": CameraProfile.make(name: "Camera")
        default: nil
        }
    }

    /// Battery (0x180F): Battery Level (0x2A19), read and notify, a percentage, with a user description and a
    /// Characteristic Presentation Format (uint8, exponent 0, percent, Bluetooth SIG name space, "unknown").
    static func battery(level: UInt8) -> (ProfileService, BluetoothUUID, Data) {
        let service = ProfileService(
            uuid: .battery,
            characteristics: [
                ProfileCharacteristic(
                    uuid: .batteryLevel, properties: [.read, .notify], permissions: [.readable],
                    initial: Data([level]),
                    descriptors: [
                        (.characteristicUserDescription, Data("Battery level in percent".utf8)),
                        (.characteristicPresentationFormat, Data([0x04, 0x00, 0xAD, 0x27, 0x01, 0x00, 0x00])),
                    ])
            ])
        return (service, .batteryLevel, Data([level]))
    }

    /// Device Information (0x180A): fixed strings.
    static func deviceInformation(model: String, serial: String) -> ProfileService {
        ProfileService(
            uuid: .deviceInformation,
            characteristics: [
                .text(.manufacturerNameString, "swift-ble"),
                .text(.modelNumberString, model),
                .text(.serialNumberString, serial),
                .text(.firmwareRevisionString, "1.0.0"),
            ])
    }
}

/// A device's small seeded generator (BLECore's, from the seed made odd), so its readings are plausible and
/// reproducible.
struct Jitter {
    private var generator: LinearCongruential
    init(seed: UInt64) { generator = LinearCongruential(seed: seed | 1) }
    /// A value in 0..<bound.
    mutating func next(_ bound: UInt64) -> UInt64 { UInt64(generator.nextHighBits()) % bound }
}

// MARK: Heart rate

/// A heart-rate sensor: Heart Rate (0x180D) with Measurement (0x2A37, notify every second while subscribed),
/// Body Sensor Location (0x2A38, read: chest) and Control Point (0x2A39, write: 0x01 resets the energy
/// expended, anything else is refused with 0x80, "Control Point value not supported"); Battery; Device
/// Information.
enum HeartRateProfile {
    static func make(name: String) -> Profile {
        let (battery, _, _) = BuiltInProfiles.battery(level: 87)
        return Profile(
            name: name,
            services: [
                ProfileService(
                    uuid: .heartRate,
                    characteristics: [
                        ProfileCharacteristic(uuid: .heartRateMeasurement, properties: [.notify], permissions: []),
                        .fixed(.bodySensorLocation, Data([0x01])),
                        ProfileCharacteristic(
                            uuid: .heartRateControlPoint, properties: [.write], permissions: [.writeable]),
                    ]),
                battery,
                BuiltInProfiles.deviceInformation(model: "HRM-1", serial: "HR-0001"),
            ],
            advertisedServices: [.heartRate, .battery],
            behaviour: { HeartRateBehaviour() })
    }
}

final class HeartRateBehaviour: ProfileBehaviour, @unchecked Sendable {
    // @unchecked: as ProfileBehaviour, touched only on the device\'s queue.
    private var timer: ScheduledTimer?
    private var jitter = Jitter(seed: 42)
    private var energyExpended: UInt16 = 0

    override func write(_ uuid: BluetoothUUID, value: Data) -> ATTErrorCode {
        guard uuid == .heartRateControlPoint else { return super.write(uuid, value: value) }
        // Heart Rate Service 3.3.2: 0x01 resets Energy Expended; other values are not supported (0x80).
        guard value == Data([0x01]) else { return ATTErrorCode(rawValue: 0x80) }
        energyExpended = 0
        return .success
    }

    override func subscribed(_ uuid: BluetoothUUID) {
        guard uuid == .heartRateMeasurement, timer == nil else { return }
        tick()
    }

    override func unsubscribed(_ uuid: BluetoothUUID) {
        guard uuid == .heartRateMeasurement, device?.isSubscribed(uuid) != true else { return }
        timer?.cancel()
        timer = nil
    }

    private func tick() {
        timer = device?.after(.seconds(1)) { [self] in
            guard timer != nil, let device else { return }
            // Flags 0x08: 8-bit heart rate, Energy Expended present (Heart Rate Service 3.1.1).
            let bpm = UInt8(68 + jitter.next(10))
            energyExpended &+= 1
            device.update(
                .heartRateMeasurement, Data([0x08, bpm, UInt8(energyExpended & 0xFF), UInt8(energyExpended >> 8)]))
            tick()
        }
    }
}

// MARK: Battery

/// A battery: Battery Level that drops one percent a minute and notifies the change.
enum BatteryProfile {
    static func make(name: String) -> Profile {
        let (battery, _, _) = BuiltInProfiles.battery(level: 100)
        return Profile(
            name: name, services: [battery, BuiltInProfiles.deviceInformation(model: "BAT-1", serial: "BT-0001")],
            advertisedServices: [.battery], behaviour: { BatteryBehaviour() })
    }
}

final class BatteryBehaviour: ProfileBehaviour, @unchecked Sendable {
    // @unchecked: as ProfileBehaviour, touched only on the device\'s queue.
    override func write(_ uuid: BluetoothUUID, value: Data) -> ATTErrorCode { .writeNotPermitted }

    override func started() { drain() }

    private func drain() {
        device?.after(.seconds(60)) { [self] in
            let level = values[.batteryLevel]?.first ?? 100
            if level > 1 {
                values[.batteryLevel] = Data([level - 1])
                device?.update(.batteryLevel, Data([level - 1]))
            }
            drain()
        }
    }
}

// MARK: Thermometer

/// A health thermometer: Health Thermometer (0x1809) with Temperature Measurement (0x2A1C), indicated every
/// two seconds while a central is subscribed, Temperature Type (0x2A1D, read: body) and Measurement Interval
/// (0x2A21, read and write, a uint16 of seconds: 2; a written value is kept, as the service allows); Battery;
/// Device Information.
enum ThermometerProfile {
    static func make(name: String) -> Profile {
        let (battery, _, _) = BuiltInProfiles.battery(level: 64)
        return Profile(
            name: name,
            services: [
                ProfileService(
                    uuid: .healthThermometer,
                    characteristics: [
                        ProfileCharacteristic(uuid: .temperatureMeasurement, properties: [.indicate], permissions: []),
                        .fixed(.temperatureType, Data([0x02]), description: "Body (general)"),
                        ProfileCharacteristic(
                            uuid: BluetoothUUID(0x2A21), properties: [.read, .write],
                            permissions: [.readable, .writeable], initial: Data([0x02, 0x00])),
                    ]),
                battery,
                BuiltInProfiles.deviceInformation(model: "THERMO-1", serial: "TH-0001"),
            ],
            advertisedServices: [.healthThermometer],
            behaviour: { ThermometerBehaviour() })
    }

    /// Temperature Measurement (Health Thermometer Service 3.1): flags 0x00 (Celsius, no time stamp, no type),
    /// then the temperature as an IEEE-11073 32-bit FLOAT: a 24-bit signed mantissa and an 8-bit signed
    /// exponent, little-endian. 36.6 °C is mantissa 366, exponent -1.
    static func measurement(tenthsOfDegree: Int32) -> Data {
        let mantissa = UInt32(bitPattern: tenthsOfDegree) & 0x00FF_FFFF
        let exponent = UInt8(bitPattern: -1)
        return Data([
            0x00, UInt8(mantissa & 0xFF), UInt8((mantissa >> 8) & 0xFF), UInt8((mantissa >> 16) & 0xFF), exponent,
        ])
    }
}

final class ThermometerBehaviour: ProfileBehaviour, @unchecked Sendable {
    // @unchecked: as ProfileBehaviour, touched only on the device\'s queue.
    private var timer: ScheduledTimer?
    private var jitter = Jitter(seed: 7)

    override func subscribed(_ uuid: BluetoothUUID) {
        guard uuid == .temperatureMeasurement, timer == nil else { return }
        tick()
    }

    override func unsubscribed(_ uuid: BluetoothUUID) {
        guard uuid == .temperatureMeasurement, device?.isSubscribed(uuid) != true else { return }
        timer?.cancel()
        timer = nil
    }

    private func tick() {
        timer = device?.after(.seconds(2)) { [self] in
            guard timer != nil, let device else { return }
            let tenths = 365 + Int32(jitter.next(5))
            device.update(.temperatureMeasurement, ThermometerProfile.measurement(tenthsOfDegree: tenths))
            tick()
        }
    }
}

// MARK: Door lock

/// A door lock on a custom 128-bit service: Lock State (read and notify: 0x01 locked, 0x00 unlocked) and Lock
/// Command (write with response: 0x01 locks, 0x00 unlocks; anything else is refused with the application
/// error 0x80).
enum DoorLockProfile {
    static let service = BluetoothUUID(string: "8D3E0001-5C1A-4F2B-9E6A-0C1D2E3F4A5B")!
    static let lockState = BluetoothUUID(string: "8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B")!
    static let lockCommand = BluetoothUUID(string: "8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B")!

    /// The lock's service: its state (read and notify, locked at first) and its command (write), each with a
    /// user description, readable and writable as `reading` and `writing` say. The secure lock's too.
    static func lockService(
        _ uuid: BluetoothUUID, state: BluetoothUUID, command: BluetoothUUID, includes: [BluetoothUUID] = [],
        reading: AttributePermissions, writing: AttributePermissions
    ) -> ProfileService {
        ProfileService(
            uuid: uuid, includes: includes,
            characteristics: [
                ProfileCharacteristic(
                    uuid: state, properties: [.read, .notify], permissions: reading, initial: Data([0x01]),
                    descriptors: [(.characteristicUserDescription, Data("Lock state: 01 locked, 00 unlocked".utf8))]),
                ProfileCharacteristic(
                    uuid: command, properties: [.write], permissions: writing,
                    descriptors: [(.characteristicUserDescription, Data("Lock command: 01 lock, 00 unlock".utf8))]),
            ])
    }

    static func make(name: String) -> Profile {
        let (battery, _, _) = BuiltInProfiles.battery(level: 42)
        return Profile(
            name: name,
            services: [
                battery,
                lockService(
                    service, state: lockState, command: lockCommand, includes: [.battery], reading: [.readable],
                    writing: [.writeable]),
                BuiltInProfiles.deviceInformation(model: "LOCK-1", serial: "DL-0001"),
            ],
            advertisedServices: [service],
            behaviour: { DoorLockBehaviour() })
    }
}

final class DoorLockBehaviour: ProfileBehaviour, @unchecked Sendable {
    // @unchecked: as ProfileBehaviour, touched only on the device\'s queue.
    let state: BluetoothUUID
    let command: BluetoothUUID

    init(state: BluetoothUUID = DoorLockProfile.lockState, command: BluetoothUUID = DoorLockProfile.lockCommand) {
        self.state = state
        self.command = command
    }

    override func write(_ uuid: BluetoothUUID, value: Data) -> ATTErrorCode {
        guard uuid == command else { return .writeNotPermitted }
        guard value.count == 1, let command = value.first, command <= 1 else {
            return ATTErrorCode(rawValue: 0x80)  // application error: not a lock command
        }
        if values[state] != Data([command]) {
            values[state] = Data([command])
            device?.update(state, Data([command]))
        }
        return .success
    }
}

// MARK: Secure lock

/// A door lock that insists on an encrypted link, as a real one does: Lock State (read and notify: 0x01 locked,
/// 0x00 unlocked) is readable only encrypted, Lock Command (write with response: 0x01 locks, 0x00 unlocks) is
/// writable only encrypted; a central on a link that is not encrypted is refused with Insufficient
/// Authentication (Insufficient Encryption once bonded), and pairs. Its own 128-bit service, so it is not taken
/// for the plain door lock. How it pairs is `ble serve`'s --io-capability, --passkey and --mitm.
enum SecureLockProfile {
    static let service = BluetoothUUID(string: "5EC10001-2B7D-4E8A-9C3F-6A1B2C3D4E5F")!
    static let lockState = BluetoothUUID(string: "5EC10002-2B7D-4E8A-9C3F-6A1B2C3D4E5F")!
    static let lockCommand = BluetoothUUID(string: "5EC10003-2B7D-4E8A-9C3F-6A1B2C3D4E5F")!

    static func make(name: String) -> Profile {
        Profile(
            name: name,
            services: [
                DoorLockProfile.lockService(
                    service, state: lockState, command: lockCommand, reading: [.readEncryptionRequired],
                    writing: [.writeEncryptionRequired]),
                BuiltInProfiles.deviceInformation(model: "LOCK-2", serial: "SL-0001"),
            ],
            advertisedServices: [service],
            behaviour: { DoorLockBehaviour(state: lockState, command: lockCommand) })
    }
}

// MARK: Printer

/// A printer in the manner of the camera's: Print Data (write without response) feeds a small buffer
/// that the device drains slowly over a slow link (no data length extension, ATT_MTU 23); Printer Status
/// (read and notify) gives the bytes received so far as a little-endian UInt32.
enum PrinterProfile {
    static let service = BluetoothUUID(string: "5E1D0001-7A3B-4C8D-9E0F-1A2B3C4D5E6F")!
    static let printData = BluetoothUUID(string: "5E1D0002-7A3B-4C8D-9E0F-1A2B3C4D5E6F")!
    static let status = BluetoothUUID(string: "5E1D0003-7A3B-4C8D-9E0F-1A2B3C4D5E6F")!

    /// The link the printer's controller and host offer: 27-byte LL payloads, the minimum ATT_MTU, and a
    /// small controller buffer.
    static let configuration = BluetoothSystem.Configuration(
        preferredMTU: 23, preferredDataLength: 27,
        aclBufferLength: 27, aclBufferCount: 2)

    static func make(name: String) -> Profile {
        Profile(
            name: name,
            services: [
                ProfileService(
                    uuid: service,
                    characteristics: [
                        ProfileCharacteristic(
                            uuid: printData, properties: [.writeWithoutResponse], permissions: [.writeable],
                            descriptors: [(.characteristicUserDescription, Data("Print data".utf8))]),
                        ProfileCharacteristic(
                            uuid: status, properties: [.read, .notify], permissions: [.readable],
                            initial: Data([0, 0, 0, 0]),
                            descriptors: [(.characteristicUserDescription, Data("Bytes received".utf8))]),
                    ]),
                BuiltInProfiles.deviceInformation(model: "PRN-1", serial: "PR-0001"),
            ],
            advertisedServices: [service],
            behaviour: { PrinterBehaviour() },
            configuration: configuration)
    }
}

final class PrinterBehaviour: ProfileBehaviour, @unchecked Sendable {
    // @unchecked: as ProfileBehaviour, touched only on the device\'s queue.
    private var received: UInt32 = 0

    override func write(_ uuid: BluetoothUUID, value: Data) -> ATTErrorCode {
        guard uuid == PrinterProfile.printData else { return .writeNotPermitted }
        received &+= UInt32(value.count)
        let bytes = Data([
            UInt8(received & 0xFF), UInt8((received >> 8) & 0xFF), UInt8((received >> 16) & 0xFF),
            UInt8(received >> 24),
        ])
        values[PrinterProfile.status] = bytes
        return .success
    }
}
