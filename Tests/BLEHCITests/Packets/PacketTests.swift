import BLECore
import BLEHCI
import NIOCore
import Testing

/// ACL header: handle (bits 0-11), Packet_Boundary_Flag (12-13), Broadcast_Flag (14-15), then the data length.
/// Core Spec 5.4, Vol 4, Part E, 5.4.2.
struct ACLCase: Sendable, CustomTestStringConvertible {
    let packet: HCIACLDataPacket
    let bytes: [UInt8]
    var testDescription: String { "\(packet.handle) \(packet.packetBoundary) bc \(packet.broadcast)" }
}

let aclCases: [ACLCase] = [
    // 0x2040: handle 0x040, PB 0b10 first flushable, BC 0
    .init(
        packet: .init(handle: handle40, packetBoundary: .firstFlushable, data: [0x01, 0x00, 0x04, 0x00, 0x0A]),
        bytes: [0x40, 0x20, /* length */ 0x05, 0x00, 0x01, 0x00, 0x04, 0x00, 0x0A]),
    // 0x1041: handle 0x041, PB 0b01 continuing
    .init(
        packet: .init(handle: ConnectionHandle(0x0041), packetBoundary: .continuing, data: [0xAA]),
        bytes: [0x41, 0x10, 0x01, 0x00, 0xAA]),
    // 0x0040: PB 0b00 first non-flushable, empty data
    .init(
        packet: .init(handle: handle40, packetBoundary: .firstNonFlushable, data: []),
        bytes: [0x40, 0x00, 0x00, 0x00]),
    // 0x3EFF: the largest handle 0xEFF, PB 0b11 complete
    .init(
        packet: .init(handle: ConnectionHandle(0x0EFF), packetBoundary: .complete, data: [0x01, 0x02]),
        bytes: [0xFF, 0x3E, 0x02, 0x00, 0x01, 0x02]),
    // 0x4001: handle 0x001, PB 0b00, BC 0b01
    .init(
        packet: .init(
            handle: ConnectionHandle(0x0001), packetBoundary: .firstNonFlushable, broadcast: 0b01, data: [0x07]),
        bytes: [0x01, 0x40, 0x01, 0x00, 0x07]),
]

@Suite struct PacketTests {
    @Test(arguments: aclCases)
    func aclEncodes(_ testCase: ACLCase) {
        #expect(testCase.packet.encode() == testCase.bytes)
    }

    @Test(arguments: aclCases)
    func aclDecodes(_ testCase: ACLCase) throws {
        #expect(try HCIACLDataPacket(decoding: testCase.bytes) == testCase.packet)
    }

    @Test(arguments: aclCases)
    func aclPrefixesAreRejected(_ testCase: ACLCase) {
        for length in 0..<testCase.bytes.count {
            #expect(throws: HCIError.self) { try HCIACLDataPacket(decoding: testCase.bytes.prefix(length)) }
        }
    }

    @Test func aclFlags() throws {
        let packet = try HCIACLDataPacket(decoding: [0x40, 0x20, 0x00, 0x00])
        #expect(packet.handle == handle40)
        #expect(packet.packetBoundary == .firstFlushable)
        #expect(packet.packetBoundary.isFirst)
        #expect(!HCIACLDataPacket.PacketBoundaryFlag.continuing.isFirst)
        #expect(packet.broadcast == 0)
    }

