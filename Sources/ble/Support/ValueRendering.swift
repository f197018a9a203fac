import ArgumentParser
import BLE
import Foundation

/// How `read` and `subscribe` print a value (`--format`).
enum ValueFormat: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// The hex, then what the value means when the tool knows (the default).
    case auto
    /// The hex alone.
    case hex
    /// The bytes as UTF-8 text.
    case utf8
    /// A little-endian unsigned integer of 1 to 8 bytes.
    case uint
    /// A little-endian two's-complement integer of 1 to 8 bytes.
    case int
    /// IEEE 754 binary32 (4 bytes) or binary64 (8 bytes); or IEEE 11073 SFLOAT/FLOAT when the characteristic's
    /// Presentation Format descriptor says medfloat16/medfloat32.
    case float
    /// One JSON object per value.
    case json
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

    /// "0848  72 bpm", or the hex alone when nothing is known; "(empty)" for no bytes.
    var hexAndMeaning: String {
        let hex = value.isEmpty ? "(empty)" : value.hex
        return decoded.map { "\(hex)  \($0.text)" } ?? hex
    }

    /// The value in `format`, or why it does not fit that format.
    func rendered(_ format: ValueFormat) -> Result<String, RenderingError> {
        let b = [UInt8](value)
        switch format {
        case .auto:
            return .success(hexAndMeaning)
        case .hex:
            return .success(value.hex)
        case .utf8:
            guard let text = String(bytes: b, encoding: .utf8) else {
                return .failure(RenderingError("\(value.hex) is not UTF-8 text"))
            }
            return .success(text)
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

    /// {"uuid", "name", "hex", "decoded", "utf8", "uint", "int", "presentation"}: "decoded" is the meaning (a
    /// number, string or text) or null; "utf8" is null unless the bytes are UTF-8; "uint" and "int" are null
    /// unless the value has 1 to 8 bytes; "presentation" is the Presentation Format descriptor or null.
    func json(extra: [(String, JSON)] = []) -> JSON {
        let b = [UInt8](value)
        let fits = (1...8).contains(b.count)
        let unsigned = fits ? ValueRendering.integer(b, bits: 8 * b.count, signed: false) : nil
        let signed = fits ? ValueRendering.integer(b, bits: 8 * b.count, signed: true) : nil
        // JSON numbers beyond 2^53 lose digits in most readers: such integers are strings.
        func number(_ text: String?) -> JSON {
            guard let text else { return .null }
            guard let n = Int(text), n.magnitude < 1 << 53 else { return .string(text) }
            return .number(n)
        }
        return .object(
            extra + [
                ("uuid", .string(type.uuidString)),
                ("name", .optional(type.displayName)),
                ("hex", .string(value.hex)),
                ("decoded", decoded?.json ?? .null),
                ("utf8", .optional(String(bytes: b, encoding: .utf8))),
                ("uint", number(unsigned.map { String(UInt64(bitPattern: $0)) })),
                ("int", number(signed.map { String($0) })),
                ("presentation", presentation.map(Self.json) ?? .null),
            ])
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
