import BLEATT
import BLECore
import NIOCore
import Testing

private func buffer(_ pdu: ATTPDU) -> ByteBuffer { pdu.encoded() }
private let read3 = ATTPDU.readRequest(.init(handle: AttributeHandle(3)))
private let read5 = ATTPDU.readRequest(.init(handle: AttributeHandle(5)))
private let id1 = ATTRequestID(1)
private let id2 = ATTRequestID(2)
private let id3 = ATTRequestID(3)

@Suite struct ATTBearerClientTests {
    @Test func oneOutstandingRequestAndAFIFOQueue() {
        var bearer = ATTBearer()
        #expect(
            bearer.sendRequest(read3, id: id1) == [
                .send(buffer(read3)), .startTimer(.transaction, after: .seconds(30)),
            ])
        #expect(bearer.sendRequest(read5, id: id2) == [])  // queued behind #1
        #expect(bearer.hasPendingRequests)

        let response = ATTPDU.readResponse(.init(value: [0x41]))
        #expect(
            bearer.received(buffer(response)) == [
                .cancelTimer(.transaction),
                .complete(id1, .success(response)),
                .send(buffer(read5)), .startTimer(.transaction, after: .seconds(30)),
            ])
        let error = ATTPDU.ErrorResponse(
            requestOpcode: .readRequest, handle: AttributeHandle(5), errorCode: .readNotPermitted)
        #expect(
            bearer.received(buffer(.errorResponse(error))) == [
                .cancelTimer(.transaction), .complete(id2, .failure(.errorResponse(error))),
            ])
        #expect(!bearer.hasPendingRequests)
        #expect(bearer.isOpen)
    }

    @Test func anUnexpectedResponseClosesTheBearer() {
        var bearer = ATTBearer()
        _ = bearer.sendRequest(read3, id: id1)
        let actions = bearer.received(buffer(.writeResponse(.init())))
        #expect(
            actions == [
                .cancelTimer(.transaction),
                .complete(id1, .failure(.bearerClosed(ATTError(.protocolViolation)))),
                .closeBearer(ATTError(.protocolViolation)),
            ])
        #expect(!bearer.isOpen)
    }

    @Test func aResponseLongerThanTheMTUClosesTheBearer() {
        var bearer = ATTBearer()
        _ = bearer.sendRequest(read3, id: id1)
        let oversize = ATTPDU.readResponse(.init(value: [UInt8](repeating: 0x41, count: 30)))  // 31 > ATT_MTU 23
        let actions = bearer.received(buffer(oversize))
        #expect(actions.contains(.closeBearer(ATTError(.protocolViolation))))
        #expect(actions.contains(.complete(id1, .failure(.bearerClosed(ATTError(.protocolViolation))))))
    }

    @Test func aRequestLongerThanTheMTUIsAnsweredInvalidPDU() {
        var bearer = ATTBearer()
        // A Prepare Write whose part overruns ATT_MTU 23: the server would echo the overrun back.
        let prepare = ATTPDU.prepareWriteRequest(
            .init(
                handle: AttributeHandle(3), offset: 0,
                partAttributeValue: [UInt8](repeating: 7, count: 30)))
        let error = ATTPDU.errorResponse(
            .init(
                requestOpcode: .prepareWriteRequest, handle: AttributeHandle(0),
                errorCode: .invalidPDU))
        #expect(bearer.received(buffer(prepare)) == [.send(buffer(error))])
        #expect(bearer.isOpen)
        // A notification that long is dropped.
        let notification = ATTPDU.handleValueNotification(
            .init(handle: AttributeHandle(3), value: [UInt8](repeating: 1, count: 30)))
        #expect(bearer.received(buffer(notification)) == [])
    }

    @Test func aResponseWithNothingOutstandingClosesTheBearer() {
        var bearer = ATTBearer()
        #expect(
            bearer.received(buffer(.readResponse(.init(value: [])))) == [.closeBearer(ATTError(.protocolViolation))])
    }

    @Test func timeoutFailsEverythingAndClosesTheBearer() {
        var bearer = ATTBearer()
        _ = bearer.sendRequest(read3, id: id1)
        _ = bearer.sendRequest(read5, id: id2)
        let indication = ATTPDU.HandleValueIndication(handle: AttributeHandle(8), value: [1])
        _ = bearer.sendIndication(indication, id: id3)
        let closed = ATTRequestFailure.bearerClosed(ATTError(.transactionTimeout))
        #expect(
            bearer.timerFired(.transaction) == [
                .cancelTimer(.indication),
                .complete(id1, .failure(closed)), .complete(id2, .failure(closed)),
                .indicationComplete(id3, closed),
                .closeBearer(ATTError(.transactionTimeout)),
            ])
        // Later requests fail at once; nothing is sent any more.
        #expect(bearer.sendRequest(read3, id: ATTRequestID(9)) == [.complete(ATTRequestID(9), .failure(closed))])
        #expect(bearer.received(buffer(.readResponse(.init(value: [])))) == [])
        #expect(throws: ATTError(.bearerClosed)) {
            try bearer.sendUnacknowledged(.writeCommand(.init(handle: .min, value: [])))
        }
        #expect(bearer.sendResponse(.writeResponse(.init())) == [])
    }

    @Test func aStaleTimerDoesNothing() {
        var bearer = ATTBearer()
        #expect(bearer.timerFired(.transaction) == [])
        #expect(bearer.timerFired(.indication) == [])
        #expect(bearer.isOpen)
    }

    @Test func disconnectFailsEverything() {
        var bearer = ATTBearer()
        _ = bearer.sendRequest(read3, id: id1)
        _ = bearer.sendRequest(read5, id: id2)
        #expect(
            bearer.linkDisconnected() == [
                .cancelTimer(.transaction), .complete(id1, .failure(.disconnected)),
                .complete(id2, .failure(.disconnected)),
            ])
        #expect(bearer.sendRequest(read3, id: id3) == [.complete(id3, .failure(.disconnected))])
    }

    @Test func mtuExchangeTakesTheSmallerAndHappensOnce() {
        var client = ATTBearer(localRxMTU: 517)
        var server = ATTBearer(localRxMTU: 247)
        let request = client.exchangeMTU(id: id1)
        #expect(request.first == .send(buffer(.exchangeMTURequest(.init(clientRxMTU: 517)))))
        let serverActions = server.received(buffer(.exchangeMTURequest(.init(clientRxMTU: 517))))
        #expect(serverActions == [.send(buffer(.exchangeMTUResponse(.init(serverRxMTU: 247)))), .mtuChanged(247)])
        #expect(server.mtu == 247)
        let response = ATTPDU.exchangeMTUResponse(.init(serverRxMTU: 247))
        #expect(
            client.received(buffer(response)) == [
                .cancelTimer(.transaction), .mtuChanged(247), .complete(id1, .success(response)),
            ])
        #expect(client.mtu == 247)
        // A second exchange is refused locally.
        #expect(client.exchangeMTU(id: id2) == [.complete(id2, .failure(.rejected(ATTError(.notAllowed))))])
    }

    @Test func mtuNeverGoesBelow23() {
        var server = ATTBearer()
        _ = server.received(buffer(.exchangeMTURequest(.init(clientRxMTU: 10))))
        #expect(server.mtu == 23)
    }

    @Test func requestsLongerThanTheMTUAreRejected() {
        var bearer = ATTBearer()
        let long = ATTPDU.writeRequest(.init(handle: .min, value: [UInt8](repeating: 0, count: 21)))
        #expect(bearer.sendRequest(long, id: id1) == [.complete(id1, .failure(.rejected(ATTError(.exceedsMTU))))])
        #expect(
            bearer.sendRequest(.writeResponse(.init()), id: id2) == [
                .complete(id2, .failure(.rejected(ATTError(.notAllowed))))
            ])
    }

    @Test func commandsAreNoTransactions() throws {
        var bearer = ATTBearer()
        _ = bearer.sendRequest(read3, id: id1)
        let command = ATTPDU.writeCommand(.init(handle: AttributeHandle(3), value: [1]))
        #expect(try bearer.sendUnacknowledged(command) == buffer(command))
        #expect(throws: ATTError(.notAllowed)) { try bearer.sendUnacknowledged(read5) }
    }

    @Test func indicationsAreDeliveredThenConfirmed() {
        var bearer = ATTBearer()
        let indication = ATTPDU.HandleValueIndication(handle: AttributeHandle(8), value: [1, 0, 0xFF, 0xFF])
        #expect(
            bearer.received(buffer(.handleValueIndication(indication))) == [
                .indication(indication), .send(buffer(.handleValueConfirmation(.init()))),
            ])
        let notification = ATTPDU.HandleValueNotification(handle: AttributeHandle(0x0D), value: [0, 72])
        #expect(bearer.received(buffer(.handleValueNotification(notification))) == [.notification(notification)])
        let multiple = ATTPDU.multipleHandleValueNotification(
            .init(handleLengthValueTupleList: [
                .init(handle: AttributeHandle(1), value: [1]), .init(handle: AttributeHandle(2), value: [2]),
            ]))
        #expect(
            bearer.received(buffer(multiple)) == [
                .notification(.init(handle: AttributeHandle(1), value: [1])),
                .notification(.init(handle: AttributeHandle(2), value: [2])),
            ])
    }
}

