import BLECore
import BLEL2CAP
import NIOCore
import Testing

typealias Action = L2CAPSignalingChannel.Action

extension L2CAPSignalingChannel {
    /// Feeds raw C-frame bytes.
    mutating func received(bytes: [UInt8]) -> [Action] { received(ByteBuffer(bytes: bytes)) }
    /// Feeds a command as the peer would send it.
    mutating func received(_ command: L2CAPSignalingCommand) -> [Action] { received(command.encoded) }
}

/// The commands among `actions`, encoded and decoded again as they would cross the link.
func sent(_ actions: [Action]) -> [L2CAPSignalingCommand] {
    actions.compactMap {
        guard case .send(let command) = $0 else { return nil }
        return try? L2CAPSignalingCommand(decoding: command.frame.payload)
    }
}

@Suite struct L2CAPSignalingChannelTests {
    // MARK: Central and peripheral against each other

    @Test func parameterUpdateAccepted() throws {
        var central = L2CAPSignalingChannel(role: .central)
        var peripheral = L2CAPSignalingChannel(role: .peripheral)

        let (identifier, requestActions) = try peripheral.requestConnectionParameterUpdate(.sample)
        #expect(identifier == 1)
        #expect(
            requestActions == [
                .send(
                    L2CAPSignalingCommand(identifier: 1, .connectionParameterUpdateRequest(.init(parameters: .sample)))),
                .startTimer(.init(identifier: 1), after: .seconds(30)),
            ])
        #expect(peripheral.outstandingRequests == [1])

        let centralActions = sent(requestActions).flatMap { central.received($0) }
        #expect(centralActions == [.requestConnectionUpdate(.sample, identifier: 1)])

