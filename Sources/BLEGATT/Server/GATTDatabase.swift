import BLEATT
import BLECore

/// One attribute of the local database.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.2 (Basic concepts: type, handle, value, permissions).
public struct GATTAttribute: Sendable, Hashable {
    /// What GATT made this attribute for.
    public enum Role: Sendable, Hashable {
        case primaryService
        case secondaryService
        case include
        case characteristicDeclaration
        case characteristicValue(GATTCharacteristicProperties)
        /// A descriptor of the characteristic whose value has this handle.
        case descriptor(characteristicValue: AttributeHandle)
        /// A Client Characteristic Configuration descriptor: its value lives per client in the server.
        case clientConfiguration(characteristicValue: AttributeHandle, properties: GATTCharacteristicProperties)
    }

    public var handle: AttributeHandle
    public var type: BluetoothUUID
    /// The stored value, or `nil` when the app supplies it (dynamic).
    public var value: [UInt8]?
    public var permissions: GATTAttributePermissions
    public var role: Role

    public init(
        handle: AttributeHandle, type: BluetoothUUID, value: [UInt8]?, permissions: GATTAttributePermissions,
        role: Role
    ) {
        self.handle = handle
        self.type = type
        self.value = value
        self.permissions = permissions
        self.role = role
    }

    /// Declarations (service, include, characteristic) are read-only for everybody.
    var isDeclaration: Bool {
        switch role {
        case .primaryService, .secondaryService, .include, .characteristicDeclaration: return true
        default: return false
        }
    }
}

/// Where a service definition landed: its range and the handles of its characteristics and descriptors, in
/// definition order.
public struct GATTServiceLayout: Sendable, Hashable {
    public struct Characteristic: Sendable, Hashable {
        public var characteristic: GATTCharacteristic
        /// The descriptors in definition order, then the automatic CCCD if one was added.
        public var descriptors: [GATTDescriptor]
        /// The Client Characteristic Configuration descriptor's handle, when there is one.
        public var clientConfigurationHandle: AttributeHandle?
    }
    public var service: GATTService
    public var characteristics: [Characteristic]
}

/// The local attribute database of a GATT server.
///
/// Built from service definitions: each service takes a contiguous run of handles in order (its declaration,
/// its include declarations, then per characteristic the declaration, the value and the descriptors). The
/// GAP service (0x1800: Device Name, Appearance) and the GATT service (0x1801: Service Changed with its CCCD,
/// Client Supported Features, Database Hash) come first, in handles 0x0001–0x000D. Services can be added and removed at any time; the handles of the others never move. A new
/// service goes after the highest handle, or into the first gap large enough when there is no room there.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3 (Service interoperability requirements), 7 (GATT service);
///   Vol 3, Part C, 12 (GAP service).
public struct GATTDatabase: Sendable {
    /// The longest attribute value ATT allows, in octets.
    public static let maximumValueLength = 512

    /// All attributes, in handle order.
    public private(set) var attributes: [GATTAttribute] = []
    /// All services, in handle order.
    public private(set) var services: [GATTService] = []

    /// The Device Name characteristic value's handle (GAP service).
    public private(set) var deviceNameHandle = AttributeHandle(0)
    /// The Appearance characteristic value's handle (GAP service).
    public private(set) var appearanceHandle = AttributeHandle(0)
    /// The Service Changed characteristic value's handle (GATT service).
    public private(set) var serviceChangedHandle = AttributeHandle(0)
    /// The Client Supported Features characteristic value's handle (GATT service): its value lives per client
    /// in the server (Core Spec 5.4, Vol 3, Part G, 7.2).
    public private(set) var clientSupportedFeaturesHandle = AttributeHandle(0)
    /// The Database Hash characteristic value's handle (GATT service): the server answers it with
    /// ``databaseHash``, computed when read (Vol 3, Part G, 7.3).
    public private(set) var databaseHashHandle = AttributeHandle(0)

