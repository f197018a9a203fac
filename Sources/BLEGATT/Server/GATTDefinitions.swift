import BLECore

/// A service to place in a ``GATTDatabase``, as CoreBluetooth's `CBMutableService`.
public struct GATTServiceDefinition: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    /// Services this one includes, by type: each must already be in the database when this one is added (the
    /// first service of that type is included).
    public var includedServices: [BluetoothUUID]
    public var characteristics: [GATTCharacteristicDefinition]

    public init(
        uuid: BluetoothUUID, isPrimary: Bool = true, includedServices: [BluetoothUUID] = [],
        characteristics: [GATTCharacteristicDefinition] = []
    ) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.includedServices = includedServices
        self.characteristics = characteristics
    }
}

/// A characteristic to place in a ``GATTDatabase``, as CoreBluetooth's `CBMutableCharacteristic`.
///
/// A characteristic that notifies or indicates gets a Client Characteristic Configuration descriptor (0x2902)
/// after its value automatically, unless ``descriptors`` already has one. A client may always read it; writing it
/// (subscribing) needs an encrypted link when the value does to be read (`readEncryptionRequired`: a notification
/// carries the value, as iOS and other stacks protect it) or when ``subscribingRequiresEncryption`` says so
/// (CoreBluetooth's `notifyEncryptionRequired` and `indicateEncryptionRequired`).
public struct GATTCharacteristicDefinition: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var properties: GATTCharacteristicProperties
    public var permissions: GATTAttributePermissions
    /// Whether writing the Client Characteristic Configuration needs an encrypted link, whatever the value's
    /// permissions.
    public var subscribingRequiresEncryption: Bool
    /// A fixed value (served by the server and overwritten by permitted writes), or `nil` for a dynamic value
    /// the app supplies on each read and receives on each write. At most 512 octets.
    public var value: [UInt8]?
    public var descriptors: [GATTDescriptorDefinition]

    public init(
        uuid: BluetoothUUID, properties: GATTCharacteristicProperties, permissions: GATTAttributePermissions,
        value: [UInt8]? = nil, descriptors: [GATTDescriptorDefinition] = [], subscribingRequiresEncryption: Bool = false
    ) {
        self.uuid = uuid
        self.properties = properties
        self.permissions = permissions
        self.subscribingRequiresEncryption = subscribingRequiresEncryption
        self.value = value
        self.descriptors = descriptors
    }
}

/// A descriptor to place after a characteristic's value, as CoreBluetooth's `CBMutableDescriptor`.
public struct GATTDescriptorDefinition: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var permissions: GATTAttributePermissions
    /// A fixed value, or `nil` for a dynamic one the app answers.
    public var value: [UInt8]?

    public init(uuid: BluetoothUUID, permissions: GATTAttributePermissions = [.readable], value: [UInt8]?) {
        self.uuid = uuid
        self.permissions = permissions
        self.value = value
    }
}
