import BLECore
import Foundation

#if !canImport(Darwin)
    /// Seconds since 2001-01-01 00:00:00 UTC, as CoreFoundation's type (which Foundation on Linux does not
    /// export): the five-argument `didDisconnectPeripheral`'s timestamp.
    public typealias CFAbsoluteTime = Double
#endif

/// Receives a central manager's events (`CBCentralManagerDelegate`). Only `centralManagerDidUpdateState` is
/// required; every other method has an empty default, as CoreBluetooth's optional methods.
public protocol CentralManagerDelegate: AnyObject {
    func centralManagerDidUpdateState(_ central: CentralManager)
    func centralManager(_ central: CentralManager, willRestoreState state: CentralManager.RestoredState)
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int)
    /// CoreBluetooth's own form of the discovery, for code ported as it is: called right after the typed one
    /// with the same discovery, the dictionary keyed by `AdvertisementDataLocalNameKey` and its siblings and
    /// the RSSI as an `NSNumber`. Implement one of the two.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: [String: Any], rssi RSSI: NSNumber)
    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral)
    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?)
    /// A link ended. Its default implementation calls the five-argument form below, so an app implements the
    /// one it wants: an app that implements this one hears every disconnection here, as on iOS (<doc:IOSRules>).
    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    /// iOS 17's form: `timestamp` is when the link ended, `isReconnecting` true when the system is connecting
    /// again by itself (`ConnectOptions.enableAutoReconnect`), so `didConnect` follows when the link is back.
    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: CFAbsoluteTime,
        isReconnecting: Bool, error: (any Error)?)
    /// A peer matching `registerForConnectionEvents(options:)` connected to or disconnected from the system.
    func centralManager(
        _ central: CentralManager, connectionEventDidOccur event: ConnectionEvent, for peripheral: Peripheral)
}

extension CentralManagerDelegate {
    public func centralManager(_ central: CentralManager, willRestoreState state: CentralManager.RestoredState) {}
    public func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int
    ) {}
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: [String: Any], rssi RSSI: NSNumber
    ) {}

    /// Both forms of a discovery, typed first.
    func announceDiscovery(
        _ central: CentralManager, _ peripheral: Peripheral, _ advertisementData: AdvertisementData, _ rssi: Int
    ) {
        centralManager(central, didDiscover: peripheral, advertisementData: advertisementData, rssi: rssi)
        centralManager(
            central, didDiscover: peripheral, advertisementData: advertisementData.dictionary,
            rssi: NSNumber(value: rssi))
    }
    public func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {}
    public func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?)
    {}
    public func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        let ending = peripheral.disconnection
        centralManager(
            central, didDisconnectPeripheral: peripheral, timestamp: ending.timestamp,
            isReconnecting: ending.isReconnecting, error: error)
    }
    public func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: CFAbsoluteTime,
        isReconnecting: Bool, error: (any Error)?
    ) {}
    public func centralManager(
        _ central: CentralManager, connectionEventDidOccur event: ConnectionEvent, for peripheral: Peripheral
    ) {}
}

/// Receives a remote peripheral's events (`CBPeripheralDelegate`); every method is optional.
public protocol PeripheralDelegate: AnyObject {
    func peripheralDidUpdateName(_ peripheral: Peripheral)
    func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service])
    // swift-format-ignore: AlwaysUseLowerCamelCase
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?)
    /// CoreBluetooth's own form, for code ported as it is: called right after the typed one, the RSSI as an
    /// `NSNumber`. Implement one of the two.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?)
    func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?)
    func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?)
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?)
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral)
}

extension PeripheralDelegate {
    public func peripheralDidUpdateName(_ peripheral: Peripheral) {}
    public func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {}
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {}
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?) {}

    /// Both forms of an RSSI reading, typed first.
    func announceRSSI(_ peripheral: Peripheral, _ rssi: Int, _ error: (any Error)?) {
        self.peripheral(peripheral, didReadRSSI: rssi, error: error)
        self.peripheral(peripheral, didReadRSSI: NSNumber(value: rssi), error: error)
    }
    public func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {}
    public func peripheral(
        _ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?
    ) {}
    public func peripheral(
        _ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?
    ) {}
    public func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?
    ) {}
    public func peripheral(
        _ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?
    ) {}
    public func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?) {}
    public func peripheral(
        _ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?
    ) {}
    public func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?) {}
    public func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {}
    public func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {}
}

