import BLE
import Foundation

/// A typed way to read and write a value, as `--format` names it for `read`, `write` and `subscribe`: fixed-width
/// integers (`u8` … `u64`, `s8` … `s64`, little-endian unless `be` follows), IEEE 754 floats (`f32`, `f64`), the
/// IEEE 11073-20601 medical floats (`sfloat`, `medfloat32`), `bool`, `utf8` text and `hex`.
///
/// A value of a fixed-width type may hold several elements, written and printed with commas (`--format u16
/// 1,2,3` is six bytes); hex, text and bool are one element. Nothing here traps on any input.
/// - SeeAlso: Assigned Numbers 2.4.1 (the formats of the Characteristic Presentation Format descriptor, whose
///   names `uint16`, `sint32`, `float32`, `medfloat16` ... are accepted too); IEEE 11073-20601 (SFLOAT, FLOAT).
struct ValueType: Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// An integer of this many bytes (1, 2, 3, 4, 6 or 8).
        case unsigned(Int)
        case signed(Int)
        /// IEEE 754 binary32 or binary64.
        case float32
        case float64
        /// IEEE 11073-20601 16-bit SFLOAT: 4-bit exponent, 12-bit mantissa.
        case sfloat
        /// IEEE 11073-20601 32-bit FLOAT: 8-bit exponent, 24-bit mantissa.
        case medfloat32
        /// One octet, 0 (false) or 1 (true).
        case bool
        case utf8
        case hex
    }

    var kind: Kind
    /// Most significant byte first (only for the integers and IEEE 754 floats).
    var bigEndian: Bool

    init(kind: Kind, bigEndian: Bool = false) {
        self.kind = kind
        self.bigEndian = bigEndian
    }

    static let hex = ValueType(kind: .hex)
    static let utf8 = ValueType(kind: .utf8)

    /// The names `--format` takes, as help lists them.
    static let names =
        "u8 u16 u24 u32 u48 u64 s8 s16 s24 s32 s48 s64 (add be for big-endian: u16be), f32 f64 (f32be), sfloat, medfloat32, bool, utf8, hex"

    /// Parses a type's name: `u16`, `u16le`, `u16be`, `uint16`, `s32`, `sint32`, `i32`, `f32`, `float32`,
    /// `sfloat`, `medfloat16`, `medfloat32`, `bool`, `utf8`, `text`, `hex`; in any case.
    init?(name: String) {
        var text = name.lowercased()
        var big = false
        if text.hasSuffix("be") || text.hasSuffix("le") {
            big = text.hasSuffix("be")
            text.removeLast(2)
        }
        let kind: Kind
        switch text {
        case "sfloat", "medfloat16": kind = .sfloat
        case "medfloat32": kind = .medfloat32
        case "f32", "float32": kind = .float32
        case "f64", "float64": kind = .float64
        case "bool", "boolean": kind = .bool
        case "utf8", "text": kind = .utf8
        case "hex": kind = .hex
        default:
            let prefixes: [(String, Bool)] = [
                ("uint", false), ("sint", true), ("int", true), ("u", false), ("s", true),
                ("i", true),
            ]
            guard let (prefix, signed) = prefixes.first(where: { text.hasPrefix($0.0) }),
                let bits = Int(text.dropFirst(prefix.count)), [8, 16, 24, 32, 48, 64].contains(bits)
            else { return nil }
            kind = signed ? .signed(bits / 8) : .unsigned(bits / 8)
        }
        // Byte order means something only for a number of several bytes.
        if name.count != text.count {
            switch kind {
            case .unsigned(let n), .signed(let n):
                guard n > 1 else { return nil }
            case .float32, .float64: break
            default: return nil
            }
        }
        self.init(kind: kind, bigEndian: big)
    }

    var description: String {
        let order = bigEndian ? "be" : ""
        switch kind {
        case .unsigned(let n): return "u\(8 * n)\(order)"
        case .signed(let n): return "s\(8 * n)\(order)"
        case .float32: return "f32\(order)"
        case .float64: return "f64\(order)"
        case .sfloat: return "sfloat"
        case .medfloat32: return "medfloat32"
        case .bool: return "bool"
        case .utf8: return "utf8"
        case .hex: return "hex"
        }
    }

    /// Bytes of one element; nil for hex and text, which take any length.
    var width: Int? {
        switch kind {
        case .unsigned(let n), .signed(let n): return n
        case .float32, .medfloat32: return 4
        case .float64: return 8
        case .sfloat: return 2
        case .bool: return 1
        case .utf8, .hex: return nil
        }
    }

    /// Whether a value may hold several elements (separated by commas).
    var takesSeveral: Bool {
        switch kind {
        case .bool, .utf8, .hex: return false
        default: return true
        }
    }

    // MARK: Writing

    /// The bytes of `text`, a value in this type: for a number type one element or several separated by commas.
    /// The error is one line that says what is wrong.
    func encode(_ text: String) throws(ValueInputError) -> Data {
        switch kind {
        case .hex:
            guard let data = Data(lenientHex: text) else { throw ValueInputError("'\(text)' is not hex digits") }
            return data
        case .utf8:
            return Data(text.utf8)
        default:
            break
        }
        let items = takesSeveral ? text.split(separator: ",", omittingEmptySubsequences: false) : [Substring(text)]
        var out = Data()
        for item in items {
            out += try encodeElement(item.trimmingCharacters(in: .whitespaces))
        }
        return out
    }

    private func encodeElement(_ text: String) throws(ValueInputError) -> Data {
        guard !text.isEmpty else { throw ValueInputError("an empty element: give a \(self) value") }
        switch kind {
        case .unsigned(let n):
            let max = n == 8 ? UInt64.max : (UInt64(1) << UInt64(8 * n)) - 1
            guard let v = Self.parseUnsigned(text) else {
                if Self.isDecimalInteger(text) {
                    throw ValueInputError("\(text) is out of range for \(self) (0 to \(max))")
                }
                throw ValueInputError("'\(text)' is not a \(self) (an integer, 0 to \(max))")
            }
            guard v <= max else { throw ValueInputError("\(text) is out of range for \(self) (0 to \(max))") }
            return ordered(Self.littleEndian(v, bytes: n))
        case .signed(let n):
            let min = n == 8 ? Int64.min : -(Int64(1) << Int64(8 * n - 1))
            let max = n == 8 ? Int64.max : (Int64(1) << Int64(8 * n - 1)) - 1
            guard let v = Self.parseSigned(text) else {
                if Self.isDecimalInteger(text) {
                    throw ValueInputError("\(text) is out of range for \(self) (\(min) to \(max))")
                }
                throw ValueInputError("'\(text)' is not a \(self) (an integer, \(min) to \(max))")
            }
            guard v >= min, v <= max else {
                throw ValueInputError("\(text) is out of range for \(self) (\(min) to \(max))")
            }
            return ordered(Self.littleEndian(UInt64(bitPattern: v), bytes: n))
        case .float32:
            guard let v = Self.parseFloat(text) else { throw ValueInputError("'\(text)' is not a number for f32") }
            guard !v.isFinite || Float(v).isFinite else {
                throw ValueInputError("\(text) is out of range for f32 (at most \(Float.greatestFiniteMagnitude))")
            }
            return ordered(Self.littleEndian(UInt64(Float(v).bitPattern), bytes: 4))
        case .float64:
            guard let v = Self.parseFloat(text) else { throw ValueInputError("'\(text)' is not a number for f64") }
            return ordered(Self.littleEndian(v.bitPattern, bytes: 8))
        case .sfloat, .medfloat32:
            return try MedicalFloat.encode(text, wide: kind == .medfloat32)
        case .bool:
            switch text.lowercased() {
            case "1", "true", "on", "yes": return Data([1])
            case "0", "false", "off", "no": return Data([0])
            default: throw ValueInputError("'\(text)' is not a bool (true or false, 1 or 0)")
            }
        case .utf8, .hex:
            return Data()
        }
    }

    private func ordered(_ bytes: [UInt8]) -> Data { Data(bigEndian ? bytes.reversed() : bytes) }

    static func littleEndian(_ v: UInt64, bytes: Int) -> [UInt8] {
        (0..<bytes).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) }
    }

    /// Digits with an optional sign: a number, whatever its size.
    static func isDecimalInteger(_ text: String) -> Bool {
        let digits = text.first == "-" || text.first == "+" ? text.dropFirst() : Substring(text)
        return !digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// Decimal, or hex after 0x.
    static func parseUnsigned(_ text: String) -> UInt64? {
        let t = text.lowercased()
        if t.hasPrefix("0x") { return UInt64(t.dropFirst(2), radix: 16) }
        if t.hasPrefix("+") { return UInt64(t.dropFirst(), radix: 10) }
        return UInt64(t, radix: 10)
    }

    /// Decimal with an optional sign, or hex after 0x (a bit pattern is not taken: -0x10 is -16).
    static func parseSigned(_ text: String) -> Int64? {
        var t = text.lowercased()
        var negative = false
        if t.hasPrefix("-") || t.hasPrefix("+") {
            negative = t.hasPrefix("-")
            t.removeFirst()
        }
        guard let magnitude = t.hasPrefix("0x") ? UInt64(t.dropFirst(2), radix: 16) : UInt64(t, radix: 10) else {
            return nil
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        // Beyond Int64.max reads as out of range, not as "not a number".
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// A decimal number, or nan, inf, +inf, -inf (infinity too); never hex floats or other spellings.
    static func parseFloat(_ text: String) -> Double? {
        switch text.lowercased() {
        case "nan": return .nan
        case "inf", "+inf", "infinity", "+infinity": return .infinity
        case "-inf", "-infinity": return -.infinity
        default: break
        }
        guard text.allSatisfy({ "0123456789+-.eE".contains($0) }), let v = Double(text), v.isFinite else {
            return nil
        }
        return v
    }

    // MARK: Reading

    /// The value's elements as this type reads them, or why it does not fit (its length).
    func decode(_ value: Data) -> Result<[TypedElement], RenderingError> {
        let b = [UInt8](value)
        switch kind {
        case .hex: return .success([.text(value.hex)])
        case .utf8:
            guard let text = String(bytes: b, encoding: .utf8) else {
                return .failure(RenderingError("\(value.hex) is not UTF-8 text"))
            }
            return .success([.text(text)])
        default: break
        }
        guard let width, !b.isEmpty, b.count % width == 0, takesSeveral || b.count == width else {
            let what = takesSeveral ? "a multiple of \(width ?? 1) bytes" : "\(width ?? 1) byte"
            let n = b.count
            return .failure(
                RenderingError(
                    "\(self) takes \(what); this value has \(n) byte\(n == 1 ? "" : "s") (\(b.isEmpty ? "empty" : value.hex))"
                ))
        }
        var out: [TypedElement] = []
        for start in stride(from: 0, to: b.count, by: width) {
            var chunk = Array(b[start..<start + width])
            if bigEndian { chunk.reverse() }
            switch decodeElement(chunk) {
            case .success(let element): out.append(element)
            case .failure(let error): return .failure(error)
            }
        }
        return .success(out)
    }

    private func decodeElement(_ b: [UInt8]) -> Result<TypedElement, RenderingError> {
        switch kind {
        case .unsigned(let n):
            let v = UInt64(bitPattern: ValueRendering.integer(b, bits: 8 * n, signed: false) ?? 0)
            return .success(n == 8 ? .wide(String(v)) : .integer(Int64(v)))
        case .signed(let n):
            let v = ValueRendering.integer(b, bits: 8 * n, signed: true) ?? 0
            return .success(n == 8 ? .wide(String(v)) : .integer(v))
        case .float32, .float64:
            return .success(.float(ValueRendering.ieee(b) ?? .nan))
        case .sfloat, .medfloat32:
            guard let d = ValueRendering.medical(b) else { return .failure(RenderingError("unreadable")) }
            switch d.value {
            case .number(let v): return .success(.medical(v, text: d.text))
            case .integer(let v): return .success(.medical(Double(v), text: d.text))
            default: return .success(.special(d.text))
            }
        case .bool:
            guard b[0] <= 1 else {
                return .failure(RenderingError("bool takes 00 or 01; this value is \(Data(b).hex)"))
            }
            return .success(.bool(b[0] == 1))
        case .utf8, .hex:
            return .success(.text(Data(b).hex))
        }
    }

    /// The elements as `write` takes them back: "60", "1,2,3", "36.5", "true", the text, the hex.
    static func text(_ elements: [TypedElement]) -> String {
        elements.map(\.text).joined(separator: ",")
    }

    /// The elements in JSON: one element as itself, several as an array.
    func json(_ elements: [TypedElement]) -> JSON {
        takesSeveral ? .array(elements.map(\.json)) : (elements.first?.json ?? .null)
    }
}

/// One element of a typed value.
enum TypedElement: Hashable, Sendable {
    /// An integer of up to 48 bits: a JSON number.
    case integer(Int64)
    /// A 64-bit integer: exact decimal digits, a JSON string always (most JSON readers keep 53 bits).
    case wide(String)
    /// An IEEE 754 float (NaN and infinities are JSON null).
    case float(Double)
    /// An IEEE 11073 float: its value, and its text written exactly ("36.5").
    case medical(Double, text: String)
    /// An IEEE 11073 special value: NaN, NRes, +INF, -INF, reserved (JSON null).
    case special(String)
    case bool(Bool)
    case text(String)

    var text: String {
        switch self {
        case .integer(let v): return String(v)
        case .wide(let s): return s
        case .float(let v): return DecodedValue(number: v).text
        case .medical(_, let text), .special(let text): return text
        case .bool(let b): return b ? "true" : "false"
        case .text(let s): return s
        }
    }

    var json: JSON {
        switch self {
        case .integer(let v): return .number(Int(v))
        case .wide(let s): return .string(s)
        case .float(let v), .medical(let v, _): return v.isFinite ? .double(v) : .null
        case .special: return .null
        case .bool(let b): return .bool(b)
        case .text(let s): return .string(s)
        }
    }
}

/// Why a value given on the command line cannot be written in the type asked for: one line.
struct ValueInputError: Error, Sendable {
    let message: String
    init(_ message: String) { self.message = message }
}

/// IEEE 11073-20601 SFLOAT and FLOAT from decimal text, exactly: value = mantissa × 10^exponent, both signed;
/// SFLOAT has a 12-bit mantissa and a 4-bit exponent, FLOAT a 24-bit mantissa and an 8-bit exponent. The top and
/// bottom mantissas are the special values (NaN 0x7FF / 0x7FFFFF, NRes 0x800 / 0x800000, +INF 0x7FE / 0x7FFFFE,
/// -INF 0x802 / 0x800002, reserved 0x801 / 0x800001), so an ordinary mantissa is within ±2045 or ±8388605.
enum MedicalFloat {
    static func encode(_ text: String, wide: Bool) throws(ValueInputError) -> Data {
        let name = wide ? "medfloat32" : "sfloat"
        let mantissaBits = wide ? 24 : 12
        let special: [String: Int64] = [
            "nan": (1 << (mantissaBits - 1)) - 1, "nres": 1 << (mantissaBits - 1),
            "+inf": (1 << (mantissaBits - 1)) - 2, "inf": (1 << (mantissaBits - 1)) - 2,
            "-inf": (1 << (mantissaBits - 1)) + 2,
        ]
        if let field = special[text.lowercased()] { return pack(field, exponent: 0, wide: wide) }
        guard var (mantissa, exponent) = decimal(text) else {
            throw ValueInputError("'\(text)' is not a number for \(name) (or NaN, NRes, +INF, -INF)")
        }
        let largest: Int64 = (1 << (mantissaBits - 1)) - 3
        let exponentRange = wide ? -128...127 : -8...7
        // The fewest digits first: trailing zeros move into the exponent.
        while mantissa != 0, mantissa % 10 == 0, exponent < exponentRange.upperBound {
            mantissa /= 10
            exponent += 1
        }
        if mantissa == 0 { exponent = 0 }
        // A large number with room below: more zeros in the mantissa, a smaller exponent.
        while exponent > exponentRange.upperBound, mantissa.magnitude * 10 <= largest {
            mantissa *= 10
            exponent -= 1
        }
        guard mantissa.magnitude <= largest, exponentRange.contains(exponent) else {
            throw ValueInputError(
                "\(text) does not fit \(name) exactly (a mantissa within ±\(largest) times 10^\(exponentRange.lowerBound)...10^\(exponentRange.upperBound))"
            )
        }
        return pack(mantissa, exponent: exponent, wide: wide)
    }

    private static func pack(_ mantissa: Int64, exponent: Int, wide: Bool) -> Data {
        if wide {
            let m = UInt32(truncatingIfNeeded: mantissa) & 0xFF_FFFF
            let raw = m | UInt32(UInt8(bitPattern: Int8(exponent))) << 24
            return Data(ValueType.littleEndian(UInt64(raw), bytes: 4))
        }
        let m = UInt16(truncatingIfNeeded: mantissa) & 0x0FFF
        let raw = m | (UInt16(exponent & 0x0F) << 12)
        return Data(ValueType.littleEndian(UInt64(raw), bytes: 2))
    }

    /// "-36.50" as (-3650, -2), "1e3" as (1, 3); nil when it is not a decimal number or has too many digits.
    static func decimal(_ text: String) -> (Int64, Int)? {
        var t = Substring(text)
        var exponent = 0
        if let e = t.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let x = Int(t[t.index(after: e)...]), abs(x) < 1000 else { return nil }
            exponent = x
            t = t[..<e]
        }
        var negative = false
        if t.first == "-" || t.first == "+" {
            negative = t.first == "-"
            t = t.dropFirst()
        }
        let parts = t.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !(parts[0].isEmpty && (parts.count == 1 || parts[1].isEmpty)),
            parts.allSatisfy({ $0.allSatisfy(\.isASCIIDigit) })
        else { return nil }
        var digits = String(parts[0]) + (parts.count == 2 ? String(parts[1]) : "")
        exponent -= parts.count == 2 ? parts[1].count : 0
        // Leading zeros carry nothing; more than 18 significant digits do not fit any mantissa.
        while digits.count > 1, digits.first == "0" { digits.removeFirst() }
        guard digits.count <= 18, let magnitude = Int64(digits) else { return nil }
        return (negative ? -magnitude : magnitude, exponent)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
