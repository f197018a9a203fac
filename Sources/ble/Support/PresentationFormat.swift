import BLE
import Foundation

/// A Characteristic Presentation Format descriptor (0x2904): how a characteristic's value is to be read.
///
/// Seven octets: Format (uint8), Exponent (sint8), Unit (uint16, a 0x27xx UUID), Name Space (uint8, 0x01 for the
/// Bluetooth SIG) and Description (uint16, an enumeration of that name space). For the integer formats the value
/// shown is the number times 10^Exponent.
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 3.3.3.5; Assigned Numbers 2.4.1 (formats), 3.5 (units), 2.4.2
///   (name space descriptions).
struct PresentationFormat: Hashable, Sendable {
    var format: Format
    /// Powers of ten the integer value is multiplied by (-128...127).
    var exponent: Int8
    /// The unit's 16-bit UUID (0x2700: unitless).
    var unit: UInt16
    var namespace: UInt8
    var description: UInt16

    init(format: Format, exponent: Int8 = 0, unit: UInt16 = 0x2700, namespace: UInt8 = 0x01, description: UInt16 = 0) {
        self.format = format
        self.exponent = exponent
        self.unit = unit
        self.namespace = namespace
        self.description = description
    }

    /// Parses the descriptor's value; nil unless it is exactly seven octets.
    init?(descriptor value: Data) {
        let b = [UInt8](value)
        guard b.count == 7 else { return nil }
        self.init(
            format: Format(rawValue: b[0]), exponent: Int8(bitPattern: b[1]), unit: UInt16(b[2]) | UInt16(b[3]) << 8,
            namespace: b[4], description: UInt16(b[5]) | UInt16(b[6]) << 8)
    }

    /// The descriptor's own value, as the tool shows it: "format sint16, exponent -2, unit °C (0x272F)".
    var summary: String {
        var parts = ["format \(format)"]
        if exponent != 0 { parts.append("exponent \(exponent)") }
        parts.append("unit " + (Self.unitSymbols[unit].map { "\($0) (\(hex(unit)))" } ?? hex(unit)))
        if let described = describedAs { parts.append("description \(described)") }
        return parts.joined(separator: ", ")
    }

    /// The unit as printed after a number ("°C", "%"); nil for unitless, "unit 0xNNNN" when not in the table.
    var unitSymbol: String? {
        guard unit != 0x2700 else { return nil }
        return Self.unitSymbols[unit] ?? "(unit \(hex(unit)))"
    }

    /// The Bluetooth SIG name space's description ("outside", "#2"); nil for "unknown" (0) or another name space.
    var describedAs: String? {
        guard namespace == 0x01, description != 0 else { return nil }
        if description <= 0xFF { return "#\(description)" }
        return Self.descriptions[description] ?? hex(description)
    }

    private func hex(_ v: UInt16) -> String { String(format: "0x%04X", v) }

    // MARK: Decoding a value

    /// The value as this descriptor says to read it, or nil when the bytes do not fit the format (wrong length,
    /// invalid text) or the format is not one the tool decodes (struct, medASN1, reserved).
    func decode(_ value: Data) -> DecodedValue? {
        let b = [UInt8](value)
        guard var decoded = decodeNumberOrText(b) else { return nil }
        if let symbol = unitSymbol, decoded.isNumber {
            decoded.text += " \(symbol)"
            decoded.unit = Self.unitSymbols[unit] ?? hex(unit)
        }
        if let described = describedAs { decoded.text += " (\(described))" }
        return decoded
    }

