import BLECore
import Foundation
import Testing

/// iBeacon and Eddystone frames, and Flags, decoded from golden bytes; malformed frames decode to nil or a
/// `malformedFrame` error, never a trap.
@Suite struct BeaconDecodingTests {
    /// The simulated room's iBeacon: a whole advertisement.
    static let iBeaconAdvertisement: [UInt8] =
        [
            0x02, 0x01, 0x06,  // Flags: LE General Discoverable | BR/EDR Not Supported
            0x1A, 0xFF,  // Manufacturer Specific Data, 25 octets
            0x4C, 0x00,  // company: Apple (0x004C), little-endian
            0x02, 0x15,  // iBeacon type, 21 octets follow
        ] + [
            0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0,  // UUID
            0x00, 0x01,  // major 1, big-endian
            0x00, 0x2A,  // minor 42, big-endian
            0xC5,  // measured power -59 dBm
        ]

    @Test func iBeaconDecodesAndEncodes() throws {
        let data = try AdvertisingData(decoding: Self.iBeaconAdvertisement)
        let beacon = try #require(data.iBeacon)
        #expect(beacon.proximityUUID == UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"))
        #expect(beacon.major == 1)
        #expect(beacon.minor == 42)
        #expect(beacon.measuredPower == -59)
        #expect(beacon.manufacturerData == data.manufacturerData)
    }

    @Test(
        arguments: [
            // Not Apple: Nordic's company identifier.
            [0x59, 0x00, 0x02, 0x15] + [UInt8](repeating: 0, count: 21),
            // Apple, another type (the overflow area, 0x01).
            [0x4C, 0x00, 0x01, 0x15] + [UInt8](repeating: 0, count: 21),
            // A length octet that does not say 21.
            [0x4C, 0x00, 0x02, 0x14] + [UInt8](repeating: 0, count: 20),
            // Truncated: one octet short of the measured power.
            [0x4C, 0x00, 0x02, 0x15] + [UInt8](repeating: 0, count: 20),
            // One octet too many.
            [0x4C, 0x00, 0x02, 0x15] + [UInt8](repeating: 0, count: 22),
            // The company identifier alone, and less.
            [0x4C, 0x00], [0x4C],
        ] as [[UInt8]])
    func notAnIBeacon(_ manufacturerData: [UInt8]) {
        var data = AdvertisingData()
        data.append(ADStructure(type: .manufacturerSpecificData, data: manufacturerData))
        #expect(data.iBeacon == nil)
    }

