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
