import BLECore
import BLEL2CAP
import NIOCore
import Testing

/// Arbitrary fragments into the recombiner and arbitrary C-frames into the signalling decoder and channel:
/// no trap, and each keeps working afterwards.
@Suite struct L2CAPRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
        mutating func boundary() -> L2CAPPacketBoundary { L2CAPPacketBoundary(rawValue: next() & 0b11)! }
    }

    // MARK: - Recombiner

    /// A packet of garbage: random flag, random bytes, sometimes a plausible basic header in front.
    static func garbageFragment(_ g: inout Generator) -> L2CAPFragment {
        var data = g.bytes(g.below(40))
        if g.chance(40) {
            let declared = g.chance(70) ? UInt16(g.below(60)) : UInt16(g.below(0x10000))
            data = [UInt8(declared & 0xFF), UInt8(declared >> 8), 0x04, 0x00] + data
        }
        return L2CAPFragment(boundary: g.boundary(), data: data)
    }

    /// A valid frame cut into packets of random sizes, the first with a start flag.
    static func fragments(of frame: L2CAPBasicFrame, _ g: inout Generator) -> [L2CAPFragment] {
        var bytes = Array(frame.encoded.readableBytesView)[...]
        var out: [L2CAPFragment] = []
        repeat {
            let take = min(bytes.count, 1 + g.below(30))
            let boundary: L2CAPPacketBoundary =
                out.isEmpty ? (g.chance(50) ? .firstNonFlushable : .firstFlushable) : .continuing
            out.append(L2CAPFragment(boundary: boundary, data: Array(bytes.prefix(take))))
            bytes = bytes.dropFirst(take)
        } while !bytes.isEmpty
        return out
    }

    @Test func randomFragmentsNeverTrapAndValidFramesStillArrive() {
        var g = Generator(seed: 0xF7A6)
        for _ in 0..<300 {
            let limit = g.chance(30) ? g.below(80) : L2CAPBasicFrame.maximumPayloadLength
            var recombiner = L2CAPRecombiner(maximumPayloadLength: limit)
            for _ in 0..<g.below(8) {
                let output = recombiner.receive(Self.garbageFragment(&g))
                if let frame = output.frame {
                    #expect(frame.payload.readableBytes <= limit)
                }
                #expect(output.errors.count <= 2)
            }
            // A whole valid frame after the garbage arrives intact, whatever state the garbage left behind.
            let frame = L2CAPBasicFrame(
                channelID: L2CAPChannelID(rawValue: UInt16(g.below(0x10000))),
                payload: g.bytes(g.below(min(limit, 100) + 1)))
            var frames: [L2CAPBasicFrame] = []
            for fragment in Self.fragments(of: frame, &g) {
                let output = recombiner.receive(fragment)
                if let frame = output.frame { frames.append(frame) }
            }
            #expect(frames == [frame])
            #expect(!recombiner.isAssembling)
        }
    }

    /// A packet read in place as a whole frame is the frame `receive` would give, with nothing wrong, and the
    /// recombiner is left as `receive` leaves it; `wholeFrame` declines anything else.
    @Test func aWholeFrameReadInPlaceIsWhatReceiveGives() {
        var g = Generator(seed: 0x3401E)
        var taken = 0
        for _ in 0..<20_000 {
            var recombiner = L2CAPRecombiner(maximumPayloadLength: g.chance(20) ? g.below(40) : 65_535)
            // Sometimes a PDU is under way, or being discarded, when the packet comes.
            if g.chance(30) { _ = recombiner.receive(Self.garbageFragment(&g)) }
            // Half the time a packet that is a whole frame on some channel, if nothing else is under way.
            var packet = Self.garbageFragment(&g)
            if g.chance(50) {
                let payload = g.bytes(g.below(60))
                packet.data = ByteBuffer(bytes: [UInt8(payload.count), 0, g.next(), g.next()] + payload)
            }
            let inPlace = recombiner.wholeFrame(in: Array(packet.data.readableBytesView), boundary: packet.boundary)
            let assembling = recombiner.isAssembling
            let output = recombiner.receive(packet)
            guard let inPlace else { continue }
            taken += 1
            #expect(!assembling)
            #expect(output.errors.isEmpty)
            #expect(output.frame?.channelID == inPlace.channel)
            #expect(output.frame.map { Array($0.payload.readableBytesView) } == Array(inPlace.payload))
            #expect(!recombiner.isAssembling)
        }
        #expect(taken > 1_000)
    }

    /// Valid frames and garbage interleaved at packet level in one long stream: never more frames than
    /// packets, and each frame's payload matches its header.
    @Test func longInterleavedStream() {
        var g = Generator(seed: 0x57AE)
        var recombiner = L2CAPRecombiner()
        var delivered = 0
        for _ in 0..<3000 {
            let output = recombiner.receive(Self.garbageFragment(&g))
            if let frame = output.frame {
                delivered += 1
                #expect(frame.encodedLength == L2CAPBasicFrame.headerLength + frame.payload.readableBytes)
            }
        }
        #expect(delivered > 0)
    }

    // MARK: - Signalling decoder

    /// Well-formed commands of every kind this stack decodes, as the byte forms to damage.
    static let goldenCommands: [L2CAPSignalingCommand] = [
        L2CAPSignalingCommand(identifier: 1, .commandReject(.commandNotUnderstood)),
        L2CAPSignalingCommand(identifier: 2, .commandReject(.signalingMTUExceeded(actualMTU: 23))),
        L2CAPSignalingCommand(
            identifier: 3,
            .commandReject(
                .invalidCID(
                    local: L2CAPChannelID(rawValue: 0x40),
                    remote: L2CAPChannelID(rawValue: 0x41)))),
        L2CAPSignalingCommand(
            identifier: 4,
            .disconnectionRequest(
                .init(
                    destinationCID: L2CAPChannelID(rawValue: 0x40),
                    sourceCID: L2CAPChannelID(rawValue: 0x41)))),
        L2CAPSignalingCommand(
            identifier: 5,
            .disconnectionResponse(
                .init(
                    destinationCID: L2CAPChannelID(rawValue: 0x40),
                    sourceCID: L2CAPChannelID(rawValue: 0x41)))),
        L2CAPSignalingCommand(
            identifier: 6,
            .connectionParameterUpdateRequest(
                .init(
                    parameters: .init(
                        minimumInterval: 24, maximumInterval: 40, peripheralLatency: 0, supervisionTimeout: 500)))),
        L2CAPSignalingCommand(identifier: 7, .connectionParameterUpdateResponse(.init(result: .rejected))),
        L2CAPSignalingCommand(
            identifier: 8,
            .leCreditBasedConnectionRequest(
                .init(
                    spsm: 0x0080, sourceCID: L2CAPChannelID(rawValue: 0x40), mtu: 512, mps: 247, initialCredits: 10))),
        L2CAPSignalingCommand(identifier: 9, .leCreditBasedConnectionResponse(.refused(.spsmNotSupported))),
    ]

    static func randomCommandBytes(_ g: inout Generator) -> [UInt8] {
        switch g.below(3) {
        case 0:
            // A plausible header (known-ish code, non-zero identifier, length mostly right) and random data.
            let data = g.bytes(g.below(20))
            let length = g.chance(70) ? UInt16(data.count) : UInt16(g.below(0x10000))
            return [UInt8(g.below(0x1A)), UInt8(1 + g.below(255)), UInt8(length & 0xFF), UInt8(length >> 8)] + data
        case 1:
            var bytes = Array(goldenCommands[g.below(goldenCommands.count)].encoded.readableBytesView)
            switch g.below(4) {
            case 0: bytes[g.below(bytes.count)] ^= 1 << (g.next() % 8)
            case 1: bytes[g.below(bytes.count)] = g.next()
            case 2: bytes.removeLast(1 + g.below(bytes.count))
            default: bytes += g.bytes(1 + g.below(4))
            }
            return bytes
        default:
            return g.bytes(g.below(30))
        }
    }

    @Test func randomCommandsDecodeOrThrow() {
        var g = Generator(seed: 0x516)
        var decoded = 0
        for _ in 0..<5000 {
            let bytes = Self.randomCommandBytes(&g)
            guard let command = try? L2CAPSignalingCommand(decoding: ByteBuffer(bytes: bytes)) else { continue }
            decoded += 1
            #expect(command.identifier.rawValue == bytes[1])
            #expect(command.pdu.code.rawValue == bytes[0])
            // What decodes re-encodes to bytes that decode to the same command.
            #expect((try? L2CAPSignalingCommand(decoding: command.encoded)) == command, "\(bytes.hexString)")
        }
        #expect(decoded > 0)
    }

    // MARK: - Signalling channel

    /// Checks the actions for one received C-frame: at most one command sent, never an answer to a response,
    /// every command sent decodes and carries the identifier of what it answers.
    static func checkAnswer(_ actions: [L2CAPSignalingChannel.Action], to bytes: [UInt8]) {
        let sent = actions.compactMap { action -> L2CAPSignalingCommand? in
            if case .send(let command) = action { return command }
            return nil
        }
        #expect(sent.count <= 1)
        guard let command = sent.first else { return }
        #expect(bytes.count >= 2 && bytes[1] != 0, "answered a C-frame with no valid identifier")
        #expect(!L2CAPSignalingCode(bytes[0]).isResponse, "answered a response: \(bytes.hexString)")
        #expect(command.identifier.rawValue == bytes[1])
        #expect(command.pdu.code.isResponse)
        #expect((try? L2CAPSignalingCommand(decoding: command.encoded)) == command)
    }

    @Test(arguments: [L2CAPSignalingChannel.Role.central, .peripheral])
    func randomCFramesThenAValidExchange(_ role: L2CAPSignalingChannel.Role) throws {
        var g = Generator(seed: role == .central ? 0xCE : 0xBE)
        var channel = L2CAPSignalingChannel(role: role, signalingMTU: 23 + g.below(40))
        var completed: [L2CAPSignalingIdentifier: Int] = [:]
        var outstanding: Set<L2CAPSignalingIdentifier> = []
        let parameters = L2CAPConnectionParameters(
            minimumInterval: 24, maximumInterval: 40, peripheralLatency: 0,
            supervisionTimeout: 500)
        func tally(_ actions: [L2CAPSignalingChannel.Action]) {
            for action in actions {
                if case .connectionParameterUpdateCompleted(let identifier, _) = action {
                    completed[identifier, default: 0] += 1
                    #expect(outstanding.remove(identifier) != nil, "\(identifier) completed but was not outstanding")
                }
            }
        }
        for _ in 0..<3000 {
            if role == .peripheral, g.chance(5) {
                let (identifier, actions) = try channel.requestConnectionParameterUpdate(parameters)
                outstanding.insert(identifier)
                tally(actions)
            }
            if g.chance(2), let identifier = outstanding.first {
                tally(channel.timerFired(.init(identifier: identifier)))
            }
            let bytes = Self.randomCommandBytes(&g)
            let actions = channel.received(ByteBuffer(bytes: bytes))
            Self.checkAnswer(actions, to: bytes)
            tally(actions)
        }
        #expect(completed.values.allSatisfy { $0 == 1 })
        #expect(Set(channel.outstandingRequests) == outstanding)

        // After all that the channel still does its job.
        switch role {
        case .central:
            let request = L2CAPSignalingCommand(
                identifier: 0x42, .connectionParameterUpdateRequest(.init(parameters: parameters)))
            #expect(channel.received(request.encoded) == [.requestConnectionUpdate(parameters, identifier: 0x42)])
            #expect(
                channel.respondToConnectionParameterUpdate(identifier: 0x42, accepted: true) == [
                    .send(
                        L2CAPSignalingCommand(
                            identifier: 0x42, .connectionParameterUpdateResponse(.init(result: .accepted))))
                ])
        case .peripheral:
            for identifier in outstanding { tally(channel.timerFired(.init(identifier: identifier))) }
            let (identifier, _) = try channel.requestConnectionParameterUpdate(parameters)
            let response = L2CAPSignalingCommand(
                identifier: identifier,
                .connectionParameterUpdateResponse(.init(result: .accepted)))
            #expect(
                channel.received(response.encoded) == [
                    .cancelTimer(.init(identifier: identifier)),
                    .connectionParameterUpdateCompleted(identifier, .accepted),
                ])
        }
        // An unknown request is still rejected with its identifier.
        #expect(
            channel.received(ByteBuffer(bytes: [0x7E, 0x33, 0x00, 0x00])) == [
                .send(L2CAPSignalingCommand(identifier: 0x33, .commandReject(.commandNotUnderstood)))
            ])
        _ = channel.linkDisconnected()
        #expect(channel.received(ByteBuffer(bytes: [0x7E, 0x33, 0x00, 0x00])).isEmpty)
    }
}
