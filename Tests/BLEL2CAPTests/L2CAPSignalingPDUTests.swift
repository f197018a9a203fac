import BLECore
import BLEL2CAP
import NIOCore
import Testing

/// One golden signalling command: its bytes and what they mean.
struct SignalingGolden: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var command: L2CAPSignalingCommand
    var testDescription: String { name }
}

extension L2CAPSignalingPDU.LECreditBasedConnectionRequest {
    static let sample = Self(
        spsm: 0x0080, sourceCID: L2CAPChannelID(rawValue: 0x0040), mtu: 512, mps: 247, initialCredits: 10)
}

extension L2CAPConnectionParameters {
    /// 7.5...15 ms, latency 0, 5 s timeout.
    static let sample = L2CAPConnectionParameters(
        minimumInterval: 6, maximumInterval: 12, peripheralLatency: 0, supervisionTimeout: 500)
}

@Suite struct L2CAPSignalingPDUTests {
    static let goldens: [SignalingGolden] = [
        SignalingGolden(
            name: "Command Reject, not understood",
            bytes: [
                0x01, 0x07, 0x02, 0x00,  // Command Reject, id 7, length 2
                0x00, 0x00,  // Reason: command not understood
            ],
            command: L2CAPSignalingCommand(identifier: 7, .commandReject(.commandNotUnderstood))),
        SignalingGolden(
            name: "Command Reject, signalling MTU exceeded",
            bytes: [
                0x01, 0x08, 0x04, 0x00,  // Command Reject, id 8, length 4
                0x01, 0x00,  // Reason: signalling MTU exceeded
                0x17, 0x00,  // Actual MTU: 23
            ],
            command: L2CAPSignalingCommand(identifier: 8, .commandReject(.signalingMTUExceeded(actualMTU: 23)))),
        SignalingGolden(
            name: "Command Reject, invalid CID",
            bytes: [
                0x01, 0x09, 0x06, 0x00,  // Command Reject, id 9, length 6
                0x02, 0x00,  // Reason: invalid CID in request
                0x40, 0x00,  // Local CID 0x0040
                0x41, 0x00,  // Remote CID 0x0041
            ],
            command: L2CAPSignalingCommand(
                identifier: 9,
                .commandReject(
                    .invalidCID(local: L2CAPChannelID(rawValue: 0x40), remote: L2CAPChannelID(rawValue: 0x41))))),
        SignalingGolden(
            name: "Disconnection Request",
            bytes: [
                0x06, 0x0A, 0x04, 0x00,  // Disconnection Request, id 10, length 4
                0x40, 0x00,  // Destination CID 0x0040
                0x41, 0x00,  // Source CID 0x0041
            ],
            command: L2CAPSignalingCommand(
                identifier: 10,
                .disconnectionRequest(
                    .init(destinationCID: L2CAPChannelID(rawValue: 0x40), sourceCID: L2CAPChannelID(rawValue: 0x41))))),
        SignalingGolden(
            name: "Disconnection Response",
            bytes: [
                0x07, 0x0A, 0x04, 0x00,  // Disconnection Response, id 10, length 4
                0x40, 0x00,  // Destination CID 0x0040
                0x41, 0x00,  // Source CID 0x0041
            ],
            command: L2CAPSignalingCommand(
                identifier: 10,
                .disconnectionResponse(
                    .init(destinationCID: L2CAPChannelID(rawValue: 0x40), sourceCID: L2CAPChannelID(rawValue: 0x41))))),
        SignalingGolden(
            name: "Connection Parameter Update Request",
            bytes: [
                0x12, 0x01, 0x08, 0x00,  // Connection Parameter Update Request, id 1, length 8
                0x06, 0x00,  // Interval Min: 6 x 1.25 ms = 7.5 ms
                0x0C, 0x00,  // Interval Max: 12 x 1.25 ms = 15 ms
                0x00, 0x00,  // Latency: 0
                0xF4, 0x01,  // Timeout: 500 x 10 ms = 5 s
            ],
            command: L2CAPSignalingCommand(identifier: 1, .connectionParameterUpdateRequest(.init(parameters: .sample)))
        ),
        SignalingGolden(
            name: "Connection Parameter Update Response, accepted",
            bytes: [
                0x13, 0x01, 0x02, 0x00,  // Connection Parameter Update Response, id 1, length 2
                0x00, 0x00,  // Result: accepted
            ],
            command: L2CAPSignalingCommand(identifier: 1, .connectionParameterUpdateResponse(.init(result: .accepted)))),
        SignalingGolden(
            name: "Connection Parameter Update Response, rejected",
            bytes: [
                0x13, 0xFF, 0x02, 0x00,  // Connection Parameter Update Response, id 255, length 2
                0x01, 0x00,  // Result: rejected
            ],
            command: L2CAPSignalingCommand(
                identifier: 255, .connectionParameterUpdateResponse(.init(result: .rejected)))),
        SignalingGolden(
            name: "LE Credit Based Connection Request",
            bytes: [
                0x14, 0x02, 0x0A, 0x00,  // LE Credit Based Connection Request, id 2, length 10
                0x80, 0x00,  // SPSM 0x0080
                0x40, 0x00,  // Source CID 0x0040
                0x00, 0x02,  // MTU 512
                0xF7, 0x00,  // MPS 247
                0x0A, 0x00,  // Initial Credits 10
            ],
            command: L2CAPSignalingCommand(identifier: 2, .leCreditBasedConnectionRequest(.sample))),
        SignalingGolden(
            name: "LE Credit Based Connection Response",
            bytes: [
                0x15, 0x02, 0x0A, 0x00,  // LE Credit Based Connection Response, id 2, length 10
                0x41, 0x00,  // Destination CID 0x0041
                0x00, 0x02,  // MTU 512
                0xF7, 0x00,  // MPS 247
                0x05, 0x00,  // Initial Credits 5
                0x00, 0x00,  // Result: connection successful
            ],
            command: L2CAPSignalingCommand(
                identifier: 2,
                .leCreditBasedConnectionResponse(
                    .init(
                        destinationCID: L2CAPChannelID(rawValue: 0x41), mtu: 512, mps: 247, initialCredits: 5,
                        result: .successful)))),
        SignalingGolden(
            name: "LE Credit Based Connection Response, refused",
            bytes: [
                0x15, 0x03, 0x0A, 0x00,  // LE Credit Based Connection Response, id 3, length 10
                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // DCID, MTU, MPS, credits: 0
                0x02, 0x00,  // Result: SPSM not supported
            ],
            command: L2CAPSignalingCommand(identifier: 3, .leCreditBasedConnectionResponse(.refused(.spsmNotSupported)))
        ),
        SignalingGolden(
            name: "Flow Control Credit Indication",
            bytes: [
                0x16, 0x04, 0x04, 0x00,  // Flow Control Credit Indication, id 4, length 4
                0x40, 0x00,  // CID 0x0040
                0x05, 0x00,  // Credits 5
            ],
            command: L2CAPSignalingCommand(
                identifier: 4, .flowControlCreditIndication(.init(cid: L2CAPChannelID(rawValue: 0x40), credits: 5)))),
        SignalingGolden(
            name: "Unknown code: Echo Request (BR/EDR only)",
            bytes: [
                0x08, 0x05, 0x03, 0x00,  // Echo Request, id 5, length 3
                0x61, 0x62, 0x63,  // data
            ],
            command: L2CAPSignalingCommand(identifier: 5, .unknown(code: .echoRequest, data: [0x61, 0x62, 0x63]))),
        SignalingGolden(
            name: "Unknown code 0x7F, no data",
            bytes: [0x7F, 0x06, 0x00, 0x00],
            command: L2CAPSignalingCommand(identifier: 6, .unknown(code: L2CAPSignalingCode(0x7F), data: []))),
    ]