    private func decodeNumberOrText(_ b: [UInt8]) -> DecodedValue? {
        switch format {
        case .boolean:
            guard b.count == 1, b[0] <= 1 else { return nil }
            return DecodedValue(text: b[0] == 1 ? "true" : "false", value: .bool(b[0] == 1))
        case .uint2, .uint4:
            guard b.count == 1 else { return nil }
            return scaled(Int64(b[0] & (format == .uint2 ? 0x03 : 0x0F)))
        default:
            break
        }
        if let (bytes, bits, signed) = format.integerLayout {
            guard b.count == bytes else { return nil }
            if bytes > 8 { return DecodedValue(text: "0x" + b.reversed().map { String(format: "%02x", $0) }.joined()) }
            guard let raw = ValueRendering.integer(b, bits: bits, signed: signed) else { return nil }
            var decoded =
                !signed && raw < 0
                // A uint64 beyond Int64.max.
                ? DecodedValue(digits: String(UInt64(bitPattern: raw)), negative: false, exponent: Int(exponent))
                : scaled(raw)
            // 64-bit formats are exact decimal text in JSON, whatever the value (most readers keep 53 bits).
            if bits == 64 { decoded.value = .wide(decoded.text) }
            return decoded
        }
        switch format {
        case .float32:
            guard b.count == 4, let v = ValueRendering.ieee(b) else { return nil }
            return DecodedValue(number: v)
        case .float64:
            guard b.count == 8, let v = ValueRendering.ieee(b) else { return nil }
            return DecodedValue(number: v)
        case .sfloat:
            guard b.count == 2 else { return nil }
            return ValueRendering.medical(b)
        case .float:
            guard b.count == 4 else { return nil }
            return ValueRendering.medical(b)
        case .uint16Pair:
            guard b.count == 4 else { return nil }
            let first = Int(b[0]) | Int(b[1]) << 8
            let second = Int(b[2]) | Int(b[3]) << 8
            return DecodedValue(text: "\(first), \(second)", value: .integers([first, second]))
        case .utf8:
            guard let text = String(bytes: b, encoding: .utf8) else { return nil }
            return DecodedValue(text: JSON.quote(text), value: .string(text))
        case .utf16:
            guard b.count % 2 == 0 else { return nil }
            let units = stride(from: 0, to: b.count, by: 2).map { UInt16(b[$0]) | UInt16(b[$0 + 1]) << 8 }
            guard let text = String(validating: units, as: UTF16.self) else { return nil }
            return DecodedValue(text: JSON.quote(text), value: .string(text))
        default:
            return nil
        }
    }

    /// An integer times 10^exponent, written exactly (no binary rounding): 2345 with exponent -2 is "23.45".
    private func scaled(_ raw: Int64) -> DecodedValue {
        DecodedValue(decimal: raw, exponent: Int(exponent))
    }

    // MARK: Tables

    /// Format (Assigned Numbers 2.4.1). An open set: unknown values are kept and shown as "0xNN".
    struct Format: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        let rawValue: UInt8
        init(rawValue: UInt8) { self.rawValue = rawValue }

        static let boolean = Format(rawValue: 0x01)
        static let uint2 = Format(rawValue: 0x02)
        static let uint4 = Format(rawValue: 0x03)
        static let uint8 = Format(rawValue: 0x04)
        static let uint12 = Format(rawValue: 0x05)
        static let uint16 = Format(rawValue: 0x06)
        static let uint24 = Format(rawValue: 0x07)
        static let uint32 = Format(rawValue: 0x08)
        static let uint48 = Format(rawValue: 0x09)
        static let uint64 = Format(rawValue: 0x0A)
        static let uint128 = Format(rawValue: 0x0B)
        static let sint8 = Format(rawValue: 0x0C)
        static let sint12 = Format(rawValue: 0x0D)
        static let sint16 = Format(rawValue: 0x0E)
        static let sint24 = Format(rawValue: 0x0F)
        static let sint32 = Format(rawValue: 0x10)
        static let sint48 = Format(rawValue: 0x11)
        static let sint64 = Format(rawValue: 0x12)
        static let sint128 = Format(rawValue: 0x13)
        /// IEEE 754 binary32.
        static let float32 = Format(rawValue: 0x14)
        /// IEEE 754 binary64.
        static let float64 = Format(rawValue: 0x15)
        /// IEEE 11073-20601 16-bit SFLOAT (medfloat16).
        static let sfloat = Format(rawValue: 0x16)
        /// IEEE 11073-20601 32-bit FLOAT (medfloat32).
        static let float = Format(rawValue: 0x17)
        static let uint16Pair = Format(rawValue: 0x18)
        static let utf8 = Format(rawValue: 0x19)
        static let utf16 = Format(rawValue: 0x1A)
        static let structure = Format(rawValue: 0x1B)
        static let medASN1 = Format(rawValue: 0x1C)

