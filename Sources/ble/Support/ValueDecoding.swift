import BLE
import Foundation

/// Human-readable meanings of values whose type the tool knows. Returns nil when it does not know the type
/// or the bytes do not fit it; the hex is always printed beside. A characteristic's Presentation Format
/// descriptor (`PresentationFormat`), when it has one, goes before all of this.
enum ValueDecoding {
    /// What a value of type `type` means: the decoders below, else the SIG-assigned format of the type
    /// (`knownFormats`).
    static func decode(_ value: Data, of type: BluetoothUUID) -> DecodedValue? {
        decodeKnown(value, of: type) ?? knownFormats[type]?.decode(value)
    }

    /// SIG characteristics whose value is one number of a fixed format (GATT Specification Supplement, 3.x):
    /// read as if they carried this Presentation Format.
    static let knownFormats: [BluetoothUUID: PresentationFormat] = [
        // Temperature Celsius, Temperature Fahrenheit (0.1 degree).
        BluetoothUUID(0x2A1F): PresentationFormat(format: .sint16, exponent: -1, unit: 0x272F),
        BluetoothUUID(0x2A20): PresentationFormat(format: .sint16, exponent: -1, unit: 0x27AC),
        // Pressure (0.1 Pa), Temperature (0.01 °C), Humidity (0.01 %).
        BluetoothUUID(0x2A6D): PresentationFormat(format: .uint32, exponent: -1, unit: 0x2724),
        BluetoothUUID(0x2A6E): PresentationFormat(format: .sint16, exponent: -2, unit: 0x272F),
        BluetoothUUID(0x2A6F): PresentationFormat(format: .uint16, exponent: -2, unit: 0x27AD),
        // UV Index, Irradiance (0.1 W/m²), Dew Point (°C).
        BluetoothUUID(0x2A76): PresentationFormat(format: .uint8),
        BluetoothUUID(0x2A77): PresentationFormat(format: .uint16, exponent: -1, unit: 0x27B6),
        BluetoothUUID(0x2A7B): PresentationFormat(format: .sint8, unit: 0x272F),
    ]

    static let stringTypes: Set<BluetoothUUID> = [
        .deviceName, .modelNumberString, .serialNumberString, .firmwareRevisionString, .hardwareRevisionString,
        .softwareRevisionString, .manufacturerNameString, .characteristicUserDescription,
    ]

    /// The text alone of `decode` (what `explore` and `read` print after the hex).
    static func describe(_ value: Data, of type: BluetoothUUID) -> String? { decode(value, of: type)?.text }

    static func decodeKnown(_ value: Data, of type: BluetoothUUID) -> DecodedValue? {
        let b = [UInt8](value)
        func u16(_ i: Int) -> Int? { b.count >= i + 2 ? Int(b[i]) | Int(b[i + 1]) << 8 : nil }
        func u32(_ i: Int) -> Int? {
            b.count >= i + 4 ? Int(b[i]) | Int(b[i + 1]) << 8 | Int(b[i + 2]) << 16 | Int(b[i + 3]) << 24 : nil
        }
        func named(_ names: [String], _ code: UInt8) -> DecodedValue {
            let name = Int(code) < names.count ? names[Int(code)] : "reserved (\(code))"
            return DecodedValue(text: name, value: .string(name))
        }
        if stringTypes.contains(type) {
            return String(data: value, encoding: .utf8).map { DecodedValue(text: "\"\($0)\"", value: .string($0)) }
        }
        switch type {
        case .appearance:
            guard let v = u16(0) else { return nil }
            let name = appearances[v]
            return DecodedValue(
                text: "appearance " + (name.map { "\($0) (\(hex16(v)))" } ?? hex16(v)), value: .integer(Int64(v)),
                fields: [.init("category", name.map(DecodedValue.Value.string) ?? .none)])
        case .batteryLevel:
            return b.count == 1 ? DecodedValue(text: "\(b[0]) %", value: .integer(Int64(b[0])), unit: "%") : nil
        case .bodySensorLocation:
            guard b.count == 1 else { return nil }
            return named(["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"], b[0])
        case .heartRateMeasurement:
            return heartRate(b)
        case .temperatureMeasurement:
            return temperature(b)
        case .temperatureType:
            guard b.count == 1 else { return nil }
            let names = [
                "reserved", "Armpit", "Body (general)", "Ear", "Finger", "Gastro-intestinal tract", "Mouth",
                "Rectum", "Toe", "Tympanum",
            ]
            return named(names, b[0])
        case BluetoothUUID(0x2A21):
            guard b.count == 2, let v = u16(0) else { return nil }
            return DecodedValue(text: "\(v) s", value: .integer(Int64(v)), unit: "s")
        case .serviceChanged:
            guard b.count == 4, let start = u16(0), let end = u16(2) else { return nil }
            return DecodedValue(text: "handles \(hex16(start))-\(hex16(end))", value: .integers([start, end]))
        case .peripheralPreferredConnectionParameters:
            guard let lo = u16(0), let hi = u16(2), let latency = u16(4), let timeout = u16(6) else { return nil }
            return DecodedValue(
                text:
                    "interval \(Double(lo) * 1.25)-\(Double(hi) * 1.25) ms, latency \(latency), timeout \(timeout * 10) ms",
                fields: [
                    .init("minimumIntervalMs", .number(Double(lo) * 1.25)),
                    .init("maximumIntervalMs", .number(Double(hi) * 1.25)),
                    .init("latency", .integer(Int64(latency))), .init("timeoutMs", .integer(Int64(timeout * 10))),
                ])
        case .clientCharacteristicConfiguration:
            guard let v = u16(0) else { return nil }
            return DecodedValue(
                text: "notifications \(v & 1 != 0 ? "on" : "off"), indications \(v & 2 != 0 ? "on" : "off")",
                value: .integer(Int64(v)),
                fields: [.init("notifications", .bool(v & 1 != 0)), .init("indications", .bool(v & 2 != 0))])
        case .characteristicPresentationFormat:
            return PresentationFormat(descriptor: value).map { DecodedValue(text: $0.summary) }
        case .characteristicExtendedProperties:
            guard let v = u16(0) else { return nil }
            return DecodedValue(
                text: "reliable write \(v & 1 != 0 ? "on" : "off"), writable auxiliaries \(v & 2 != 0 ? "on" : "off")",
                value: .integer(Int64(v)),
                fields: [.init("reliableWrite", .bool(v & 1 != 0)), .init("writableAuxiliaries", .bool(v & 2 != 0))])
        case DoorLockProfile.lockState, SecureLockProfile.lockState:
            guard b.count == 1, b[0] <= 1 else { return nil }
            let state = b[0] == 1 ? "locked" : "unlocked"
            return DecodedValue(text: state, value: .string(state))
        case PrinterProfile.status:
            guard b.count == 4, let v = u32(0) else { return nil }
            return DecodedValue(text: "\(v) bytes received", value: .integer(Int64(v)), unit: "bytes")
        case CameraProfile.status:
            guard b.count == 8, let taken = u32(0), let dropped = u32(4) else { return nil }
            return DecodedValue(
                text: "\(taken) bytes taken, \(dropped) dropped",
                fields: [.init("taken", .integer(Int64(taken))), .init("dropped", .integer(Int64(dropped)))])
        default:
            return nil
        }
    }

