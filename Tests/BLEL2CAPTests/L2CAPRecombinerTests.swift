import BLECore
import BLEL2CAP
import NIOCore
import Testing

/// A frame with a recognisable payload of `length` octets.
func sampleFrame(length: Int, channelID: L2CAPChannelID = .att) -> L2CAPBasicFrame {
    L2CAPBasicFrame(channelID: channelID, payload: (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })
}

func bytes(_ frame: L2CAPBasicFrame) -> [UInt8] { Array(frame.encoded.readableBytesView) }

@Suite struct L2CAPRecombinerTests {
    @Test func completeFrameInOnePacket() {
        var recombiner = L2CAPRecombiner()
        let frame = sampleFrame(length: 10)
        let output = recombiner.receive(ByteBuffer(bytes: bytes(frame)), boundary: .firstFlushable)
        #expect(output == L2CAPRecombiner.Output(frame: frame))
        #expect(!recombiner.isAssembling)
    }

    @Test(arguments: L2CAPPacketBoundary.allCases.filter(\.isStart))
    func everyStartFlagStartsAFrame(boundary: L2CAPPacketBoundary) {
        var recombiner = L2CAPRecombiner()
        let frame = sampleFrame(length: 3)
        #expect(recombiner.receive(ByteBuffer(bytes: bytes(frame)), boundary: boundary).frame == frame)
    }

    @Test func fedFragmentByFragment() {
        var recombiner = L2CAPRecombiner()
        let frame = sampleFrame(length: 100)
        let encoded = bytes(frame)  // 104 octets: 27 + 27 + 27 + 23
        var outputs: [L2CAPRecombiner.Output] = []
        for (index, start) in stride(from: 0, to: encoded.count, by: 27).enumerated() {
            let chunk = Array(encoded[start..<min(start + 27, encoded.count)])
            outputs.append(
                recombiner.receive(ByteBuffer(bytes: chunk), boundary: index == 0 ? .firstFlushable : .continuing))
        }
        #expect(outputs.dropLast().allSatisfy { $0 == .needMoreFragments })
        #expect(outputs.last == L2CAPRecombiner.Output(frame: frame))
    }

