/// Manufacturer Specific Data: a company identifier and the company's own octets.
///
/// - SeeAlso: Core Specification Supplement v11, Part A, 1.4.
public struct ManufacturerSpecificData: Sendable, Hashable, CustomStringConvertible {
    public var companyIdentifier: CompanyIdentifier
    /// The octets after the company identifier.
    public var data: [UInt8]

    public init(companyIdentifier: CompanyIdentifier, data: [UInt8]) {
        self.companyIdentifier = companyIdentifier
        self.data = data
    }

    /// The AD data: the company identifier (little-endian) followed by `data`, as CoreBluetooth's
    /// `kCBAdvDataManufacturerData` holds it.
    public var bytes: [UInt8] {
        [UInt8(companyIdentifier.rawValue & 0xFF), UInt8(companyIdentifier.rawValue >> 8)] + data
    }

    /// From AD data; `nil` if shorter than the two-octet company identifier.
    public init?(bytes: [UInt8]) {
        guard bytes.count >= 2 else { return nil }
        self.companyIdentifier = CompanyIdentifier(UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
        self.data = Array(bytes[2...])
    }

    public var description: String { "\(companyIdentifier): \(data.hexString)" }
}

// MARK: - Typed views
//
// The views are lenient: a structure too short for its type is skipped, and a UUID list whose length is not a
// multiple of the UUID size yields the whole UUIDs it holds. The raw `structures` still hold every octet.

extension AdvertisingData {
    /// The Flags value (its first octet), if a Flags structure is present.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.3.
    public var flags: ADFlags? {
        guard let data = self[.flags], let first = data.first else { return nil }
        return ADFlags(rawValue: first)
    }

    /// Every advertised service UUID, from the complete and incomplete 16-, 32- and 128-bit lists, in wire
    /// order, without duplicates.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.1.
    public var serviceUUIDs: [BluetoothUUID] {
        uuids(in: [
            .incompleteList16BitServiceUUIDs, .completeList16BitServiceUUIDs,
            .incompleteList32BitServiceUUIDs, .completeList32BitServiceUUIDs,
            .incompleteList128BitServiceUUIDs, .completeList128BitServiceUUIDs,
        ])
    }

    /// Whether the advertiser declares its service list complete: at least one service UUID list is present
    /// and none is of an "incomplete" type. With no list at all the advertiser said nothing, so this is `false`.
    public var isServiceListComplete: Bool {
        var sawComplete = false
        for structure in structures {
            switch structure.type {
            case .incompleteList16BitServiceUUIDs, .incompleteList32BitServiceUUIDs, .incompleteList128BitServiceUUIDs:
                return false
            case .completeList16BitServiceUUIDs, .completeList32BitServiceUUIDs, .completeList128BitServiceUUIDs:
                sawComplete = true
            default:
                continue
            }
        }
        return sawComplete
    }

    /// The service solicitation UUIDs (16-, 32- and 128-bit lists), in wire order, without duplicates; as
    /// CoreBluetooth's `kCBAdvDataSolicitedServiceUUIDs`.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.10.
    public var solicitedServiceUUIDs: [BluetoothUUID] {
        uuids(in: [.serviceSolicitation16BitUUIDs, .serviceSolicitation32BitUUIDs, .serviceSolicitation128BitUUIDs])
    }

    /// The local name: the complete name if present, otherwise the shortened one. Invalid UTF-8 is replaced
    /// by U+FFFD.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.2.
    public var localName: String? {
        completeLocalName ?? shortenedLocalName
    }

    /// The Complete Local Name, if present.
    public var completeLocalName: String? {
        self[.completeLocalName].map { String(decoding: $0, as: UTF8.self) }
    }

    /// The Shortened Local Name, if present.
    public var shortenedLocalName: String? {
        self[.shortenedLocalName].map { String(decoding: $0, as: UTF8.self) }
    }

    /// The transmit power level in dBm (-127...127), if present.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.5.
    public var txPowerLevel: Int8? {
        guard let data = self[.txPowerLevel], let first = data.first else { return nil }
        return Int8(bitPattern: first)
    }

    /// The first Manufacturer Specific Data structure at least two octets long.
    public var manufacturerData: ManufacturerSpecificData? {
        allManufacturerData.first
    }

    /// Every Manufacturer Specific Data structure at least two octets long, in wire order.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.4.
    public var allManufacturerData: [ManufacturerSpecificData] {
        structures(ofType: .manufacturerSpecificData).compactMap { ManufacturerSpecificData(bytes: $0.data) }
    }

    /// Service data keyed by service UUID, from the 16-, 32- and 128-bit Service Data types. When a UUID
    /// appears twice, the first structure wins.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.11.
    public var serviceData: [BluetoothUUID: [UInt8]] {
        var out: [BluetoothUUID: [UInt8]] = [:]
        for structure in structures {
            let width: Int
            switch structure.type {
            case .serviceData16BitUUID: width = 2
            case .serviceData32BitUUID: width = 4
            case .serviceData128BitUUID: width = 16
            default: continue
            }
            guard structure.data.count >= width,
                let uuid = BluetoothUUID(littleEndian: structure.data[0..<width])
            else { continue }
            if out[uuid] == nil { out[uuid] = Array(structure.data[width...]) }
        }
        return out
    }