/// Receives a peripheral manager's events (`CBPeripheralManagerDelegate`). Only
/// `peripheralManagerDidUpdateState` is required.
public protocol PeripheralManagerDelegate: AnyObject {
    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager)
    func peripheralManager(_ peripheral: PeripheralManager, willRestoreState state: PeripheralManager.RestoredState)
    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?)
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?)
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic)
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic)
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest)
    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest])
    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager)

    // swift-ble extensions, not in CoreBluetooth (whose peripheral manager hears of a central only through its
    // requests): a central's link as it comes, changes and goes, for tools that log it. Each has an empty default.

    /// A central connected to this device; `central` is the object its requests will carry.
    func peripheralManager(_ peripheral: PeripheralManager, didConnect central: Central)
    /// The central's link ended (`error` says why: its `hciStatus` is the reason the controller gave). Its
    /// subscriptions were ended first, each with `didUnsubscribeFrom`.
    func peripheralManager(_ peripheral: PeripheralManager, didDisconnect central: Central, error: (any Error)?)
    /// The link's ATT_MTU changed (an MTU exchange); `central.maximumUpdateValueLength` already follows it.
    func peripheralManager(_ peripheral: PeripheralManager, central: Central, didUpdateMTU mtu: Int)
    /// The security of the central's link changed: a pairing started, ended or failed, or the link was encrypted
    /// (after a pairing, or with the keys of an earlier one).
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUpdateSecurity event: CentralSecurityEvent)
}

extension PeripheralManagerDelegate {
    public func peripheralManager(
        _ peripheral: PeripheralManager, willRestoreState state: PeripheralManager.RestoredState
    ) {}
    public func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {}
    public func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {}
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {}
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {}
    public func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {}
    public func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {}
    public func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {}
    public func peripheralManager(_ peripheral: PeripheralManager, didConnect central: Central) {}
    public func peripheralManager(
        _ peripheral: PeripheralManager, didDisconnect central: Central, error: (any Error)?
    ) {}
    public func peripheralManager(_ peripheral: PeripheralManager, central: Central, didUpdateMTU mtu: Int) {}
    public func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUpdateSecurity event: CentralSecurityEvent
    ) {}
}

/// A change in the security of a central's link, as its peripheral manager hears it
/// (`PeripheralManagerDelegate.peripheralManager(_:central:didUpdateSecurity:)`, a swift-ble extension: iOS tells
/// a peripheral app nothing of pairing). Pairing itself is the system's, as on a phone: questions for the user go
/// to `BluetoothSystem.pairingDelegate`, bonds are kept in the system's store.
public enum CentralSecurityEvent: Sendable, Hashable, CustomStringConvertible {
    /// The central sent a Pairing Request (or this device's Security Request was answered with one).
    case pairingStarted
    /// The pairing ended with these keys; `bonded`: both keep them, so the next link is encrypted without pairing.
    case paired(PairingResult)
    /// The pairing failed; the error's `pairingFailureReason` says why when either side sent Pairing Failed.
    case pairingFailed(BluetoothError)
    /// The link is encrypted: with the new keys after a pairing, or with the keys of an earlier one.
    case encrypted
    /// Encrypting the link failed (the error's `hciStatus` is the controller's reason).
    case encryptionFailed(BluetoothError)

    public var description: String {
        switch self {
        case .pairingStarted: "pairing started"
        case .paired(let result):
            "paired (\(result.method), \(result.secureConnections ? "LE Secure Connections" : "legacy"), "
                + "\(result.authenticated ? "authenticated" : "unauthenticated"), key size \(result.keySize))"
                + (result.bonded ? "; bonded" : "; not bonded")
        case .pairingFailed(let error): "pairing failed: \(error.message)"
        case .encrypted: "encrypted"
        case .encryptionFailed(let error): "encryption failed: \(error.message)"
        }
    }
}