    @Test(arguments: goldens)
    func decodes(golden: SignalingGolden) throws {
        #expect(try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: golden.bytes)) == golden.command)
    }

    @Test(arguments: goldens)
    func encodes(golden: SignalingGolden) {
        #expect(Array(golden.command.encoded.readableBytesView) == golden.bytes)
        let frame = golden.command.frame
        #expect(frame.channelID == .leSignaling)
        #expect(Array(frame.payload.readableBytesView) == golden.bytes)
    }

    @Test(arguments: goldens)
    func everyTruncationIsRejected(golden: SignalingGolden) {
        // Cut the buffer: the header or the declared data is incomplete.
        for length in 0..<golden.bytes.count {
            #expect(throws: L2CAPError.truncated()) {
                try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: golden.bytes.prefix(length)))
            }
        }
    }

    @Test(arguments: goldens.filter { !$0.name.hasPrefix("Unknown") && !$0.name.hasPrefix("Command Reject") })
    func shortDataIsRejected(golden: SignalingGolden) {
        // Cut the data and lower the length field to match: the command's own fields are incomplete.
        let dataLength = golden.bytes.count - 4
        for length in 0..<dataLength {
            let bytes = [golden.bytes[0], golden.bytes[1], UInt8(length), 0x00] + golden.bytes[4..<(4 + length)]
            #expect(throws: L2CAPError.truncated()) {
                try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: bytes))
            }
        }
    }

    @Test func commandRejectNeedsItsReason() {
        #expect(throws: L2CAPError.truncated()) {
            try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: [0x01, 0x01, 0x01, 0x00, 0x00]))
        }
    }

    @Test func identifierZeroIsMalformed() {
        #expect(throws: L2CAPError.malformed()) {
            try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: [0x13, 0x00, 0x02, 0x00, 0x00, 0x00]))
        }
        #expect(L2CAPSignalingIdentifier(rawValue: 0) == nil)
    }

    @Test func oneCommandPerCFrame() {
        // Two commands back to back, as BR/EDR would allow: LE rejects the C-frame.
        let two: [UInt8] = [0x13, 0x01, 0x02, 0x00, 0x00, 0x00, 0x13, 0x02, 0x02, 0x00, 0x00, 0x00]
        #expect(throws: L2CAPError.malformed()) {
            try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: two))
        }
    }

    @Test func extraDataInAFixedSizeCommandIsIgnored() throws {
        let bytes: [UInt8] = [0x13, 0x01, 0x03, 0x00, 0x01, 0x00, 0xEE]
        let command = try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: bytes))
        #expect(
            command
                == L2CAPSignalingCommand(identifier: 1, .connectionParameterUpdateResponse(.init(result: .rejected))))
    }

    @Test func commandRejectData() {
        let mtu = L2CAPSignalingPDU.CommandReject.signalingMTUExceeded(actualMTU: 0x0200)
        #expect(mtu.actualMTU == 0x0200)
        #expect(mtu.invalidCIDs == nil)
        let cid = L2CAPSignalingPDU.CommandReject.invalidCID(
            local: L2CAPChannelID(rawValue: 0x40), remote: L2CAPChannelID(rawValue: 0x41))
        #expect(cid.invalidCIDs?.local == L2CAPChannelID(rawValue: 0x40))
        #expect(cid.invalidCIDs?.remote == L2CAPChannelID(rawValue: 0x41))
        #expect(cid.actualMTU == nil)
        #expect(L2CAPSignalingPDU.CommandReject.commandNotUnderstood.data.isEmpty)
    }

    @Test func identifiersWrapSkippingZero() {
        #expect(L2CAPSignalingIdentifier.first.rawValue == 1)
        #expect(L2CAPSignalingIdentifier(integerLiteral: 0xFE).next.rawValue == 0xFF)
        #expect(L2CAPSignalingIdentifier(integerLiteral: 0xFF).next.rawValue == 0x01)
    }

    @Test func descriptions() {
        #expect(
            L2CAPSignalingCode.connectionParameterUpdateRequest.description
                == "L2CAP_CONNECTION_PARAMETER_UPDATE_REQ (0x12)")
        #expect(L2CAPSignalingCode(0x7F).description == "0x7F")
        #expect(L2CAPSignalingPDU.CommandReject.Reason(rawValue: 0x0002).description == "Invalid CID in request")
        #expect(L2CAPSignalingCode.connectionParameterUpdateResponse.isResponse)
        #expect(!L2CAPSignalingCode.connectionParameterUpdateRequest.isResponse)
    }

    @Test func connectionParameterValidation() {
        func p(_ min: UInt16, _ max: UInt16, _ latency: UInt16, _ timeout: UInt16) -> L2CAPConnectionParameters {
            L2CAPConnectionParameters(
                minimumInterval: min, maximumInterval: max, peripheralLatency: latency, supervisionTimeout: timeout)
        }
        #expect(L2CAPConnectionParameters.sample.isValid)
        #expect(p(6, 3200, 0, 3200).isValid)  // 4 s interval, 32 s timeout: 32 s > 8 s
        #expect(!p(3200, 3200, 3, 3200).isValid)  // 32 s is not above (1 + 3) x 4 s x 2 = 32 s
        #expect(p(3200, 3200, 2, 3200).isValid)  // 32 s > 3 x 4 s x 2 = 24 s
        #expect(p(24, 40, 4, 100).isValid)  // 1 s > 5 x 50 ms x 2 = 500 ms
        #expect(!p(24, 40, 4, 50).isValid)  // 500 ms == 500 ms: not strictly greater
        #expect(!p(5, 12, 0, 500).isValid)  // interval below 7.5 ms
        #expect(!p(6, 3201, 0, 3200).isValid)  // interval above 4 s
        #expect(!p(12, 6, 0, 500).isValid)  // min above max
        #expect(!p(6, 12, 500, 3200).isValid)  // latency above 499
        #expect(p(6, 6, 499, 3200).isValid)  // 32 s > 500 x 7.5 ms x 2 = 7.5 s
        #expect(!p(6, 12, 0, 9).isValid)  // timeout below 100 ms
        #expect(!p(6, 12, 0, 3201).isValid)  // timeout above 32 s
        #expect(throws: L2CAPError.invalidParameters()) { try p(12, 6, 0, 500).validate() }
    }
}
