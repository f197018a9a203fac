import BLECore
import DequeModule
import NIOCore

/// Names one ATT transaction a bearer user started: a client request, or a server's indication. The caller
/// picks the ids and keeps them unique among the transactions pending on one bearer.
public struct ATTRequestID: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
}

/// The two transaction timers of one bearer, each 30 seconds.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.3.3 (Transaction).
public enum ATTTimer: Sendable, Hashable {
    /// The client's outstanding request awaits its response.
    case transaction
    /// The server's outstanding indication awaits its confirmation.
    case indication
}

/// The Attribute Protocol on one ATT bearer (one LE link's fixed channel 0x0004), both roles at once: the
/// client side sends requests and receives notifications and indications, the server side receives requests
/// and sends notifications and indications.
///
/// ### Overview
/// A pure state machine: events in, actions out. The driver (the host) feeds it the SDUs received on the ATT
/// channel (``received(_:)``), timer expirations (``timerFired(_:)``), the link's loss
/// (``linkDisconnected()``) and its users' requests (``sendRequest(_:id:)``, ``sendResponse(_:)``,
/// ``sendIndication(_:id:)``), and performs the returned ``Action``s in order; ``sendUnacknowledged(_:)``
/// returns the one PDU to send.
///
/// ### Function
/// - ATT_MTU starts at 23. The client sends one Exchange MTU Request; the server answers any with its own
///   receive MTU; both then use `max(23, min(client Rx MTU, server Rx MTU))`.
/// - Client: one request outstanding at a time; further requests wait in a FIFO queue. A response must answer
///   the outstanding request (its response opcode, or an Error Response naming its opcode); anything else is
///   a protocol violation that closes the bearer.
/// - Server: incoming requests are handed up as ``Action/request(_:)``; one indication is outstanding at a
///   time, the rest queue.
/// - Each outstanding request and indication runs a 30-second timer. When one fires, the bearer is closed:
///   every pending transaction fails with ``ATTRequestFailure/bearerClosed(_:)``, later ones fail at once,
///   and the bearer asks for the link to be dropped (``Action/closeBearer(_:)``).
/// - Received indications are delivered and then confirmed by the bearer itself.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.2.8 (Exchanging MTU size), 3.3.2 (Sequential protocol),
///   3.3.3 (Transaction), 3.4.7 (Server initiated).
public struct ATTBearer: Sendable {
    /// The LE default and minimum ATT_MTU.
    public static let defaultMTU: UInt16 = 23
    /// The largest ATT_MTU this stack offers (an attribute value of 512 octets plus headers).
    public static let maximumMTU: UInt16 = 517
    /// How long a request waits for its response, and an indication for its confirmation.
    public static let transactionTimeout: Duration = .seconds(30)

    /// What the driver must do, in order.
    public enum Action: Sendable, Equatable {
        /// Send this PDU on the ATT fixed channel.
        case send(ByteBuffer)
        /// Start (or restart) the named timer.
        case startTimer(ATTTimer, after: Duration)
        /// Cancel the named timer.
        case cancelTimer(ATTTimer)
        /// A client request finished: its response, or how far its failure reaches.
        case complete(ATTRequestID, Result<ATTPDU, ATTRequestFailure>)
        /// A server indication finished: `nil` when confirmed, else the failure.
        case indicationComplete(ATTRequestID, ATTRequestFailure?)
        /// A request from the peer client, for the server to answer through ``ATTBearer/sendResponse(_:)``.
        case request(ATTPDU)
        /// A command from the peer client (Write Command, Signed Write Command); never answered.
        case command(ATTPDU)
        /// A notified value from the peer server.
        case notification(ATTPDU.HandleValueNotification)
        /// An indicated value from the peer server. The bearer's next action sends the confirmation.
        case indication(ATTPDU.HandleValueIndication)
        /// The ATT_MTU changed.
        case mtuChanged(UInt16)
        /// The bearer is unusable (transaction timeout, protocol violation): no ATT PDU may be sent on this
        /// link any more, so the host should disconnect it.
        case closeBearer(ATTError)
    }

    private struct Transaction: Sendable {
        var id: ATTRequestID
        var pdu: ATTPDU
    }

    private struct Open: Sendable {
        var outstandingRequest: Transaction?
        var requestQueue: Deque<Transaction> = []
        var outstandingIndication: Transaction?
        var indicationQueue: Deque<Transaction> = []
        /// Whether this side, as a client, has sent its Exchange MTU Request.
        var clientExchangedMTU = false
        /// Whether this side, as a server, has answered an Exchange MTU Request.
        var serverExchangedMTU = false
    }

    private enum State: Sendable {
        case open(Open)
        case closed(ATTError)
        case disconnected
    }

