/// An AD type: what the data of an AD structure means.
///
/// An open set: unknown values round-trip and print as `0xNN`.
///
/// - SeeAlso: Assigned Numbers, 2.3 (Common Data Types); Core Specification Supplement v11, Part A, 1.
public struct ADType: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// Flags (CSS Part A, 1.3): one octet of `ADFlags`.
    public static let flags = ADType(0x01)
    /// Incomplete List of 16-bit Service or Service Class UUIDs (CSS Part A, 1.1).
    public static let incompleteList16BitServiceUUIDs = ADType(0x02)
    /// Complete List of 16-bit Service or Service Class UUIDs (CSS Part A, 1.1).
    public static let completeList16BitServiceUUIDs = ADType(0x03)
    /// Incomplete List of 32-bit Service or Service Class UUIDs (CSS Part A, 1.1).
    public static let incompleteList32BitServiceUUIDs = ADType(0x04)
    /// Complete List of 32-bit Service or Service Class UUIDs (CSS Part A, 1.1).
    public static let completeList32BitServiceUUIDs = ADType(0x05)
    /// Incomplete List of 128-bit Service or Service Class UUIDs (CSS Part A, 1.1).
    public static let incompleteList128BitServiceUUIDs = ADType(0x06)
    /// Complete List of 128-bit Service or Service Class UUIDs (CSS Part A, 1.1).
    public static let completeList128BitServiceUUIDs = ADType(0x07)
    /// Shortened Local Name, UTF-8 (CSS Part A, 1.2).
    public static let shortenedLocalName = ADType(0x08)
    /// Complete Local Name, UTF-8 (CSS Part A, 1.2).
    public static let completeLocalName = ADType(0x09)
    /// Tx Power Level, one signed octet in dBm (CSS Part A, 1.5).
    public static let txPowerLevel = ADType(0x0A)
    /// Class of Device (CSS Part A, 1.6).
    public static let classOfDevice = ADType(0x0D)
    /// Simple Pairing Hash C-192 (CSS Part A, 1.6).
    public static let simplePairingHashC192 = ADType(0x0E)
    /// Simple Pairing Randomizer R-192 (CSS Part A, 1.6).
    public static let simplePairingRandomizerR192 = ADType(0x0F)
    /// Device ID, or Security Manager TK Value.
    public static let securityManagerTKValue = ADType(0x10)
    /// Security Manager Out of Band Flags.
    public static let securityManagerOOBFlags = ADType(0x11)
    /// Peripheral Connection Interval Range (CSS Part A, 1.9).
    public static let peripheralConnectionIntervalRange = ADType(0x12)
    /// List of 16-bit Service Solicitation UUIDs (CSS Part A, 1.10).
    public static let serviceSolicitation16BitUUIDs = ADType(0x14)
    /// List of 128-bit Service Solicitation UUIDs (CSS Part A, 1.10).
    public static let serviceSolicitation128BitUUIDs = ADType(0x15)
    /// Service Data - 16-bit UUID (CSS Part A, 1.11).
    public static let serviceData16BitUUID = ADType(0x16)
    /// Public Target Address (CSS Part A, 1.13).
    public static let publicTargetAddress = ADType(0x17)
    /// Random Target Address (CSS Part A, 1.14).
    public static let randomTargetAddress = ADType(0x18)
    /// Appearance, a 16-bit value (CSS Part A, 1.12).
    public static let appearance = ADType(0x19)
    /// Advertising Interval (CSS Part A, 1.15).
    public static let advertisingInterval = ADType(0x1A)
    /// LE Bluetooth Device Address (CSS Part A, 1.16).
    public static let leBluetoothDeviceAddress = ADType(0x1B)
    /// LE Role (CSS Part A, 1.17).
    public static let leRole = ADType(0x1C)
    /// Simple Pairing Hash C-256 (CSS Part A, 1.6).
    public static let simplePairingHashC256 = ADType(0x1D)
    /// Simple Pairing Randomizer R-256 (CSS Part A, 1.6).
    public static let simplePairingRandomizerR256 = ADType(0x1E)
    /// List of 32-bit Service Solicitation UUIDs (CSS Part A, 1.10).
    public static let serviceSolicitation32BitUUIDs = ADType(0x1F)
    /// Service Data - 32-bit UUID (CSS Part A, 1.11).
    public static let serviceData32BitUUID = ADType(0x20)
    /// Service Data - 128-bit UUID (CSS Part A, 1.11).
    public static let serviceData128BitUUID = ADType(0x21)
    /// LE Secure Connections Confirmation Value (CSS Part A, 1.6).
    public static let leSecureConnectionsConfirmationValue = ADType(0x22)
    /// LE Secure Connections Random Value (CSS Part A, 1.6).
    public static let leSecureConnectionsRandomValue = ADType(0x23)
    /// URI (CSS Part A, 1.18).
    public static let uri = ADType(0x24)
    /// Indoor Positioning.
    public static let indoorPositioning = ADType(0x25)
    /// Transport Discovery Data.
    public static let transportDiscoveryData = ADType(0x26)
    /// LE Supported Features (CSS Part A, 1.19).
    public static let leSupportedFeatures = ADType(0x27)
    /// Channel Map Update Indication (CSS Part A, 1.20).
    public static let channelMapUpdateIndication = ADType(0x28)
    /// PB-ADV (Mesh Profile).
    public static let pbADV = ADType(0x29)
    /// Mesh Message (Mesh Profile).
    public static let meshMessage = ADType(0x2A)
    /// Mesh Beacon (Mesh Profile).
    public static let meshBeacon = ADType(0x2B)
    /// BIGInfo.
    public static let bigInfo = ADType(0x2C)
    /// Broadcast_Code.
    public static let broadcastCode = ADType(0x2D)
    /// Resolvable Set Identifier.
    public static let resolvableSetIdentifier = ADType(0x2E)
    /// Advertising Interval - long (CSS Part A, 1.15).
    public static let advertisingIntervalLong = ADType(0x2F)
    /// Broadcast_Name.
    public static let broadcastName = ADType(0x30)
    /// Encrypted Advertising Data.
    public static let encryptedAdvertisingData = ADType(0x31)
    /// Periodic Advertising Response Timing Information.
    public static let periodicAdvertisingResponseTimingInformation = ADType(0x32)
    /// Electronic Shelf Label.
    public static let electronicShelfLabel = ADType(0x34)
    /// 3D Information Data.
    public static let threeDInformationData = ADType(0x3D)
    /// Manufacturer Specific Data: a 16-bit company identifier then vendor data (CSS Part A, 1.4).
    public static let manufacturerSpecificData = ADType(0xFF)

    /// The Assigned Numbers name, if this type is one we know.
    public var name: String? { Self.names[rawValue] }

    public var description: String {
        let hex = String(rawValue, radix: 16, uppercase: true)
        let code = "0x" + (hex.count == 1 ? "0" + hex : hex)
        if let name { return "\(name) (\(code))" }
        return code
    }

    public static func < (a: ADType, b: ADType) -> Bool { a.rawValue < b.rawValue }

    private static let names: [UInt8: String] = [
        0x01: "Flags",
        0x02: "Incomplete List of 16-bit Service UUIDs",
        0x03: "Complete List of 16-bit Service UUIDs",
        0x04: "Incomplete List of 32-bit Service UUIDs",
        0x05: "Complete List of 32-bit Service UUIDs",
        0x06: "Incomplete List of 128-bit Service UUIDs",
        0x07: "Complete List of 128-bit Service UUIDs",
        0x08: "Shortened Local Name",
        0x09: "Complete Local Name",
        0x0A: "Tx Power Level",
        0x0D: "Class of Device",
        0x0E: "Simple Pairing Hash C-192",
        0x0F: "Simple Pairing Randomizer R-192",
        0x10: "Device ID / Security Manager TK Value",
        0x11: "Security Manager Out of Band Flags",
        0x12: "Peripheral Connection Interval Range",
        0x14: "List of 16-bit Service Solicitation UUIDs",
        0x15: "List of 128-bit Service Solicitation UUIDs",
        0x16: "Service Data - 16-bit UUID",
        0x17: "Public Target Address",
        0x18: "Random Target Address",
        0x19: "Appearance",
        0x1A: "Advertising Interval",
        0x1B: "LE Bluetooth Device Address",
        0x1C: "LE Role",
        0x1D: "Simple Pairing Hash C-256",
        0x1E: "Simple Pairing Randomizer R-256",
        0x1F: "List of 32-bit Service Solicitation UUIDs",
        0x20: "Service Data - 32-bit UUID",
        0x21: "Service Data - 128-bit UUID",
        0x22: "LE Secure Connections Confirmation Value",
        0x23: "LE Secure Connections Random Value",
        0x24: "URI",
        0x25: "Indoor Positioning",
        0x26: "Transport Discovery Data",
        0x27: "LE Supported Features",
        0x28: "Channel Map Update Indication",
        0x29: "PB-ADV",
        0x2A: "Mesh Message",
        0x2B: "Mesh Beacon",
        0x2C: "BIGInfo",
        0x2D: "Broadcast_Code",
        0x2E: "Resolvable Set Identifier",
        0x2F: "Advertising Interval - long",
        0x30: "Broadcast_Name",
        0x31: "Encrypted Advertising Data",
        0x32: "Periodic Advertising Response Timing Information",
        0x34: "Electronic Shelf Label",
        0x3D: "3D Information Data",
        0xFF: "Manufacturer Specific Data",
    ]
}