    @Test(arguments: 0...5)
    func headerSplitAfter(octets split: Int) {
        // The first packet carries only `split` octets of the frame, the header cut wherever that falls.
        var recombiner = L2CAPRecombiner()
        let frame = sampleFrame(length: 2)
        let encoded = bytes(frame)
        #expect(
            recombiner.receive(ByteBuffer(bytes: encoded.prefix(split)), boundary: .firstFlushable)
                == .needMoreFragments)
        #expect(recombiner.isAssembling)
        let rest = recombiner.receive(ByteBuffer(bytes: encoded.dropFirst(split)), boundary: .continuing)
        #expect(rest == L2CAPRecombiner.Output(frame: frame))
    }

    @Test func oneOctetAtATime() {
        var recombiner = L2CAPRecombiner()
        let frame = sampleFrame(length: 40)
        let encoded = bytes(frame)
        for (index, octet) in encoded.enumerated() {
            let output = recombiner.receive(
                ByteBuffer(bytes: [octet]), boundary: index == 0 ? .firstFlushable : .continuing)
            if index == encoded.count - 1 {
                #expect(output == L2CAPRecombiner.Output(frame: frame))
            } else {
                #expect(output == .needMoreFragments)
            }
        }
    }

    @Test func wholePDULargerThanTheControllerBufferInOnePacket() {
        // Some controllers deliver a 300-octet PDU in one ACL packet although they advertised 251.
        var recombiner = L2CAPRecombiner()
        let frame = sampleFrame(length: 300)
        #expect(recombiner.receive(ByteBuffer(bytes: bytes(frame)), boundary: .firstFlushable).frame == frame)
    }

    @Test func continuationWithoutStart() {
        var recombiner = L2CAPRecombiner()
        let output = recombiner.receive(ByteBuffer(bytes: [1, 2, 3]), boundary: .continuing)
        #expect(output.frame == nil)
        #expect(output.errors == [.unexpectedContinuation()])
        // Recombination carries on.
        let frame = sampleFrame(length: 5)
        #expect(recombiner.receive(ByteBuffer(bytes: bytes(frame)), boundary: .firstFlushable).frame == frame)
    }

    @Test func newStartWhileIncompleteDropsTheOldFrame() {
        var recombiner = L2CAPRecombiner()
        let old = bytes(sampleFrame(length: 50))
        #expect(recombiner.receive(ByteBuffer(bytes: old.prefix(27)), boundary: .firstFlushable) == .needMoreFragments)
        let new = sampleFrame(length: 5, channelID: .smp)
        let output = recombiner.receive(ByteBuffer(bytes: bytes(new)), boundary: .firstFlushable)
        #expect(output.errors == [.incompleteFrameDropped()])
        #expect(output.frame == new)
        // The old frame's late continuation is now unexpected.
        #expect(
            recombiner.receive(ByteBuffer(bytes: old.dropFirst(27)), boundary: .continuing).errors == [
                .unexpectedContinuation()
            ])
    }

    @Test func newStartThatIsItselfIncomplete() {
        var recombiner = L2CAPRecombiner()
        #expect(recombiner.receive(ByteBuffer(bytes: [0x10, 0x00]), boundary: .firstFlushable) == .needMoreFragments)
        let output = recombiner.receive(ByteBuffer(bytes: [0x10, 0x00, 0x04, 0x00]), boundary: .firstFlushable)
        #expect(output == L2CAPRecombiner.Output(errors: [.incompleteFrameDropped()]))
        #expect(recombiner.isAssembling)
    }

    @Test func fragmentOverrunningTheDeclaredLength() {
        var recombiner = L2CAPRecombiner()
        // In the first packet.
        let first = recombiner.receive(
            ByteBuffer(bytes: [0x01, 0x00, 0x04, 0x00, 0xAA, 0xBB]), boundary: .firstFlushable)
        #expect(first == L2CAPRecombiner.Output(errors: [.fragmentOverrun()]))
        #expect(!recombiner.isAssembling)
        // In a continuation.
        #expect(
            recombiner.receive(ByteBuffer(bytes: [0x03, 0x00, 0x04, 0x00, 0x01]), boundary: .firstFlushable)
                == .needMoreFragments)
        let later = recombiner.receive(ByteBuffer(bytes: [0x02, 0x03, 0x04]), boundary: .continuing)
        #expect(later.errors == [.fragmentOverrun()])
        #expect(later.frame == nil)
        #expect(!recombiner.isAssembling)
    }

    @Test func declaredLengthAboveTheMaximum() {
        var recombiner = L2CAPRecombiner(maximumPayloadLength: 100)
        let tooLong = bytes(sampleFrame(length: 150))
        let first = recombiner.receive(ByteBuffer(bytes: tooLong.prefix(27)), boundary: .firstFlushable)
        #expect(first.errors == [.frameTooLong()])
        // Its continuations are skipped quietly...
        var rest = Array(tooLong.dropFirst(27))
        while !rest.isEmpty {
            let chunk = Array(rest.prefix(27))
            rest.removeFirst(chunk.count)
            #expect(recombiner.receive(ByteBuffer(bytes: chunk), boundary: .continuing) == .needMoreFragments)
        }
        // ...and what comes after them is not.
        #expect(recombiner.receive(ByteBuffer(bytes: [0]), boundary: .continuing).errors == [.unexpectedContinuation()])
        let frame = sampleFrame(length: 100)
        #expect(recombiner.receive(ByteBuffer(bytes: bytes(frame)), boundary: .firstFlushable).frame == frame)
    }

    @Test func declaredLengthAboveTheMaximumSplitInTheHeader() {
        var recombiner = L2CAPRecombiner(maximumPayloadLength: 10)
        #expect(recombiner.receive(ByteBuffer(bytes: [0x0B]), boundary: .firstNonFlushable) == .needMoreFragments)
        #expect(recombiner.receive(ByteBuffer(bytes: [0x00, 0x04]), boundary: .continuing).errors == [.frameTooLong()])
        #expect(!recombiner.isAssembling)
    }

    @Test func resetForgetsThePartialFrame() {
        var recombiner = L2CAPRecombiner()
        _ = recombiner.receive(ByteBuffer(bytes: [0x05, 0x00]), boundary: .firstFlushable)
        recombiner.reset()
        #expect(!recombiner.isAssembling)
        #expect(
            recombiner.receive(ByteBuffer(bytes: [0x04]), boundary: .continuing).errors == [.unexpectedContinuation()])
    }

    @Test func emptyPackets() {
        var recombiner = L2CAPRecombiner()
        #expect(recombiner.receive(ByteBuffer(), boundary: .firstFlushable) == .needMoreFragments)
        #expect(recombiner.receive(ByteBuffer(), boundary: .continuing) == .needMoreFragments)
        let frame = sampleFrame(length: 0)
        #expect(recombiner.receive(ByteBuffer(bytes: bytes(frame)), boundary: .continuing).frame == frame)
    }
}
