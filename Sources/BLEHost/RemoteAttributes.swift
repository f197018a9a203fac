import BLECore
import BLETransport
import DequeModule
import Synchronization

/// A service found on a peer's GATT server.
public struct RemoteService: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    public var start: AttributeHandle
    public var end: AttributeHandle
    public init(uuid: BluetoothUUID, isPrimary: Bool, start: AttributeHandle, end: AttributeHandle) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.start = start
        self.end = end
    }
}

/// A characteristic found on a peer's GATT server; `end` is the last handle that can hold its descriptors.
public struct RemoteCharacteristic: Sendable, Hashable {
    public var uuid: BluetoothUUID
    /// The properties byte of the declaration (Core Spec 5.4, Vol 3, Part G, 3.3.1.1).
    public var properties: UInt8
    public var declaration: AttributeHandle
    public var value: AttributeHandle
    public var end: AttributeHandle
    public init(uuid: BluetoothUUID, properties: UInt8, declaration: AttributeHandle, value: AttributeHandle, end: AttributeHandle) {
        self.uuid = uuid
        self.properties = properties
        self.declaration = declaration
        self.value = value
        self.end = end
    }
}

/// A descriptor found on a peer's GATT server.
public struct RemoteDescriptor: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var handle: AttributeHandle
    public init(uuid: BluetoothUUID, handle: AttributeHandle) {
        self.uuid = uuid
        self.handle = handle
    }
}
