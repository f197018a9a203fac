import BLE
import Dispatch
import Foundation
import Synchronization

/// The default transport's simulated room: one `SimulatedRadio` with a fixed seed and the devices of
/// `WorldDevices`, each a `BluetoothSystem` of its own at its own position (so RSSI differs), running device
/// logic written against the public API. The tool's own system joins it as one more device.
final class World: Sendable {
    let radio: SimulatedRadio
    private let devices = Mutex<[ServedDevice]>([])

    init(seed: UInt64) {
        radio = SimulatedRadio(seed: seed)
        var served: [ServedDevice] = []
        for device in WorldDevices.all {
            let system =
                device.address.map {
                    BluetoothSystem.simulated(
                        on: radio, name: device.profile.deviceName, address: $0, position: device.position,
                        configuration: device.profile.configuration)
                }
                ?? BluetoothSystem.simulated(
                    on: radio, name: device.profile.deviceName, position: device.position,
                    configuration: device.profile.configuration)
            served.append(ServedDevice(system: system, profile: device.profile))
        }
        devices.withLock { $0 = served }
    }

    /// The tool's own device, at the origin.
    func addToolDevice(name: String, configuration: BluetoothSystem.Configuration) throws -> BluetoothSystem {
        try BluetoothSystem.makeSimulated(
            on: radio, name: name, position: RadioPosition(x: 0, y: 0), configuration: configuration)
    }
}

/// The devices in the room.
enum WorldDevices {
    struct Device {
        var profile: Profile
        var position: RadioPosition
        var address: BluetoothAddress? = nil
    }

    /// The Environment Hub's custom service, advertised with its name in the scan response.
    static let environmentService = BluetoothUUID(string: "0B5E0001-3F6A-4D2C-8B1E-7C9D0A1B2C3D")!

    static let all: [Device] = [
        // Connectable devices with GATT databases.
        Device(
            profile: HeartRateProfile.make(name: "HRM-Demo"), position: RadioPosition(x: 2, y: 1),
            address: BluetoothAddress(string: "00:1B:DC:0A:12:34", type: .publicDevice)),
        Device(profile: ThermometerProfile.make(name: "Thermometer"), position: RadioPosition(x: 4, y: -2)),
        Device(
            profile: DoorLockProfile.make(name: "DoorLock"), position: RadioPosition(x: 6, y: 3),
            address: BluetoothAddress(string: "00:1B:DC:0A:56:78", type: .publicDevice)),
        Device(profile: PrinterProfile.make(name: "Printer"), position: RadioPosition(x: 3, y: 5)),
        Device(profile: CameraProfile.make(name: "Camera"), position: RadioPosition(x: -3, y: 2)),
        // Devices that only advertise.
        Device(profile: beacon(name: "iBeacon", manufacturerData: iBeaconData), position: RadioPosition(x: 8, y: -4)),
        Device(
            profile: beacon(
                name: "Eddystone", services: [BluetoothUUID(0xFEAA)],
                serviceData: [BluetoothUUID(0xFEAA): eddystoneURL]),
            position: RadioPosition(x: 10, y: 1)),
        Device(
            profile: beacon(name: "Environment Hub", advertisedName: "Environment Hub", services: [environmentService]),
            position: RadioPosition(x: 5, y: -6)),
    ]

    /// A device that advertises without accepting connections: a nameless beacon, or (with a name) a scannable
    /// device whose complete name does not fit the advertising PDU and goes into the scan response.
    static func beacon(
        name: String, advertisedName: String? = nil, services: [BluetoothUUID] = [],
        manufacturerData: Data? = nil, serviceData: [BluetoothUUID: Data]? = nil
    ) -> Profile {
        Profile(
            name: advertisedName ?? "", services: [], advertisedServices: services,
            manufacturerData: manufacturerData, serviceData: serviceData,
            behaviour: { ProfileBehaviour() }, connectable: false, systemName: name)
    }

    /// Apple's iBeacon layout: company 0x004C, type 0x02, length 0x15, proximity UUID, major, minor, and the
    /// measured power at 1 m.
    static let iBeaconData: Data = {
        var bytes: [UInt8] = [0x4C, 0x00, 0x02, 0x15]
        bytes += BluetoothUUID(string: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!.bytes128
        bytes += [0x00, 0x01, 0x00, 0x2A, 0xC5]  // major 1, minor 42, -59 dBm
        return Data(bytes)
    }()

    /// An Eddystone-URL frame: type 0x10, TX power at 0 m (-20 dBm), scheme 0x03 ("https://"), "swift" and
    /// 0x08 (".org").
    static let eddystoneURL = Data([0x10, 0xEC, 0x03] + Array("swift".utf8) + [0x08])
}
