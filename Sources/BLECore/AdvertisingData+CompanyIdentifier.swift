/// A Bluetooth SIG company identifier, as the first two octets (little-endian) of Manufacturer Specific Data.
///
/// An open set: any 16-bit value round-trips; the well-known ones have names.
///
/// - SeeAlso: Assigned Numbers, 7.1 (Company Identifiers); Core Specification Supplement v11, Part A, 1.4.
public struct CompanyIdentifier: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let ericsson = CompanyIdentifier(0x0000)
    public static let nokia = CompanyIdentifier(0x0001)
    public static let intel = CompanyIdentifier(0x0002)
    public static let ibm = CompanyIdentifier(0x0003)
    public static let toshiba = CompanyIdentifier(0x0004)
    public static let microsoft = CompanyIdentifier(0x0006)
    public static let qualcommTechnologiesInternational = CompanyIdentifier(0x000A)
    public static let texasInstruments = CompanyIdentifier(0x000D)
    public static let broadcom = CompanyIdentifier(0x000F)
    public static let qualcomm = CompanyIdentifier(0x001D)
    public static let stMicroelectronics = CompanyIdentifier(0x0030)
    public static let apple = CompanyIdentifier(0x004C)
    public static let nordicSemiconductor = CompanyIdentifier(0x0059)
    public static let samsung = CompanyIdentifier(0x0075)
    public static let garmin = CompanyIdentifier(0x0087)
    public static let google = CompanyIdentifier(0x00E0)
    public static let espressif = CompanyIdentifier(0x02E5)
    public static let siliconLabs = CompanyIdentifier(0x02FF)
    /// 0xFFFF: not assigned to any company; for internal and interoperability tests only, never in products.
    public static let bluetoothSIGTest = CompanyIdentifier(0xFFFF)

    /// The company's name, if this identifier is one we know.
    public var name: String? { Self.names[rawValue] }

    public var description: String {
        let code = "0x" + String(format4: rawValue)
        if let name { return "\(name) (\(code))" }
        return code
    }

    public static func < (a: CompanyIdentifier, b: CompanyIdentifier) -> Bool { a.rawValue < b.rawValue }

    private static let names: [UInt16: String] = [
        0x0000: "Ericsson",
        0x0001: "Nokia",
        0x0002: "Intel",
        0x0003: "IBM",
        0x0004: "Toshiba",
        0x0006: "Microsoft",
        0x000A: "Qualcomm Technologies International",
        0x000D: "Texas Instruments",
        0x000F: "Broadcom",
        0x001D: "Qualcomm",
        0x0030: "STMicroelectronics",
        0x004C: "Apple",
        0x0059: "Nordic Semiconductor",
        0x0075: "Samsung Electronics",
        0x0087: "Garmin",
        0x00E0: "Google",
        0x02E5: "Espressif",
        0x02FF: "Silicon Laboratories",
        0xFFFF: "Bluetooth SIG test",
    ]
}
