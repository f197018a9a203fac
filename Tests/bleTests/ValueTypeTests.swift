import BLE
import Foundation
import Testing

@testable import ble

/// The typed formats `write` takes and `read` prints (`--format u16`, `s64`, `f32be`, `sfloat` ...), the UTF-8
/// preview of unknown values, names for characteristics, and the JSON types of decoded values.
@Suite struct ValueTypeTests {
    private func type(_ name: String) throws -> ValueType { try #require(ValueType(name: name)) }

    private func bytes(_ name: String, _ text: String) throws -> [UInt8] { [UInt8](try type(name).encode(text)) }

    // MARK: Names

    @Test func typeNamesAndTheirAliases() throws {
        #expect(try type("u16") == ValueType(kind: .unsigned(2)))
        #expect(try type("UINT16") == ValueType(kind: .unsigned(2)))
        #expect(try type("u16le") == ValueType(kind: .unsigned(2)))
        #expect(try type("u16be") == ValueType(kind: .unsigned(2), bigEndian: true))
        #expect(try type("sint32") == ValueType(kind: .signed(4)))
        #expect(try type("i64") == ValueType(kind: .signed(8)))
        #expect(try type("float32") == ValueType(kind: .float32))
        #expect(try type("medfloat16") == ValueType(kind: .sfloat))
        #expect(try type("text") == .utf8)
        // Byte order means nothing for one byte, text, or the medical floats.
        for bad in ["u8be", "u7", "u128", "sfloatbe", "hexle", "boolbe", "x16", "", "u"] {
            #expect(ValueType(name: bad) == nil, "\(bad)")
        }
        #expect(ValueFormat(argument: "u16be") == .typed(ValueType(kind: .unsigned(2), bigEndian: true)))
        #expect(ValueFormat(argument: "float") == .float)
        #expect(ValueFormat(argument: "hex") == .hex)
    }

    // MARK: Integers

    @Test(arguments: [
        ("u8", "0", [0x00] as [UInt8]),
        ("u8", "255", [0xFF]),
        ("u8", "0xff", [0xFF]),
        ("u16", "60", [0x3C, 0x00]),
        ("u16be", "60", [0x00, 0x3C]),
        ("u16", "1,2,3", [1, 0, 2, 0, 3, 0]),
        ("u16", "1, 2", [1, 0, 2, 0]),
        ("u24", "197121", [0x01, 0x02, 0x03]),
        ("u32be", "0x01020304", [1, 2, 3, 4]),
        ("u48", "1099511627777", [1, 0, 0, 0, 0, 1]),
        ("u64", "18446744073709551615", [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        ("s8", "-128", [0x80]),
        ("s8", "127", [0x7F]),
        ("s16", "-2", [0xFE, 0xFF]),
        ("s16be", "-2", [0xFF, 0xFE]),
        ("s64", "-9223372036854775808", [0, 0, 0, 0, 0, 0, 0, 0x80]),
        ("s64", "9223372036854775807", [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]),
        ("bool", "true", [1]),
        ("bool", "0", [0]),
        ("hex", "01:02 03", [1, 2, 3]),
        ("utf8", "héllo", Array("héllo".utf8)),
    ])
    func aValueIsWrittenAsItsTypeSays(name: String, text: String, expected: [UInt8]) throws {
        #expect(try bytes(name, text) == expected)
    }

    @Test(arguments: [
        ("u8", "256", "256 is out of range for u8 (0 to 255)"),
        ("u8", "-1", "-1 is out of range for u8 (0 to 255)"),
        ("u8", "1.5", "'1.5' is not a u8 (an integer, 0 to 255)"),
        ("u16", "65536", "65536 is out of range for u16 (0 to 65535)"),
        ("u64", "18446744073709551616", "18446744073709551616 is out of range for u64 (0 to 18446744073709551615)"),
        ("s8", "128", "128 is out of range for s8 (-128 to 127)"),
        ("s8", "-129", "-129 is out of range for s8 (-128 to 127)"),
        (
            "s64", "-9223372036854775809",
            "-9223372036854775809 is out of range for s64 (-9223372036854775808 to 9223372036854775807)"
        ),
        ("u16", "sixty", "'sixty' is not a u16 (an integer, 0 to 65535)"),
        ("u16", "1,,2", "an empty element: give a u16 value"),
        ("f32", "1e39", "1e39 is out of range for f32 (at most 3.4028235e+38)"),
        ("f32", "0x10", "'0x10' is not a number for f32"),
        ("bool", "2", "'2' is not a bool (true or false, 1 or 0)"),
        ("hex", "0g", "'0g' is not hex digits"),
        ("sfloat", "36.55", "36.55 does not fit sfloat exactly (a mantissa within ±2045 times 10^-8...10^7)"),
        ("sfloat", "abc", "'abc' is not a number for sfloat (or NaN, NRes, +INF, -INF)"),
        (
            "medfloat32", "1e200",
            "1e200 does not fit medfloat32 exactly (a mantissa within ±8388605 times 10^-128...10^127)"
        ),
    ])
    func badInputIsOneClearLine(name: String, text: String, message: String) throws {
        let valueType = try type(name)
        #expect(throws: ValueInputError.self) { try valueType.encode(text) }
        do {
            _ = try valueType.encode(text)
        } catch {
            #expect(error.message == message)
        }
    }

    @Test func integersReadBackInTheirOrder() throws {
        let u16 = try type("u16")
        #expect(try u16.decode(Data([0x3C, 0x00])).get() == [.integer(60)])
        #expect(ValueType.text(try u16.decode(Data([1, 0, 2, 0])).get()) == "1,2")
        #expect(ValueType.text(try type("u16be").decode(Data([0x00, 0x3C])).get()) == "60")
        #expect(ValueType.text(try type("s16").decode(Data([0xFE, 0xFF])).get()) == "-2")
        // 64-bit integers are exact decimal text, and strings in JSON whatever their size.
        let max = try type("u64").decode(Data(repeating: 0xFF, count: 8)).get()
        #expect(max == [.wide("18446744073709551615")])
        #expect(try type("u64").json(max).text == "[\"18446744073709551615\"]")
        let min = try type("s64").decode(Data([0, 0, 0, 0, 0, 0, 0, 0x80])).get()
        #expect(ValueType.text(min) == "-9223372036854775808")
        #expect(try type("u64").json(try type("u64").decode(Data(count: 8)).get()).text == "[\"0\"]")
        #expect(try type("u32").json(try type("u32").decode(Data([1, 0, 0, 0])).get()).text == "[1]")
        // A length that is not a multiple of the width says so.
        guard case .failure(let error) = u16.decode(Data([1, 2, 3])) else {
            Issue.record("three bytes read as u16")
            return
        }
        #expect(error.message == "u16 takes a multiple of 2 bytes; this value has 3 bytes (010203)")
        guard case .failure = try type("bool").decode(Data([2])) else {
            Issue.record("02 read as a bool")
            return
        }
    }

    // MARK: Floats

    @Test func ieeeFloatsBothWaysAndTheirSpecialValues() throws {
        #expect(try bytes("f32", "1.5") == [0x00, 0x00, 0xC0, 0x3F])
        #expect(try bytes("f32be", "1.5") == [0x3F, 0xC0, 0x00, 0x00])
        #expect(try bytes("f64", "-2.5") == [0, 0, 0, 0, 0, 0, 0x04, 0xC0])
        #expect(try bytes("f32", "inf") == [0x00, 0x00, 0x80, 0x7F])
        #expect(try bytes("f32", "-inf") == [0x00, 0x00, 0x80, 0xFF])
        let nan = try type("f32").decode(Data(try bytes("f32", "nan"))).get()
        #expect(ValueType.text(nan) == "NaN")
        #expect(try type("f32").json(nan).text == "[null]")
        #expect(ValueType.text(try type("f32be").decode(Data([0x3F, 0xC0, 0, 0])).get()) == "1.5")
    }

    @Test(arguments: [
        // text, SFLOAT bytes (little-endian: mantissa low byte, then exponent nibble and mantissa high nibble)
        ("36.5", [0x6D, 0xF1] as [UInt8]),  // 365 × 10^-1
        ("-36.5", [0x93, 0xFE]),  // -365 × 10^-1
        ("0", [0x00, 0x00]),
        ("2045", [0xFD, 0x07]),
        ("20000000", [0x02, 0x70]),  // 2 × 10^7
        ("NaN", [0xFF, 0x07]),
        ("NRes", [0x00, 0x08]),
        ("+INF", [0xFE, 0x07]),
        ("-INF", [0x02, 0x08]),
    ])
    func sfloatIsWrittenExactly(text: String, expected: [UInt8]) throws {
        let written = try bytes("sfloat", text)
        #expect(written == expected)
        // And reads back as written (the special values by their names).
        let back = ValueType.text(try type("sfloat").decode(Data(written)).get())
        #expect(back == (text == "20000000" ? "20000000" : text))
    }

    @Test func medfloat32IsWrittenExactlyAndReadBack() throws {
        // 36.74: mantissa 3674 (0x000E5A), exponent -2.
        #expect(try bytes("medfloat32", "36.74") == [0x5A, 0x0E, 0x00, 0xFE])
        #expect(try bytes("medfloat32", "NaN") == [0xFF, 0xFF, 0x7F, 0x00])
        #expect(try bytes("medfloat32", "NRes") == [0x00, 0x00, 0x80, 0x00])
        #expect(ValueType.text(try type("medfloat32").decode(Data([0x5A, 0x0E, 0x00, 0xFE])).get()) == "36.74")
        #expect(ValueType.text(try type("medfloat32").decode(Data([0xFE, 0xFF, 0x7F, 0x00])).get()) == "+INF")
        // The largest ordinary mantissa fits; one more does not.
        #expect(try bytes("medfloat32", "8388605") == [0xFD, 0xFF, 0x7F, 0x00])
        #expect(throws: ValueInputError.self) { try type("medfloat32").encode("8388606") }
    }

    // MARK: What read prints

    @Test func unknownPrintableTextIsPreviewedBesideTheHex() {
        let unknown = BluetoothUUID(string: "FF01")!
        #expect(ValueReading(Data("Hello".utf8), type: unknown).hexAndMeaning == "48656c6c6f  \"Hello\"")
        // Not text, a control character, one character only, or invalid UTF-8: the hex alone.
        #expect(ValueReading(Data([0x01, 0x02]), type: unknown).hexAndMeaning == "0102")
        #expect(ValueReading(Data([0x41, 0x0A]), type: unknown).hexAndMeaning == "410a")
        #expect(ValueReading(Data([0x41]), type: unknown).hexAndMeaning == "41")
        #expect(ValueReading(Data([0x62, 0xFF, 0xFE]), type: unknown).hexAndMeaning == "62fffe")
    }

    @Test func aTypedFormatRendersTheValue() throws {
        let reading = ValueReading(Data([0x3C, 0x00]), type: BluetoothUUID(0x2A21))
        #expect(try reading.rendered(.typed(ValueType(kind: .unsigned(2)))).get() == "60")
        #expect(throws: RenderingError.self) { try reading.rendered(.typed(ValueType(kind: .unsigned(4)))).get() }
        #expect(
            reading.json(typed: ValueType(kind: .unsigned(2))).text.hasSuffix(",\"format\":\"u16\",\"value\":[60]}"))
    }

    // MARK: JSON types

    @Test func decodedValuesKeepTheirUnitApartAndTheirTypes() throws {
        let battery = try #require(ValueDecoding.decode(Data([87]), of: .batteryLevel))
        #expect(battery.json.text == #"{"text":"87 %","value":87,"unit":"%"}"#)
        let thermometer = try #require(
            ValueDecoding.decode(Data([0x00, 0x70, 0x01, 0x00, 0xFF]), of: .temperatureMeasurement))
        #expect(thermometer.json.text == #"{"text":"36.8 °C","value":36.8,"unit":"°C"}"#)
        // NaN: the same keys, the value null.
        let nan = try #require(ValueDecoding.decode(Data([0x00, 0xFF, 0xFF, 0x7F, 0x00]), of: .temperatureMeasurement))
        #expect(nan.json.text == #"{"text":"NaN","value":null,"unit":"°C"}"#)
        // Heart rate: flags 0x18 (energy and RR present), 72 bpm, 1 kJ, one RR of 1024/1024 s.
        let rate = try #require(
            ValueDecoding.decode(Data([0x18, 72, 0x01, 0x00, 0x00, 0x04]), of: .heartRateMeasurement))
        #expect(
            rate.json.text
                == #"{"text":"72 bpm, energy expended 1 kJ, RR 1.000 s","value":72,"unit":"bpm","sensorContact":null,"energyExpendedKJ":1,"rrIntervals":[1.0]}"#
        )
        // A uint64 is a string, small or not; the text stays exact.
        let wide = PresentationFormat(format: .uint64)
        #expect(
            wide.decode(Data(repeating: 0xFF, count: 8))?.json.text
                == #"{"text":"18446744073709551615","value":"18446744073709551615","unit":null}"#)
        #expect(wide.decode(Data([1, 0, 0, 0, 0, 0, 0, 0]))?.json.text == #"{"text":"1","value":"1","unit":null}"#)
    }

    @Test func theRoomsOwnValuesAreDecodedAlike() {
        // The secure lock's state as the door lock's (D30), the camera's status as the printer's.
        #expect(ValueReading(Data([1]), type: SecureLockProfile.lockState).hexAndMeaning == "01  locked")
        #expect(ValueReading(Data([0]), type: DoorLockProfile.lockState).hexAndMeaning == "00  unlocked")
        #expect(
            ValueReading(Data([18, 0, 0, 0, 3, 0, 0, 0]), type: CameraProfile.status).hexAndMeaning
                == "1200000003000000  18 bytes taken, 3 dropped")
        #expect(CameraProfile.status.labelled == "Camera Status (CA3E0003)")
        #expect(SecureLockProfile.service.displayName == "Secure Lock")
    }

    @Test func rawIntegerFieldsHaveOneTypePerLength() {
        let six = ValueReading(Data([1, 0, 0, 0, 0, 0]), type: BluetoothUUID(string: "FF01")!).json().text
        #expect(six.contains(#""uint":1,"int":1,"#))
        let eight = ValueReading(Data([1, 0, 0, 0, 0, 0, 0, 0]), type: BluetoothUUID(string: "FF01")!).json().text
        #expect(eight.contains(#""uint":"1","int":"1","#))
    }

    // MARK: Names

    @Test func characteristicsAreNamedInAnyCaseOrByTheStartOfTheirWords() throws {
        for text in ["Battery Level", "battery level", "BATTERY  LEVEL", "2A19", "0x2A19", "battery_level"] {
            #expect(try parseCharacteristic(text).candidates == [.batteryLevel], "\(text)")
        }
        // The start of words may fit several; the device decides (and a device with several is an error).
        let battery = try parseCharacteristic("battery")
        #expect(battery.candidates.contains(.batteryLevel))
        #expect(try battery.pick(among: [.deviceName, .batteryLevel], on: "D") == .batteryLevel)
        let heart = try parseCharacteristic("heart rate")
        #expect(throws: ToolError.self) {
            try heart.pick(among: [.heartRateMeasurement, .heartRateControlPoint], on: "HRM-Demo")
        }
        do {
            _ = try heart.pick(among: [.heartRateMeasurement, .heartRateControlPoint], on: "HRM-Demo")
        } catch let error as ToolError {
            #expect(error.kind == .usage)
            #expect(
                error.message
                    == "'heart rate' names several characteristics of HRM-Demo: Heart Rate Measurement (2A37), Heart Rate Control Point (2A39); give one of them"
            )
        }
        #expect(try parseCharacteristic("heart rate m").candidates == [.heartRateMeasurement])
        // A service's name is not a characteristic's.
        #expect(throws: (any Error).self) { try parseCharacteristic("Battery Service") }
        #expect(try parseService("heart rate") == .heartRate)
        #expect(try parseService("Environment Hub") == WorldDevices.environmentService)
        #expect(
            try AttributeReference("user description", kind: .descriptor, what: "--descriptor").candidates == [
                .characteristicUserDescription
            ])
    }

    @Test func anUnknownNameSuggestsTheNearOnes() {
        #expect(AssignedNames.nearMisses("batery level", kind: .characteristic) == ["Battery Level"])
        #expect(AssignedNames.nearMisses("batery", kind: .characteristic).contains("Battery Level"))
        #expect(AssignedNames.nearMisses("zzzzzz", kind: .characteristic).isEmpty)
    }
}
