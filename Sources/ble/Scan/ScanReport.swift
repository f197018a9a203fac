import ArgumentParser
import BLE
import Foundation

/// One discovery as `ble scan` shows it: the device, what it advertised (with the swift-ble extensions: the PDU
/// type, the raw advertisement and scan response) and the signal strength of this report.
struct ScanReport: Sendable {
    var identifier: UUID
    var address: BluetoothAddress
    /// The advertised name, or the name the system knows the device by.
    var name: String?
    var advertisement: AdvertisementData
    /// dBm; 127 when the controller could not measure it.
    var rssi: Int

    init(_ found: DiscoveredPeripheral) {
        identifier = found.peripheral.identifier
        address = found.peripheral.address
        name = found.advertisementData.localName ?? found.peripheral.name
        advertisement = found.advertisementData
        rssi = found.rssi
    }

    /// Whether the name came in the scan response (the advertisement itself carries no name of that kind).
    var nameInScanResponse: Bool {
        let types = advertisement.scanResponseTypes
        guard advertisement.localName != nil else { return false }
        let all = AdvertisingData(
            (advertisement.advertisementStructures?.structures ?? [])
                + (advertisement.scanResponseStructures?.structures ?? []))
        return all.completeLocalName != nil ? types.contains(.completeLocalName) : types.contains(.shortenedLocalName)
    }

    /// The JSON keys of the fields that came (in whole or in part) in the scan response.
    var scanResponseFields: [String] {
        let types = advertisement.scanResponseTypes
        var fields: [String] = []
        if nameInScanResponse { fields.append("name") }
        let lists: Set<ADType> = [
            .incompleteList16BitServiceUUIDs, .completeList16BitServiceUUIDs, .incompleteList32BitServiceUUIDs,
            .completeList32BitServiceUUIDs, .incompleteList128BitServiceUUIDs, .completeList128BitServiceUUIDs,
        ]
        if !types.isDisjoint(with: lists) { fields.append("serviceUUIDs") }
        if types.contains(.manufacturerSpecificData) { fields.append("manufacturerData") }
        if !serviceDataInScanResponse.isEmpty { fields.append("serviceData") }
        if types.contains(.txPowerLevel) { fields.append("txPowerLevel") }
        return fields
    }

    /// The service data UUIDs whose data only the scan response carries.
    var serviceDataInScanResponse: Set<BluetoothUUID> {
        let advertised = Set((advertisement.advertisementStructures?.serviceData ?? [:]).keys)
        return Set((advertisement.scanResponseStructures?.serviceData ?? [:]).keys).subtracting(advertised)
    }

    /// The iBeacon in the manufacturer data, if it is one.
    var iBeacon: IBeacon? {
        advertisement.manufacturerData.flatMap { ManufacturerSpecificData(bytes: Array($0)) }.flatMap {
            IBeacon(manufacturerData: $0)
        }
    }

    /// The Eddystone frame in the service data of 0xFEAA: decoded, or why it could not be (its bytes are shown
    /// as they came either way); `nil` when there is none.
    var eddystone: Result<EddystoneFrame, AdvertisingDataError>? {
        guard let data = advertisement.serviceData?[EddystoneFrame.serviceUUID] else { return nil }
        return Result { () throws(AdvertisingDataError) in try EddystoneFrame(decoding: Array(data)) }
    }
}

/// The `--name` and `--rssi` filters.
struct ScanFilter: Sendable {
    var name: String?
    var minimumRSSI: Int?

    func admits(_ report: ScanReport) -> Bool {
        if let name {
            guard let found = report.name, found.range(of: name, options: .caseInsensitive) != nil else { return false }
        }
        if let minimumRSSI {
            // 127: the controller could not measure it, so it is not known to be strong enough.
            guard report.rssi != 127, report.rssi >= minimumRSSI else { return false }
        }
        return true
    }
}

/// How the devices are listed (`--sort`).
enum ScanSort: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// Strongest first.
    case rssi
    /// By name, case-insensitively; devices without a name last.
    case name
    /// By address.
    case address
    /// In the order they were first seen.
    case seen
}
