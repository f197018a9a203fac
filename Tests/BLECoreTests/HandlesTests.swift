import BLECore
import NIOCore
import Testing

@Suite struct HandlesTests {
    @Test func connectionHandleKeepsTwelveBits() {
        #expect(ConnectionHandle(0x0040).rawValue == 0x0040)
        // The upper 4 bits of the HCI ACL header field are PB/BC flags, not part of the handle.
        #expect(ConnectionHandle(rawValue: 0x2040).rawValue == 0x0040)
        #expect(ConnectionHandle(0x0EFF).description == "0x0EFF")
        #expect(ConnectionHandle(0x0001) < ConnectionHandle(0x0002))
        #expect(ConnectionHandle.maximum == 0x0EFF)
    }

    @Test func attributeHandles() {
        #expect(AttributeHandle.min.rawValue == 0x0001)
        #expect(AttributeHandle.max.rawValue == 0xFFFF)
        #expect(AttributeHandle(0x0003).description == "0x0003")
        #expect(AttributeHandle(1).distance(to: AttributeHandle(5)) == 4)
        #expect(AttributeHandle(5).advanced(by: -2) == AttributeHandle(3))
        #expect(AttributeHandle.max.advanced(by: 1) == AttributeHandle.max)  // clamps, never traps
        #expect(Array(AttributeHandle(1)...AttributeHandle(3)).count == 3)
    }

    @Test func channelIdentifiers() {
        #expect(L2CAPChannelID.att.rawValue == 0x0004)
        #expect(L2CAPChannelID.leSignaling.rawValue == 0x0005)
        #expect(L2CAPChannelID.smp.rawValue == 0x0006)
        #expect(L2CAPChannelID.leSignaling.description == "0x0005")
    }
}

@Suite struct ByteHelperTests {
    @Test func littleEndianIntegers() {
        var buffer = ByteBuffer()
        buffer.writeLE(UInt16(0x1234))
        buffer.writeUInt24LE(0xABCDEF)
        buffer.writeLE(UInt32(0x0102_0304))
        #expect(Array(buffer.readableBytesView) == [0x34, 0x12, 0xEF, 0xCD, 0xAB, 0x04, 0x03, 0x02, 0x01])
        #expect(buffer.readLE(UInt16.self) == 0x1234)
        #expect(buffer.readUInt24LE() == 0xABCDEF)
        #expect(buffer.readLE(UInt32.self) == 0x0102_0304)
        #expect(buffer.readLE(UInt8.self) == nil)
    }

    @Test func uuidReads() {
        var buffer = ByteBuffer(bytes: [0x0D, 0x18, 0x01])
        #expect(buffer.readUUID(length: 3) == nil)
        #expect(buffer.readUUID(length: 4) == nil)  // short: consumes nothing
        #expect(buffer.readableBytes == 3)
        #expect(buffer.readUUID(length: 2) == .heartRate)
        #expect(buffer.readRemainingBytes() == [0x01])
    }

    @Test func hex() {
        #expect([UInt8](hex: "0a 1B:ff-00") == [0x0A, 0x1B, 0xFF, 0x00])
        #expect([UInt8](hex: "") == [])
        #expect([UInt8](hex: "abc") == nil)
        #expect([UInt8](hex: "+f") == nil)
        #expect([UInt8](hex: "zz") == nil)
        #expect([0x0A, 0xFF].hexString == "0aff")
    }
}

@Suite struct DurationNanosecondsTests {
    @Test func timersClampInsteadOfOverflowing() {
        #expect(Duration.milliseconds(1500).clampedNanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).clampedNanoseconds == 7)
        #expect(Duration.seconds(-3).clampedNanoseconds == 0)
        #expect(Duration.seconds(Int64.max).clampedNanoseconds == Int64.max / 2)
        #expect((Duration.seconds(9_223_372_036) + .milliseconds(900)).clampedNanoseconds == Int64.max / 2)
        #expect(Duration.seconds(4_611_686_018).clampedNanoseconds == 4_611_686_018_000_000_000)
    }
}