    private var state: State = .open(Open())
    /// Where unacknowledged PDUs are encoded; shared with the `.send` that carries one until the caller drops
    /// it, and copied on write if the caller still holds it when the next one is encoded.
    private var outgoing = ByteBuffer()
    /// The ATT_MTU in force, in octets.
    public private(set) var mtu: UInt16 = ATTBearer.defaultMTU
    /// The receive MTU this side offers in an exchange (23...517).
    public let localRxMTU: UInt16

    public init(localRxMTU: UInt16 = ATTBearer.maximumMTU) {
        self.localRxMTU = min(max(localRxMTU, Self.defaultMTU), Self.maximumMTU)
    }

    /// Whether PDUs can still be sent.
    public var isOpen: Bool {
        if case .open = state { return true }
        return false
    }

    /// Whether a client request is outstanding or queued.
    public var hasPendingRequests: Bool {
        guard case .open(let open) = state else { return false }
        return open.outstandingRequest != nil || !open.requestQueue.isEmpty
    }

    // MARK: - Client side

    /// Sends a request, or queues it behind the outstanding one. It completes with ``Action/complete(_:_:)``.
    ///
    /// A request that is not a request, does not fit the ATT_MTU, or is a second Exchange MTU Request
    /// completes at once with ``ATTRequestFailure/rejected(_:)``.
    public mutating func sendRequest(_ pdu: ATTPDU, id: ATTRequestID) -> [Action] {
        guard case .open(var open) = state else { return [.complete(id, .failure(failureAfterClose))] }
        guard pdu.opcode.kind == .request, pdu.opcode.responseOpcode != nil else {
            return [.complete(id, .failure(.rejected(ATTError(.notAllowed, opcode: pdu.opcode, "not a request"))))]
        }
        guard pdu.encodedLength <= Int(mtu) else {
            return [.complete(id, .failure(.rejected(ATTError(.exceedsMTU, opcode: pdu.opcode))))]
        }
        if case .exchangeMTURequest = pdu {
            guard !open.clientExchangedMTU else {
                return [
                    .complete(
                        id,
                        .failure(
                            .rejected(
                                ATTError(
                                    .notAllowed, opcode: pdu.opcode,
                                    "the MTU is exchanged once per connection"))))
                ]
            }
            open.clientExchangedMTU = true
        }
        let transaction = Transaction(id: id, pdu: pdu)
        if open.outstandingRequest == nil {
            open.outstandingRequest = transaction
            state = .open(open)
            return [.send(pdu.encoded()), .startTimer(.transaction, after: Self.transactionTimeout)]
        }
        open.requestQueue.append(transaction)
        state = .open(open)
        return []
    }

    /// Sends the Exchange MTU Request offering ``localRxMTU``.
    public mutating func exchangeMTU(id: ATTRequestID) -> [Action] {
        sendRequest(.exchangeMTURequest(.init(clientRxMTU: localRxMTU)), id: id)
    }

    /// Encodes a PDU that no one answers, for the caller to send on the ATT fixed channel: a Write Command,
    /// Signed Write Command, or (server side) a Handle Value Notification or Multiple Handle Value
    /// Notification. Nothing else follows from it (no timer, no state), so it returns the PDU itself rather than
    /// a list of one `.send` (an array allocated for every notification). Throws when the bearer is closed, the
    /// PDU is of another kind, or it does not fit the ATT_MTU.
    public mutating func sendUnacknowledged(_ pdu: ATTPDU) throws(ATTError) -> ByteBuffer {
        guard isOpen else { throw ATTError(.bearerClosed, opcode: pdu.opcode) }
        let kind = pdu.opcode.kind
        guard kind == .command || kind == .notification else {
            throw ATTError(.notAllowed, opcode: pdu.opcode, "not a command or notification")
        }
        // Encoded once (measuring it with `encodedLength` first encoded every notification twice), into the
        // bearer's own buffer: once the caller let go of the last one, `clear` finds it unshared and the PDU is
        // written in place, where a new buffer was two allocations a notification.
        outgoing.clear()
        pdu.encode(into: &outgoing)
        guard outgoing.readableBytes <= Int(mtu) else { throw ATTError(.exceedsMTU, opcode: pdu.opcode) }
        return outgoing
    }

    // MARK: - Server side

    /// Sends the answer to a request handed up with ``Action/request(_:)``: its response or an Error
    /// Response. Nothing is sent on a closed bearer.
    public mutating func sendResponse(_ pdu: ATTPDU) -> [Action] {
        guard isOpen else { return [] }
        return [.send(pdu.encoded())]
    }

