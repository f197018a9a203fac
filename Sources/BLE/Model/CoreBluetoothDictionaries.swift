// swift-format-ignore-file: AlwaysUseLowerCamelCase

import BLECore
import Foundation
import Logging

// CoreBluetooth's dictionary keys, with the `CB` prefix dropped, so that code written with option and
// advertisement dictionaries ports as it is: a dictionary literal with these keys builds the typed options
// (`scanForPeripherals(withServices: nil, options: [CentralManagerScanOptionAllowDuplicatesKey: true])`), and
// `centralManager(_:didDiscover:advertisementData: [String: Any], rssi: NSNumber)` reads them. The strings are
// CoreBluetooth's own. An unknown key, or a value of the wrong type, is logged and left out, never guessed at.

/// `CBAdvertisementDataLocalNameKey`: a `String`.
public let AdvertisementDataLocalNameKey = "kCBAdvDataLocalName"
/// `CBAdvertisementDataManufacturerDataKey`: `Data`, the company identifier first (little-endian).
public let AdvertisementDataManufacturerDataKey = "kCBAdvDataManufacturerData"
/// `CBAdvertisementDataServiceDataKey`: `[BluetoothUUID: Data]`.
public let AdvertisementDataServiceDataKey = "kCBAdvDataServiceData"
/// `CBAdvertisementDataServiceUUIDsKey`: `[BluetoothUUID]`.
public let AdvertisementDataServiceUUIDsKey = "kCBAdvDataServiceUUIDs"
/// `CBAdvertisementDataOverflowServiceUUIDsKey`: `[BluetoothUUID]`.
public let AdvertisementDataOverflowServiceUUIDsKey = "kCBAdvDataHashedServiceUUIDs"
/// `CBAdvertisementDataTxPowerLevelKey`: an `NSNumber` (dBm).
public let AdvertisementDataTxPowerLevelKey = "kCBAdvDataTxPowerLevel"
/// `CBAdvertisementDataIsConnectable`: an `NSNumber` holding a Bool.
public let AdvertisementDataIsConnectable = "kCBAdvDataIsConnectable"
/// `CBAdvertisementDataSolicitedServiceUUIDsKey`: `[BluetoothUUID]`.
public let AdvertisementDataSolicitedServiceUUIDsKey = "kCBAdvDataSolicitedServiceUUIDs"

/// `CBCentralManagerOptionShowPowerAlertKey`: a Bool.
public let CentralManagerOptionShowPowerAlertKey = "kCBInitOptionShowPowerAlert"
/// `CBCentralManagerOptionRestoreIdentifierKey`: a `String`.
public let CentralManagerOptionRestoreIdentifierKey = "kCBInitOptionRestoreIdentifier"
/// `CBCentralManagerScanOptionAllowDuplicatesKey`: a Bool.
public let CentralManagerScanOptionAllowDuplicatesKey = "kCBScanOptionAllowDuplicates"
/// `CBCentralManagerScanOptionSolicitedServiceUUIDsKey`: `[BluetoothUUID]`.
public let CentralManagerScanOptionSolicitedServiceUUIDsKey = "kCBScanOptionSolicitedServiceUUIDs"
/// `CBConnectPeripheralOptionNotifyOnConnectionKey`: a Bool.
public let ConnectPeripheralOptionNotifyOnConnectionKey = "kCBConnectOptionNotifyOnConnection"
/// `CBConnectPeripheralOptionNotifyOnDisconnectionKey`: a Bool.
public let ConnectPeripheralOptionNotifyOnDisconnectionKey = "kCBConnectOptionNotifyOnDisconnection"
/// `CBConnectPeripheralOptionNotifyOnNotificationKey`: a Bool.
public let ConnectPeripheralOptionNotifyOnNotificationKey = "kCBConnectOptionNotifyOnNotification"
/// `CBPeripheralManagerOptionShowPowerAlertKey`: a Bool.
public let PeripheralManagerOptionShowPowerAlertKey = "kCBInitOptionShowPowerAlert"
/// `CBPeripheralManagerOptionRestoreIdentifierKey`: a `String`.
public let PeripheralManagerOptionRestoreIdentifierKey = "kCBInitOptionRestoreIdentifier"

/// Reads a CoreBluetooth-style dictionary into typed fields; what does not fit is logged.
struct DictionaryReader {
    static let logger = Logger(label: "swift-ble.api")
    let what: String
    var entries: [String: Any]

    init(_ what: String, _ elements: [(String, Any)]) {
        self.what = what
        entries = Dictionary(elements, uniquingKeysWith: { _, last in last })
    }

    mutating func take<T>(_ key: String, as type: T.Type) -> T? {
        guard let value = entries.removeValue(forKey: key) else { return nil }
        if let typed = value as? T { return typed }
        if T.self == Bool.self, let number = value as? NSNumber { return number.boolValue as? T }
        if T.self == Int.self, let number = value as? NSNumber { return number.intValue as? T }
        Self.logger.warning("\(what): \(key) holds \(Swift.type(of: value)), not \(T.self); it is left out")
        return nil
    }

    func finish() {
        for key in entries.keys.sorted() {
            Self.logger.warning("\(what): \(key) is not a key this library knows; it is left out")
        }
    }
}

