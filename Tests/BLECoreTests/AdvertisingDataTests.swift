import BLECore
import NIOCore
import Testing

@Suite struct AdvertisingDataTests {
    /// A heart-rate sensor's advertisement, every common field once.
    static let heartRateSensor: [UInt8] = [
        0x02, 0x01, 0x06,  // Flags: LE General Discoverable | BR/EDR Not Supported
        0x05, 0x02, 0x0D, 0x18, 0x0F, 0x18,  // Incomplete 16-bit UUIDs: 180D, 180F
        0x02, 0x0A, 0xF4,  // Tx Power Level: -12 dBm
        0x03, 0x19, 0x41, 0x03,  // Appearance: 0x0341 (Heart Rate Sensor: Heart Rate Belt)
        0x06, 0xFF, 0x59, 0x00, 0x01, 0x02, 0x03,  // Manufacturer Specific: Nordic (0x0059), 01 02 03
        0x05, 0x08, 0x48, 0x52, 0x4D, 0x31,  // Shortened Local Name: "HRM1"
    ]

    @Test func decodesAndReencodesGoldenBytes() throws {
        let data = try AdvertisingData(decoding: Self.heartRateSensor)
        #expect(
            data.structures == [
                ADStructure(type: .flags, data: [0x06]),
                ADStructure(type: .incompleteList16BitServiceUUIDs, data: [0x0D, 0x18, 0x0F, 0x18]),
                ADStructure(type: .txPowerLevel, data: [0xF4]),
                ADStructure(type: .appearance, data: [0x41, 0x03]),
                ADStructure(type: .manufacturerSpecificData, data: [0x59, 0x00, 0x01, 0x02, 0x03]),
                ADStructure(type: .shortenedLocalName, data: Array("HRM1".utf8)),
            ])
        #expect(data.bytes == Self.heartRateSensor)
        #expect(data.count == Self.heartRateSensor.count)
        #expect(data.fitsLegacyAdvertising)

