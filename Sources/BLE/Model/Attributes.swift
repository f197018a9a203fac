import BLECore
import BLEGATT
import Foundation
import Synchronization

/// The common base of services, characteristics and descriptors, as `CBAttribute`.
open class Attribute: @unchecked Sendable {
    // @unchecked: `uuid` is immutable; subclasses guard their mutable state with `Mutex`es.
    /// The attribute's type.
    public let uuid: BluetoothUUID

    init(uuid: BluetoothUUID) { self.uuid = uuid }
}

/// A service of a remote peripheral (`CBService`), or the base of `MutableService`.
///
/// `includedServices` and `characteristics` are `nil` until discovered, as in CoreBluetooth.
public class Service: Attribute, @unchecked Sendable, CustomStringConvertible {
    // @unchecked: every mutable field lives in `state`, a Mutex.
    struct State {
        var isPrimary: Bool
        var includedServices: [Service]?
        var characteristics: [Characteristic]?
        weak var peripheral: Peripheral?
        /// Where the service lives on the remote server (client side).
        var remote: GATTService?
    }
    let state: Mutex<State>

    init(uuid: BluetoothUUID, isPrimary: Bool, peripheral: Peripheral?) {
        state = Mutex(State(isPrimary: isPrimary, peripheral: peripheral))
        super.init(uuid: uuid)
    }

    /// The peripheral this service belongs to (nil for a local `MutableService`).
    public var peripheral: Peripheral? { state.withLock { $0.peripheral } }
    /// Whether this is a primary service.
    public var isPrimary: Bool { state.withLock { $0.isPrimary } }
    /// Included services, once discovered with `discoverIncludedServices(_:for:)`.
    public var includedServices: [Service]? { state.withLock { $0.includedServices } }
    /// Characteristics, once discovered with `discoverCharacteristics(_:for:)`.
    public var characteristics: [Characteristic]? { state.withLock { $0.characteristics } }

    /// The attribute handles the service spans on the remote server (nil for a local service). Not part of
    /// CoreBluetooth; tools such as `ble explore` show it.
    public var handleRange: ClosedRange<UInt16>? {
        state.withLock { $0.remote.map { $0.handleRange.lowerBound.rawValue...$0.handleRange.upperBound.rawValue } }
    }

    public var description: String {
        "<Service \(uuid.uuidString)\(uuid.name.map { " (\($0))" } ?? "") primary=\(isPrimary)>"
    }
}

/// A characteristic of a remote peripheral's service (`CBCharacteristic`), or the base of
/// `MutableCharacteristic`.
public class Characteristic: Attribute, @unchecked Sendable, CustomStringConvertible {
    // @unchecked: every mutable field lives in `state`, a Mutex.
    struct State {
        weak var service: Service?
        var properties: CharacteristicProperties
        var value: Data?
        var descriptors: [Descriptor]?
        var isNotifying = false
        /// Subscribe to indications even when the characteristic also notifies (set by
        /// `setNotifyValue(_:for:preferring:timeout:)`).
        var prefersIndications = false
        /// Where the characteristic lives on the remote server (client side).
        var remote: GATTCharacteristic?
    }
    let state: Mutex<State>

    init(uuid: BluetoothUUID, properties: CharacteristicProperties, value: Data?, service: Service?) {
        state = Mutex(State(service: service, properties: properties, value: value))
        super.init(uuid: uuid)
    }

    /// The service this characteristic belongs to.
    public var service: Service? { state.withLock { $0.service } }
    /// What the characteristic allows.
    public var properties: CharacteristicProperties { state.withLock { $0.properties } }
    /// The latest value read or notified; set just before `peripheral(_:didUpdateValueFor:error:)` is called.
    public var value: Data? { state.withLock { $0.value } }
    /// Descriptors, once discovered with `discoverDescriptors(for:)`.
    public var descriptors: [Descriptor]? { state.withLock { $0.descriptors } }
    /// Whether notifications or indications are enabled for this characteristic.
    public var isNotifying: Bool { state.withLock { $0.isNotifying } }

    /// The handle of the characteristic declaration on the remote server (nil for a local characteristic).
    /// Not part of CoreBluetooth; tools show it.
    public var handle: UInt16? { state.withLock { $0.remote?.declarationHandle.rawValue } }

    /// The handle of the characteristic value on the remote server (nil for a local characteristic).
    public var valueHandle: UInt16? { state.withLock { $0.remote?.valueHandle.rawValue } }

    public var description: String {
        "<Characteristic \(uuid.uuidString)\(uuid.name.map { " (\($0))" } ?? "") properties=\(properties)>"
    }
}

/// A descriptor of a remote characteristic (`CBDescriptor`), or the base of `MutableDescriptor`.
///
/// CoreBluetooth types a descriptor's value as `Any`; here it is the raw bytes, as every other value in this
/// API. The helpers `stringValue` and `uint16Value` decode the common descriptor formats.
public class Descriptor: Attribute, @unchecked Sendable, CustomStringConvertible {
    // @unchecked: every mutable field lives in `state`, a Mutex.
    struct State {
        weak var characteristic: Characteristic?
        var value: Data?
        /// The descriptor's handle on the remote server (client side).
        var remote: GATTDescriptor?
    }
    let state: Mutex<State>

    init(uuid: BluetoothUUID, value: Data?, characteristic: Characteristic?) {
        state = Mutex(State(characteristic: characteristic, value: value))
        super.init(uuid: uuid)
    }

    /// The characteristic this descriptor belongs to.
    public var characteristic: Characteristic? { state.withLock { $0.characteristic } }
    /// The latest value read, if any.
    public var value: Data? { state.withLock { $0.value } }
    /// The descriptor's handle on the remote server (nil for a local descriptor). Not part of CoreBluetooth.
    public var handle: UInt16? { state.withLock { $0.remote?.handle.rawValue } }

    /// The value as UTF-8 text (Characteristic User Description).
    public var stringValue: String? { value.flatMap { String(data: $0, encoding: .utf8) } }
    /// The value as a little-endian 16-bit number (Client Characteristic Configuration, Extended Properties).
    public var uint16Value: UInt16? {
        guard let v = value, v.count >= 2 else { return nil }
        return UInt16(v[v.startIndex]) | UInt16(v[v.startIndex + 1]) << 8
    }

    public var description: String {
        "<Descriptor \(uuid.uuidString)\(uuid.name.map { " (\($0))" } ?? "")>"
    }
}
