import BLE
import Foundation

/// A service of a profile: what `ble serve` publishes, from a JSON profile file or a built-in profile.
public struct ProfileService: Sendable {
    public var uuid: BluetoothUUID
    public var primary: Bool
    /// Services this one includes (by UUID; they must appear earlier in the list).
    public var includes: [BluetoothUUID]
    public var characteristics: [ProfileCharacteristic]

    public init(
        uuid: BluetoothUUID, primary: Bool = true, includes: [BluetoothUUID] = [],
        characteristics: [ProfileCharacteristic]
    ) {
        self.uuid = uuid
        self.primary = primary
        self.includes = includes
        self.characteristics = characteristics
    }
}

/// A characteristic of a profile's service.
public struct ProfileCharacteristic: Sendable {
    public var uuid: BluetoothUUID
    public var properties: CharacteristicProperties
    public var permissions: AttributePermissions
    /// A fixed value the stack answers itself (read-only characteristics only), or nil: then every read and
    /// write reaches the device's behaviour, starting from `initial`.
    public var value: Data?
    public var initial: Data?
    /// Descriptors with fixed values (the stack adds the Client Characteristic Configuration itself).
    public var descriptors: [(uuid: BluetoothUUID, value: Data)]

    public init(
        uuid: BluetoothUUID, properties: CharacteristicProperties, permissions: AttributePermissions,
        value: Data? = nil, initial: Data? = nil, descriptors: [(uuid: BluetoothUUID, value: Data)] = []
    ) {
        self.uuid = uuid
        self.properties = properties
        self.permissions = permissions
        self.value = value
        self.initial = initial
        self.descriptors = descriptors
    }

    /// A read-only characteristic with a fixed value, and a User Description when `description` is given.
    public static func fixed(_ uuid: BluetoothUUID, _ value: Data, description: String? = nil)
        -> ProfileCharacteristic
    {
        ProfileCharacteristic(
            uuid: uuid, properties: [.read], permissions: [.readable], value: value,
            descriptors: description.map { [(BluetoothUUID.characteristicUserDescription, Data($0.utf8))] } ?? [])
    }

    /// A read-only characteristic whose fixed value is `text` in UTF-8.
    public static func text(_ uuid: BluetoothUUID, _ text: String) -> ProfileCharacteristic {
        fixed(uuid, Data(text.utf8))
    }
}
