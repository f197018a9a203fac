import BLECore
import Foundation
import NIOCore
import Testing

/// Arbitrary advertising data and arbitrary UUID bytes and strings: each decoder returns or throws (or gives
/// `nil`), never traps, and what it accepts survives a round trip.
@Suite struct CoreRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    /// The AD types the views read, so random structures reach them.
    static let viewedTypes: [UInt8] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x14, 0x15, 0x16,
        0x19, 0x1F, 0x20, 0x21, 0xFF,
    ]

    /// Advertising data: mostly well-framed structures of viewed types, then some damage.
    static func randomAdvertisingData(_ g: inout Generator) -> [UInt8] {
        var bytes: [UInt8] = []
        let limit = g.chance(80) ? 31 : 254
        while bytes.count < limit, g.chance(85) {
            let data = g.bytes(g.below(g.chance(90) ? 20 : 254))
            let type = g.chance(80) ? viewedTypes[g.below(viewedTypes.count)] : g.next()
            bytes += [UInt8(min(255, data.count + 1)), type] + data
        }
        switch g.below(6) {
        case 0 where !bytes.isEmpty: bytes[g.below(bytes.count)] = g.next()
        case 1 where !bytes.isEmpty: bytes.removeLast(1 + g.below(bytes.count))
        case 2: bytes += g.bytes(1 + g.below(8))
        case 3: bytes = g.bytes(g.below(40))
        default: break
        }
        return bytes
    }

    /// Touches every typed view, as a scanner would.
    static func readEveryView(_ data: AdvertisingData) {
        _ = data.flags
        _ = data.serviceUUIDs
        _ = data.isServiceListComplete
        _ = data.solicitedServiceUUIDs
        _ = data.localName
        _ = data.txPowerLevel
        _ = data.allManufacturerData.map(\.bytes)
        _ = data.serviceData
        _ = data.appearance
        _ = data.description
        _ = data.fitsLegacyAdvertising
    }

    @Test func randomAdvertisingDataNeverTraps() {
        var g = Generator(seed: 0xAD)
        var decoded = 0
        for _ in 0..<5000 {
            let bytes = Self.randomAdvertisingData(&g)
            do {
                let data = try AdvertisingData(decoding: bytes)
                decoded += 1
                Self.readEveryView(data)
                // The encoding is the input up to its end or its first zero length octet.
                #expect(data.bytes == Array(bytes.prefix(data.count)))
                #expect(data.count == bytes.count || bytes[data.count] == 0)
                #expect((try? AdvertisingData(decoding: data.bytes)) == data)
            } catch {
                #expect(error.code == .structureOverrun)
            }
        }
        #expect(decoded > 1000)
    }

    /// A buffer whose readable bytes start part-way in decodes the same as the bytes alone.
    @Test func advertisingDataFromABufferSlice() {
        var g = Generator(seed: 0xB0F)
        for _ in 0..<500 {
            let prefix = g.bytes(g.below(10))
            let bytes = Self.randomAdvertisingData(&g)
            var buffer = ByteBuffer(bytes: prefix + bytes)
            buffer.moveReaderIndex(forwardBy: prefix.count)
            let fromBuffer = try? AdvertisingData(buffer: buffer)
            #expect(fromBuffer == (try? AdvertisingData(decoding: bytes)))
            #expect(buffer.readableBytes == bytes.count)
        }
    }

    @Test func randomLittleEndianUUIDs() {
        var g = Generator(seed: 0x0111D)
        for _ in 0..<3000 {
            let bytes = g.bytes(g.below(20))
            // Sometimes a slice that does not start at index 0.
            let uuid =
                g.chance(50) ? BluetoothUUID(littleEndian: bytes) : BluetoothUUID(littleEndian: ([0xEE] + bytes)[1...])
            #expect((uuid != nil) == [2, 4, 16].contains(bytes.count))
            guard let uuid else { continue }
            #expect(BluetoothUUID(littleEndian: uuid.littleEndianBytes) == uuid)
            #expect(BluetoothUUID(littleEndian: uuid.attWireBytes) == uuid)
            #expect(BluetoothUUID(string: uuid.uuidString) == uuid)
            _ = uuid.description
        }
    }

    /// Strings built from the characters a UUID parser meets, and some it should not: digits in other
    /// scripts, combining marks, signs, whitespace, emoji.
    @Test func randomUUIDStrings() {
        var g = Generator(seed: 0x57121)
        let alphabet: [String] =
            Array("0123456789abcdefABCDEF0123456789-").map(String.init)
            + [
                "x", "X", "0x", " ", "\t", "+", "g", "G", "\u{0301}", "\u{FF11}", "\u{0661}", "\u{1D7D9}", "é", "👍🏽",
                "\u{200B}", "\n", "\0", "\u{FFFD}",
            ]
        var parsed = 0
        for _ in 0..<4000 {
            var text = ""
            switch g.below(3) {
            case 0:
                // A 128-bit form with characters swapped for others.
                var characters = Array("12345678-9ABC-DEF0-1234-56789ABCDEF0").map(String.init)
                for _ in 0..<(1 + g.below(3)) {
                    characters[g.below(characters.count)] = alphabet[g.below(alphabet.count)]
                }
                text = characters.joined()
            case 1:
                for _ in 0..<[4, 8, 6, 10][g.below(4)] { text += alphabet[g.below(alphabet.count)] }
            default:
                for _ in 0..<g.below(40) { text += alphabet[g.below(alphabet.count)] }
            }
            guard let uuid = BluetoothUUID(string: text) else { continue }
            parsed += 1
            #expect(BluetoothUUID(string: uuid.uuidString) == uuid, "\(text.debugDescription)")
            #expect(BluetoothUUID(string: uuid.uuid.uuidString) == uuid)
        }
        #expect(parsed > 0)
    }
}
