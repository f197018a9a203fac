import BLEATT
import BLECore
import BLEGATT
import Testing

/// The GATT cache's record: what goes in comes out, and anything else is refused whole.
@Suite struct GATTCacheRecordTests {
    static func h(_ value: UInt16) -> AttributeHandle { AttributeHandle(value) }

    static let record = GATTCacheRecord(
        services: [
            GATTService(uuid: .genericAccess, isPrimary: true, handleRange: h(1)...h(5)),
            GATTService(uuid: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E", isPrimary: true, handleRange: h(14)...h(0xFFFF)),
        ],
        includedServices: [h(14): [GATTService(uuid: .battery, isPrimary: false, handleRange: h(6)...h(9))]],
        characteristics: [
            h(1): [
                GATTCharacteristic(
                    uuid: .deviceName, properties: [.read], declarationHandle: h(2), valueHandle: h(3), endHandle: h(3)),
                GATTCharacteristic(
                    uuid: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E", properties: [.notify, .write],
                    declarationHandle: h(4), valueHandle: h(5), endHandle: h(5)),
            ]
        ],
        descriptors: [h(5): [GATTDescriptor(uuid: .clientCharacteristicConfiguration, handle: h(6))], h(3): []])

    @Test func whatGoesInComesOut() {
        let bytes = Self.record.encoded()
        #expect(GATTCacheRecord(decoding: bytes) == Self.record)
        #expect(GATTCacheRecord(decoding: GATTCacheRecord().encoded()) == GATTCacheRecord())
        #expect(GATTCacheRecord().isEmpty)
        // Services never discovered together stay absent, not empty.
        let partial = GATTCacheRecord(characteristics: [Self.h(1): []])
        #expect(GATTCacheRecord(decoding: partial.encoded())?.services == nil)
    }

    @Test func anythingElseIsRefused() {
        let bytes = Self.record.encoded()
        #expect(GATTCacheRecord(decoding: []) == nil)
        #expect(GATTCacheRecord(decoding: [2] + bytes.dropFirst()) == nil, "another version")
        #expect(GATTCacheRecord(decoding: bytes + [0]) == nil, "bytes left over")
        for cut in 1..<bytes.count {
            #expect(GATTCacheRecord(decoding: Array(bytes.prefix(cut))) == nil, "cut at \(cut)")
        }
        // A service whose range ends before it starts.
        var backwards: [UInt8] = [1, 1, 1, 0, 2, 0x00, 0x18, 1, 5, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        #expect(GATTCacheRecord(decoding: backwards) == nil)
        backwards[8] = 1
        backwards[10] = 5
        #expect(GATTCacheRecord(decoding: backwards) != nil)
        // Random bytes never trap.
        var g = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let length = Int.random(in: 0..<64, using: &g)
            _ = GATTCacheRecord(decoding: (0..<length).map { _ in UInt8.random(in: 0...255, using: &g) })
        }
    }
}
