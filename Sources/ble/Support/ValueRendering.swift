import ArgumentParser
import BLE
import Foundation

/// How `read` and `subscribe` print a value, and how `write` reads the values it is given (`--format`).
enum ValueFormat: Hashable, Sendable, ExpressibleByArgument, CustomStringConvertible {
    /// The hex, then what the value means when the tool knows (the default).
    case auto
    /// A little-endian unsigned integer of 1 to 8 bytes (reading only: a write needs a width, `u16`).
    case uint
    /// A little-endian two's-complement integer of 1 to 8 bytes (reading only).
    case int
    /// IEEE 754 binary32 (4 bytes) or binary64 (8 bytes); or IEEE 11073 SFLOAT/FLOAT when the characteristic's
    /// Presentation Format descriptor says medfloat16/medfloat32 (reading only).
    case float
    /// One JSON object per value.
    case json
    /// A type of fixed width (`u16`, `s32be`, `f32`, `sfloat`, `bool`), or hex or UTF-8 text.
    case typed(ValueType)

    /// The hex alone.
    static let hex = ValueFormat.typed(.hex)
    /// The bytes as UTF-8 text.
    static let utf8 = ValueFormat.typed(.utf8)

    init?(argument: String) {
        switch argument.lowercased() {
        case "auto": self = .auto
        case "uint": self = .uint
        case "int": self = .int
        case "float": self = .float
        case "json": self = .json
        default:
            guard let type = ValueType(name: argument) else { return nil }
            self = .typed(type)
        }
    }

    var description: String {
        switch self {
        case .auto: "auto"
        case .uint: "uint"
        case .int: "int"
        case .float: "float"
        case .json: "json"
        case .typed(let type): type.description
        }
    }

    /// What Tab offers after --format.
    static let completions = [
        "auto", "hex", "utf8", "uint", "int", "float", "json", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
        "u16be", "u32be", "f32", "f64", "sfloat", "medfloat32", "bool",
    ]

    static var allValueStrings: [String] { completions }

    /// The type a write takes its values in; an error for a format that only reads.
    func typeForWriting() throws(ValueInputError) -> ValueType {
        switch self {
        case .typed(let type): return type
        case .auto: return .hex
        case .uint, .int:
            throw ValueInputError(
                "--format \(self) does not say how many bytes to write: give u8, u16, u32 or u64 (s8 ... s64 signed)")
        case .float:
            throw ValueInputError(
                "--format float does not say how many bytes to write: give f32 or f64 (or sfloat, medfloat32)")
        case .json:
            throw ValueInputError(
                "--format json is for reading; a write takes hex, utf8 or a type (\(ValueType.names))")
        }
    }
}

/// A value to print, with what the tool knows of how to read it.
struct ValueReading: Sendable {
    let value: Data
    /// The attribute's type (a characteristic's or a descriptor's).
    let type: BluetoothUUID
    /// The characteristic's Characteristic Presentation Format descriptor, when it has one (and this is its value).
    let presentation: PresentationFormat?

    init(_ value: Data, type: BluetoothUUID, presentation: PresentationFormat? = nil) {
        self.value = value
        self.type = type
        self.presentation = presentation
    }

    /// What the value means: by its Presentation Format when it has one, else by its type when the tool knows it.
    var decoded: DecodedValue? {
        if let presentation, let decoded = presentation.decode(value) { return decoded }
        return ValueDecoding.decode(value, of: type)
    }

    /// "0848  72 bpm", or the hex alone when nothing is known; "(empty)" for no bytes. A value the tool does not
    /// know that is printable UTF-8 text is shown with its text: `48656c6c6f  "Hello"`.
    var hexAndMeaning: String {
        let hex = value.isEmpty ? "(empty)" : value.hex
        if let decoded { return "\(hex)  \(decoded.text)" }
        if let preview = Self.preview(value) { return "\(hex)  \(JSON.quote(preview))" }
        return hex
    }

    /// The value as text when it is valid UTF-8 of at least two characters, none of them a control character
    /// (tab aside), a private-use, unassigned or replacement one: what is worth showing beside the hex.
    static func preview(_ value: Data) -> String? {
        guard value.count >= 2, let text = String(bytes: value, encoding: .utf8), text.count >= 2 else { return nil }
        for scalar in text.unicodeScalars {
            if scalar == "\t" { continue }
            switch scalar.properties.generalCategory {
            case .control, .format, .privateUse, .unassigned, .surrogate, .lineSeparator, .paragraphSeparator:
                return nil
            default:
                if scalar == "\u{FFFD}" { return nil }
            }
        }
        return text
    }

    /// The value in `format`, or why it does not fit that format.
    func rendered(_ format: ValueFormat) -> Result<String, RenderingError> {
        let b = [UInt8](value)
        switch format {
        case .auto:
            return .success(hexAndMeaning)
        case .typed(let type):
            return type.decode(value).map(ValueType.text)
        case .uint, .int:
            guard (1...8).contains(b.count),
                let n = ValueRendering.integer(b, bits: 8 * b.count, signed: format == .int)
            else {
                return .failure(RenderingError("\(format) takes 1 to 8 bytes; \(describeLength(b.count))"))
            }
            return .success(format == .uint ? String(UInt64(bitPattern: n)) : String(n))
        case .float:
            switch presentation?.format {
            case PresentationFormat.Format.sfloat? where b.count == 2,
                PresentationFormat.Format.float? where b.count == 4:
                return ValueRendering.medical(b).map { .success($0.text) } ?? .failure(RenderingError("unreadable"))
            default:
                guard b.count == 4 || b.count == 8, let v = ValueRendering.ieee(b) else {
                    return .failure(
                        RenderingError(
                            "float takes 4 or 8 bytes (IEEE 754), or 2 or 4 with a medfloat Presentation Format; \(describeLength(b.count))"
                        ))
                }
                return .success(DecodedValue(number: v).text)
            }
        case .json:
            return .success(json().text)
        }
    }

