import BLECore
import NIOCore

/// What a client discovered of a peer's database, as a GATT cache keeps it between connections: the complete
/// list of primary services when it was discovered, and per service its included services and characteristics,
/// per characteristic its descriptors (each complete, as discovered). Parts never discovered are absent.
///
/// ``encoded()`` and ``init(decoding:)`` give it a compact binary form for a store. The decoder refuses anything
/// it did not write (another version, a length that runs past the end, bytes left over, a range that ends before
/// it starts), so a damaged record is dropped, never half-read.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 2.5.2 (Attribute caching).
public struct GATTCacheRecord: Sendable, Hashable {
    /// Every primary service, in handle order; nil when they were never discovered together.
    public var services: [GATTService]?
    /// By the including service's first handle.
    public var includedServices: [AttributeHandle: [GATTService]]
    /// By the service's first handle.
    public var characteristics: [AttributeHandle: [GATTCharacteristic]]
    /// By the characteristic's value handle.
    public var descriptors: [AttributeHandle: [GATTDescriptor]]

    public init(
        services: [GATTService]? = nil, includedServices: [AttributeHandle: [GATTService]] = [:],
        characteristics: [AttributeHandle: [GATTCharacteristic]] = [:],
        descriptors: [AttributeHandle: [GATTDescriptor]] = [:]
    ) {
        self.services = services
        self.includedServices = includedServices
        self.characteristics = characteristics
        self.descriptors = descriptors
    }

    /// Nothing discovered.
    public var isEmpty: Bool {
        services == nil && includedServices.isEmpty && characteristics.isEmpty && descriptors.isEmpty
    }

    /// The version of the encoding this type writes (its first byte).
    public static let encodingVersion: UInt8 = 1

    /// The record in its binary form: the version, then each part, little-endian, keys in handle order.
    public func encoded() -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeLE(Self.encodingVersion)
        if let services {
            buffer.writeLE(UInt8(1))
            Self.write(services, to: &buffer)
        } else {
            buffer.writeLE(UInt8(0))
        }
        Self.write(includedServices, to: &buffer) { Self.write($1, to: &$0) }
        Self.write(characteristics, to: &buffer) { buffer, list in
            buffer.writeLE(UInt16(clamping: list.count))
            for c in list.prefix(Int(UInt16.max)) {
                Self.write(c.uuid, to: &buffer)
                buffer.writeLE(c.properties.rawValue)
                buffer.writeLE(c.declarationHandle.rawValue)
                buffer.writeLE(c.valueHandle.rawValue)
                buffer.writeLE(c.endHandle.rawValue)
            }
        }
        Self.write(descriptors, to: &buffer) { buffer, list in
            buffer.writeLE(UInt16(clamping: list.count))
            for d in list.prefix(Int(UInt16.max)) {
                Self.write(d.uuid, to: &buffer)
                buffer.writeLE(d.handle.rawValue)
            }
        }
        return buffer.readRemainingBytes()
    }

    /// Reads a record that ``encoded()`` wrote; nil for anything else.
    public init?(decoding bytes: [UInt8]) {
        var buffer = ByteBuffer(bytes: bytes)
        guard buffer.readLE(UInt8.self) == Self.encodingVersion, let flag = buffer.readLE(UInt8.self), flag <= 1
        else { return nil }
        var services: [GATTService]?
        if flag == 1 {
            guard let list = Self.readServices(&buffer) else { return nil }
            services = list
        }
        guard let included = Self.readMap(&buffer, Self.readServices),
            let characteristics = Self.readMap(&buffer, Self.readCharacteristics),
            let descriptors = Self.readMap(&buffer, Self.readDescriptors),
            buffer.readableBytes == 0
        else { return nil }
        self.init(
            services: services, includedServices: included, characteristics: characteristics,
            descriptors: descriptors)
    }

    // MARK: Private

    private static func write(_ uuid: BluetoothUUID, to buffer: inout ByteBuffer) {
        let bytes = uuid.attWireBytes
        buffer.writeLE(UInt8(bytes.count))
        buffer.writeBytes(bytes)
    }

    private static func write(_ services: [GATTService], to buffer: inout ByteBuffer) {
        buffer.writeLE(UInt16(clamping: services.count))
        for service in services.prefix(Int(UInt16.max)) {
            write(service.uuid, to: &buffer)
            buffer.writeLE(UInt8(service.isPrimary ? 1 : 0))
            buffer.writeLE(service.handleRange.lowerBound.rawValue)
            buffer.writeLE(service.handleRange.upperBound.rawValue)
        }
    }

    private static func write<T>(
        _ map: [AttributeHandle: [T]], to buffer: inout ByteBuffer,
        _ writeList: (inout ByteBuffer, [T]) -> Void
    ) {
        let keys = map.keys.sorted().prefix(Int(UInt16.max))
        buffer.writeLE(UInt16(keys.count))
        for key in keys {
            buffer.writeLE(key.rawValue)
            writeList(&buffer, map[key] ?? [])
        }
    }

    private static func readUUID(_ buffer: inout ByteBuffer) -> BluetoothUUID? {
        guard let length = buffer.readLE(UInt8.self) else { return nil }
        return buffer.readUUID(length: Int(length))
    }

    private static func readHandle(_ buffer: inout ByteBuffer) -> AttributeHandle? {
        buffer.readLE(UInt16.self).map(AttributeHandle.init(rawValue:))
    }

    private static func readServices(_ buffer: inout ByteBuffer) -> [GATTService]? {
        guard let count = buffer.readLE(UInt16.self) else { return nil }
        var list: [GATTService] = []
        for _ in 0..<count {
            guard let uuid = readUUID(&buffer), let primary = buffer.readLE(UInt8.self), primary <= 1,
                let start = readHandle(&buffer), let end = readHandle(&buffer), start <= end
            else { return nil }
            list.append(GATTService(uuid: uuid, isPrimary: primary == 1, handleRange: start...end))
        }
        return list
    }

    private static func readCharacteristics(_ buffer: inout ByteBuffer) -> [GATTCharacteristic]? {
        guard let count = buffer.readLE(UInt16.self) else { return nil }
        var list: [GATTCharacteristic] = []
        for _ in 0..<count {
            guard let uuid = readUUID(&buffer), let properties = buffer.readLE(UInt8.self),
                let declaration = readHandle(&buffer), let value = readHandle(&buffer), let end = readHandle(&buffer),
                declaration < value, value <= end
            else { return nil }
            list.append(
                GATTCharacteristic(
                    uuid: uuid, properties: GATTCharacteristicProperties(rawValue: properties),
                    declarationHandle: declaration, valueHandle: value, endHandle: end))
        }
        return list
    }

    private static func readDescriptors(_ buffer: inout ByteBuffer) -> [GATTDescriptor]? {
        guard let count = buffer.readLE(UInt16.self) else { return nil }
        var list: [GATTDescriptor] = []
        for _ in 0..<count {
            guard let uuid = readUUID(&buffer), let handle = readHandle(&buffer) else { return nil }
            list.append(GATTDescriptor(uuid: uuid, handle: handle))
        }
        return list
    }

    private static func readMap<T>(
        _ buffer: inout ByteBuffer, _ readList: (inout ByteBuffer) -> [T]?
    ) -> [AttributeHandle: [T]]? {
        guard let count = buffer.readLE(UInt16.self) else { return nil }
        var map: [AttributeHandle: [T]] = [:]
        for _ in 0..<count {
            guard let key = readHandle(&buffer), map[key] == nil, let list = readList(&buffer) else { return nil }
            map[key] = list
        }
        return map
    }
}
