import BLECore
import BLEL2CAP
import NIOCore
import Testing

@Suite struct L2CAPBasicFrameTests {
    static let mtuRequest: [UInt8] = [
        0x03, 0x00,  // Length: 3
        0x04, 0x00,  // Channel ID: ATT (0x0004)
        0x02, 0x17, 0x00,  // ATT Exchange MTU Request, Client Rx MTU 23
    ]

    @Test func goldenBytes() throws {
        let frame = try L2CAPBasicFrame(decoding: ByteBuffer(bytes: Self.mtuRequest))
        #expect(frame.channelID == .att)
        #expect(Array(frame.payload.readableBytesView) == [0x02, 0x17, 0x00])
        #expect(frame.encodedLength == 7)

        let built = L2CAPBasicFrame(channelID: .att, payload: [0x02, 0x17, 0x00])
        #expect(built == frame)
        #expect(Array(built.encoded.readableBytesView) == Self.mtuRequest)
        #expect(built.bytes == Self.mtuRequest)
        var buffer = ByteBuffer(bytes: [0xAA])
        #expect(built.encode(into: &buffer) == 7)
        #expect(Array(buffer.readableBytesView) == [0xAA] + Self.mtuRequest)
    }

    @Test func emptyPayloadAndUnknownChannel() throws {
        let bytes: [UInt8] = [0x00, 0x00, 0x40, 0x00]  // Length 0, CID 0x0040 (dynamic)
        let frame = try L2CAPBasicFrame(decoding: ByteBuffer(bytes: bytes))
        #expect(frame.channelID == L2CAPChannelID(rawValue: 0x0040))
        #expect(frame.payload.readableBytes == 0)
        #expect(Array(frame.encoded.readableBytesView) == bytes)
        #expect(frame.bytes == bytes)
    }

    /// `bytes` (one array, what a one-packet PDU carries) and `encoded` agree, for payloads of every size up to
    /// the longest an LE ACL buffer holds and beyond, and for a payload read from the middle of a buffer.
    @Test func bytesAreTheEncodedFrame() {
        for length in [0, 1, 23, 247, 251, 300, 517] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let frame = L2CAPBasicFrame(
                channelID: L2CAPChannelID(rawValue: 0x0023), payload: ByteBuffer(bytes: payload))
            #expect(frame.bytes == Array(frame.encoded.readableBytesView), "payload of \(length)")
            #expect(frame.bytes.count == 4 + length)
        }
        var buffer = ByteBuffer(bytes: [9, 9, 1, 2, 3, 9])
        buffer.moveReaderIndex(forwardBy: 2)
        let slice = buffer.readSlice(length: 3)!
        #expect(L2CAPBasicFrame(channelID: .att, payload: slice).bytes == [3, 0, 4, 0, 1, 2, 3])
    }

    @Test func everyTruncationIsRejected() {
        for length in 0..<Self.mtuRequest.count {
            #expect(throws: L2CAPError.truncated()) {
                try L2CAPBasicFrame(decoding: ByteBuffer(bytes: Self.mtuRequest.prefix(length)))
            }
        }
    }

    @Test func trailingOctetsAreRejected() {
        #expect(throws: L2CAPError.malformed()) {
            try L2CAPBasicFrame(decoding: ByteBuffer(bytes: Self.mtuRequest + [0x00]))
        }
    }

    @Test func readingFromAStreamWaitsForTheWholeFrame() {
        var stream = ByteBuffer(bytes: Self.mtuRequest.prefix(5))
        #expect(L2CAPBasicFrame.read(from: &stream) == nil)
        #expect(stream.readableBytes == 5)  // nothing consumed
        stream.writeBytes(Self.mtuRequest.suffix(2) + Self.mtuRequest)
        #expect(L2CAPBasicFrame.read(from: &stream)?.channelID == .att)
        #expect(L2CAPBasicFrame.read(from: &stream)?.channelID == .att)
        #expect(L2CAPBasicFrame.read(from: &stream) == nil)
        #expect(stream.readableBytes == 0)
    }

    @Test func largestFrame() throws {
        let payload = [UInt8](repeating: 0x5A, count: 65535)
        let frame = L2CAPBasicFrame(channelID: .att, payload: payload)
        let encoded = frame.encoded
        #expect(Array(encoded.readableBytesView.prefix(4)) == [0xFF, 0xFF, 0x04, 0x00])
        #expect(try L2CAPBasicFrame(decoding: encoded) == frame)
    }
}
