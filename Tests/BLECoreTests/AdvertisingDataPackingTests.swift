import BLECore
import Testing

@Suite struct AdvertisingDataPackingTests {
    static let uart: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
    static let uartTX: BluetoothUUID = "6E400003-B5A3-F393-E0A9-E50E24DCCA9E"

    @Test func everythingFits() {
        let data = AdvertisingData.packed(localName: "HRM", serviceUUIDs: [.heartRate])
        #expect(
            data.bytes == [
                0x02, 0x01, 0x06,  // Flags
                0x03, 0x03, 0x0D, 0x18,  // Complete 16-bit UUIDs: 180D
                0x04, 0x09, 0x48, 0x52, 0x4D,  // Complete Local Name "HRM"
            ])
        #expect(data.isServiceListComplete)
    }

    @Test func longNameIsShortened() {
        let data = AdvertisingData.packed(localName: "Polar H10 12345678 Heart Sensor Pro", serviceUUIDs: [.heartRate])
        #expect(
            data.bytes == [
                0x02, 0x01, 0x06,  // Flags
                0x03, 0x03, 0x0D, 0x18,  // Complete 16-bit UUIDs: 180D
                0x17, 0x08,  // Shortened Local Name, 22 octets: "Polar H10 12345678 Hea"
            ] + Array("Polar H10 12345678 Hea".utf8))
        #expect(data.count == 31)
        #expect(data.localName == "Polar H10 12345678 Hea")
        #expect(data.completeLocalName == nil)
    }

    @Test func nameFillsExactly() {
        let name = String(repeating: "x", count: 22)
        let data = AdvertisingData.packed(localName: name, serviceUUIDs: [.heartRate])
        #expect(data.count == 31)
        #expect(data.completeLocalName == name)
    }

    @Test func tooManyServicesMakeTheListIncomplete() {
        let uuids = (0..<14).map { BluetoothUUID(0x1800 + UInt16($0)) }
        let data = AdvertisingData.packed(localName: "Busy", serviceUUIDs: uuids)
        // 28 octets after the flags: a 16-bit list of 13 UUIDs (2 + 26), no room for a name.
        #expect(data.structures.map(\.type) == [.flags, .incompleteList16BitServiceUUIDs])
        #expect(data.serviceUUIDs == Array(uuids.prefix(13)))
        #expect(data.count == 31)
        #expect(data.localName == nil)
        #expect(!data.isServiceListComplete)
    }

    @Test func secondLongUUIDDoesNotFit() {
        let data = AdvertisingData.packed(localName: "Sensor", serviceUUIDs: [Self.uart, Self.uartTX])
        #expect(
            data.bytes == [
                0x02, 0x01, 0x06,  // Flags
                0x11, 0x06,  // Incomplete 128-bit UUIDs: the first one only
            ] + Self.uart.littleEndianBytes + [
                0x07, 0x09, 0x53, 0x65, 0x6E, 0x73, 0x6F, 0x72,  // Complete Local Name "Sensor"
            ])
        #expect(data.count == 29)
    }

    @Test func everyListIsMarkedIncompleteWhenAnyUUIDIsLeftOut() {
        // The 16-bit UUID fits whole, the second 128-bit one does not: both lists say "incomplete".
        let data = AdvertisingData.packed(localName: nil, serviceUUIDs: [Self.uart, .heartRate, Self.uartTX])
        #expect(
            data.structures.map(\.type) == [
                .flags, .incompleteList16BitServiceUUIDs, .incompleteList128BitServiceUUIDs,
            ])
        #expect(data.serviceUUIDs == [.heartRate, Self.uart])
        #expect(data.count == 25)
    }

    @Test func shortenedNameNeverSplitsACharacter() {
        // After flags (3) and one 128-bit UUID (18): 10 octets, so 8 for the name. "Café" is 5 octets,
        // each "é" 2 more: "Caféé" (7) fits, a third "é" (9) would not.
        let data = AdvertisingData.packed(localName: "Cafééé", serviceUUIDs: [Self.uart])
        #expect(data.shortenedLocalName == "Caféé")
        #expect(data.structures.last?.data.count == 7)
        #expect(data.count == 30)

        let flags = AdvertisingData.packed(localName: "🇳🇴🇳🇴", serviceUUIDs: [Self.uart], maximumLength: 31)
        // A flag emoji is 8 octets of UTF-8 in one character: one fits in 8 octets.
        #expect(flags.shortenedLocalName == "🇳🇴")
    }

    @Test func noRoomForANameCharacter() {
        // Flags (3) + one 128-bit (18) + 16-bit list of 4 (10) = 31.
        let uuids: [BluetoothUUID] = [Self.uart, 0x1800, 0x1801, 0x180A, 0x180F]
        let data = AdvertisingData.packed(localName: "Name", serviceUUIDs: uuids)
        #expect(data.count == 31)
        #expect(data.localName == nil)
        #expect(data.isServiceListComplete)
    }

    @Test func withoutFlagsForAScanResponse() {
        let data = AdvertisingData.packed(localName: "Thermo", serviceUUIDs: [], flags: nil)
        #expect(data.bytes == [0x07, 0x09] + Array("Thermo".utf8))
        #expect(data.flags == nil)
        #expect(!data.isServiceListComplete)  // no list at all
    }

    @Test func emptyInputGivesOnlyFlags() {
        #expect(AdvertisingData.packed(localName: nil, serviceUUIDs: []).bytes == [0x02, 0x01, 0x06])
        #expect(AdvertisingData.packed(localName: "", serviceUUIDs: []).bytes == [0x02, 0x01, 0x06])
    }

    @Test func duplicatesAndLongForms() {
        let data = AdvertisingData.packed(
            localName: nil, serviceUUIDs: [.heartRate, "0000180D-0000-1000-8000-00805F9B34FB", .battery])
        #expect(data.bytes == [0x02, 0x01, 0x06, 0x05, 0x03, 0x0D, 0x18, 0x0F, 0x18])
    }

    @Test(arguments: 0...40)
    func alwaysFits(maximumLength: Int) throws {
        let uuids: [BluetoothUUID] = [Self.uart, .heartRate, BluetoothUUID(uint32: 0x1234_5678), .battery, Self.uartTX]
        let data = AdvertisingData.packed(
            localName: "A rather long device name", serviceUUIDs: uuids, maximumLength: maximumLength)
        #expect(data.count <= maximumLength)
        // It decodes back to the same structures.
        #expect(try AdvertisingData(decoding: data.bytes) == data)
    }
}
