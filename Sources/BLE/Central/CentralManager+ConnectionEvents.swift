import BLECore
import Foundation
import Synchronization

/// What happened to a peer's connection to the system (`CBConnectionEvent`).
public enum ConnectionEvent: Int, Sendable, Hashable, CustomStringConvertible {
    case peerDisconnected = 0
    case peerConnected = 1

    public var description: String { self == .peerConnected ? "peerConnected" : "peerDisconnected" }
}

/// A key of `registerForConnectionEvents(options:)`'s dictionary (`CBConnectionEventMatchingOption`).
public struct ConnectionEventMatchingOption: RawRepresentable, Hashable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `[BluetoothUUID]`: peers that advertised, or have, any of these services.
    public static let serviceUUIDs = ConnectionEventMatchingOption(
        rawValue: "kCBConnectionEventMatchingOptionServiceUUIDs")
    /// `[UUID]`: peers with these identifiers.
    public static let peripheralUUIDs = ConnectionEventMatchingOption(
        rawValue: "kCBConnectionEventMatchingOptionPeripheralUUIDs")
}

/// Which connections `centralManager(_:connectionEventDidOccur:for:)` reports: a peer matches when either
/// list names it; with neither, every peer does.
public struct ConnectionEventMatchingOptions: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    public var serviceUUIDs: [BluetoothUUID]?
    public var peripheralUUIDs: [UUID]?

    public init(serviceUUIDs: [BluetoothUUID]? = nil, peripheralUUIDs: [UUID]? = nil) {
        self.serviceUUIDs = serviceUUIDs
        self.peripheralUUIDs = peripheralUUIDs
    }

    public init() { self.init(serviceUUIDs: nil) }

    /// As CoreBluetooth's `[.serviceUUIDs: [uuid]]`.
    public init(dictionaryLiteral elements: (ConnectionEventMatchingOption, Any)...) {
        var reader = DictionaryReader("connection event options", elements.map { ($0.rawValue, $1) })
        self.init(
            serviceUUIDs: reader.take(ConnectionEventMatchingOption.serviceUUIDs.rawValue, as: [BluetoothUUID].self),
            peripheralUUIDs: reader.take(ConnectionEventMatchingOption.peripheralUUIDs.rawValue, as: [UUID].self))
        reader.finish()
    }

    func matches(identifier: UUID, services: [BluetoothUUID]) -> Bool {
        if serviceUUIDs == nil && peripheralUUIDs == nil { return true }
        if let ids = peripheralUUIDs, ids.contains(identifier) { return true }
        if let wanted = serviceUUIDs, services.contains(where: wanted.contains) { return true }
        return false
    }
}

/// What the host's features allow (`CBCentralManager.Feature`).
public struct CentralManagerFeature: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// Extended advertising scanning and connecting (LE Extended Advertising, Bluetooth 5).
    public static let extendedScanAndConnect = CentralManagerFeature(rawValue: 1 << 0)
}

extension CentralManager {
    public typealias Feature = CentralManagerFeature

    /// Whether this library and the process default system's controller support `features`
    /// (`CBCentralManager.supports(_:)`). Extended scanning and connecting is not implemented by this host
    /// (it scans and connects with the legacy commands), so it is never reported, whatever the controller.
    public static func supports(_ features: Feature) -> Bool {
        features.subtracting(supportedFeatures).isEmpty
    }

    /// The features this host implements.
    static let supportedFeatures: Feature = []

    /// Reports, through `centralManager(_:connectionEventDidOccur:for:)`, every peer matching `options` that
    /// connects to or disconnects from this system as a peripheral, whichever manager made the link (iOS 13's
    /// `registerForConnectionEvents(options:)`), from the call on: the end of a link that came up before it is
    /// reported too. A later call replaces the options; nil matches every peer.
    /// Services match what the peer advertised while a manager of this system scanned, or what was discovered on
    /// it.
    public func registerForConnectionEvents(options: ConnectionEventMatchingOptions? = nil) {
        locked.withLock { $0.connectionEvents = options ?? ConnectionEventMatchingOptions() }
        system.core.watchConnections(session)
    }

    /// A central-role link to `peer` started or ended (the system tells a manager registered for connection
    /// events of every one, whichever manager made it).
    func connectionEvent(_ event: ConnectionEvent, handle: ConnectionHandle, peer address: BluetoothAddress) {
        let found = locked.withLock { s -> (ConnectionEventMatchingOptions?, [BluetoothUUID]) in
            (s.connectionEvents, s.advertisedServices[address] ?? [])
        }
        guard case (let options?, let advertised) = found, currentState != .unauthorized else { return }
        let peripheral = peripheral(for: address)
        let services = advertised + (peripheral.services ?? []).map(\.uuid)
        guard options.matches(identifier: peripheral.identifier, services: services) else { return }
        deliver { manager in
            manager.tell(.connectionEvent(event, peripheral))
        }
    }
}