        // The host applied the parameters through HCI.
        let response = central.respondToConnectionParameterUpdate(identifier: 1, accepted: true)
        #expect(
            sent(response) == [
                L2CAPSignalingCommand(identifier: 1, .connectionParameterUpdateResponse(.init(result: .accepted)))
            ])
        // Answering twice does nothing.
        #expect(central.respondToConnectionParameterUpdate(identifier: 1, accepted: true) == [])

        let completion = sent(response).flatMap { peripheral.received($0) }
        #expect(completion == [.cancelTimer(.init(identifier: 1)), .connectionParameterUpdateCompleted(1, .accepted)])
        #expect(peripheral.outstandingRequests.isEmpty)
        // A duplicate response matches nothing any more.
        #expect(sent(response).flatMap { peripheral.received($0) } == [])
    }

    @Test func parameterUpdateRejectedByTheHost() throws {
        var central = L2CAPSignalingChannel(role: .central)
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let (identifier, actions) = try peripheral.requestConnectionParameterUpdate(.sample)
        #expect(
            sent(actions).flatMap { central.received($0) } == [
                .requestConnectionUpdate(.sample, identifier: identifier)
            ])
        let response = central.respondToConnectionParameterUpdate(identifier: identifier, accepted: false)
        #expect(
            sent(response).flatMap { peripheral.received($0) }
                == [
                    .cancelTimer(.init(identifier: identifier)),
                    .connectionParameterUpdateCompleted(identifier, .rejected),
                ])
    }

    @Test func invalidParametersAreRejectedAtOnceByTheCentral() {
        var central = L2CAPSignalingChannel(role: .central)
        let invalid: [L2CAPConnectionParameters] = [
            // min > max
            .init(minimumInterval: 12, maximumInterval: 6, peripheralLatency: 0, supervisionTimeout: 500),
            // timeout < 10
            .init(minimumInterval: 6, maximumInterval: 12, peripheralLatency: 0, supervisionTimeout: 5),
            // latency
            .init(minimumInterval: 6, maximumInterval: 12, peripheralLatency: 500, supervisionTimeout: 3200),
            // 4 s = 4 x 1 s... not above 8 s
            .init(minimumInterval: 800, maximumInterval: 800, peripheralLatency: 3, supervisionTimeout: 400),
        ]
        for (index, parameters) in invalid.enumerated() {
            let identifier = L2CAPSignalingIdentifier(rawValue: UInt8(index + 1))!
            let request = L2CAPSignalingCommand(
                identifier: identifier, .connectionParameterUpdateRequest(.init(parameters: parameters)))
            #expect(
                sent(central.received(request))
                    == [
                        L2CAPSignalingCommand(
                            identifier: identifier, .connectionParameterUpdateResponse(.init(result: .rejected)))
                    ])
            // And it awaits no decision.
            #expect(central.respondToConnectionParameterUpdate(identifier: identifier, accepted: true) == [])
        }
    }

    @Test func aPeripheralRejectsAParameterUpdateRequest() throws {
        var central = L2CAPSignalingChannel(role: .central)
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        // A misbehaving central sends the request; the peripheral answers "not understood".
        let request = L2CAPSignalingCommand(
            identifier: 9, .connectionParameterUpdateRequest(.init(parameters: .sample)))
        #expect(
            sent(peripheral.received(request)) == [
                L2CAPSignalingCommand(identifier: 9, .commandReject(.commandNotUnderstood))
            ])
        // And a central cannot send one.
        #expect(throws: L2CAPError.notAllowedForRole()) { try central.requestConnectionParameterUpdate(.sample) }
    }

    @Test func commandRejectCompletesTheRequest() throws {
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let (identifier, _) = try peripheral.requestConnectionParameterUpdate(.sample)
        // An old central that does not know the command.
        let reject = L2CAPSignalingCommand(identifier: identifier, .commandReject(.commandNotUnderstood))
        #expect(
            peripheral.received(reject) == [
                .cancelTimer(.init(identifier: identifier)),
                .connectionParameterUpdateCompleted(identifier, .commandRejected(.commandNotUnderstood)),
            ])
    }

    @Test func timeout() throws {
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let (identifier, _) = try peripheral.requestConnectionParameterUpdate(.sample)
        #expect(
            peripheral.timerFired(.init(identifier: identifier)) == [
                .connectionParameterUpdateCompleted(identifier, .timedOut)
            ])
        // A late response and a stale timer are ignored.
        let late = L2CAPSignalingCommand(
            identifier: identifier, .connectionParameterUpdateResponse(.init(result: .accepted)))
        #expect(peripheral.received(late) == [])
        #expect(peripheral.timerFired(.init(identifier: identifier)) == [])
    }

    @Test func responsesWithIdentifiersWeDidNotSendAreIgnored() throws {
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let (identifier, _) = try peripheral.requestConnectionParameterUpdate(.sample)
        let other = L2CAPSignalingIdentifier(rawValue: identifier.rawValue + 1)!
        #expect(
            peripheral.received(
                L2CAPSignalingCommand(identifier: other, .connectionParameterUpdateResponse(.init(result: .accepted))))
                == [])
        #expect(
            peripheral.received(L2CAPSignalingCommand(identifier: other, .commandReject(.commandNotUnderstood))) == [])
        #expect(peripheral.outstandingRequests == [identifier])
    }

    @Test func linkDisconnectedCompletesEverything() throws {
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let (first, _) = try peripheral.requestConnectionParameterUpdate(.sample)
        let (second, _) = try peripheral.requestConnectionParameterUpdate(.sample)
        #expect(first != second)
        #expect(
            peripheral.linkDisconnected() == [
                .cancelTimer(.init(identifier: first)), .connectionParameterUpdateCompleted(first, .linkDisconnected),
                .cancelTimer(.init(identifier: second)), .connectionParameterUpdateCompleted(second, .linkDisconnected),
            ])
        #expect(peripheral.isClosed)
        #expect(peripheral.linkDisconnected() == [])
        #expect(peripheral.timerFired(.init(identifier: first)) == [])
        #expect(peripheral.received(bytes: [0x7F, 0x01, 0x00, 0x00]) == [])
        #expect(throws: L2CAPError.linkDisconnected()) { try peripheral.requestConnectionParameterUpdate(.sample) }

        var central = L2CAPSignalingChannel(role: .central)
        _ = central.received(
            L2CAPSignalingCommand(identifier: 3, .connectionParameterUpdateRequest(.init(parameters: .sample))))
        #expect(central.linkDisconnected() == [])
        #expect(central.respondToConnectionParameterUpdate(identifier: 3, accepted: true) == [])
    }

    @Test func requestParametersAreValidatedBeforeSending() {
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let invalid = L2CAPConnectionParameters(
            minimumInterval: 6, maximumInterval: 12, peripheralLatency: 0, supervisionTimeout: 1)
        #expect(throws: L2CAPError.invalidParameters()) { try peripheral.requestConnectionParameterUpdate(invalid) }
        #expect(peripheral.outstandingRequests.isEmpty)
    }

    @Test func identifiersWrapAndSkipOutstanding() throws {
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        var identifiers: [L2CAPSignalingIdentifier] = []
        for _ in 0..<255 {
            identifiers.append(try peripheral.requestConnectionParameterUpdate(.sample).identifier)
        }
        #expect(identifiers.map(\.rawValue) == Array(1...255))
        #expect(throws: L2CAPError.noIdentifierAvailable()) { try peripheral.requestConnectionParameterUpdate(.sample) }
        // Free 7 and 200; the next ones are 7 then 200 (wrapping past 255, never 0).
        _ = peripheral.timerFired(.init(identifier: 200))
        _ = peripheral.timerFired(.init(identifier: 7))
        #expect(try peripheral.requestConnectionParameterUpdate(.sample).identifier == 7)
        #expect(try peripheral.requestConnectionParameterUpdate(.sample).identifier == 200)
    }

    // MARK: Rejecting what is not understood

    @Test(arguments: [
        [0x08, 0x05, 0x02, 0x00, 0xAA, 0xBB] as [UInt8],  // Echo Request: BR/EDR only
        [0x0A, 0x05, 0x02, 0x00, 0x02, 0x00],  // Information Request: BR/EDR only
        [0x02, 0x05, 0x04, 0x00, 0x01, 0x00, 0x40, 0x00],  // Connection Request: BR/EDR only
        [0x7F, 0x05, 0x00, 0x00],  // unassigned code
        // Credit Based Connection Request
        [0x17, 0x05, 0x0A, 0x00, 0x80, 0x00, 0x00, 0x02, 0xF7, 0x00, 0x01, 0x00, 0x40, 0x00],
    ])
    func unknownRequestsAreRejectedWithTheSameIdentifier(bytes: [UInt8]) {
        for role in [L2CAPSignalingChannel.Role.central, .peripheral] {
            var channel = L2CAPSignalingChannel(role: role)
            #expect(
                sent(channel.received(bytes: bytes)) == [
                    L2CAPSignalingCommand(identifier: 5, .commandReject(.commandNotUnderstood))
                ])
        }
    }

    @Test(arguments: [
        [0x12, 0x05, 0x06, 0x00, 0x06, 0x00, 0x0C, 0x00, 0x00, 0x00] as [UInt8],  // request with data cut short
        [0x12, 0x05, 0x08, 0x00, 0x06, 0x00, 0x0C, 0x00],  // length beyond the frame
        [0x12, 0x05, 0x02, 0x00, 0x00, 0x00, 0x13, 0x06, 0x02, 0x00, 0x00, 0x00],  // two commands in one C-frame
        [0x7F, 0x05],  // header cut short, identifier readable
    ])
    func malformedRequestsAreRejected(bytes: [UInt8]) {
        var central = L2CAPSignalingChannel(role: .central)
        #expect(
            sent(central.received(bytes: bytes)) == [
                L2CAPSignalingCommand(identifier: 5, .commandReject(.commandNotUnderstood))
            ])
    }

    @Test(arguments: [
        [] as [UInt8],
        [0x12],  // no identifier
        [0x12, 0x00, 0x08, 0x00, 0x06, 0x00, 0x0C, 0x00, 0x00, 0x00, 0xF4, 0x01],  // identifier 0
        [0x13, 0x05, 0x01, 0x00, 0x00],  // malformed response: never answered
        [0x01, 0x05, 0x01, 0x00, 0x00],  // malformed Command Reject: never answered
        [0x01, 0x05, 0x02, 0x00, 0x00, 0x00],  // a Command Reject for nothing we sent
        [0x07, 0x05, 0x04, 0x00, 0x40, 0x00, 0x41, 0x00],  // Disconnection Response we never asked for
        [0x15, 0x05, 0x0A, 0x00, 0x41, 0x00, 0x00, 0x02, 0xF7, 0x00, 0x05, 0x00, 0x00, 0x00],  // LE CBC Response
        [0x16, 0x05, 0x04, 0x00, 0x40, 0x00, 0x05, 0x00],  // credits for a channel we do not have
        [0x18, 0x05, 0x02, 0x00, 0x00, 0x00],  // unknown-to-us response code
    ])
    func ignored(bytes: [UInt8]) {
        for role in [L2CAPSignalingChannel.Role.central, .peripheral] {
            var channel = L2CAPSignalingChannel(role: role)
            #expect(channel.received(bytes: bytes) == [])
        }
    }

    @Test func leCreditBasedConnectionIsRefused() {
        var channel = L2CAPSignalingChannel(role: .peripheral)
        let request = L2CAPSignalingCommand(identifier: 2, .leCreditBasedConnectionRequest(.sample))
        #expect(
            sent(channel.received(request)) == [
                L2CAPSignalingCommand(identifier: 2, .leCreditBasedConnectionResponse(.refused(.spsmNotSupported)))
            ])
    }

    @Test func disconnectionRequestForAnUnknownChannel() {
        var channel = L2CAPSignalingChannel(role: .central)
        let request = L2CAPSignalingCommand(
            identifier: 4,
            .disconnectionRequest(
                .init(destinationCID: L2CAPChannelID(rawValue: 0x40), sourceCID: L2CAPChannelID(rawValue: 0x41))))
        #expect(
            sent(channel.received(request)) == [
                L2CAPSignalingCommand(
                    identifier: 4,
                    .commandReject(
                        .invalidCID(local: L2CAPChannelID(rawValue: 0x40), remote: L2CAPChannelID(rawValue: 0x41))))
            ])
    }

    @Test func signalingMTUExceeded() {
        var channel = L2CAPSignalingChannel(role: .central)
        let long: [UInt8] = [0x7E, 0x05, 0x14, 0x00] + [UInt8](repeating: 0, count: 20)  // 24 octets > 23
        #expect(
            sent(channel.received(bytes: long)) == [
                L2CAPSignalingCommand(identifier: 5, .commandReject(.signalingMTUExceeded(actualMTU: 23)))
            ])
        var roomy = L2CAPSignalingChannel(role: .central, signalingMTU: 64)
        #expect(
            sent(roomy.received(bytes: long)) == [
                L2CAPSignalingCommand(identifier: 5, .commandReject(.commandNotUnderstood))
            ])
        #expect(L2CAPSignalingChannel(role: .central, signalingMTU: 5).signalingMTU == 23)
    }

    @Test func twoMachinesExchangeOverFragmentedLinks() throws {
        // The whole path: command -> B-frame -> 27-octet fragments -> recombiner -> the other machine.
        var central = L2CAPSignalingChannel(role: .central)
        var peripheral = L2CAPSignalingChannel(role: .peripheral)
        let fragmenter = L2CAPFragmenter(maximumFragmentLength: 27)
        var toCentral = L2CAPRecombiner()
        var toPeripheral = L2CAPRecombiner()

        func deliver(
            _ actions: [Action], via recombiner: inout L2CAPRecombiner, to machine: inout L2CAPSignalingChannel
        ) -> [Action] {
            var out: [Action] = []
            for case .send(let command) in actions {
                for fragment in fragmenter.fragments(of: command.frame) {
                    if let frame = recombiner.receive(fragment).frame {
                        #expect(frame.channelID == .leSignaling)
                        out += machine.received(frame.payload)
                    }
                }
            }
            return out
        }

        let parameters = L2CAPConnectionParameters(
            minimumInterval: 24, maximumInterval: 40, peripheralLatency: 4, supervisionTimeout: 600)
        let (identifier, request) = try peripheral.requestConnectionParameterUpdate(parameters)
        let decision = deliver(request, via: &toCentral, to: &central)
        #expect(decision == [.requestConnectionUpdate(parameters, identifier: identifier)])
        let response = central.respondToConnectionParameterUpdate(identifier: identifier, accepted: true)
        let done = deliver(response, via: &toPeripheral, to: &peripheral)
        #expect(
            done == [
                .cancelTimer(.init(identifier: identifier)), .connectionParameterUpdateCompleted(identifier, .accepted),
            ])

        // The central's unknown-command probe comes back rejected.
        let probe = L2CAPSignalingCommand(identifier: 42, .unknown(code: L2CAPSignalingCode(0x60), data: [1, 2, 3]))
        let rejected = deliver([.send(probe)], via: &toPeripheral, to: &peripheral)
        #expect(rejected == [.send(L2CAPSignalingCommand(identifier: 42, .commandReject(.commandNotUnderstood)))])
        #expect(deliver(rejected, via: &toCentral, to: &central) == [])  // a reject for nothing outstanding
    }
}