        #expect(data.flags == [.leGeneralDiscoverable, .brEdrNotSupported])
        #expect(data.serviceUUIDs == [.heartRate, .battery])
        #expect(!data.isServiceListComplete)
        #expect(data.txPowerLevel == -12)
        #expect(data.appearance == 0x0341)
        #expect(
            data.manufacturerData == ManufacturerSpecificData(companyIdentifier: .nordicSemiconductor, data: [1, 2, 3]))
        #expect(data.manufacturerData?.bytes == [0x59, 0x00, 0x01, 0x02, 0x03])
        #expect(data.localName == "HRM1")
        #expect(data.completeLocalName == nil)
        #expect(data.shortenedLocalName == "HRM1")
        #expect(data.serviceData.isEmpty)
    }

    @Test func buildsTheSameBytes() throws {
        var data = AdvertisingData()
        data.addFlags(.leOnlyGeneralDiscoverable)
        data.addServiceUUIDs([.heartRate, .battery], complete: false)
        data.addTxPowerLevel(-12)
        data.addAppearance(0x0341)
        data.addManufacturerData(company: .nordicSemiconductor, data: [1, 2, 3])
        data.addLocalName("HRM1", complete: false)
        #expect(data.bytes == Self.heartRateSensor)

        var buffer = ByteBuffer()
        #expect(data.encode(into: &buffer) == Self.heartRateSensor.count)
        #expect(Array(buffer.readableBytesView) == Self.heartRateSensor)
        #expect(try AdvertisingData(buffer: buffer) == data)
    }

    @Test func unknownTypesAndOrderSurvive() throws {
        let bytes: [UInt8] = [
            0x04, 0x09, 0x41, 0x42, 0x43,  // Complete Local Name "ABC" before the flags
            0x03, 0x77, 0xAA, 0xBB,  // AD type 0x77: unassigned
            0x01, 0x78,  // AD type 0x78 with no data
            0x02, 0x01, 0x1A,  // Flags 0x1A: General | Simultaneous (Controller) | bit 4
        ]
        let data = try AdvertisingData(decoding: bytes)
        #expect(data.structures.map(\.type) == [.completeLocalName, ADType(0x77), ADType(0x78), .flags])
        #expect(data.bytes == bytes)
        #expect(data[ADType(0x77)] == [0xAA, 0xBB])
        #expect(data[ADType(0x78)] == [])
        #expect(data.flags == [.leGeneralDiscoverable, .simultaneousLEAndBrEdrController, .simultaneousLEAndBrEdrHost])
        #expect(ADType(0x77).description == "0x77")
        #expect(ADType(0x77).name == nil)
        #expect(ADType.completeLocalName.description == "Complete Local Name (0x09)")
    }

    @Test func zeroLengthEndsTheSignificantPart() throws {
        // Legacy scan responses are often padded to 31 octets with zeros.
        var padded: [UInt8] = [0x02, 0x01, 0x06]
        padded += [UInt8](repeating: 0, count: 28)
        let data = try AdvertisingData(decoding: padded)
        #expect(data.structures == [ADStructure(type: .flags, data: [0x06])])
        #expect(data.count == 3)
        // What follows the zero octet is not significant, even if it would not parse.
        #expect(try AdvertisingData(decoding: [0x02, 0x01, 0x06, 0x00, 0xFF, 0x09]).count == 3)
        #expect(try AdvertisingData(decoding: []).isEmpty)
        #expect(try AdvertisingData(decoding: [0x00]).isEmpty)
    }

    @Test(arguments: [
        [0x01] as [UInt8],  // length 1 but no type octet
        [0x02, 0x01],  // length 2, one octet follows
        [0x02, 0x01, 0x06, 0x05, 0x09, 0x41],  // second structure overruns
        [0xFF, 0xFF, 0x00],
    ])
    func overrunIsAnError(bytes: [UInt8]) {
        #expect(throws: AdvertisingDataError.structureOverrun("")) {
            try AdvertisingData(decoding: bytes)
        }
    }

    @Test func everyTruncationOfGoldenBytesDecodesOrThrows() {
        // Cutting the buffer inside a structure is an overrun; cutting between structures is a shorter list.
        let boundaries: Set<Int> = [0, 3, 9, 12, 16, 23, 29]
        for length in 0...Self.heartRateSensor.count {
            let prefix = Array(Self.heartRateSensor.prefix(length))
            if boundaries.contains(length) {
                #expect(throws: Never.self) { try AdvertisingData(decoding: prefix) }
            } else {
                #expect(throws: AdvertisingDataError.self) { try AdvertisingData(decoding: prefix) }
            }
        }
    }

    @Test func serviceUUIDsMergeAllSixLists() throws {
        let uart: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
        let bytes: [UInt8] = [
            0x03, 0x03, 0x0D, 0x18,  // Complete 16-bit: 180D
            0x05, 0x05, 0x78, 0x56, 0x34, 0x12,  // Complete 32-bit: 12345678
            0x11, 0x07,  // Complete 128-bit: 6E400001-B5A3-F393-E0A9-E50E24DCCA9E
            0x9E, 0xCA, 0xDC, 0x24, 0x0E, 0xE5, 0xA9, 0xE0, 0x93, 0xF3, 0xA3, 0xB5, 0x01, 0x00, 0x40, 0x6E,
            0x03, 0x02, 0x0D, 0x18,  // a duplicate 180D in an incomplete list
        ]
        let data = try AdvertisingData(decoding: bytes)
        #expect(data.serviceUUIDs == [.heartRate, BluetoothUUID(uint32: 0x1234_5678), uart])
        #expect(!data.isServiceListComplete)

        var complete = AdvertisingData()
        complete.addServiceUUIDs([.heartRate, BluetoothUUID(uint32: 0x1234_5678), uart])
        #expect(complete.bytes == Array(bytes.prefix(28)))
        #expect(complete.isServiceListComplete)
        #expect(!AdvertisingData().isServiceListComplete)
    }

    @Test func addServiceUUIDsGroupsByWidthAndKeepsOrder() {
        let uart: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
        var data = AdvertisingData()
        // A long-form 16-bit alias is sent short; duplicates are dropped.
        data.addServiceUUIDs([uart, "0000180F-0000-1000-8000-00805F9B34FB", .heartRate, .battery])
        #expect(data.structures.map(\.type) == [.completeList16BitServiceUUIDs, .completeList128BitServiceUUIDs])
        #expect(data.structures[0].data == [0x0F, 0x18, 0x0D, 0x18])
        #expect(data.serviceUUIDs == [.battery, .heartRate, uart])
    }

    @Test func uuidListWithTrailingPartialUUIDKeepsWholeOnes() throws {
        let data = try AdvertisingData(decoding: [0x04, 0x03, 0x0D, 0x18, 0x0F])
        #expect(data.serviceUUIDs == [.heartRate])
        #expect(data.bytes == [0x04, 0x03, 0x0D, 0x18, 0x0F])
    }

    @Test func solicitation() throws {
        let bytes: [UInt8] = [
            0x03, 0x14, 0x00, 0x18,  // 16-bit solicitation: 1800
            0x05, 0x1F, 0x78, 0x56, 0x34, 0x12,  // 32-bit solicitation: 12345678
        ]
        let data = try AdvertisingData(decoding: bytes)
        #expect(data.solicitedServiceUUIDs == [.genericAccess, BluetoothUUID(uint32: 0x1234_5678)])
        #expect(data.serviceUUIDs.isEmpty)
        var built = AdvertisingData()
        built.addSolicitedServiceUUIDs([.genericAccess, BluetoothUUID(uint32: 0x1234_5678)])
        #expect(built.bytes == bytes)
    }

    @Test func localNamePrefersComplete() throws {
        let bytes: [UInt8] = [
            0x03, 0x08, 0x48, 0x52,  // Shortened: "HR"
            0x06, 0x09, 0x48, 0x52, 0x4D, 0x2D, 0x32,  // Complete: "HRM-2"
        ]
        let data = try AdvertisingData(decoding: bytes)
        #expect(data.localName == "HRM-2")
        #expect(data.shortenedLocalName == "HR")
        #expect(try AdvertisingData(decoding: [0x03, 0x09, 0xC3, 0xA9]).localName == "é")
        #expect(try AdvertisingData(decoding: [0x02, 0x09, 0xFF]).localName == "\u{FFFD}")  // invalid UTF-8
    }

    @Test func serviceData() throws {
        let bytes: [UInt8] = [
            0x04, 0x16, 0x0F, 0x18, 0x64,  // Service Data 16-bit: Battery (180F), level 100
            0x07, 0x20, 0x78, 0x56, 0x34, 0x12, 0xAA, 0xBB,  // Service Data 32-bit: 12345678, AA BB
            0x04, 0x16, 0x0F, 0x18, 0x32,  // Battery again: the first wins
            0x02, 0x16, 0x0F,  // too short for its UUID: skipped
        ]
        let data = try AdvertisingData(decoding: bytes)
        #expect(data.serviceData == [.battery: [0x64], BluetoothUUID(uint32: 0x1234_5678): [0xAA, 0xBB]])
        var built = AdvertisingData()
        built.addServiceData([0x64], for: .battery)
        built.addServiceData([0xAA, 0xBB], for: BluetoothUUID(uint32: 0x1234_5678))
        #expect(built.bytes == Array(bytes.prefix(13)))

        let uart: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
        var long = AdvertisingData()
        long.addServiceData([0x01], for: uart)
        #expect(long.bytes == [0x12, 0x21] + uart.littleEndianBytes + [0x01])
        #expect(try AdvertisingData(decoding: long.bytes).serviceData == [uart: [0x01]])
    }

    @Test func manufacturerData() throws {
        let bytes: [UInt8] = [
            0x02, 0xFF, 0x4C,  // too short for a company identifier: skipped by the view
            0x05, 0xFF, 0x4C, 0x00, 0x10, 0x05,  // Apple (0x004C): 10 05
            0x03, 0xFF, 0xFF, 0xFF,  // Bluetooth SIG test (0xFFFF), no data
        ]
        let data = try AdvertisingData(decoding: bytes)
        #expect(
            data.allManufacturerData == [
                ManufacturerSpecificData(companyIdentifier: .apple, data: [0x10, 0x05]),
                ManufacturerSpecificData(companyIdentifier: .bluetoothSIGTest, data: []),
            ])
        #expect(data.manufacturerData?.companyIdentifier == .apple)
        #expect(data.bytes == bytes)
    }

    @Test func emptyAndMissingFields() throws {
        let data = try AdvertisingData(decoding: [0x01, 0x01, 0x01, 0x0A, 0x02, 0x19, 0x41])
        #expect(data.flags == nil)  // Flags with no octet
        #expect(data.txPowerLevel == nil)
        #expect(data.appearance == nil)  // one octet of two
        #expect(data.localName == nil)
        #expect(data.manufacturerData == nil)
    }

    @Test func editing() throws {
        var data = try AdvertisingData(decoding: AdvertisingDataTests.heartRateSensor)
        data.removeAll(ofType: .manufacturerSpecificData)
        #expect(data.manufacturerData == nil)
        #expect(data.structures(ofType: .flags).count == 1)
        #expect(data.count == AdvertisingDataTests.heartRateSensor.count - 7)
    }

    @Test func txPowerExtremes() throws {
        var data = AdvertisingData()
        data.addTxPowerLevel(-127)
        data.addTxPowerLevel(127)
        #expect(data.bytes == [0x02, 0x0A, 0x81, 0x02, 0x0A, 0x7F])
        #expect(data.txPowerLevel == -127)
    }

    @Test func namesOfCodes() {
        #expect(CompanyIdentifier.apple.rawValue == 0x004C)
        #expect(CompanyIdentifier.microsoft.rawValue == 0x0006)
        #expect(CompanyIdentifier.nordicSemiconductor.rawValue == 0x0059)
        #expect(CompanyIdentifier.google.rawValue == 0x00E0)
        #expect(CompanyIdentifier.samsung.rawValue == 0x0075)
        #expect(CompanyIdentifier.espressif.rawValue == 0x02E5)
        #expect(CompanyIdentifier.texasInstruments.rawValue == 0x000D)
        #expect(CompanyIdentifier.apple.description == "Apple (0x004C)")
        #expect(CompanyIdentifier(0x1234).description == "0x1234")
        #expect(ADFlags.leOnlyGeneralDiscoverable.rawValue == 0x06)
        #expect(ADFlags(rawValue: 0x25).description == "[LE Limited Discoverable, BR/EDR Not Supported, 0x20]")
    }
}