    static func hex16(_ v: Int) -> String { String(format: "0x%04X", v) }

    static let appearances: [Int: String] = [
        0x0000: "Unknown", 0x0040: "Generic Phone", 0x0080: "Generic Computer", 0x00C0: "Generic Watch",
        0x0300: "Generic Thermometer", 0x0301: "Ear Thermometer", 0x0340: "Generic Heart Rate Sensor",
        0x0341: "Heart Rate Belt", 0x03C0: "Generic HID",
    ]

    /// Heart Rate Measurement (Heart Rate Service 3.1; GATT Specification Supplement 3.113): flags, an 8- or
    /// 16-bit rate in beats per minute, then Energy Expended (uint16, kJ) and RR-Intervals (uint16, 1/1024 s each)
    /// when the flags say so. Flags: bit 0 16-bit rate, bits 1-2 sensor contact (bit 2 supported, bit 1
    /// detected), bit 3 energy expended present, bit 4 RR-intervals present.
    static func heartRate(_ b: [UInt8]) -> DecodedValue? {
        guard let flags = b.first else { return nil }
        let wide = flags & 0x01 != 0
        guard b.count >= (wide ? 3 : 2) else { return nil }
        let bpm = wide ? Int(b[1]) | Int(b[2]) << 8 : Int(b[1])
        var text = "\(bpm) bpm"
        var index = wide ? 3 : 2
        let contact: DecodedValue.Value = flags & 0x04 != 0 ? .bool(flags & 0x02 != 0) : .none
        var energy: DecodedValue.Value = .none
        if flags & 0x08 != 0, b.count >= index + 2 {
            let kJ = Int(b[index]) | Int(b[index + 1]) << 8
            text += ", energy expended \(kJ) kJ"
            energy = .integer(Int64(kJ))
            index += 2
        }
        var intervals: [Double] = []
        if flags & 0x10 != 0 {
            while b.count >= index + 2 {
                intervals.append(Double(Int(b[index]) | Int(b[index + 1]) << 8) / 1024)
                index += 2
            }
            if !intervals.isEmpty {
                text += ", RR " + intervals.map { String(format: "%.3f s", $0) }.joined(separator: " ")
            }
        }
        return DecodedValue(
            text: text, value: .integer(Int64(bpm)), unit: "bpm",
            fields: [
                .init("sensorContact", contact), .init("energyExpendedKJ", energy),
                .init("rrIntervals", .numbers(intervals)),
            ])
    }

    /// Temperature Measurement (Health Thermometer Service 3.1): flags (bit 0: Fahrenheit), then an IEEE-11073
    /// 32-bit FLOAT (24-bit signed mantissa, 8-bit signed exponent, little-endian).
    static func temperature(_ b: [UInt8]) -> DecodedValue? {
        guard b.count >= 5, let reading = ValueRendering.medical(Array(b[1...4])) else { return nil }
        let unit = b[0] & 1 != 0 ? "°F" : "°C"
        guard reading.isNumber else { return DecodedValue(text: reading.text, unit: unit) }
        return DecodedValue(text: "\(reading.text) \(unit)", value: reading.value, unit: unit)
    }
}