    /// Sends an indication, or queues it behind the outstanding one. It completes with
    /// ``Action/indicationComplete(_:_:)`` once confirmed (or failed). The value must fit ATT_MTU-3.
    public mutating func sendIndication(_ indication: ATTPDU.HandleValueIndication, id: ATTRequestID) -> [Action] {
        guard case .open(var open) = state else { return [.indicationComplete(id, failureAfterClose)] }
        let pdu = ATTPDU.handleValueIndication(indication)
        guard pdu.encodedLength <= Int(mtu) else {
            return [.indicationComplete(id, .rejected(ATTError(.exceedsMTU, opcode: pdu.opcode)))]
        }
        let transaction = Transaction(id: id, pdu: pdu)
        if open.outstandingIndication == nil {
            open.outstandingIndication = transaction
            state = .open(open)
            return [.send(pdu.encoded()), .startTimer(.indication, after: Self.transactionTimeout)]
        }
        open.indicationQueue.append(transaction)
        state = .open(open)
        return []
    }

    // MARK: - Events

    /// ``received(_:)`` for an SDU still in the bytes it arrived in. A Handle Value Notification, what a stream
    /// of values is made of, is read from them directly and its value copied once (through a buffer it was
    /// copied twice); any other PDU goes through ``received(_:)``. The actions are the same either way.
    public mutating func received(bytes sdu: ArraySlice<UInt8>) -> [Action] {
        let start = sdu.startIndex
        guard sdu.first == ATTOpcode.handleValueNotification.rawValue, sdu.count >= 3, sdu.count <= Int(mtu) else {
            return received(ByteBuffer(bytes: sdu))
        }
        guard case .open = state else { return [] }
        let handle = AttributeHandle(UInt16(sdu[start + 1]) | UInt16(sdu[start + 2]) << 8)
        return [.notification(.init(handle: handle, value: Array(sdu[(start + 3)...])))]
    }

    /// An SDU arrived on the ATT channel.
    public mutating func received(_ sdu: ByteBuffer) -> [Action] {
        guard case .open(var open) = state else { return [] }
        guard let rawOpcode = sdu.getInteger(at: sdu.readerIndex, as: UInt8.self) else { return [] }
        let opcode = ATTOpcode(rawOpcode)
        // No PDU may exceed ATT_MTU (Vol 3, Part F, 3.2.8 and 5.2.1). A request that does is answered with
        // Invalid PDU (as a malformed one is), so that nothing longer than ATT_MTU is echoed back; a response
        // that does breaks the protocol as a malformed one does; other oversize PDUs are dropped.
        if sdu.readableBytes > Int(mtu) {
            switch opcode.kind {
            case .request:
                let reply = ATTPDU.errorResponse(
                    .init(requestOpcode: opcode, handle: AttributeHandle(0), errorCode: .invalidPDU))
                return [.send(reply.encoded())]
            case .response:
                return close(ATTError(.protocolViolation, opcode: opcode, "a response longer than ATT_MTU (\(mtu))"))
            default:
                return []
            }
        }
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(buffer: sdu)
        } catch {
            switch opcode.kind {
            case .request:
                let reply = ATTPDU.errorResponse(
                    .init(
                        requestOpcode: opcode, handle: AttributeHandle(0),
                        errorCode: .invalidPDU))
                return [.send(reply.encoded())]
            case .response:
                return close(ATTError(.protocolViolation, opcode: opcode, "malformed response: \(error)"))
            default:
                return []  // a malformed command, notification, indication or confirmation is dropped
            }
        }

