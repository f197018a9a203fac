import BLE
import Foundation

/// Human-readable meanings of values whose type the tool knows. Returns nil when it does not know the type
/// or the bytes do not fit it; the hex is always printed beside. A characteristic's Presentation Format
/// descriptor (`PresentationFormat`), when it has one, goes before all of this.
enum ValueDecoding {
    /// What a value of type `type` means: the decoders below, else the SIG-assigned format of the type
    /// (`knownFormats`).
    static func decode(_ value: Data, of type: BluetoothUUID) -> DecodedValue? {
        if let text = describe(value, of: type) {
            if stringTypes.contains(type), let string = String(data: value, encoding: .utf8) {
                return DecodedValue(text: text, value: .string(string))
            }
            return DecodedValue(text: text)
        }
        return knownFormats[type]?.decode(value)
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

    static func describe(_ value: Data, of type: BluetoothUUID) -> String? {
        let b = [UInt8](value)
        func u16(_ i: Int) -> Int? { b.count >= i + 2 ? Int(b[i]) | Int(b[i + 1]) << 8 : nil }
        if stringTypes.contains(type) {
            return String(data: value, encoding: .utf8).map { "\"\($0)\"" }
        }
        switch type {
        case .appearance:
            guard let v = u16(0) else { return nil }
            return "appearance " + (appearances[v].map { "\($0) (\(hex16(v)))" } ?? hex16(v))
        case .batteryLevel:
            return b.count == 1 ? "\(b[0]) %" : nil
        case .bodySensorLocation:
            guard b.count == 1 else { return nil }
            let names = ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"]
            return Int(b[0]) < names.count ? names[Int(b[0])] : "reserved (\(b[0]))"
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
            return Int(b[0]) < names.count ? names[Int(b[0])] : "reserved (\(b[0]))"
        case BluetoothUUID(0x2A21):
            return u16(0).map { "\($0) s" }
        case .serviceChanged:
            guard let start = u16(0), let end = u16(2) else { return nil }
            return "handles \(hex16(start))-\(hex16(end))"
        case .peripheralPreferredConnectionParameters:
            guard let lo = u16(0), let hi = u16(2), let latency = u16(4), let timeout = u16(6) else { return nil }
            return
                "interval \(Double(lo) * 1.25)-\(Double(hi) * 1.25) ms, latency \(latency), timeout \(timeout * 10) ms"
        case .clientCharacteristicConfiguration:
            guard let v = u16(0) else { return nil }
            return "notifications \(v & 1 != 0 ? "on" : "off"), indications \(v & 2 != 0 ? "on" : "off")"
        case .characteristicPresentationFormat:
            return PresentationFormat(descriptor: value)?.summary
        case .characteristicExtendedProperties:
            guard let v = u16(0) else { return nil }
            return "reliable write \(v & 1 != 0 ? "on" : "off"), writable auxiliaries \(v & 2 != 0 ? "on" : "off")"
        case DoorLockProfile.lockState:
            guard b.count == 1 else { return nil }
            return b[0] == 1 ? "locked" : b[0] == 0 ? "unlocked" : nil
        case PrinterProfile.status:
            guard b.count == 4 else { return nil }
            return "\(Int(b[0]) | Int(b[1]) << 8 | Int(b[2]) << 16 | Int(b[3]) << 24) bytes received"
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

    /// Heart Rate Measurement (Heart Rate Service 3.1): flags, an 8- or 16-bit rate, then optional fields.
    static func heartRate(_ b: [UInt8]) -> String? {
        guard let flags = b.first else { return nil }
        let wide = flags & 0x01 != 0
        guard b.count >= (wide ? 3 : 2) else { return nil }
        let bpm = wide ? Int(b[1]) | Int(b[2]) << 8 : Int(b[1])
        var text = "\(bpm) bpm"
        let index = wide ? 3 : 2
        if flags & 0x08 != 0, b.count >= index + 2 {
            text += ", energy expended \(Int(b[index]) | Int(b[index + 1]) << 8) kJ"
        }
        return text
    }

    /// Temperature Measurement (Health Thermometer Service 3.1): flags (bit 0: Fahrenheit), then an IEEE-11073
    /// 32-bit FLOAT (24-bit signed mantissa, 8-bit signed exponent, little-endian).
    static func temperature(_ b: [UInt8]) -> String? {
        guard b.count >= 5 else { return nil }
        let raw = Int32(b[1]) | Int32(b[2]) << 8 | Int32(b[3]) << 16
        let mantissa = raw & 0x80_0000 != 0 ? raw - 0x100_0000 : raw
        switch raw {
        case 0x7F_FFFF: return "NaN"
        case 0x80_0000: return "NRes"
        default: break
        }
        let exponent = Int(Int8(bitPattern: b[4]))
        let value = Double(mantissa) * pow(10, Double(exponent))
        let digits = max(0, -exponent)
        return String(format: "%.\(digits)f %@", value, b[0] & 1 != 0 ? "°F" : "°C")
    }
}
