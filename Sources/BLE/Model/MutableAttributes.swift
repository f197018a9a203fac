import BLECore
import Foundation
import Synchronization

/// A service this device publishes through a `PeripheralManager` (`CBMutableService`).
public final class MutableService: Service, @unchecked Sendable {
    // @unchecked: mutable fields live in the inherited Mutex `state`.

    /// A service of type `type`; set `characteristics` (and `includedServices`) before adding it.
    public init(type: BluetoothUUID, primary: Bool) {
        super.init(uuid: type, isPrimary: primary, peripheral: nil)
    }

    public override var characteristics: [Characteristic]? {
        get { state.withLock { $0.characteristics } }
        set { state.withLock { $0.characteristics = newValue } }
    }

    public override var includedServices: [Service]? {
        get { state.withLock { $0.includedServices } }
        set { state.withLock { $0.includedServices = newValue } }
    }
}

/// A characteristic this device publishes (`CBMutableCharacteristic`).
///
/// With a non-nil `value` the characteristic is static: the stack answers reads itself, and the properties
/// may only be `.read` (and `.broadcast`, `.extendedProperties`), as CoreBluetooth requires. With a nil value
/// every read reaches `peripheralManager(_:didReceiveRead:)` and every write `didReceiveWrite`.
public final class MutableCharacteristic: Characteristic, @unchecked Sendable {
    // @unchecked: mutable fields live in the inherited Mutex `state` and in `mutableState`.
    struct MutableState {
        var permissions: AttributePermissions
        var subscribedCentrals: [Central] = []
    }
    let mutableState: Mutex<MutableState>

    public init(
        type: BluetoothUUID, properties: CharacteristicProperties, value: Data?, permissions: AttributePermissions
    ) {
        mutableState = Mutex(MutableState(permissions: permissions))
        super.init(uuid: type, properties: properties, value: value, service: nil)
    }

    /// Who may read and write the value.
    public var permissions: AttributePermissions {
        get { mutableState.withLock { $0.permissions } }
        set { mutableState.withLock { $0.permissions = newValue } }
    }

    /// The centrals currently subscribed to notifications or indications.
    public var subscribedCentrals: [Central]? { mutableState.withLock { $0.subscribedCentrals } }

    public override var value: Data? {
        get { state.withLock { $0.value } }
        set { state.withLock { $0.value = newValue } }
    }

    public override var descriptors: [Descriptor]? {
        get { state.withLock { $0.descriptors } }
        set { state.withLock { $0.descriptors = newValue } }
    }

    public override var properties: CharacteristicProperties {
        get { state.withLock { $0.properties } }
        set { state.withLock { $0.properties = newValue } }
    }
}

/// A descriptor this device publishes (`CBMutableDescriptor`). The Client Characteristic Configuration
/// descriptor is managed by the stack and may not be added by hand (adding the service fails).
public final class MutableDescriptor: Descriptor, @unchecked Sendable {
    // @unchecked: mutable fields live in the inherited Mutex `state`.

    /// A descriptor with a fixed value (raw bytes).
    public init(type: BluetoothUUID, value: Data?) {
        super.init(uuid: type, value: value, characteristic: nil)
    }

    /// A Characteristic User Description (0x2901) or any text-valued descriptor.
    public convenience init(type: BluetoothUUID, string: String) {
        self.init(type: type, value: Data(string.utf8))
    }
}