        switch opcode.kind {
        case .request:
            if case .exchangeMTURequest(let request) = pdu {
                var actions: [Action] = [.send(ATTPDU.exchangeMTUResponse(.init(serverRxMTU: localRxMTU)).encoded())]
                if !open.serverExchangedMTU {
                    open.serverExchangedMTU = true
                    state = .open(open)
                    actions += adoptMTU(peerRxMTU: request.clientRxMTU)
                }
                return actions
            }
            if case .unknown = pdu {
                let reply = ATTPDU.errorResponse(
                    .init(
                        requestOpcode: opcode, handle: AttributeHandle(0),
                        errorCode: .requestNotSupported))
                return [.send(reply.encoded())]
            }
            return [.request(pdu)]

        case .command:
            if case .unknown = pdu { return [] }
            return [.command(pdu)]

        case .notification:
            switch pdu {
            case .handleValueNotification(let notification):
                return [.notification(notification)]
            case .multipleHandleValueNotification(let multiple):
                return multiple.handleLengthValueTupleList.map {
                    .notification(.init(handle: $0.handle, value: $0.value))
                }
            default:
                return []
            }

        case .indication:
            guard case .handleValueIndication(let indication) = pdu else { return [] }
            return [.indication(indication), .send(ATTPDU.handleValueConfirmation(.init()).encoded())]

        case .confirmation:
            guard let outstanding = open.outstandingIndication else { return [] }  // stray: ignored
            var actions: [Action] = [.cancelTimer(.indication), .indicationComplete(outstanding.id, nil)]
            open.outstandingIndication = nil
            if let next = open.indicationQueue.popFirst() {
                open.outstandingIndication = next
                actions += [.send(next.pdu.encoded()), .startTimer(.indication, after: Self.transactionTimeout)]
            }
            state = .open(open)
            return actions

        case .response:
            guard let outstanding = open.outstandingRequest else {
                return close(ATTError(.protocolViolation, opcode: opcode, "a response with no request outstanding"))
            }
            let result: Result<ATTPDU, ATTRequestFailure>
            if case .errorResponse(let error) = pdu {
                guard error.requestOpcode == outstanding.pdu.opcode else {
                    return close(
                        ATTError(
                            .protocolViolation, opcode: opcode,
                            "an error response for \(error.requestOpcode) while \(outstanding.pdu.opcode) is outstanding"
                        ))
                }
                result = .failure(.errorResponse(error))
            } else {
                guard opcode == outstanding.pdu.opcode.responseOpcode else {
                    return close(
                        ATTError(
                            .protocolViolation, opcode: opcode,
                            "does not answer \(outstanding.pdu.opcode)"))
                }
                result = .success(pdu)
            }
            var actions: [Action] = [.cancelTimer(.transaction)]
            open.outstandingRequest = nil
            state = .open(open)
            if case .success(.exchangeMTUResponse(let response)) = result {
                actions += adoptMTU(peerRxMTU: response.serverRxMTU)
            }
            actions.append(.complete(outstanding.id, result))
            actions += sendNextRequest()
            return actions
        }
    }

    /// A timer the bearer started has fired. A stale timer (its transaction already over) does nothing;
    /// otherwise the bearer closes.
    public mutating func timerFired(_ timer: ATTTimer) -> [Action] {
        guard case .open(let open) = state else { return [] }
        switch timer {
        case .transaction:
            guard let outstanding = open.outstandingRequest else { return [] }
            return close(
                ATTError(.transactionTimeout, opcode: outstanding.pdu.opcode, "no response within 30 s"),
                firedTimer: timer)
        case .indication:
            guard open.outstandingIndication != nil else { return [] }
            return close(
                ATTError(.transactionTimeout, opcode: .handleValueIndication, "no confirmation within 30 s"),
                firedTimer: timer)
        }
    }

    /// The link is gone: every pending transaction fails with ``ATTRequestFailure/disconnected``.
    public mutating func linkDisconnected() -> [Action] {
        guard case .open(let open) = state else {
            state = .disconnected
            return []
        }
        state = .disconnected
        return failAll(open, with: .disconnected, firedTimer: nil)
    }

    // MARK: - Private

    private var failureAfterClose: ATTRequestFailure {
        switch state {
        case .closed(let error): return .bearerClosed(error)
        case .disconnected: return .disconnected
        case .open: return .bearerClosed(ATTError(.bearerClosed))
        }
    }

    private mutating func adoptMTU(peerRxMTU: UInt16) -> [Action] {
        let newMTU = max(Self.defaultMTU, min(peerRxMTU, localRxMTU))
        guard newMTU != mtu else { return [] }
        mtu = newMTU
        return [.mtuChanged(newMTU)]
    }

    private mutating func sendNextRequest() -> [Action] {
        guard case .open(var open) = state, open.outstandingRequest == nil else { return [] }
        if let next = open.requestQueue.popFirst() {
            open.outstandingRequest = next
            state = .open(open)
            return [.send(next.pdu.encoded()), .startTimer(.transaction, after: Self.transactionTimeout)]
        }
        state = .open(open)
        return []
    }

    private mutating func close(_ error: ATTError, firedTimer: ATTTimer? = nil) -> [Action] {
        guard case .open(let open) = state else { return [] }
        state = .closed(error)
        return failAll(open, with: .bearerClosed(error), firedTimer: firedTimer) + [.closeBearer(error)]
    }

    private func failAll(_ open: Open, with failure: ATTRequestFailure, firedTimer: ATTTimer?) -> [Action] {
        var actions: [Action] = []
        if open.outstandingRequest != nil && firedTimer != .transaction { actions.append(.cancelTimer(.transaction)) }
        if open.outstandingIndication != nil && firedTimer != .indication { actions.append(.cancelTimer(.indication)) }
        for transaction in [open.outstandingRequest].compactMap({ $0 }) + open.requestQueue {
            actions.append(.complete(transaction.id, .failure(failure)))
        }
        for transaction in [open.outstandingIndication].compactMap({ $0 }) + open.indicationQueue {
            actions.append(.indicationComplete(transaction.id, failure))
        }
        return actions
    }
}
