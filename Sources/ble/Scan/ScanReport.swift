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
    /// When it came: the system's time (virtual on a simulated radio), and the same as a date.
    var time: Duration
    var date: Date

    init(
        identifier: UUID, address: BluetoothAddress, name: String?, advertisement: AdvertisementData, rssi: Int,
        time: Duration, date: Date
    ) {
        self.identifier = identifier
        self.address = address
        self.name = name
        self.advertisement = advertisement
        self.rssi = rssi
        self.time = time
        self.date = date
    }

    init(_ found: DiscoveredPeripheral, time: Duration, date: Date) {
        identifier = found.peripheral.identifier
        address = found.peripheral.address
        name = found.advertisementData.localName ?? found.peripheral.name
        advertisement = found.advertisementData
        rssi = found.rssi
        self.time = time
        self.date = date
    }

    /// A report received now on `system`.
    init(_ found: DiscoveredPeripheral, on system: BluetoothSystem) {
        self.init(found, time: system.now, date: Date(timeIntervalSinceReferenceDate: system.absoluteTime))
    }

    /// Whether the name is a shortened one (Shortened Local Name, AD type 0x08), with no complete name beside it:
    /// the device's full name begins with it.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.2.
    var nameIsShortened: Bool {
        guard let advertised = advertisement.localName, advertised == name else { return false }
        return TargetMatcher.shortenedName(advertisement) != nil
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

/// The filters of `ble scan` and the shell's `scan` (beside `--service`, which the scan itself applies): a
/// report passes when it passes each filter given.
struct ScanFilter: Sendable {
    /// Text the name contains, ignoring case.
    var name: String?
    var minimumRSSI: Int?
    /// Address prefixes ("C0:11" or a whole address), in upper case; any of them.
    var addresses: [String] = []
    /// Company identifiers the manufacturer data starts with; any of them.
    var manufacturers: [UInt16] = []
    /// Only connectable advertisements.
    var connectableOnly = false

    func admits(_ report: ScanReport) -> Bool {
        if let name {
            guard let found = report.name, found.range(of: name, options: .caseInsensitive) != nil else { return false }
        }
        if let minimumRSSI {
            // 127: the controller could not measure it, so it is not known to be strong enough.
            guard report.rssi != 127, report.rssi >= minimumRSSI else { return false }
        }
        if !addresses.isEmpty {
            let address = report.address.string
            guard addresses.contains(where: { address.hasPrefix($0) }) else { return false }
        }
        if !manufacturers.isEmpty {
            guard let m = report.advertisement.manufacturerData, m.count >= 2,
                manufacturers.contains(UInt16(m[m.startIndex]) | UInt16(m[m.startIndex + 1]) << 8)
            else { return false }
        }
        if connectableOnly, report.advertisement.isConnectable == false { return false }
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
