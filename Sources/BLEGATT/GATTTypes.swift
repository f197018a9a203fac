import BLEATT
import BLECore

/// A service as discovered (or as placed in the local database): its type and the handles it spans, from its
/// declaration to its last attribute.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.1 (Service definition).
public struct GATTService: Sendable, Hashable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    /// Primary or secondary. Services found through an include declaration are reported as secondary
    /// (`false`): the include does not say which they are.
    public var isPrimary: Bool
    /// Service declaration handle ... end group handle.
    public var handleRange: ClosedRange<AttributeHandle>

    public init(uuid: BluetoothUUID, isPrimary: Bool, handleRange: ClosedRange<AttributeHandle>) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.handleRange = handleRange
    }

    public var description: String { "service \(uuid) \(handleRange.lowerBound)...\(handleRange.upperBound)" }
}

/// A characteristic as discovered: its declaration, value handle and the last handle that belongs to it.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.3 (Characteristic definition).
public struct GATTCharacteristic: Sendable, Hashable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    public var properties: GATTCharacteristicProperties
    public var declarationHandle: AttributeHandle
    public var valueHandle: AttributeHandle
    /// The last handle of this characteristic's definition (its last descriptor, or its value).
    public var endHandle: AttributeHandle

    public init(
        uuid: BluetoothUUID, properties: GATTCharacteristicProperties, declarationHandle: AttributeHandle,
        valueHandle: AttributeHandle, endHandle: AttributeHandle
    ) {
        self.uuid = uuid
        self.properties = properties
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
        self.endHandle = endHandle
    }

    public var description: String { "characteristic \(uuid) value \(valueHandle) \(properties)" }
}

/// A characteristic descriptor as discovered.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.3.3 (Characteristic descriptor declarations).
public struct GATTDescriptor: Sendable, Hashable, CustomStringConvertible {
    public var uuid: BluetoothUUID
    public var handle: AttributeHandle
    public init(uuid: BluetoothUUID, handle: AttributeHandle) {
        self.uuid = uuid
        self.handle = handle
    }
    public var description: String { "descriptor \(uuid) at \(handle)" }
}

/// The Characteristic Properties bit field of a characteristic declaration.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.3.1.1 (Characteristic Properties).
public struct GATTCharacteristicProperties: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let broadcast = Self(rawValue: 0x01)
    public static let read = Self(rawValue: 0x02)
    public static let writeWithoutResponse = Self(rawValue: 0x04)
    public static let write = Self(rawValue: 0x08)
    public static let notify = Self(rawValue: 0x10)
    public static let indicate = Self(rawValue: 0x20)
    public static let authenticatedSignedWrites = Self(rawValue: 0x40)
    public static let extendedProperties = Self(rawValue: 0x80)

    public var description: String {
        let names: [(Self, String)] = [
            (.broadcast, "broadcast"), (.read, "read"),
            (.writeWithoutResponse, "writeWithoutResponse"), (.write, "write"),
            (.notify, "notify"), (.indicate, "indicate"),
            (.authenticatedSignedWrites, "authenticatedSignedWrites"),
            (.extendedProperties, "extendedProperties"),
        ]
        return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
    }
}

/// Who may read and write an attribute, as CoreBluetooth's `CBAttributePermissions`. An encryption-required
/// permission implies the plain one.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.2.5 (Attribute permissions).
public struct GATTAttributePermissions: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let readable = Self(rawValue: 0x01)
    public static let writeable = Self(rawValue: 0x02)
    public static let readEncryptionRequired = Self(rawValue: 0x04)
    public static let writeEncryptionRequired = Self(rawValue: 0x08)

    public var allowsRead: Bool { !isDisjoint(with: [.readable, .readEncryptionRequired]) }
    public var allowsWrite: Bool { !isDisjoint(with: [.writeable, .writeEncryptionRequired]) }
}

/// The value of a Client Characteristic Configuration descriptor: which server-initiated updates one client
/// wants.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.3.3.3 (Client Characteristic Configuration).
public struct GATTClientConfiguration: OptionSet, Sendable, Hashable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    /// Bit 0: notifications enabled.
    public static let notification = Self(rawValue: 0x0001)
    /// Bit 1: indications enabled.
    public static let indication = Self(rawValue: 0x0002)

    /// The descriptor's two octets, little-endian.
    public var bytes: [UInt8] { [UInt8(rawValue & 0xFF), UInt8(rawValue >> 8)] }

    /// From the descriptor's two octets; `nil` for any other length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 2 else { return nil }
        self.init(rawValue: UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
    }
}