    private func describeLength(_ n: Int) -> String {
        "this value has \(n) byte\(n == 1 ? "" : "s") (\(value.isEmpty ? "empty" : value.hex))"
    }

    /// {"uuid", "name", "hex", "decoded", "utf8", "uint", "int", "presentation"}, and with a typed format
    /// {"format", "value"} after them: "decoded" is `DecodedValue.json` or null; "utf8" is null unless the bytes
    /// are UTF-8; "uint" and "int" are null unless the value has 1 to 8 bytes, numbers for 1 to 6 bytes and exact
    /// decimal strings for 7 or 8 (a 64-bit integer is a string, whatever its size); "presentation" is the
    /// Presentation Format descriptor or null.
    func json(extra: [(String, JSON)] = [], typed: ValueType? = nil) -> JSON {
        let b = [UInt8](value)
        let fits = (1...8).contains(b.count)
        let unsigned = fits ? ValueRendering.integer(b, bits: 8 * b.count, signed: false) : nil
        let signed = fits ? ValueRendering.integer(b, bits: 8 * b.count, signed: true) : nil
        func number(_ text: String?) -> JSON {
            guard let text else { return .null }
            guard b.count <= 6, let n = Int(text) else { return .string(text) }
            return .number(n)
        }
        var fields: [(String, JSON)] =
            extra + [
                ("uuid", .string(type.uuidString)),
                ("name", .optional(type.displayName)),
                ("hex", .string(value.hex)),
                ("decoded", decoded?.json ?? .null),
                ("utf8", .optional(String(bytes: b, encoding: .utf8))),
                ("uint", number(unsigned.map { String(UInt64(bitPattern: $0)) })),
                ("int", number(signed.map { String($0) })),
                ("presentation", presentation.map(Self.json) ?? .null),
            ]
        if let typed {
            fields.append(("format", .string(typed.description)))
            fields.append(("value", (try? typed.decode(value).get()).map(typed.json) ?? .null))
        }
        return .object(fields)
    }

    static func json(_ p: PresentationFormat) -> JSON {
        .object([
            ("format", .string(p.format.description)),
            ("exponent", .number(Int(p.exponent))),
            ("unit", .string(String(format: "%04X", p.unit))),
            ("unitSymbol", .optional(p.unitSymbol)),
            ("namespace", .number(Int(p.namespace))),
            ("description", .number(Int(p.description))),
        ])
    }
}

/// Why a value cannot be shown in the format asked for.
struct RenderingError: Error, Sendable {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Number codecs for values: little-endian, as Bluetooth is; none traps on any input.
enum ValueRendering {
    /// The little-endian integer of `bits` significant bits in `bytes` (at most 8 of them), sign-extended when
    /// `signed`; bits beyond `bits` are ignored (uint12 in two octets). Nil for more than 8 bytes.
    static func integer(_ bytes: [UInt8], bits: Int, signed: Bool) -> Int64? {
        guard bytes.count <= 8, bits > 0, bits <= 64 else { return nil }
        var raw: UInt64 = 0
        for (i, byte) in bytes.enumerated() { raw |= UInt64(byte) << (8 * UInt64(i)) }
        if bits < 64 {
            raw &= (1 << UInt64(bits)) - 1
            if signed, raw & (1 << UInt64(bits - 1)) != 0 { raw |= ~((1 << UInt64(bits)) - 1) }
        }
        return Int64(bitPattern: raw)
    }

    /// IEEE 754 binary32 (4 bytes) or binary64 (8 bytes), little-endian.
    static func ieee(_ bytes: [UInt8]) -> Double? {
        switch bytes.count {
        case 4: return integer(bytes, bits: 32, signed: false).map { Double(Float(bitPattern: UInt32($0))) }
        case 8: return integer(bytes, bits: 64, signed: false).map { Double(bitPattern: UInt64(bitPattern: $0)) }
        default: return nil
        }
    }

    /// IEEE 11073-20601 SFLOAT (2 bytes: 4-bit exponent, 12-bit mantissa) or FLOAT (4 bytes: 8-bit exponent,
    /// 24-bit mantissa), both signed, value = mantissa * 10^exponent; the reserved mantissas are NaN, NRes,
    /// +INF, -INF and "reserved".
    static func medical(_ bytes: [UInt8]) -> DecodedValue? {
        let mantissaBits: Int
        switch bytes.count {
        case 2: mantissaBits = 12
        case 4: mantissaBits = 24
        default: return nil
        }
        guard let raw = integer(bytes, bits: 8 * bytes.count, signed: false) else { return nil }
        let mantissaField = raw & ((1 << Int64(mantissaBits)) - 1)
        let top = Int64(1) << Int64(mantissaBits - 1)
        // The special values sit at the top of the positive range and the bottom of the negative one.
        switch mantissaField - top {
        case -1: return DecodedValue(text: "NaN")
        case 0: return DecodedValue(text: "NRes")
        case -2: return DecodedValue(text: "+INF")
        case 2: return DecodedValue(text: "-INF")
        case 1: return DecodedValue(text: "reserved")
        default: break
        }
        guard let mantissa = integer(bytes, bits: mantissaBits, signed: true) else { return nil }
        let exponent: Int
        if bytes.count == 2 {
            let e = Int((raw >> 12) & 0x0F)
            exponent = e >= 8 ? e - 16 : e
        } else {
            exponent = Int(Int8(bitPattern: bytes[3]))
        }
        return DecodedValue(decimal: mantissa, exponent: exponent)
    }
}
