import BLECore
import Testing

@testable import BLEGATT

/// AES-CMAC against RFC 4493's examples, and the Database Hash against the Core Specification's example
/// database (Vol 3, Part G, Appendix B).
@Suite struct DatabaseHashTests {
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    @Test(arguments: [
        (0, "bb1d6929e95937287fa37d129b756746"),
        (16, "070a16b46b4d4144f79bdd9dd04a287c"),
        (40, "dfa66747de9ae63030ca32611497c827"),
        (64, "51f0bebf7e3b9d92fc49741779363cfe"),
    ])
    func aesCMACMatchesRFC4493(length: Int, expected: String) {
        let key = Self.bytes("2b7e151628aed2a6abf7158809cf4f3c")
        let message = Self.bytes(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                + "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
        #expect(AESCMAC.mac(key: key, message: Array(message.prefix(length))) == Self.bytes(expected))
        #expect(AESCMAC.mac(key: [1, 2, 3], message: []) == nil)
    }

    /// Appendix B's database: GAP (Device Name, Appearance), GATT (Service Changed with its CCCD, Client
    /// Supported Features, Database Hash), Glucose (an include of Battery, Glucose Measurement with a CCCD and
    /// Extended Properties) and a secondary Battery service. Values of characteristics are not hashed: theirs
    /// are left in to show it.
    static let appendixB: [GATTAttribute] = {
        func a(_ handle: UInt16, _ type: UInt16, _ value: [UInt8]?) -> GATTAttribute {
            GATTAttribute(
                handle: AttributeHandle(handle), type: BluetoothUUID(type), value: value, permissions: [.readable],
                role: .primaryService)
        }
        return [
            a(0x0001, 0x2800, [0x00, 0x18]),
            a(0x0002, 0x2803, [0x0A, 0x03, 0x00, 0x00, 0x2A]), a(0x0003, 0x2A00, Array("name".utf8)),
            a(0x0004, 0x2803, [0x02, 0x05, 0x00, 0x01, 0x2A]), a(0x0005, 0x2A01, [0x00, 0x00]),
            a(0x0006, 0x2800, [0x01, 0x18]),
            a(0x0007, 0x2803, [0x20, 0x08, 0x00, 0x05, 0x2A]), a(0x0008, 0x2A05, nil),
            a(0x0009, 0x2902, [0x02, 0x00]),
            a(0x000A, 0x2803, [0x0A, 0x0B, 0x00, 0x29, 0x2B]), a(0x000B, 0x2B29, [0x01]),
            a(0x000C, 0x2803, [0x02, 0x0D, 0x00, 0x2A, 0x2B]), a(0x000D, 0x2B2A, nil),
            a(0x000E, 0x2800, [0x08, 0x18]),
            a(0x000F, 0x2802, [0x14, 0x00, 0x16, 0x00, 0x0F, 0x18]),
            a(0x0010, 0x2803, [0xA2, 0x11, 0x00, 0x18, 0x2A]), a(0x0011, 0x2A18, [1, 2, 3]),
            a(0x0012, 0x2902, [0x00, 0x00]),
            a(0x0013, 0x2900, [0x00, 0x00]),
            a(0x0014, 0x2801, [0x0F, 0x18]),
            a(0x0015, 0x2803, [0x02, 0x16, 0x00, 0x19, 0x2A]), a(0x0016, 0x2A19, [88]),
        ]
    }()

    @Test func theSpecsExampleDatabaseHashesAsTheSpecSays() {
        let m = GATTDatabase.databaseHashInput(Self.appendixB.reversed())
        #expect(
            m
                == Self.bytes(
                    "010000280018020003280a0300002a04000328020500012a06000028011807000328200800052a090002290a0003280a"
                        + "0b00292b0c000328020d002a2b0e00002808180f000228140016000f1810000328a21100182a120002291300002900"
                        + "00140001280f1815000328021600192a"))
        #expect(m.count == 111)
        // The CMAC is F1CA2D48ECF58BAC8A8830BBB9FBA990; served as the little-endian number, reversed.
        #expect(
            GATTDatabase.databaseHash(of: Self.appendixB) == Self.bytes("F1CA2D48ECF58BAC8A8830BBB9FBA990").reversed())
    }

    @Test func aDatabasesHashChangesWithItsServicesAndNotWithValues() throws {
        var database = GATTDatabase(deviceName: "one")
        let before = database.databaseHash
        #expect(before.count == 16)
        database.deviceName = "two"
        #expect(database.databaseHash == before)
        try database.add(
            GATTServiceDefinition(
                uuid: .battery,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: .batteryLevel, properties: [.read], permissions: [.readable], value: [1])
                ]))
        #expect(database.databaseHash != before)
    }
}