    /// A database holding only the GAP and GATT services.
    /// With `databaseHash` false, the GATT service has no Database Hash (as a server older than Core 5.1, which
    /// clients cannot cache by hash); `databaseHashHandle` is then 0 and names no attribute.
    public init(deviceName: String = "", appearance: UInt16 = 0, databaseHash: Bool = true) {
        let gap = GATTServiceDefinition(
            uuid: .genericAccess,
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: .deviceName, properties: [.read], permissions: [.readable],
                    value: Self.deviceNameValue(deviceName)),
                GATTCharacteristicDefinition(
                    uuid: .appearance, properties: [.read], permissions: [.readable],
                    value: [UInt8(appearance & 0xFF), UInt8(appearance >> 8)]),
            ])
        let gatt = GATTServiceDefinition(
            uuid: .genericAttribute,
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: .serviceChanged, properties: [.indicate], permissions: [],
                    value: [0x00, 0x00, 0x00, 0x00]),
                // The stored values of these two stand in for what the server computes per client and per read.
                GATTCharacteristicDefinition(
                    uuid: .clientSupportedFeatures, properties: [.read, .write], permissions: [.readable, .writeable],
                    value: [0x00]),
            ]
                + (databaseHash
                    ? [
                        GATTCharacteristicDefinition(
                            uuid: .databaseHash, properties: [.read], permissions: [.readable],
                            value: [UInt8](repeating: 0, count: 16))
                    ] : []))
        // Neither definition can fail on an empty database: their handles are the first thirteen, and every value
        // is within 512 octets (the name is cut to 248 above).
        let gapLayout = try! add(gap)
        let gattLayout = try! add(gatt)
        deviceNameHandle = gapLayout.characteristics[0].characteristic.valueHandle
        appearanceHandle = gapLayout.characteristics[1].characteristic.valueHandle
        serviceChangedHandle = gattLayout.characteristics[0].characteristic.valueHandle
        clientSupportedFeaturesHandle = gattLayout.characteristics[1].characteristic.valueHandle
        if databaseHash { databaseHashHandle = gattLayout.characteristics[2].characteristic.valueHandle }
    }

    /// The GAP Device Name, UTF-8.
    public var deviceName: String {
        get { String(decoding: attribute(at: deviceNameHandle)?.value ?? [], as: UTF8.self) }
        set { setValue(Self.deviceNameValue(newValue), at: deviceNameHandle) }
    }

    /// A name as the Device Name characteristic holds it: UTF-8, at most 248 octets (Core Spec 5.4, Vol 3,
    /// Part C, 12.1), cut after the last whole character that fits.
    static func deviceNameValue(_ name: String) -> [UInt8] {
        var bytes: [UInt8] = []
        for character in name {
            let utf8 = Array(String(character).utf8)
            guard bytes.count + utf8.count <= 248 else { break }
            bytes += utf8
        }
        return bytes
    }

    /// The GAP Appearance (Assigned Numbers 2.6).
    public var appearance: UInt16 {
        get {
            let bytes = attribute(at: appearanceHandle)?.value ?? []
            guard bytes.count >= 2 else { return 0 }
            return UInt16(bytes[0]) | UInt16(bytes[1]) << 8
        }
        set { setValue([UInt8(newValue & 0xFF), UInt8(newValue >> 8)], at: appearanceHandle) }
    }

    /// The attribute with this handle.
    public func attribute(at handle: AttributeHandle) -> GATTAttribute? {
        guard let index = index(of: handle) else { return nil }
        return attributes[index]
    }

    /// The attributes whose handles lie in `range`, in order.
    public func attributes(in range: ClosedRange<AttributeHandle>) -> ArraySlice<GATTAttribute> {
        let start = firstIndex(atOrAfter: range.lowerBound)
        var end = start
        while end < attributes.count && attributes[end].handle <= range.upperBound { end += 1 }
        return attributes[start..<end]
    }

    /// The service whose range holds `handle`.
    public func service(containing handle: AttributeHandle) -> GATTService? {
        services.first { $0.handleRange.contains(handle) }
    }

    /// Replaces a stored value (a dynamic attribute stays dynamic unless `value` is set here). Returns `false`
    /// when there is no such attribute or it is a declaration.
    @discardableResult
    public mutating func setValue(_ value: [UInt8], at handle: AttributeHandle) -> Bool {
        guard let index = index(of: handle), !attributes[index].isDeclaration else { return false }
        attributes[index].value = Array(value.prefix(Self.maximumValueLength))
        return true
    }

    /// Adds a service, returning where it landed. Throws ``GATTError/Code/invalidDefinition`` when an
    /// included service is not in the database, a value is longer than 512 octets, or no run of handles is
    /// free.
    @discardableResult
    public mutating func add(_ definition: GATTServiceDefinition) throws(GATTError) -> GATTServiceLayout {
        var includes: [GATTService] = []
        for uuid in definition.includedServices {
            guard let included = services.first(where: { $0.uuid == uuid }) else {
                throw GATTError(.invalidDefinition, "included service \(uuid) is not in the database")
            }
            includes.append(included)
        }
        var count = 1 + includes.count
        for characteristic in definition.characteristics {
            if (characteristic.value?.count ?? 0) > Self.maximumValueLength
                || characteristic.descriptors.contains(where: { ($0.value?.count ?? 0) > Self.maximumValueLength })
            {
                throw GATTError(.invalidDefinition, "a value is longer than 512 octets")
            }
            count += 2 + characteristic.descriptors.count + (Self.needsAutomaticCCCD(characteristic) ? 1 : 0)
        }
        guard let start = freeRun(of: count) else {
            throw GATTError(.invalidDefinition, "no run of \(count) free handles")
        }

        // Counted in Int: the last handle may be 0xFFFF.
        var next = Int(start.rawValue)
        var new: [GATTAttribute] = []
        func take() -> AttributeHandle {
            defer { next += 1 }
            return AttributeHandle(UInt16(next))
        }
        func last() -> AttributeHandle { AttributeHandle(UInt16(next - 1)) }
        new.append(
            GATTAttribute(
                handle: take(), type: definition.isPrimary ? .primaryService : .secondaryService,
                value: definition.uuid.attWireBytes, permissions: [.readable],
                role: definition.isPrimary ? .primaryService : .secondaryService))
        for included in includes {
            var value =
                withUnsafeBytes(of: included.handleRange.lowerBound.rawValue.littleEndian, Array.init)
                + withUnsafeBytes(of: included.handleRange.upperBound.rawValue.littleEndian, Array.init)
            if let short = included.uuid.uint16 { value += [UInt8(short & 0xFF), UInt8(short >> 8)] }
            new.append(
                GATTAttribute(handle: take(), type: .include, value: value, permissions: [.readable], role: .include))
        }
        var characteristics: [GATTServiceLayout.Characteristic] = []
        for characteristic in definition.characteristics {
            let declarationHandle = take()
            let valueHandle = take()
            var declaration = [
                characteristic.properties.rawValue, UInt8(valueHandle.rawValue & 0xFF),
                UInt8(valueHandle.rawValue >> 8),
            ]
            declaration += characteristic.uuid.attWireBytes
            new.append(
                GATTAttribute(
                    handle: declarationHandle, type: .characteristicDeclaration, value: declaration,
                    permissions: [.readable], role: .characteristicDeclaration))
            new.append(
                GATTAttribute(
                    handle: valueHandle, type: characteristic.uuid, value: characteristic.value,
                    permissions: characteristic.permissions,
                    role: .characteristicValue(characteristic.properties)))
            var descriptors: [GATTDescriptor] = []
            var cccd: AttributeHandle?
            for descriptor in characteristic.descriptors {
                let handle = take()
                if descriptor.uuid == .clientCharacteristicConfiguration {
                    cccd = handle
                    new.append(
                        GATTAttribute(
                            handle: handle, type: descriptor.uuid, value: nil,
                            permissions: Self.clientConfigurationPermissions(characteristic),
                            role: .clientConfiguration(
                                characteristicValue: valueHandle,
                                properties: characteristic.properties)))
                } else {
                    new.append(
                        GATTAttribute(
                            handle: handle, type: descriptor.uuid, value: descriptor.value,
                            permissions: descriptor.permissions,
                            role: .descriptor(characteristicValue: valueHandle)))
                }
                descriptors.append(GATTDescriptor(uuid: descriptor.uuid, handle: handle))
            }
            if Self.needsAutomaticCCCD(characteristic) {
                let handle = take()
                cccd = handle
                new.append(
                    GATTAttribute(
                        handle: handle, type: .clientCharacteristicConfiguration, value: nil,
                        permissions: Self.clientConfigurationPermissions(characteristic),
                        role: .clientConfiguration(
                            characteristicValue: valueHandle,
                            properties: characteristic.properties)))
                descriptors.append(GATTDescriptor(uuid: .clientCharacteristicConfiguration, handle: handle))
            }
            let end = last()
            characteristics.append(
                .init(
                    characteristic: GATTCharacteristic(
                        uuid: characteristic.uuid, properties: characteristic.properties,
                        declarationHandle: declarationHandle, valueHandle: valueHandle,
                        endHandle: end),
                    descriptors: descriptors, clientConfigurationHandle: cccd))
        }
        let service = GATTService(
            uuid: definition.uuid, isPrimary: definition.isPrimary,
            handleRange: start...last())
        let insertAt = firstIndex(atOrAfter: start)
        attributes.insert(contentsOf: new, at: insertAt)
        services.append(service)
        services.sort { $0.handleRange.lowerBound < $1.handleRange.lowerBound }
        return GATTServiceLayout(service: service, characteristics: characteristics)
    }

    /// Removes the service whose declaration has this handle, with all its attributes. The GAP and GATT
    /// services cannot be removed. Returns the removed service.
    @discardableResult
    public mutating func removeService(at handle: AttributeHandle) -> GATTService? {
        guard let index = services.firstIndex(where: { $0.handleRange.lowerBound == handle }) else { return nil }
        let service = services[index]
        guard !service.handleRange.contains(deviceNameHandle), !service.handleRange.contains(serviceChangedHandle)
        else { return nil }
        services.remove(at: index)
        attributes.removeAll { service.handleRange.contains($0.handle) }
        return service
    }

    // MARK: - Private

    /// A CCCD is always readable; writing it needs encryption when reading the value does (a notification
    /// carries the value) or the definition asks for it.
    private static func clientConfigurationPermissions(_ characteristic: GATTCharacteristicDefinition)
        -> GATTAttributePermissions
    {
        characteristic.permissions.contains(.readEncryptionRequired) || characteristic.subscribingRequiresEncryption
            ? [.readable, .writeEncryptionRequired] : [.readable, .writeable]
    }

    private static func needsAutomaticCCCD(_ characteristic: GATTCharacteristicDefinition) -> Bool {
        !characteristic.properties.isDisjoint(with: [.notify, .indicate])
            && !characteristic.descriptors.contains { $0.uuid == .clientCharacteristicConfiguration }
    }

    /// The first handle of a free run of `count` handles: after the highest handle when it fits, else the
    /// first gap between services that does.
    private func freeRun(of count: Int) -> AttributeHandle? {
        let highest = Int(attributes.last?.handle.rawValue ?? 0)
        if highest + count <= 0xFFFF { return AttributeHandle(UInt16(highest + 1)) }
        var previousEnd = 0
        for service in services {
            let gap = Int(service.handleRange.lowerBound.rawValue) - previousEnd - 1
            if gap >= count { return AttributeHandle(UInt16(previousEnd + 1)) }
            previousEnd = Int(service.handleRange.upperBound.rawValue)
        }
        return nil
    }

    private func firstIndex(atOrAfter handle: AttributeHandle) -> Int {
        var low = 0
        var high = attributes.count
        while low < high {
            let mid = (low + high) / 2
            if attributes[mid].handle < handle { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func index(of handle: AttributeHandle) -> Int? {
        let index = firstIndex(atOrAfter: handle)
        return index < attributes.count && attributes[index].handle == handle ? index : nil
    }
}
