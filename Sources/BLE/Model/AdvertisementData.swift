import BLECore
import Foundation

/// What a peripheral advertises, in meaning rather than bytes: the `advertisementData` dictionary of
/// CoreBluetooth as a typed struct. Every field is optional; the same type is what
/// `centralManager(_:didDiscover:advertisementData:rssi:)` reports and what `startAdvertising(_:)` takes
/// (CoreBluetooth's peripheral manager advertises only `localName` and `serviceUUIDs`; this one also sends
/// manufacturer data, service data, TX power and solicited services when given).
public struct AdvertisementData: Sendable, Hashable {
    /// Complete or shortened local name (`CBAdvertisementDataLocalNameKey`).
    public var localName: String?
    /// Manufacturer-specific data: the 2-byte company identifier (little-endian) followed by its bytes
    /// (`CBAdvertisementDataManufacturerDataKey`).
    public var manufacturerData: Data?
    /// Service data by service UUID (`CBAdvertisementDataServiceDataKey`).
    public var serviceData: [BluetoothUUID: Data]?
    /// Advertised service UUIDs (`CBAdvertisementDataServiceUUIDsKey`).
    public var serviceUUIDs: [BluetoothUUID]?
    /// Services that did not fit and were listed as incomplete (`CBAdvertisementDataOverflowServiceUUIDsKey`).
    public var overflowServiceUUIDs: [BluetoothUUID]?
    /// Transmit power in dBm (`CBAdvertisementDataTxPowerLevelKey`).
    public var txPowerLevel: Int?
    /// Whether the advertising PDU allows a connection (`CBAdvertisementDataIsConnectable`).
    public var isConnectable: Bool?
    /// Services the advertiser solicits (`CBAdvertisementDataSolicitedServiceUUIDsKey`).
    public var solicitedServiceUUIDs: [BluetoothUUID]?

    // MARK: swift-ble extensions (not in CoreBluetooth)

    /// The type of the advertising PDU this came from (ADV_IND, ADV_SCAN_IND, ADV_NONCONN_IND,
    /// ADV_DIRECT_IND), from the controller's report. A swift-ble extension, not in CoreBluetooth. Set on
    /// discoveries; `nil` on data built to advertise (and ignored by `startAdvertising`).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.2; Vol 6, Part B, 2.3.
    public var advertisingType: AdvertisingPDUType?
    /// The advertising PDU's data (AdvData) exactly as received, every octet, including any that do not form
    /// a whole AD structure. A swift-ble extension, not in CoreBluetooth. Set on discoveries; `nil` on data
    /// built to advertise (and ignored by `startAdvertising`).
    public var rawAdvertisement: Data?
    /// The scan response's data (ScanRspData) exactly as received, when one came with this advertisement;
    /// `nil` otherwise (the PDU is not scannable, or the response was lost). A swift-ble extension, not in
    /// CoreBluetooth, which merges it into the other fields without saying so; ignored by `startAdvertising`.
    public var rawScanResponse: Data?

    public init(
        localName: String? = nil, manufacturerData: Data? = nil, serviceData: [BluetoothUUID: Data]? = nil,
        serviceUUIDs: [BluetoothUUID]? = nil, overflowServiceUUIDs: [BluetoothUUID]? = nil,
        txPowerLevel: Int? = nil, isConnectable: Bool? = nil, solicitedServiceUUIDs: [BluetoothUUID]? = nil
    ) {
        self.localName = localName
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.serviceUUIDs = serviceUUIDs
        self.overflowServiceUUIDs = overflowServiceUUIDs
        self.txPowerLevel = txPowerLevel
        self.isConnectable = isConnectable
        self.solicitedServiceUUIDs = solicitedServiceUUIDs
    }
}

extension AdvertisementData {
    /// The AD structures of `rawAdvertisement`, in wire order, decoded leniently (the whole structures before
    /// one that overruns). A swift-ble extension, not in CoreBluetooth.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part C, 11; Core Specification Supplement v11, Part A, 1.
    public var advertisementStructures: AdvertisingData? {
        rawAdvertisement.map { AdvertisingData(leniently: $0) }
    }

    /// The AD structures of `rawScanResponse`, decoded leniently. A swift-ble extension, not in CoreBluetooth.
    public var scanResponseStructures: AdvertisingData? {
        rawScanResponse.map { AdvertisingData(leniently: $0) }
    }

    /// The AD types whose meaning in this value came from the scan response: present in the scan response and
    /// absent from the advertisement (where a type is in both, the advertisement's structure comes first and
    /// wins). A local name that only the scan response carries, for example, gives `.completeLocalName` here.
    /// A swift-ble extension, not in CoreBluetooth.
    public var scanResponseTypes: Set<ADType> {
        guard let response = scanResponseStructures else { return [] }
        let advertised = Set((advertisementStructures?.structures ?? []).map(\.type))
        return Set(response.structures.map(\.type)).subtracting(advertised)
    }

    /// The Flags of the advertisement (Flags may not appear in a scan response), if present. A swift-ble
    /// extension, not in CoreBluetooth.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.3.
    public var flags: ADFlags? { advertisementStructures?.flags }
}