extension CentralManager.Options: ExpressibleByDictionaryLiteral {
    /// Nothing set (an empty literal would otherwise be ambiguous with the dictionary form).
    public init() { self.init(showPowerAlert: nil) }

    public init(dictionaryLiteral elements: (String, Any)...) {
        var reader = DictionaryReader("CentralManager options", elements)
        self.init(
            showPowerAlert: reader.take(CentralManagerOptionShowPowerAlertKey, as: Bool.self),
            restoreIdentifier: reader.take(CentralManagerOptionRestoreIdentifierKey, as: String.self))
        reader.finish()
    }
}

extension CentralManager.ScanOptions: ExpressibleByDictionaryLiteral {
    /// Nothing set (an empty literal would otherwise be ambiguous with the dictionary form).
    public init() { self.init(allowDuplicates: nil) }

    public init(dictionaryLiteral elements: (String, Any)...) {
        var reader = DictionaryReader("scan options", elements)
        self.init(
            allowDuplicates: reader.take(CentralManagerScanOptionAllowDuplicatesKey, as: Bool.self),
            solicitedServiceUUIDs: reader.take(
                CentralManagerScanOptionSolicitedServiceUUIDsKey, as: [BluetoothUUID].self))
        reader.finish()
    }
}

extension CentralManager.ConnectOptions: ExpressibleByDictionaryLiteral {
    /// Nothing set (an empty literal would otherwise be ambiguous with the dictionary form).
    public init() { self.init(notifyOnConnection: nil) }

    public init(dictionaryLiteral elements: (String, Any)...) {
        var reader = DictionaryReader("connect options", elements)
        self.init(
            notifyOnConnection: reader.take(ConnectPeripheralOptionNotifyOnConnectionKey, as: Bool.self),
            notifyOnDisconnection: reader.take(ConnectPeripheralOptionNotifyOnDisconnectionKey, as: Bool.self),
            notifyOnNotification: reader.take(ConnectPeripheralOptionNotifyOnNotificationKey, as: Bool.self))
        reader.finish()
    }
}

extension PeripheralManager.Options: ExpressibleByDictionaryLiteral {
    /// Nothing set (an empty literal would otherwise be ambiguous with the dictionary form).
    public init() { self.init(showPowerAlert: nil) }

    public init(dictionaryLiteral elements: (String, Any)...) {
        var reader = DictionaryReader("PeripheralManager options", elements)
        self.init(
            showPowerAlert: reader.take(PeripheralManagerOptionShowPowerAlertKey, as: Bool.self),
            restoreIdentifier: reader.take(PeripheralManagerOptionRestoreIdentifierKey, as: String.self))
        reader.finish()
    }
}

extension AdvertisementData: ExpressibleByDictionaryLiteral {
    /// Nothing set (an empty literal would otherwise be ambiguous with the dictionary form).
    public init() { self.init(localName: nil) }

    /// An advertisement from CoreBluetooth's keys, as `startAdvertising([AdvertisementDataLocalNameKey: "x"])`.
    public init(dictionaryLiteral elements: (String, Any)...) {
        var reader = DictionaryReader("advertisement data", elements)
        self.init(
            localName: reader.take(AdvertisementDataLocalNameKey, as: String.self),
            manufacturerData: reader.take(AdvertisementDataManufacturerDataKey, as: Data.self),
            serviceData: reader.take(AdvertisementDataServiceDataKey, as: [BluetoothUUID: Data].self),
            serviceUUIDs: reader.take(AdvertisementDataServiceUUIDsKey, as: [BluetoothUUID].self),
            overflowServiceUUIDs: reader.take(AdvertisementDataOverflowServiceUUIDsKey, as: [BluetoothUUID].self),
            txPowerLevel: reader.take(AdvertisementDataTxPowerLevelKey, as: Int.self),
            isConnectable: reader.take(AdvertisementDataIsConnectable, as: Bool.self),
            solicitedServiceUUIDs: reader.take(AdvertisementDataSolicitedServiceUUIDsKey, as: [BluetoothUUID].self))
        reader.finish()
    }

    /// The advertisement as CoreBluetooth's `advertisementData` dictionary: only the fields present, numbers as
    /// `NSNumber`.
    public var dictionary: [String: Any] {
        var d: [String: Any] = [:]
        if let localName { d[AdvertisementDataLocalNameKey] = localName }
        if let manufacturerData { d[AdvertisementDataManufacturerDataKey] = manufacturerData }
        if let serviceData { d[AdvertisementDataServiceDataKey] = serviceData }
        if let serviceUUIDs { d[AdvertisementDataServiceUUIDsKey] = serviceUUIDs }
        if let overflowServiceUUIDs { d[AdvertisementDataOverflowServiceUUIDsKey] = overflowServiceUUIDs }
        if let txPowerLevel { d[AdvertisementDataTxPowerLevelKey] = NSNumber(value: txPowerLevel) }
        if let isConnectable { d[AdvertisementDataIsConnectable] = NSNumber(value: isConnectable) }
        if let solicitedServiceUUIDs { d[AdvertisementDataSolicitedServiceUUIDsKey] = solicitedServiceUUIDs }
        return d
    }
}
