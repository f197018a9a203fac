import BLECore
import Foundation
import Testing

@Suite struct BluetoothUUIDTests {
    static let heartRateLong = "0000180D-0000-1000-8000-00805F9B34FB"

    @Test func sixteenBitEqualsItsBaseUUIDExpansion() throws {
        let short = BluetoothUUID(0x180D)
        let long = try #require(BluetoothUUID(string: Self.heartRateLong))
        let fromFoundation = BluetoothUUID(try #require(UUID(uuidString: Self.heartRateLong)))
        let thirtyTwo = BluetoothUUID(uint32: 0x0000_180D)
        #expect(short == long)
        #expect(short == fromFoundation)
        #expect(short == thirtyTwo)
        #expect(Set([short, long, fromFoundation, thirtyTwo]).count == 1)
        #expect(short.hashValue == long.hashValue)
        #expect(long.width == .bits16)
        #expect(long.uint16 == 0x180D)
        #expect(long.uint32 == 0x0000_180D)
        #expect(long.isShort)
    }

    @Test func thirtyTwoBitEqualsItsBaseUUIDExpansion() throws {
        let short = BluetoothUUID(uint32: 0x1234_5678)
        let long = try #require(BluetoothUUID(string: "12345678-0000-1000-8000-00805F9B34FB"))
        #expect(short == long)
        #expect(short.hashValue == long.hashValue)
        #expect(short.width == .bits32)
        #expect(short.uint16 == nil)
        #expect(short.uint32 == 0x1234_5678)
    }

    @Test func vendorUUIDIsNotShort() throws {
        let nordicUART = try #require(BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
        #expect(nordicUART.width == .bits128)
        #expect(!nordicUART.isShort)
        #expect(nordicUART.uint16 == nil)
        #expect(nordicUART.uint32 == nil)
        #expect(nordicUART != BluetoothUUID(0x0001))
    }

    @Test(arguments: [
        ("180D", BluetoothUUID(0x180D)),
        ("180d", BluetoothUUID(0x180D)),
        ("0x180d", BluetoothUUID(0x180D)),
        ("0X180D", BluetoothUUID(0x180D)),
        (" 2A37 ", BluetoothUUID(0x2A37)),
        ("0000180D", BluetoothUUID(uint32: 0x180D)),
        ("12345678", BluetoothUUID(uint32: 0x1234_5678)),
        ("0x12345678", BluetoothUUID(uint32: 0x1234_5678)),
        ("0000180d-0000-1000-8000-00805f9b34fb", BluetoothUUID(0x180D)),
        ("0000180D-0000-1000-8000-00805F9B34FB", BluetoothUUID(0x180D)),
    ])
    func parses(text: String, expected: BluetoothUUID) {
        #expect(BluetoothUUID(string: text) == expected)
    }

    @Test(arguments: [
        "", "18", "180", "18 0D", "+18D", "-18D", "180G", "0x", "123456789", "+2345678",
        "0000180D-0000-1000-8000-00805F9B34F", "0000180D00001000800000805F9B34FB", "zzzz",
    ])
    func rejects(text: String) {
        #expect(BluetoothUUID(string: text) == nil)
    }

    @Test func literals() {
        let fromString: BluetoothUUID = "180D"
        let fromInteger: BluetoothUUID = 0x180D
        #expect(fromString == .heartRate)
        #expect(fromInteger == .heartRate)
    }

    @Test(arguments: [
        (BluetoothUUID(0x180D), "180D"),
        (BluetoothUUID(0x2a37), "2A37"),
        (BluetoothUUID(0x0001), "0001"),
        (BluetoothUUID(string: "0000180d-0000-1000-8000-00805f9b34fb")!, "180D"),
        (BluetoothUUID(string: "0000180D")!, "180D"),
        (BluetoothUUID(uint32: 0x1234_5678), "12345678"),
        (BluetoothUUID(uint32: 0x0001_0000), "00010000"),
        (BluetoothUUID(string: "6e400001-b5a3-f393-e0a9-e50e24dcca9e")!, "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"),
        (BluetoothUUID(string: "0000180D-0000-1000-8000-00805F9B34FC")!, "0000180D-0000-1000-8000-00805F9B34FC"),
    ])
    func uuidStringAsCoreBluetoothPrintsIt(uuid: BluetoothUUID, expected: String) {
        #expect(uuid.uuidString == expected)
    }

    @Test func littleEndianWireForms() throws {
        // 16-bit: 0x180D -> 0D 18
        #expect(BluetoothUUID(0x180D).littleEndianBytes == [0x0D, 0x18])
        #expect(BluetoothUUID(littleEndian: [0x0D, 0x18]) == BluetoothUUID(0x180D))
        // 32-bit: 0x12345678 -> 78 56 34 12
        #expect(BluetoothUUID(uint32: 0x1234_5678).littleEndianBytes == [0x78, 0x56, 0x34, 0x12])
        #expect(BluetoothUUID(littleEndian: [0x78, 0x56, 0x34, 0x12]) == BluetoothUUID(uint32: 0x1234_5678))
        // 128-bit: the printed bytes reversed.
        let uart = try #require(BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
        let wire: [UInt8] = [
            0x9E, 0xCA, 0xDC, 0x24, 0x0E, 0xE5, 0xA9, 0xE0, 0x93, 0xF3, 0xA3, 0xB5, 0x01, 0x00, 0x40, 0x6E,
        ]
        #expect(uart.littleEndianBytes == wire)
        #expect(uart.attWireBytes == wire)
        #expect(BluetoothUUID(littleEndian: wire) == uart)
        // A 128-bit wire form of a 16-bit alias decodes to the alias and re-encodes short.
        let longHeartRate = BluetoothUUID(0x180D).bytes128.reversed()
        let decoded = try #require(BluetoothUUID(littleEndian: longHeartRate))
        #expect(decoded == .heartRate)
        #expect(decoded.littleEndianBytes == [0x0D, 0x18])
        // ATT has no 32-bit form: a 32-bit alias goes out as 16 octets.
        #expect(BluetoothUUID(uint32: 0x1234_5678).attWireBytes.count == 16)
        #expect(BluetoothUUID(0x2902).attWireBytes == [0x02, 0x29])
    }

    @Test(arguments: [0, 1, 3, 5, 15, 17])
    func littleEndianRejectsOtherLengths(count: Int) {
        #expect(BluetoothUUID(littleEndian: [UInt8](repeating: 0, count: count)) == nil)
    }

    @Test func names() {
        #expect(BluetoothUUID.heartRate.name == "Heart Rate")
        #expect(BluetoothUUID(0x2902).name == "Client Characteristic Configuration")
        #expect(BluetoothUUID(0x180D).description == "180D (Heart Rate)")
        #expect(BluetoothUUID(0xFFF0).name == nil)
        #expect(BluetoothUUID(0xFFF0).description == "FFF0")
    }

    @Test func foundationRoundTrip() throws {
        let uuid = try #require(UUID(uuidString: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
        #expect(BluetoothUUID(uuid).uuid == uuid)
        #expect(BluetoothUUID(0x180D).uuid.uuidString == Self.heartRateLong)
    }

    @Test func ordering() {
        #expect(BluetoothUUID(0x1800) < BluetoothUUID(0x180D))
        #expect(
            [BluetoothUUID(0x2A37), BluetoothUUID(0x1800)].sorted() == [BluetoothUUID(0x1800), BluetoothUUID(0x2A37)])
    }
}