    /// The Appearance value (Assigned Numbers 2.6), if present.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.12.
    public var appearance: UInt16? {
        guard let data = self[.appearance], data.count >= 2 else { return nil }
        return UInt16(data[0]) | UInt16(data[1]) << 8
    }

    private func uuids(in types: Set<ADType>) -> [BluetoothUUID] {
        var seen: Set<BluetoothUUID> = []
        var out: [BluetoothUUID] = []
        for structure in structures where types.contains(structure.type) {
            let width = Self.uuidWidth(of: structure.type)
            var index = 0
            while index + width <= structure.data.count {
                if let uuid = BluetoothUUID(littleEndian: structure.data[index..<(index + width)]),
                    seen.insert(uuid).inserted
                {
                    out.append(uuid)
                }
                index += width
            }
        }
        return out
    }

    private static func uuidWidth(of type: ADType) -> Int {
        switch type {
        case .incompleteList16BitServiceUUIDs, .completeList16BitServiceUUIDs, .serviceSolicitation16BitUUIDs: 2
        case .incompleteList32BitServiceUUIDs, .completeList32BitServiceUUIDs, .serviceSolicitation32BitUUIDs: 4
        default: 16
        }
    }
}

// MARK: - Builders

extension AdvertisingData {
    /// Appends a Flags structure.
    public mutating func addFlags(_ flags: ADFlags) {
        append(ADStructure(type: .flags, data: [flags.rawValue]))
    }

    /// Appends service UUID lists: one structure per width present among `uuids` (16-bit first, then 32-bit,
    /// then 128-bit), each UUID in its shortest form, duplicates removed.
    ///
    /// - Parameters:
    ///   - uuids: the services to list, in any widths and order.
    ///   - complete: whether the lists use the "complete" AD types (the advertiser has no other service UUIDs of
    ///     those widths) or the "incomplete" ones.
    public mutating func addServiceUUIDs(_ uuids: [BluetoothUUID], complete: Bool = true) {
        let types: [BluetoothUUID.Width: ADType] =
            complete
            ? [
                .bits16: .completeList16BitServiceUUIDs, .bits32: .completeList32BitServiceUUIDs,
                .bits128: .completeList128BitServiceUUIDs,
            ]
            : [
                .bits16: .incompleteList16BitServiceUUIDs, .bits32: .incompleteList32BitServiceUUIDs,
                .bits128: .incompleteList128BitServiceUUIDs,
            ]
        addUUIDLists(uuids, types: types)
    }

    /// Appends service solicitation lists: one structure per width present among `uuids`.
    public mutating func addSolicitedServiceUUIDs(_ uuids: [BluetoothUUID]) {
        addUUIDLists(
            uuids,
            types: [
                .bits16: .serviceSolicitation16BitUUIDs, .bits32: .serviceSolicitation32BitUUIDs,
                .bits128: .serviceSolicitation128BitUUIDs,
            ])
    }

    /// Appends a local name in UTF-8, as the Complete or the Shortened Local Name.
    public mutating func addLocalName(_ name: String, complete: Bool = true) {
        append(ADStructure(type: complete ? .completeLocalName : .shortenedLocalName, data: Array(name.utf8)))
    }

    /// Appends a Tx Power Level in dBm.
    public mutating func addTxPowerLevel(_ dBm: Int8) {
        append(ADStructure(type: .txPowerLevel, data: [UInt8(bitPattern: dBm)]))
    }

    /// Appends Manufacturer Specific Data.
    public mutating func addManufacturerData(_ manufacturerData: ManufacturerSpecificData) {
        append(ADStructure(type: .manufacturerSpecificData, data: manufacturerData.bytes))
    }

    /// Appends Manufacturer Specific Data for `company`.
    public mutating func addManufacturerData(company: CompanyIdentifier, data: [UInt8]) {
        addManufacturerData(ManufacturerSpecificData(companyIdentifier: company, data: data))
    }

    /// Appends Service Data for `uuid`, using the 16-, 32- or 128-bit type that fits the UUID's shortest form.
    public mutating func addServiceData(_ data: [UInt8], for uuid: BluetoothUUID) {
        let type: ADType =
            switch uuid.width {
            case .bits16: .serviceData16BitUUID
            case .bits32: .serviceData32BitUUID
            case .bits128: .serviceData128BitUUID
            }
        append(ADStructure(type: type, data: uuid.littleEndianBytes + data))
    }

    /// Appends an Appearance value (Assigned Numbers 2.6).
    public mutating func addAppearance(_ appearance: UInt16) {
        append(ADStructure(type: .appearance, data: [UInt8(appearance & 0xFF), UInt8(appearance >> 8)]))
    }

    private mutating func addUUIDLists(_ uuids: [BluetoothUUID], types: [BluetoothUUID.Width: ADType]) {
        var seen: Set<BluetoothUUID> = []
        let unique = uuids.filter { seen.insert($0).inserted }
        for width in [BluetoothUUID.Width.bits16, .bits32, .bits128] {
            let group = unique.filter { $0.width == width }
            guard !group.isEmpty, let type = types[width] else { continue }
            append(ADStructure(type: type, data: group.flatMap(\.littleEndianBytes)))
        }
    }
}
