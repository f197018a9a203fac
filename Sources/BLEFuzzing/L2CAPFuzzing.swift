import BLECore
import BLEL2CAP
import NIOCore

extension FuzzTarget {
    /// One link's ACL packets into an `L2CAPRecombiner`, as the host feeds them: a packet boundary flag and the
    /// data of each. A frame comes out only whole: exactly the bytes sent since the first fragment that began it,
    /// never longer than the recombiner's limit. A packet read in place as a whole frame (`wholeFrame`) is the
    /// frame `receive` gives.
    static let aclRecombiner = FuzzTarget("acl-recombiner", "ACL packets (flag, data) into L2CAPRecombiner") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        let limits = [L2CAPBasicFrame.maximumPayloadLength, 0, 23, 27, 65, 247, 251, 512]
        let limit = limits[reader.below(limits.count)]
        var recombiner = L2CAPRecombiner(maximumPayloadLength: limit)
        // What a PDU begun by the last first fragment holds so far.
        var begun: [UInt8]?
        while !reader.isEmpty {
            guard let boundary = L2CAPPacketBoundary(rawValue: reader.byte() & 0b11) else { continue }
            let data = reader.chunk()
            if boundary.isStart {
                begun = data
            } else {
                begun? += data
            }
            // A packet the recombiner reads in place as a whole frame is the frame `receive` gives, cleanly.
            let inPlace = recombiner.wholeFrame(in: data, boundary: boundary)
            let output = recombiner.receive(ByteBuffer(bytes: data), boundary: boundary)
            if let inPlace {
                try expect(
                    output.errors.isEmpty && output.frame?.channelID == inPlace.channel
                        && output.frame.map { Array($0.payload.readableBytesView) } == Array(inPlace.payload),
                    "a whole frame read in place is not what receive gave: \(output)")
            }
            try expect(output.errors.count <= 2, "one packet gave \(output.errors.count) errors")
            guard let frame = output.frame else { continue }
            try expect(output.errors.count <= 1, "a frame came with \(output.errors.count) errors")
            try expect(frame.payload.readableBytes <= limit, "a frame of \(frame.payload.readableBytes) octets")
            try expect(
                Array(frame.encoded.readableBytesView) == begun,
                "the frame is not the bytes sent since its first fragment")
            try expect(!recombiner.isAssembling, "still assembling after a whole frame")
            begun = nil
        }
    }

    /// The LE signalling channel (CID 0x0005) in either role: C-frames from the peer between the host's own
    /// requests, decisions, timeouts and a disconnection. Each C-frame is answered at most once, never a
    /// response, always with its identifier; every outstanding request completes once.
    static let l2capSignaling = FuzzTarget("l2cap-signaling", "C-frames into L2CAPSignalingCommand and the channel") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        let role: L2CAPSignalingChannel.Role = reader.bool() ? .central : .peripheral
        var channel = L2CAPSignalingChannel(
            role: role, signalingMTU: L2CAPSignalingChannel.minimumSignalingMTU + reader.below(64))
        var outstanding: Set<L2CAPSignalingIdentifier> = []
        var closed = false
        func tally(_ actions: [L2CAPSignalingChannel.Action]) throws(Violation) {
            for action in actions {
                guard case .connectionParameterUpdateCompleted(let identifier, _) = action else { continue }
                try expect(outstanding.remove(identifier) != nil, "\(identifier) completed but was not outstanding")
            }
        }
        while !reader.isEmpty {
            switch reader.below(16) {
            case 0:
                let parameters = L2CAPConnectionParameters(
                    minimumInterval: reader.uint16(), maximumInterval: reader.uint16(),
                    peripheralLatency: reader.uint16(), supervisionTimeout: reader.uint16())
                guard let (identifier, actions) = try? channel.requestConnectionParameterUpdate(parameters) else {
                    break
                }
                try expect(!closed && role == .peripheral, "a request was sent on a closed channel or by a central")
                try expect(outstanding.insert(identifier).inserted, "\(identifier) is already outstanding")
                try tally(actions)
            case 1:
                guard let identifier = outstanding.sorted().dropFirst(reader.below(4)).first else { break }
                try tally(channel.timerFired(.init(identifier: identifier)))
            case 2:
                guard let identifier = L2CAPSignalingIdentifier(rawValue: reader.byte()) else { break }
                let actions = channel.respondToConnectionParameterUpdate(
                    identifier: identifier, accepted: reader.bool())
                try expect(actions.count <= 1, "one decision gave \(actions.count) actions")
            case 3:
                try tally(channel.linkDisconnected())
                try expect(outstanding.isEmpty, "requests outlived the link: \(outstanding)")
                closed = true
            default:
                let bytes = reader.chunk()
                try decodeSignalingCommand(bytes)
                let actions = channel.received(ByteBuffer(bytes: bytes))
                if closed { try expect(actions.isEmpty, "a closed channel acted on a C-frame") }
                try checkAnswer(actions, to: bytes)
                try tally(actions)
            }
        }
        try expect(Set(channel.outstandingRequests) == outstanding, "the channel's outstanding requests differ")
    }

    /// Whatever decodes re-encodes to a command that decodes the same.
    static func decodeSignalingCommand(_ bytes: [UInt8]) throws(Violation) {
        guard let command = try? L2CAPSignalingCommand(decoding: ByteBuffer(bytes: bytes)) else { return }
        try expect(
            command.identifier.rawValue == bytes[1] && command.pdu.code.rawValue == bytes[0],
            "\(command) does not carry the code and identifier it was read with")
        try expect(
            (try? L2CAPSignalingCommand(decoding: command.encoded)) == command,
            "\(command) does not survive its own encoding")
    }

    /// At most one command is sent for a C-frame: a response, with the identifier of a request it answers.
    static func checkAnswer(_ actions: [L2CAPSignalingChannel.Action], to bytes: [UInt8]) throws(Violation) {
        let sent = actions.compactMap { action -> L2CAPSignalingCommand? in
            if case .send(let command) = action { return command }
            return nil
        }
        try expect(sent.count <= 1, "one C-frame was answered \(sent.count) times")
        guard let command = sent.first else { return }
        try expect(bytes.count >= 2 && bytes[1] != 0, "answered a C-frame with no valid identifier")
        try expect(!L2CAPSignalingCode(bytes[0]).isResponse, "answered a response")
        try expect(command.identifier.rawValue == bytes[1], "answered with another identifier")
        try expect(command.pdu.code.isResponse, "answered with a request")
        try expect(
            (try? L2CAPSignalingCommand(decoding: command.encoded)) == command, "sent \(command), which does not decode"
        )
    }
}