@Suite struct ATTBearerServerTests {
    @Test func requestsGoUpAndUnknownOnesAreRefused() {
        var bearer = ATTBearer()
        #expect(bearer.received(buffer(read3)) == [.request(read3)])
        let command = ATTPDU.writeCommand(.init(handle: .min, value: [1]))
        #expect(bearer.received(buffer(command)) == [.command(command)])
        // An unknown request: Request Not Supported. An unknown command: ignored.
        #expect(
            bearer.received(ByteBuffer(bytes: [0x3F, 0x01])) == [
                .send(
                    buffer(
                        .errorResponse(
                            .init(
                                requestOpcode: ATTOpcode(0x3F), handle: AttributeHandle(0),
                                errorCode: .requestNotSupported))))
            ])
        #expect(bearer.received(ByteBuffer(bytes: [0x7F, 0x01])) == [])
        // A malformed request: Invalid PDU.
        #expect(
            bearer.received(ByteBuffer(bytes: [0x0A, 0x01])) == [
                .send(
                    buffer(
                        .errorResponse(
                            .init(requestOpcode: .readRequest, handle: AttributeHandle(0), errorCode: .invalidPDU))))
            ])
        #expect(bearer.received(ByteBuffer()) == [])
    }

    @Test func oneOutstandingIndication() {
        var bearer = ATTBearer()
        let first = ATTPDU.HandleValueIndication(handle: AttributeHandle(8), value: [1])
        let second = ATTPDU.HandleValueIndication(handle: AttributeHandle(8), value: [2])
        #expect(
            bearer.sendIndication(first, id: id1) == [
                .send(buffer(.handleValueIndication(first))), .startTimer(.indication, after: .seconds(30)),
            ])
        #expect(bearer.sendIndication(second, id: id2) == [])
        #expect(
            bearer.received(buffer(.handleValueConfirmation(.init()))) == [
                .cancelTimer(.indication), .indicationComplete(id1, nil),
                .send(buffer(.handleValueIndication(second))), .startTimer(.indication, after: .seconds(30)),
            ])
        #expect(
            bearer.received(buffer(.handleValueConfirmation(.init()))) == [
                .cancelTimer(.indication), .indicationComplete(id2, nil),
            ])
        // A stray confirmation is ignored.
        #expect(bearer.received(buffer(.handleValueConfirmation(.init()))) == [])
    }

    @Test func indicationTimeoutClosesTheBearer() {
        var bearer = ATTBearer()
        _ = bearer.sendIndication(.init(handle: AttributeHandle(8), value: [1]), id: id1)
        let closed = ATTRequestFailure.bearerClosed(ATTError(.transactionTimeout))
        #expect(
            bearer.timerFired(.indication) == [
                .indicationComplete(id1, closed), .closeBearer(ATTError(.transactionTimeout)),
            ])
        #expect(
            bearer.sendIndication(.init(handle: AttributeHandle(8), value: [1]), id: id2) == [
                .indicationComplete(id2, closed)
            ])
    }
}