    @Test func aclLongerThanDeclaredIsRejected() {
        let error = #expect(throws: HCIError.self) {
            try HCIACLDataPacket(decoding: [0x40, 0x20, 0x01, 0x00, 0xAA, 0xBB])
        }
        #expect(error?.code == .lengthMismatch)
    }

    @Test func aclLengthUsesSixteenBits() throws {
        let data = [UInt8](repeating: 0x5A, count: 300)
        let bytes = HCIACLDataPacket(handle: handle40, packetBoundary: .firstFlushable, data: data).encode()
        #expect(Array(bytes.prefix(4)) == [0x40, 0x20, 0x2C, 0x01])
        #expect(try HCIACLDataPacket(decoding: bytes).data == data)
    }

    @Test func commandAndEventPacketsRejectTrailingBytes() {
        #expect(throws: HCIError.self) { try HCICommandPacket(decoding: [0x03, 0x0C, 0x00, 0xFF]) }
        #expect(throws: HCIError.self) { try HCIEventPacket(decoding: [0x10, 0x01, 0x42, 0xFF]) }
    }

    @Test func packetTypes() {
        #expect(HCIPacket.command(HCIReset().packet).packetType == .command)
        #expect(HCIPacket.acl(aclCases[0].packet).packetType == .acl)
        #expect(HCIPacket.event(HCIEvent.HardwareError(hardwareCode: 0).packet).packetType == .event)
        #expect(HCIPacket.other(type: 0x05, bytes: []).packetType == .iso)
        #expect(HCIPacketType.sco.rawValue == 0x03)
        #expect(HCIPacketType(rawValue: 0x09).description == "0x09")
    }
}

@Suite struct H4FramerTests {
    /// Five packets in one H4 stream: indicator then packet.
    static let stream: [(HCIPacket, [UInt8])] = [
        (.command(HCIReset().packet), [0x01, 0x03, 0x0C, 0x00]),
        (
            .event(HCIEvent.CommandComplete(completing: HCIReset.self, returning: HCIEmptyReturn()).packet),
            [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]
        ),
        (.acl(aclCases[0].packet), [0x02] + aclCases[0].bytes),
        // SCO: handle 0x0001, length 2 (one byte)
        (.other(type: 0x03, bytes: [0x01, 0x00, 0x02, 0xAB, 0xCD]), [0x03, 0x01, 0x00, 0x02, 0xAB, 0xCD]),
        // ISO: handle 0x0002 (flags 0b10 in bits 12-13), 14-bit length 3; flag bits above the length ignored
        (
            .other(type: 0x05, bytes: [0x02, 0x20, 0x03, 0xC0, 0x01, 0x02, 0x03]),
            [0x05, 0x02, 0x20, 0x03, 0xC0, 0x01, 0x02, 0x03]
        ),
    ]

    @Test func encodes() {
        for (packet, bytes) in Self.stream {
            #expect(H4Encoder.encode(packet) == bytes)
            var buffer = ByteBuffer()
            H4Encoder.encode(packet, into: &buffer)
            #expect(buffer.readableBytesView.elementsEqual(bytes))
        }
    }

    @Test func decodesFedOneByteAtATime() throws {
        var decoder = H4Decoder()
        var buffer = ByteBuffer()
        var decoded: [HCIPacket] = []
        for byte in Self.stream.flatMap(\.1) {
            buffer.writeInteger(byte)
            while true {
                let before = buffer.readerIndex
                guard let packet = try decoder.decode(&buffer) else {
                    #expect(buffer.readerIndex == before, "nil must consume nothing")
                    break
                }
                decoded.append(packet)
            }
        }
        #expect(decoded == Self.stream.map(\.0))
        #expect(buffer.readableBytes == 0)
    }

    @Test func decodesAWholeStreamAtOnce() throws {
        var decoder = H4Decoder()
        var buffer = ByteBuffer(bytes: Self.stream.flatMap(\.1))
        var decoded: [HCIPacket] = []
        while let packet = try decoder.decode(&buffer) { decoded.append(packet) }
        #expect(decoded == Self.stream.map(\.0))
    }

    @Test func emptyBufferNeedsMore() throws {
        var decoder = H4Decoder()
        var buffer = ByteBuffer()
        #expect(try decoder.decode(&buffer) == nil)
    }

    @Test(arguments: [UInt8(0x00), 0x06, 0x42, 0xFF])
    func unknownIndicatorThrows(_ indicator: UInt8) {
        var decoder = H4Decoder()
        var buffer = ByteBuffer(bytes: [indicator, 0x00, 0x00])
        let error = #expect(throws: HCIError.self) { try decoder.decode(&buffer) }
        #expect(error?.code == .unknownPacketType)
    }
}
