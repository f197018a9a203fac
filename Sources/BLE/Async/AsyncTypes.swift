import BLESystem
import Foundation
import Synchronization

/// A peripheral found by `CentralManager.scan(withServices:options:)`: what
/// `centralManager(_:didDiscover:advertisementData:rssi:)` reports, as one value.
public struct DiscoveredPeripheral: Sendable, CustomStringConvertible {
    /// The peripheral, the same object the delegate receives; connect to it with `connect(_:options:timeout:)`.
    public let peripheral: Peripheral
    /// The advertisement (merged with its scan response).
    public let advertisementData: AdvertisementData
    /// Received signal strength in dBm; 127 when the controller could not measure it.
    public let rssi: Int

    public init(peripheral: Peripheral, advertisementData: AdvertisementData, rssi: Int) {
        self.peripheral = peripheral
        self.advertisementData = advertisementData
        self.rssi = rssi
    }

    public var description: String { "<DiscoveredPeripheral \(peripheral.identifier) rssi=\(rssi)>" }
}

/// A link that went down: what `centralManager(_:didDisconnectPeripheral:error:)` reports, as one value.
public struct PeripheralDisconnection: Sendable, CustomStringConvertible {
    public let peripheral: Peripheral
    /// Why, or nil when the application cancelled the connection itself.
    public let error: BluetoothError?
    /// When the link ended (the system's time, `BluetoothSystem.absoluteTime`).
    public let timestamp: CFAbsoluteTime
    /// Whether the system is connecting again by itself (`ConnectOptions.enableAutoReconnect`).
    public let isReconnecting: Bool

    public init(
        peripheral: Peripheral, error: BluetoothError?, timestamp: CFAbsoluteTime = 0, isReconnecting: Bool = false
    ) {
        self.peripheral = peripheral
        self.error = error
        self.timestamp = timestamp
        self.isReconnecting = isReconnecting
    }

    public var description: String {
        "<PeripheralDisconnection \(peripheral.identifier)\(error.map { " error=\($0)" } ?? "")"
            + "\(isReconnecting ? " reconnecting" : "")>"
    }
}

/// A request a remote central sent to a characteristic this device publishes, from
/// `PeripheralManager.requests`. Answer it with `respond(to:withResult:)`, as from the delegate.
public enum PeripheralManagerRequest: Sendable, CustomStringConvertible {
    /// A read (`didReceiveRead`): set `request.value`, then respond.
    case read(ATTRequest)
    /// A write (`didReceiveWrite`): one request per part of a long write, answered once through the first.
    case write([ATTRequest])

    public var description: String {
        switch self {
        case .read(let r): "read \(r)"
        case .write(let rs): "write \(rs)"
        }
    }
}

/// A change in who is subscribed to a characteristic this device publishes, from
/// `PeripheralManager.subscriptions`.
public enum SubscriptionEvent: Sendable, CustomStringConvertible {
    /// `central` enabled notifications or indications (`central(_:didSubscribeTo:)`).
    case subscribed(Central, Characteristic)
    /// `central` disabled them or disconnected (`central(_:didUnsubscribeFrom:)`).
    case unsubscribed(Central, Characteristic)

    public var description: String {
        switch self {
        case .subscribed(let c, let ch): "\(c) subscribed to \(ch)"
        case .unsubscribed(let c, let ch): "\(c) unsubscribed from \(ch)"
        }
    }
}

extension BluetoothError {
    /// The error an async operation throws when its manager is not powered on, with the reason `system` gave
    /// for its state when it gave one (the controller's transport closed, the controller refused LE, ...).
    static func notPoweredOn(_ state: ManagerState, system: BluetoothSystem) -> BluetoothError {
        var because = ""
        switch system.core.powerState {
        case .poweredOff(let reason), .unsupported(let reason): because = ": \(reason)"
        default: break
        }
        return switch state {
        case .poweredOff: BluetoothError(.transportClosed, "Bluetooth is powered off\(because)")
        case .unsupported:
            BluetoothError(.operationNotSupported, "this controller does not support Bluetooth LE\(because)")
        case .unauthorized: BluetoothError(.operationNotSupported, "the application is not authorized to use Bluetooth")
        case .unknown, .resetting, .poweredOn:
            BluetoothError(.invalidParameters, "the manager is not powered on (\(state))")
        }
    }

    /// How a link loss reaches pending operations: the delivered error, or `.operationCancelled` when the
    /// application cancelled the connection.
    static func linkLost(_ error: (any Error)?) -> BluetoothError {
        if let error = error as? BluetoothError { return error }
        if let error { return BluetoothError(.peripheralDisconnected, "\(error)") }
        return BluetoothError(.operationCancelled, "the connection was cancelled")
    }
}
