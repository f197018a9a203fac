import BLESystem

/// What a characteristic allows, as `CBCharacteristicProperties`. The low byte is the properties field of the
/// characteristic declaration (Core Spec 5.4, Vol 3, Part G, 3.3.1.1).
public struct CharacteristicProperties: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let broadcast = CharacteristicProperties(rawValue: 0x01)
    public static let read = CharacteristicProperties(rawValue: 0x02)
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
    public static let write = CharacteristicProperties(rawValue: 0x08)
    public static let notify = CharacteristicProperties(rawValue: 0x10)
    public static let indicate = CharacteristicProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
    public static let extendedProperties = CharacteristicProperties(rawValue: 0x80)
    /// Local characteristics only: notifications require an encrypted link.
    public static let notifyEncryptionRequired = CharacteristicProperties(rawValue: 0x100)
    /// Local characteristics only: indications require an encrypted link.
    public static let indicateEncryptionRequired = CharacteristicProperties(rawValue: 0x200)

    /// The names `ble explore --json` prints, in declaration order.
    public var names: [String] {
        let table: [(CharacteristicProperties, String)] = [
            (.broadcast, "broadcast"), (.read, "read"), (.writeWithoutResponse, "writeWithoutResponse"),
            (.write, "write"), (.notify, "notify"), (.indicate, "indicate"),
            (.authenticatedSignedWrites, "authenticatedSignedWrites"), (.extendedProperties, "extendedProperties"),
            (.notifyEncryptionRequired, "notifyEncryptionRequired"),
            (.indicateEncryptionRequired, "indicateEncryptionRequired"),
        ]
        return table.filter { contains($0.0) }.map(\.1)
    }

    public var description: String { "[" + names.joined(separator: ", ") + "]" }
}

/// Who may read and write a local attribute's value, as `CBAttributePermissions`.
public struct AttributePermissions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let readable = AttributePermissions(rawValue: 0x01)
    public static let writeable = AttributePermissions(rawValue: 0x02)
    public static let readEncryptionRequired = AttributePermissions(rawValue: 0x04)
    public static let writeEncryptionRequired = AttributePermissions(rawValue: 0x08)
}

/// How a characteristic value is written, as `CBCharacteristicWriteType`.
public enum CharacteristicWriteType: Int, Sendable, Hashable {
    /// ATT Write Request (or the long-write procedure beyond MTU-3); `didWriteValueFor` reports the outcome.
    case withResponse = 0
    /// ATT Write Command: no response, no callback; limited to `maximumWriteValueLength(for: .withoutResponse)`.
    case withoutResponse = 1
}

/// Shorthand used in the API contract.
public typealias WriteType = CharacteristicWriteType

/// The state of a central or peripheral manager, as `CBManagerState`.
public enum ManagerState: Int, Sendable, Hashable, CustomStringConvertible {
    case unknown = 0
    case resetting
    case unsupported
    case unauthorized
    case poweredOff
    case poweredOn

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .resetting: "resetting"
        case .unsupported: "unsupported"
        case .unauthorized: "unauthorized"
        case .poweredOff: "poweredOff"
        case .poweredOn: "poweredOn"
        }
    }
}

/// The connection state of a remote peripheral, as `CBPeripheralState`.
public enum PeripheralState: Int, Sendable, Hashable, CustomStringConvertible {
    case disconnected = 0
    case connecting
    case connected
    case disconnecting

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .connecting: "connecting"
        case .connected: "connected"
        case .disconnecting: "disconnecting"
        }
    }
}

extension ManagerState {
    /// The state a manager shows for its system's power state.
    init(_ power: SystemPowerState) {
        switch power {
        case .unknown: self = .unknown
        case .poweredOn: self = .poweredOn
        case .unsupported: self = .unsupported
        case .poweredOff: self = .poweredOff
        case .resetting: self = .resetting
        case .unauthorized: self = .unauthorized
        }
    }
}