        private static let names: [UInt8: String] = [
            0x01: "boolean", 0x02: "2bit", 0x03: "nibble", 0x04: "uint8", 0x05: "uint12", 0x06: "uint16",
            0x07: "uint24", 0x08: "uint32", 0x09: "uint48", 0x0A: "uint64", 0x0B: "uint128", 0x0C: "sint8",
            0x0D: "sint12", 0x0E: "sint16", 0x0F: "sint24", 0x10: "sint32", 0x11: "sint48", 0x12: "sint64",
            0x13: "sint128", 0x14: "float32", 0x15: "float64", 0x16: "medfloat16", 0x17: "medfloat32",
            0x18: "uint16[2]", 0x19: "utf8s", 0x1A: "utf16s", 0x1B: "struct", 0x1C: "medASN1",
        ]

        var description: String { Self.names[rawValue] ?? String(format: "0x%02X", rawValue) }

        /// Octets, significant bits and signedness of the integer formats (not boolean, 2bit, nibble).
        var integerLayout: (bytes: Int, bits: Int, signed: Bool)? {
            switch rawValue {
            case 0x04: (1, 8, false)
            case 0x05: (2, 12, false)
            case 0x06: (2, 16, false)
            case 0x07: (3, 24, false)
            case 0x08: (4, 32, false)
            case 0x09: (6, 48, false)
            case 0x0A: (8, 64, false)
            case 0x0B: (16, 128, false)
            case 0x0C: (1, 8, true)
            case 0x0D: (2, 12, true)
            case 0x0E: (2, 16, true)
            case 0x0F: (3, 24, true)
            case 0x10: (4, 32, true)
            case 0x11: (6, 48, true)
            case 0x12: (8, 64, true)
            case 0x13: (16, 128, true)
            default: nil
            }
        }
    }

    /// Units the tool names (Assigned Numbers 3.5); others print as "(unit 0x27NN)".
    static let unitSymbols: [UInt16: String] = [
        0x2701: "m", 0x2702: "kg", 0x2703: "s", 0x2704: "A", 0x2705: "K", 0x2706: "mol", 0x2707: "cd",
        0x2710: "m²", 0x2711: "m³", 0x2712: "m/s", 0x2713: "m/s²", 0x2720: "rad", 0x2722: "Hz", 0x2723: "N",
        0x2724: "Pa", 0x2725: "J", 0x2726: "W", 0x2727: "C", 0x2728: "V", 0x2729: "F", 0x272A: "Ω", 0x272B: "S",
        0x272F: "°C", 0x2731: "lx", 0x2760: "min", 0x2761: "h", 0x2762: "d", 0x2763: "°", 0x2767: "L",
        0x2780: "bar", 0x2781: "mmHg", 0x27A2: "in", 0x27A3: "ft", 0x27A4: "mi", 0x27A6: "km/h", 0x27A7: "mph",
        0x27A8: "rpm", 0x27AB: "kWh", 0x27AC: "°F", 0x27AD: "%", 0x27AE: "‰", 0x27AF: "bpm", 0x27B0: "Ah",
        0x27B1: "mg/dL", 0x27B2: "mmol/L", 0x27B6: "W/m²", 0x27B8: "lb", 0x27C3: "dB", 0x27C4: "ppm", 0x27C5: "ppb",
    ]

    /// The Bluetooth SIG name space's descriptions beyond the ordinals 0x0001-0x00FF (Assigned Numbers 2.4.2).
    static let descriptions: [UInt16: String] = [
        0x0100: "front", 0x0101: "back", 0x0102: "top", 0x0103: "bottom", 0x0104: "upper", 0x0105: "lower",
        0x0106: "main", 0x0107: "backup", 0x0108: "auxiliary", 0x0109: "supplementary", 0x010A: "flash",
        0x010B: "inside", 0x010C: "outside", 0x010D: "left", 0x010E: "right", 0x010F: "internal", 0x0110: "external",
    ]
}

