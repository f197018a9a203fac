import BLECore
import BLEL2CAP
import NIOCore
import Testing

@Suite struct L2CAPFragmenterTests {
    @Test func goldenFragments() {
        let frame = L2CAPBasicFrame(channelID: .att, payload: [0x1B, 0x03, 0x00, 0x01, 0x02, 0x03])
        let fragments = L2CAPFragmenter(maximumFragmentLength: 4).fragments(of: frame)
        #expect(
            fragments == [
                L2CAPFragment(boundary: .firstNonFlushable, data: [0x06, 0x00, 0x04, 0x00]),  // header
                L2CAPFragment(boundary: .continuing, data: [0x1B, 0x03, 0x00, 0x01]),  // Handle Value Notification...
                L2CAPFragment(boundary: .continuing, data: [0x02, 0x03]),
            ])
    }

    @Test func fitsInOne() {
        let frame = sampleFrame(length: 23)
        let fragments = L2CAPFragmenter(maximumFragmentLength: 27).fragments(of: frame, firstBoundary: .firstFlushable)
        #expect(fragments.count == 1)
        #expect(fragments[0].boundary == .firstFlushable)
        #expect(Array(fragments[0].data.readableBytesView) == bytes(frame))
    }

    @Test func emptyInputGivesOneEmptyFragment() {
        let fragments = L2CAPFragmenter(maximumFragmentLength: 27).fragments(ofEncodedFrame: ByteBuffer())
        #expect(fragments == [L2CAPFragment(boundary: .firstNonFlushable, data: [])])
    }

    static let lengths = [0, 1, 22, 23, 24, 27, 100, 246, 247, 248, 251, 512, 1000, 65535]

    @Test(arguments: [27, 251], lengths)
    func roundTrip(bufferSize: Int, payloadLength: Int) {
        let frame = sampleFrame(length: payloadLength, channelID: L2CAPChannelID(rawValue: 0x0040))
        let fragments = L2CAPFragmenter(maximumFragmentLength: bufferSize).fragments(of: frame)

        let total = L2CAPBasicFrame.headerLength + payloadLength
        #expect(fragments.count == (total + bufferSize - 1) / bufferSize)
        #expect(fragments.allSatisfy { $0.data.readableBytes <= bufferSize })
        #expect(fragments.dropLast().allSatisfy { $0.data.readableBytes == bufferSize })
        #expect(fragments.first?.boundary == .firstNonFlushable)
        #expect(fragments.dropFirst().allSatisfy { $0.boundary == .continuing })

        var recombiner = L2CAPRecombiner()
        var frames: [L2CAPBasicFrame] = []
        for fragment in fragments {
            let output = recombiner.receive(fragment)
            #expect(output.errors.isEmpty)
            if let frame = output.frame { frames.append(frame) }
        }
        #expect(frames == [frame])
        #expect(!recombiner.isAssembling)
    }

    @Test func interleavedFramesOnTwoConnectionsStayApart() {
        // One recombiner per connection: fragments of two links interleave without harm.
        let a = sampleFrame(length: 80)
        let b = sampleFrame(length: 60, channelID: .smp)
        let fragmenter = L2CAPFragmenter(maximumFragmentLength: 27)
        var fa = fragmenter.fragments(of: a)[...]
        var fb = fragmenter.fragments(of: b)[...]
        var ra = L2CAPRecombiner()
        var rb = L2CAPRecombiner()
        var got: [L2CAPBasicFrame] = []
        while !fa.isEmpty || !fb.isEmpty {
            if let f = fa.popFirst(), let frame = ra.receive(f).frame { got.append(frame) }
            if let f = fb.popFirst(), let frame = rb.receive(f).frame { got.append(frame) }
        }
        #expect(got == [b, a])
    }
}
