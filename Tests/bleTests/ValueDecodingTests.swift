import BLE
import Foundation
import Testing

@testable import ble

/// How `read`, `subscribe` and `explore` show values: the Characteristic Presentation Format descriptor (0x2904),
/// the SIG formats the tool knows, and the `--format` renderings.
@Suite struct ValueDecodingTests {
    // MARK: The 0x2904 descriptor

    @Test func aPresentationFormatIsSevenOctets() throws {
        let p = try #require(
            PresentationFormat(
                descriptor: Data([
                    0x0E,  // format: sint16
                    0xFE,  // exponent: -2
                    0x2F, 0x27,  // unit: 0x272F, degree Celsius
                    0x01,  // name space: Bluetooth SIG
                    0x0C, 0x01,  // description: 0x010C, outside
                ])))
        #expect(p == PresentationFormat(format: .sint16, exponent: -2, unit: 0x272F, namespace: 1, description: 0x010C))
        #expect(p.summary == "format sint16, exponent -2, unit °C (0x272F), description outside")
        // Every other length is not one (never a trap).
        for length in [0, 1, 6, 8, 20] {
            #expect(PresentationFormat(descriptor: Data(repeating: 0xFF, count: length)) == nil)
        }
    }

    @Test(arguments: [
        // format, exponent, unit, value bytes, text
        (PresentationFormat.Format.sint16, Int8(-2), UInt16(0x272F), [0x29, 0x09] as [UInt8], "23.45 °C"),
        (.sint16, -2, 0x272F, [0xD7, 0xF6], "-23.45 °C"),
        (.sint16, -2, 0x272F, [0x05, 0x00], "0.05 °C"),
        (.uint8, 0, 0x27AD, [0x57], "87 %"),
        (.uint16, 1, 0x2724, [0x0C, 0x00], "120 Pa"),
        (.uint12, 0, 0x2700, [0xFF, 0xFF], "4095"),
        (.sint12, 0, 0x2700, [0xFF, 0x0F], "-1"),
        (.uint24, 0, 0x2700, [0x01, 0x02, 0x03], "197121"),
        (.sint24, -1, 0x2700, [0xFF, 0xFF, 0xFF], "-0.1"),
        (.uint48, 0, 0x2703, [1, 0, 0, 0, 0, 1], "1099511627777 s"),
        (.uint64, 0, 0x2700, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "18446744073709551615"),
        (.sint64, 0, 0x2700, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "-1"),
        (.boolean, 0, 0x2700, [0x01], "true"),
        (.uint4, 0, 0x2700, [0xF7], "7"),
        (.float32, 0, 0x2728, [0x00, 0x00, 0xC0, 0x3F], "1.5 V"),
        (.float64, 0, 0x2700, [0, 0, 0, 0, 0, 0, 0x04, 0xC0], "-2.5"),
        // SFLOAT: exponent -1 (0xF), mantissa 365.
        (.sfloat, 0, 0x272F, [0x6D, 0xF1], "36.5 °C"),
        // FLOAT: mantissa 0x000E5A (3674), exponent -2.
        (.float, 0, 0x272F, [0x5A, 0x0E, 0x00, 0xFE], "36.74 °C"),
        (.sfloat, 0, 0x2700, [0xFF, 0x07], "NaN"),
        (.sfloat, 0, 0x2700, [0x00, 0x08], "NRes"),
        (.float, 0, 0x2700, [0xFE, 0xFF, 0x7F, 0x00], "+INF"),
        (.uint16Pair, 0, 0x2700, [0x01, 0x00, 0x02, 0x00], "1, 2"),
        (.utf8, 0, 0x2700, Array("Kitchen".utf8), "\"Kitchen\""),
        (.utf16, 0, 0x2700, [0x48, 0x00, 0x69, 0x00], "\"Hi\""),
    ])
    func aFormatDecodesItsValue(
        format: PresentationFormat.Format, exponent: Int8, unit: UInt16, bytes: [UInt8], text: String
    ) {
        let p = PresentationFormat(format: format, exponent: exponent, unit: unit)
        #expect(p.decode(Data(bytes))?.text == text)
    }

    @Test func bytesThatDoNotFitTheFormatAreNotDecoded() {
        #expect(PresentationFormat(format: .sint16).decode(Data([0x01])) == nil)
        #expect(PresentationFormat(format: .uint8).decode(Data([0x01, 0x02])) == nil)
        #expect(PresentationFormat(format: .boolean).decode(Data([0x02])) == nil)
        #expect(PresentationFormat(format: .utf8).decode(Data([0xFF, 0xFE])) == nil)
        #expect(PresentationFormat(format: .structure).decode(Data([0x01])) == nil)
        #expect(PresentationFormat(format: .init(rawValue: 0xEE)).decode(Data([0x01])) == nil)
        #expect(PresentationFormat(format: .init(rawValue: 0xEE)).summary.hasPrefix("format 0xEE"))
    }

    @Test func anUnknownUnitIsNamedByItsNumber() {
        let p = PresentationFormat(format: .uint8, unit: 0x27FE)
        #expect(p.decode(Data([3]))?.text == "3 (unit 0x27FE)")
    }

    @Test func decimalsAreExact() {
        #expect(DecodedValue(decimal: 1, exponent: -3).text == "0.001")
        #expect(DecodedValue(decimal: -1, exponent: -3).text == "-0.001")
        #expect(DecodedValue(decimal: 7, exponent: 2).text == "700")
        #expect(DecodedValue(decimal: Int64.min, exponent: -1).text == "-922337203685477580.8")
        #expect(DecodedValue(decimal: 2345, exponent: -2).json.text == #"{"text":"23.45","value":23.45,"unit":null}"#)
    }

    // MARK: By type, without a descriptor

    @Test func knownTypesDecodeWithoutADescriptor() {
        #expect(ValueReading(Data([0x01]), type: .bodySensorLocation).hexAndMeaning == "01  Chest")
        #expect(ValueReading(Data([0x29, 0x09]), type: BluetoothUUID(0x2A6E)).hexAndMeaning == "2909  23.45 °C")
        #expect(
            ValueReading(Data([0x01, 0x00]), type: .clientCharacteristicConfiguration).hexAndMeaning
                == "0100  notifications on, indications off")
        #expect(
            ValueReading(Data("Rate".utf8), type: .characteristicUserDescription).hexAndMeaning
                == "52617465  \"Rate\"")
        #expect(ValueReading(Data([0xAB]), type: BluetoothUUID(0xFFF1)).hexAndMeaning == "ab")
        #expect(ValueReading(Data(), type: BluetoothUUID(0xFFF1)).hexAndMeaning == "(empty)")
    }

    @Test func aPresentationFormatGoesBeforeTheType() {
        // A battery level that says it is in tenths of a percent.
        let p = PresentationFormat(format: .uint8, exponent: -1, unit: 0x27AD)
        #expect(ValueReading(Data([0x57]), type: .batteryLevel, presentation: p).hexAndMeaning == "57  8.7 %")
        // One that does not fit its descriptor falls back to the type.
        let wide = PresentationFormat(format: .uint16)
        #expect(ValueReading(Data([0x57]), type: .batteryLevel, presentation: wide).hexAndMeaning == "57  87 %")
    }

    // MARK: --format

    @Test func formats() throws {
        let value = ValueReading(Data([0xFE, 0xFF]), type: BluetoothUUID(0xFFF1))
        #expect(try value.rendered(.hex).get() == "feff")
        #expect(try value.rendered(.uint).get() == "65534")
        #expect(try value.rendered(.int).get() == "-2")
        #expect(try value.rendered(.auto).get() == "feff")
        let eight = ValueReading(Data(repeating: 0xFF, count: 8), type: BluetoothUUID(0xFFF1))
        #expect(try eight.rendered(.uint).get() == "18446744073709551615")
        #expect(try eight.rendered(.int).get() == "-1")
        #expect(try eight.rendered(.float).get() == "NaN")
        #expect(try ValueReading(Data("héllo".utf8), type: .deviceName).rendered(.utf8).get() == "héllo")
        let float = ValueReading(Data([0x00, 0x00, 0x20, 0x41]), type: BluetoothUUID(0xFFF1))
        #expect(try float.rendered(.float).get() == "10.0")
        let sfloat = ValueReading(
            Data([0x6D, 0xF1]), type: BluetoothUUID(0xFFF1), presentation: PresentationFormat(format: .sfloat))
        #expect(try sfloat.rendered(.float).get() == "36.5")
    }

    @Test func aValueThatDoesNotFitItsFormatSaysWhy() {
        let nine = ValueReading(Data(repeating: 1, count: 9), type: BluetoothUUID(0xFFF1))
        #expect(throws: RenderingError.self) { try nine.rendered(.uint).get() }
        #expect(throws: RenderingError.self) { try nine.rendered(.float).get() }
        let empty = ValueReading(Data(), type: BluetoothUUID(0xFFF1))
        #expect(throws: RenderingError.self) { try empty.rendered(.int).get() }
        let binary = ValueReading(Data([0xFF]), type: BluetoothUUID(0xFFF1))
        if case .failure(let error) = binary.rendered(.utf8) {
            #expect(error.message == "ff is not UTF-8 text")
        } else {
            Issue.record("0xFF is not UTF-8")
        }
    }

    @Test func jsonCarriesEveryReading() {
        let p = PresentationFormat(format: .sint16, exponent: -2, unit: 0x272F)
        let reading = ValueReading(Data([0x29, 0x09]), type: BluetoothUUID(0x2A6E), presentation: p)
        #expect(
            reading.json(extra: [("handle", .number(18))]).text
                == #"{"handle":18,"uuid":"2A6E","name":"Temperature","hex":"2909","#
                + #""decoded":{"text":"23.45 °C","value":23.45,"unit":"°C"},"utf8":")\t","#
                + #""uint":2345,"int":2345,"presentation":{"format":"sint16","exponent":-2,"unit":"272F","#
                + #""unitSymbol":"°C","namespace":1,"description":0}}"#)
    }

    @Test func integersOfAnyWidthNeverTrap() {
        for count in 0...10 {
            let bytes = [UInt8](repeating: 0x80, count: count)
            for bits in [1, 8, 12, 63, 64, 65] {
                _ = ValueRendering.integer(bytes, bits: bits, signed: true)
                _ = ValueRendering.integer(bytes, bits: bits, signed: false)
            }
            _ = ValueRendering.medical(bytes)
            _ = ValueRendering.ieee(bytes)
        }
        #expect(ValueRendering.integer([0x00, 0x08], bits: 12, signed: true) == -2048)
    }

    // MARK: subscribe's lines

    @Test func subscribeLinesSayWhenAndHow() {
        let reading = ValueReading(Data([0x00, 0x48]), type: .heartRateMeasurement)
        let auto = ValueLineStyle(format: .auto, json: false)
        #expect(SubscribeCommand.line(reading, kind: "notify", at: "T", style: auto) == "T notify 0048  72 bpm")
        #expect(
            SubscribeCommand.line(reading, kind: "indicate", at: "T", style: .init(format: .hex, json: false))
                == "T indicate 0048")
        #expect(
            SubscribeCommand.line(reading, kind: "indicate", at: "T", style: .init(format: .json, json: false))
                == #"{"time":"T","characteristic":"2A37","name":"Heart Rate Measurement","kind":"indicate","hex":"0048","#
                + #""decoded":{"text":"72 bpm","value":72,"unit":"bpm","sensorContact":null,"energyExpendedKJ":null,"#
                + #""rrIntervals":[]}}"#)
        #expect(
            SubscribeCommand.line(
                reading, kind: "read", at: "T", style: .init(format: .typed(ValueType(kind: .unsigned(1))), json: true)
            ).hasSuffix(#","format":"u8","value":[0,72]}"#))
        #expect(Timestamp.format(Date(timeIntervalSince1970: 1_700_000_000.123_4)) == "2023-11-14T22:13:20.123Z")
    }

    // MARK: serve --updates lines

    @Test func updateLines() {
        #expect(ServeUpdate.parse("2A37 0640") == .success(.set(.heartRateMeasurement, Data([0x06, 0x40]))))
        #expect(ServeUpdate.parse("  2a37   06:40 ") == .success(.set(.heartRateMeasurement, Data([0x06, 0x40]))))
        #expect(ServeUpdate.parse("2A00 text:a b ") == .success(.set(.deviceName, Data("a b ".utf8))))
        #expect(ServeUpdate.parse("sleep 0.5") == .success(.sleep(.milliseconds(500))))
        #expect(ServeUpdate.parse("") == .success(nil))
        #expect(ServeUpdate.parse("# a comment") == .success(nil))
        for bad in ["2A37", "2A37 zz", "notauuid 00", "sleep", "sleep -1", "sleep nan", "sleep 1e300", "2A37 text"] {
            guard case .failure = ServeUpdate.parse(bad) else {
                Issue.record("'\(bad)' was accepted")
                continue
            }
        }
        #expect(ServeUpdate.parse("2A37 " + String(repeating: "00", count: 513)).isFailure)
    }
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}