/// The Flags AD type's value: discoverable mode and BR/EDR support.
///
/// - SeeAlso: Core Specification Supplement v11, Part A, 1.3; Core Spec 5.4, Vol 3, Part C, 9.2 (discoverable
///   modes).
public struct ADFlags: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bit 0: LE Limited Discoverable Mode.
    public static let leLimitedDiscoverable = ADFlags(rawValue: 1 << 0)
    /// Bit 1: LE General Discoverable Mode.
    public static let leGeneralDiscoverable = ADFlags(rawValue: 1 << 1)
    /// Bit 2: BR/EDR Not Supported.
    public static let brEdrNotSupported = ADFlags(rawValue: 1 << 2)
    /// Bit 3: Simultaneous LE and BR/EDR to Same Device Capable (Controller).
    public static let simultaneousLEAndBrEdrController = ADFlags(rawValue: 1 << 3)
    /// Bit 4: previously "Simultaneous LE and BR/EDR to Same Device Capable (Host)"; now reserved.
    public static let simultaneousLEAndBrEdrHost = ADFlags(rawValue: 1 << 4)

    /// What an LE-only device in the general discoverable mode advertises (0x06).
    public static let leOnlyGeneralDiscoverable: ADFlags = [.leGeneralDiscoverable, .brEdrNotSupported]

    public var description: String {
        "[" + names.joined(separator: ", ") + "]"
    }

    /// The name of each bit set, lowest first; reserved bits (5-7) as one hex value ("0xe0").
    public var names: [String] {
        var parts: [String] = []
        if contains(.leLimitedDiscoverable) { parts.append("LE Limited Discoverable") }
        if contains(.leGeneralDiscoverable) { parts.append("LE General Discoverable") }
        if contains(.brEdrNotSupported) { parts.append("BR/EDR Not Supported") }
        if contains(.simultaneousLEAndBrEdrController) { parts.append("LE and BR/EDR (Controller)") }
        if contains(.simultaneousLEAndBrEdrHost) { parts.append("LE and BR/EDR (Host)") }
        let rest = rawValue & 0b1110_0000
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return parts
    }
}