    @Test func eddystoneUID() throws {
        let frame: [UInt8] =
            [
                0x00,  // frame type: UID
                0xEE,  // TX power at 0 m: -18 dBm
            ] + [0x8B, 0x0C, 0xA7, 0x50, 0xE7, 0xA7, 0x4E, 0x14, 0xBD, 0x99]  // namespace
            + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06]  // instance
        let expected = EddystoneFrame.uid(
            .init(
                txPower: -18, namespace: [0x8B, 0x0C, 0xA7, 0x50, 0xE7, 0xA7, 0x4E, 0x14, 0xBD, 0x99],
                instance: [1, 2, 3, 4, 5, 6]))
        #expect(try EddystoneFrame(decoding: frame) == expected)
        // With the two reserved octets.
        #expect(try EddystoneFrame(decoding: frame + [0x00, 0x00]) == expected)
    }

    @Test(
        arguments: [
            // The room's beacon: https:// "swift" .org
            ([0x10, 0xEC, 0x03] + Array("swift".utf8) + [0x08], -20, "https://swift.org"),
            // http://www. "example" .com/ "a"
            ([0x10, 0x00, 0x00] + Array("example".utf8) + [0x00] + Array("a".utf8), 0, "http://www.example.com/a"),
            // https://www. "x" .gov, then http:// with nothing after the scheme
            ([0x10, 0x14, 0x01, 0x78, 0x0D], 20, "https://www.x.gov"),
            ([0x10, 0x9C, 0x02], -100, "http://"),
        ] as [([UInt8], Int8, String)])
    func eddystoneURL(_ frame: [UInt8], _ power: Int8, _ url: String) throws {
        #expect(try EddystoneFrame(decoding: frame) == .url(.init(txPower: power, url: url)))
    }

    @Test func eddystoneURLExpandsEveryCode() throws {
        let frame: [UInt8] = [0x10, 0x00, 0x03] + Array(0x00...0x0D)
        guard case .url(let f) = try EddystoneFrame(decoding: frame) else {
            Issue.record("not a URL frame")
            return
        }
        #expect(f.url == "https://.com/.org/.edu/.net/.info/.biz/.gov/.com.org.edu.net.info.biz.gov")
    }

    @Test func eddystoneTLM() throws {
        let frame: [UInt8] = [
            0x20,  // frame type: TLM
            0x00,  // version: unencrypted
            0x0B, 0xB8,  // battery 3000 mV
            0x17, 0x80,  // temperature 23.5 °C (8.8 fixed point)
            0x00, 0x00, 0x01, 0x00,  // 256 advertising PDUs
            0x00, 0x00, 0x03, 0xE8,  // up 1000 tenths of a second
        ]
        #expect(
            try EddystoneFrame(decoding: frame)
                == .tlm(
                    .init(batteryVoltage: 3000, temperature: 23.5, advertisingCount: 256, uptimeTenthsOfSecond: 1000)))
        // 0x8000: temperature not supported; a negative one.
        var unsupported = frame
        unsupported[4] = 0x80
        unsupported[5] = 0x00
        guard case .tlm(let t) = try EddystoneFrame(decoding: unsupported) else {
            Issue.record("not a TLM frame")
            return
        }
        #expect(t.temperature == nil)
        var cold = frame
        cold[4] = 0xFF
        cold[5] = 0x80
        guard case .tlm(let c) = try EddystoneFrame(decoding: cold) else {
            Issue.record("not a TLM frame")
            return
        }
        #expect(c.temperature == -0.5)
    }

    @Test func eddystoneEncryptedTLMEIDAndUnknownTypes() throws {
        let etlm = [UInt8](1...16)
        #expect(try EddystoneFrame(decoding: [0x20, 0x01] + etlm) == .encryptedTLM(etlm))
        let eid: [UInt8] = [0x30, 0xF6, 1, 2, 3, 4, 5, 6, 7, 8]
        #expect(try EddystoneFrame(decoding: eid) == .eid(.init(txPower: -10, identifier: [1, 2, 3, 4, 5, 6, 7, 8])))
        #expect(try EddystoneFrame(decoding: [0x40, 0xAB]) == .unknown(frameType: 0x40, data: [0xAB]))
    }

    @Test(
        arguments: [
            [],  // no frame type
            [0x00, 0xEE] + [UInt8](repeating: 0, count: 15),  // UID one octet short
            [0x00, 0xEE] + [UInt8](repeating: 0, count: 17),  // UID of 19 octets
            [0x10, 0xEC],  // URL without a scheme
            [0x10, 0xEC, 0x04, 0x61],  // reserved scheme 0x04
            [0x10, 0xEC, 0x03, 0x0E],  // reserved URL code 0x0E
            [0x10, 0xEC, 0x03, 0x20],  // a space
            [0x10, 0xEC, 0x03, 0x7F],  // DEL
            [0x10, 0xEC, 0x03] + [UInt8](repeating: 0x61, count: 18),  // a URL of 18 octets
            [0x20],  // TLM without a version
            [0x20, 0x00, 0x0B, 0xB8],  // TLM truncated
            [0x20, 0x02] + [UInt8](repeating: 0, count: 12),  // TLM version 2
            [0x20, 0x01, 0x00],  // encrypted TLM truncated
            [0x30, 0xF6, 1, 2, 3],  // EID truncated
        ] as [[UInt8]])
    func malformedEddystoneThrows(_ frame: [UInt8]) {
        #expect(throws: AdvertisingDataError(code: .malformedFrame, message: "")) {
            try EddystoneFrame(decoding: frame)
        }
        var data = AdvertisingData()
        data.addServiceData(frame, for: EddystoneFrame.serviceUUID)
        #expect(data.eddystone == nil)
        #expect(data.serviceData[EddystoneFrame.serviceUUID] == frame, "the octets stay")
    }

    @Test func eddystoneViewReadsServiceDataOfFEAA() throws {
        let advertisement: [UInt8] =
            [
                0x02, 0x01, 0x06,  // Flags
                0x03, 0x03, 0xAA, 0xFE,  // Complete List of 16-bit Service UUIDs: FEAA
                0x0C, 0x16, 0xAA, 0xFE,  // Service Data - 16-bit UUID FEAA, 9 octets of frame
                0x10, 0xEC, 0x03,  // URL, -20 dBm, https://
            ] + Array("swift".utf8) + [0x08]  // "swift" .org
        let data = try AdvertisingData(decoding: advertisement)
        #expect(data.eddystone == .url(.init(txPower: -20, url: "https://swift.org")))
        #expect(AdvertisingData().eddystone == nil)
    }

    @Test(
        arguments: [
            (0x06, ["LE General Discoverable", "BR/EDR Not Supported"]),
            (0x05, ["LE Limited Discoverable", "BR/EDR Not Supported"]),
            (0x1A, ["LE General Discoverable", "LE and BR/EDR (Controller)", "LE and BR/EDR (Host)"]),
            (0xE6, ["LE General Discoverable", "BR/EDR Not Supported", "0xe0"]),
            (0x00, []),
        ] as [(UInt8, [String])])
    func flagsNameTheirBits(_ value: UInt8, _ names: [String]) throws {
        let data = try AdvertisingData(decoding: [0x02, 0x01, value])
        let flags = try #require(data.flags)
        #expect(flags.names == names)
        #expect(flags.description == "[" + names.joined(separator: ", ") + "]")
    }

    @Test func emptyFlagsStructureHasNoFlags() throws {
        #expect(try AdvertisingData(decoding: [0x01, 0x01]).flags == nil)
    }
}