/// A value decoded: the text a person reads, and for JSON the value, its unit and the fields of a structured
/// value (a heart rate measurement's energy expended and RR intervals).
struct DecodedValue: Hashable, Sendable {
    enum Value: Hashable, Sendable {
        case number(Double)
        case integer(Int64)
        /// A value of a 64-bit integer format: its exact decimal text, a JSON string whatever its size.
        case wide(String)
        case string(String)
        case bool(Bool)
        case integers([Int])
        case numbers([Double])
        case none
    }

    /// A named part of a structured value.
    struct Field: Hashable, Sendable {
        var name: String
        var value: Value
        init(_ name: String, _ value: Value) {
            self.name = name
            self.value = value
        }
    }

    var text: String
    var value: Value = .none
    /// The unit of `value` ("°C", "%", "bpm"), nil when it has none.
    var unit: String?
    var fields: [Field] = []

    /// Whether the value is a number (a unit goes after it).
    var isNumber: Bool {
        switch value {
        case .number, .integer, .wide: return true
        default: return false
        }
    }

    init(text: String, value: Value = .none, unit: String? = nil, fields: [Field] = []) {
        self.text = text
        self.value = value
        self.unit = unit
        self.fields = fields
    }

    /// A floating-point number, printed as Swift prints the shortest exact form.
    init(number: Double) {
        self.init(text: number.isFinite ? "\(number)" : (number.isNaN ? "NaN" : (number > 0 ? "+INF" : "-INF")))
        value = .number(number)
    }

    /// `mantissa` times 10^`exponent`, printed exactly.
    init(decimal mantissa: Int64, exponent: Int) {
        self.init(digits: String(mantissa.magnitude), negative: mantissa < 0, exponent: exponent)
    }

    /// The decimal number `digits` (a magnitude) times 10^`exponent`, printed exactly.
    init(digits magnitude: String, negative: Bool, exponent: Int) {
        let sign = negative ? "-" : ""
        guard exponent != 0 else {
            let text = sign + magnitude
            self.init(text: text, value: Int64(text).map { .integer($0) } ?? .wide(text))
            return
        }
        var digits = magnitude
        if exponent > 0 {
            digits += String(repeating: "0", count: min(exponent, 400))
        } else {
            let places = -exponent
            if digits.count <= places { digits = String(repeating: "0", count: places - digits.count + 1) + digits }
            digits.insert(".", at: digits.index(digits.endIndex, offsetBy: -places))
        }
        let text = sign + digits
        self.init(text: text, value: Double(text).map { .number($0) } ?? .none)
    }

    /// The JSON form ("decoded" fields): {"text", "value", "unit", then the fields of a structured value}.
    /// "text" is what the text output shows; "value" a number, a string (an enumeration's name, text, or the
    /// exact digits of a 64-bit integer), a bool, an array, or null (no single value, or NaN); "unit" a string
    /// or null. Each key's type depends only on the characteristic's type, never on the value.
    var json: JSON {
        .object(
            [("text", .string(text)), ("value", Self.json(value)), ("unit", .optional(unit))]
                + fields.map { ($0.name, Self.json($0.value)) })
    }

    static func json(_ value: Value) -> JSON {
        switch value {
        case .number(let d): return d.isFinite ? .double(d) : .null
        case .integer(let i): return .number(Int(i))
        case .wide(let s): return .string(s)
        case .string(let s): return .string(s)
        case .bool(let b): return .bool(b)
        case .integers(let items): return .array(items.map(JSON.number))
        case .numbers(let items): return .array(items.map { $0.isFinite ? .double($0) : .null })
        case .none: return .null
        }
    }
}
