import BLECore
import NIOCore

/// The LE signalling channel (CID 0x0005) of one connection, as a pure state machine.
///
/// ### Overview
///
/// Each LE link has one signalling channel. On it the peripheral may ask the central for new connection
/// parameters, either side may open or close credit-based channels, and any command one side does not
/// understand is answered with a Command Reject carrying the same identifier. This type holds what one side of
/// one link must remember for that: its role, the requests it sent and has not seen answered, and the requests it
/// received and handed to its host for a decision.
///
/// ### Function
///
/// Events go in through mutating methods named after them and come out as `Action`s for the host to perform,
/// in order:
/// - `received(_:)`: a C-frame's payload arrived. Unknown commands and commands this side does not accept are
///   rejected (`.send` of a Command Reject, reason "command not understood", same identifier); malformed
///   commands too, unless they are responses, which are never answered. A C-frame longer than the signalling
///   MTU is rejected with "signalling MTU exceeded".
/// - As **central**, a valid Connection Parameter Update Request becomes `.requestConnectionUpdate` for the
///   host to try through HCI (LE Connection Update); it then calls
///   `respondToConnectionParameterUpdate(identifier:accepted:)`. An invalid request is rejected at once.
/// - As **peripheral**, `requestConnectionParameterUpdate(_:)` sends a request with a fresh identifier and
///   starts its 30 s response timer (RTX); the response, a Command Reject naming the identifier,
///   `timerFired(_:)` or `linkDisconnected()` completes it with
///   `.connectionParameterUpdateCompleted(identifier, outcome)`. A response whose identifier matches nothing
///   outstanding is ignored.
/// - An LE Credit Based Connection Request is refused with "SPSM not supported" and a Disconnection Request
///   with "invalid CID", since this version opens no credit-based channels.
///
/// ### Implementation
///
/// All state lives in one enum: `.open` with the per-link bookkeeping, or `.closed` once the link is gone, after
/// which every event is ignored and requests throw. No clocks: timers are actions, and their expiry an event.
/// Identifiers are allocated in sequence from 0x01, wrapping after 0xFF and skipping those still outstanding.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4 (Signaling packet formats), 4.20-4.21 (Connection Parameter
///   Update), 6.2.1 (RTX timer, 1...60 s).
public struct L2CAPSignalingChannel: Sendable {
    /// The role of this device on the link.
    public enum Role: Hashable, Sendable {
        case central
        case peripheral
    }

    /// The response timer (RTX) of the request sent with `identifier`.
    public struct Timer: Hashable, Sendable, CustomStringConvertible {
        public var identifier: L2CAPSignalingIdentifier
        public init(identifier: L2CAPSignalingIdentifier) { self.identifier = identifier }
        public var description: String { "RTX \(identifier)" }
    }

    /// How a Connection Parameter Update Request this side sent ended.
    public enum ConnectionParameterUpdateOutcome: Hashable, Sendable {
        /// The central accepted the parameters (it will now run the link layer procedure).
        case accepted
        /// The central rejected them (any result other than "accepted" counts as a rejection).
        case rejected
        /// The central answered with a Command Reject (for example, it does not support the command).
        case commandRejected(L2CAPSignalingPDU.CommandReject.Reason)
        /// No answer within the response timeout.
        case timedOut
        /// The link closed first.
        case linkDisconnected
    }

    /// What the host must do, in order.
    public enum Action: Hashable, Sendable {
        /// Send this command in a B-frame on CID 0x0005 (`command.frame`).
        case send(L2CAPSignalingCommand)
        /// Start `timer`; call `timerFired(_:)` when it expires.
        case startTimer(Timer, after: Duration)
        /// Stop `timer`; it must not fire any more.
        case cancelTimer(Timer)
        /// Central only: the peripheral asks for these parameters. Apply them through HCI (or decide not to),
        /// then call `respondToConnectionParameterUpdate(identifier:accepted:)`.
        case requestConnectionUpdate(L2CAPConnectionParameters, identifier: L2CAPSignalingIdentifier)
        /// Peripheral only: the request sent with this identifier is over.
        case connectionParameterUpdateCompleted(L2CAPSignalingIdentifier, ConnectionParameterUpdateOutcome)
    }

    /// How long a request waits for its response: the RTX timer's initial value, within the 1...60 s the
    /// specification allows.
    public static let responseTimeout: Duration = .seconds(30)
    /// The smallest signalling MTU an LE device supports (MTUsig).
    public static let minimumSignalingMTU = 23

    private enum Outstanding: Hashable, Sendable {
        case connectionParameterUpdate(L2CAPConnectionParameters)
    }

    private struct OpenState: Sendable {
        var nextIdentifier: L2CAPSignalingIdentifier = .first
        /// Requests this side sent, by identifier.
        var outstanding: [L2CAPSignalingIdentifier: Outstanding] = [:]
        /// Connection Parameter Update Requests handed to the host, awaiting `respond...`.
        var awaitingDecision: Set<L2CAPSignalingIdentifier> = []
    }

    private enum State: Sendable {
        case open(OpenState)
        case closed
    }

    /// This device's role on the link.
    public let role: Role
    /// The largest C-frame payload this side accepts.
    public let signalingMTU: Int
    private var state: State = .open(OpenState())

    /// - Parameters:
    ///   - role: this device's role on the link.
    ///   - signalingMTU: the largest C-frame this side accepts; at least 23 (smaller values are raised).
    public init(role: Role, signalingMTU: Int = L2CAPSignalingChannel.minimumSignalingMTU) {
        self.role = role
        self.signalingMTU = max(Self.minimumSignalingMTU, min(signalingMTU, Int(UInt16.max)))
    }

    /// Whether the link is gone (`linkDisconnected()` was called).
    public var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// Identifiers of the requests this side sent and that are not complete yet, in order.
    public var outstandingRequests: [L2CAPSignalingIdentifier] {
        guard case .open(let open) = state else { return [] }
        return open.outstanding.keys.sorted()
    }

    // MARK: Events

    /// A C-frame arrived on the LE signalling channel; `payload` is the B-frame's payload.
    public mutating func received(_ payload: ByteBuffer) -> [Action] {
        guard case .open(var open) = state else { return [] }
        defer { state = .open(open) }

        if payload.readableBytes > signalingMTU {
            guard let (code, identifier) = Self.peekHeader(payload), !code.isResponse else { return [] }
            return [
                .send(
                    L2CAPSignalingCommand(
                        identifier: identifier, .commandReject(.signalingMTUExceeded(actualMTU: UInt16(signalingMTU)))))
            ]
        }

        let command: L2CAPSignalingCommand
        do {
            command = try L2CAPSignalingCommand(decoding: payload)
        } catch {
            // A malformed request is answered so the peer does not wait for its timeout; a malformed response
            // (or reject) is dropped, and so is anything without a valid identifier.
            guard let (code, identifier) = Self.peekHeader(payload), !code.isResponse else { return [] }
            return [.send(L2CAPSignalingCommand(identifier: identifier, .commandReject(.commandNotUnderstood)))]
        }

        let identifier = command.identifier
        switch command.pdu {
        case .commandReject(let reject):
            return Self.complete(&open, identifier, .commandRejected(reject.reason))

        case .connectionParameterUpdateResponse(let response):
            return Self.complete(&open, identifier, response.result == .accepted ? .accepted : .rejected)

        case .connectionParameterUpdateRequest(let request):
            guard role == .central else {
                return [.send(L2CAPSignalingCommand(identifier: identifier, .commandReject(.commandNotUnderstood)))]
            }
            guard request.parameters.isValid else {
                return [
                    .send(
                        L2CAPSignalingCommand(
                            identifier: identifier, .connectionParameterUpdateResponse(.init(result: .rejected))))
                ]
            }
            open.awaitingDecision.insert(identifier)
            return [.requestConnectionUpdate(request.parameters, identifier: identifier)]

        case .leCreditBasedConnectionRequest:
            return [
                .send(
                    L2CAPSignalingCommand(
                        identifier: identifier, .leCreditBasedConnectionResponse(.refused(.spsmNotSupported))))
            ]

        case .disconnectionRequest(let request):
            return [
                .send(
                    L2CAPSignalingCommand(
                        identifier: identifier,
                        .commandReject(.invalidCID(local: request.destinationCID, remote: request.sourceCID))))
            ]

        case .disconnectionResponse, .leCreditBasedConnectionResponse:
            return []  // answers to requests this side never sends: nothing outstanding matches

        case .flowControlCreditIndication:
            return []  // credits for a channel that does not exist: indications are never answered

        case .unknown(let code, _):
            if code.isResponse { return [] }
            return [.send(L2CAPSignalingCommand(identifier: identifier, .commandReject(.commandNotUnderstood)))]
        }
    }

    /// Central: the host's decision on the Connection Parameter Update Request it got with `identifier`.
    /// Sends the response; does nothing if no such request awaits a decision.
    public mutating func respondToConnectionParameterUpdate(
        identifier: L2CAPSignalingIdentifier, accepted: Bool
    ) -> [Action] {
        guard case .open(var open) = state else { return [] }
        defer { state = .open(open) }
        guard open.awaitingDecision.remove(identifier) != nil else { return [] }
        let result: L2CAPSignalingPDU.ConnectionParameterUpdateResponse.Result = accepted ? .accepted : .rejected
        return [
            .send(
                L2CAPSignalingCommand(identifier: identifier, .connectionParameterUpdateResponse(.init(result: result)))
            )
        ]
    }

    /// Peripheral: asks the central for new connection parameters.
    ///
    /// Returns the request's identifier, under which it completes, and the actions: send the request and start
    /// its response timer.
    ///
    /// - Throws: `.linkDisconnected` after `linkDisconnected()`; `.notAllowedForRole` on a central (which
    ///   updates parameters through its controller directly); `.invalidParameters`; `.noIdentifierAvailable`
    ///   if 255 requests are outstanding.
    public mutating func requestConnectionParameterUpdate(
        _ parameters: L2CAPConnectionParameters
    ) throws(L2CAPError) -> (identifier: L2CAPSignalingIdentifier, actions: [Action]) {
        guard case .open(var open) = state else { throw .linkDisconnected("the signalling channel is closed") }
        defer { state = .open(open) }
        guard role == .peripheral else {
            throw .notAllowedForRole("only a peripheral sends a Connection Parameter Update Request")
        }
        try parameters.validate()
        let identifier = try Self.allocateIdentifier(&open)
        open.outstanding[identifier] = .connectionParameterUpdate(parameters)
        let request = L2CAPSignalingCommand(
            identifier: identifier, .connectionParameterUpdateRequest(.init(parameters: parameters)))
        return (identifier, [.send(request), .startTimer(Timer(identifier: identifier), after: Self.responseTimeout)])
    }

    /// A timer started by `.startTimer` expired. Completes its request with `.timedOut`, if still outstanding.
    public mutating func timerFired(_ timer: Timer) -> [Action] {
        guard case .open(var open) = state else { return [] }
        defer { state = .open(open) }
        guard open.outstanding.removeValue(forKey: timer.identifier) != nil else { return [] }
        return [.connectionParameterUpdateCompleted(timer.identifier, .timedOut)]
    }

    /// The link closed: every outstanding request completes with `.linkDisconnected` (its timer cancelled),
    /// decisions still awaited are forgotten, and the channel closes for good.
    public mutating func linkDisconnected() -> [Action] {
        guard case .open(let open) = state else { return [] }
        state = .closed
        var actions: [Action] = []
        for identifier in open.outstanding.keys.sorted() {
            actions.append(.cancelTimer(Timer(identifier: identifier)))
            actions.append(.connectionParameterUpdateCompleted(identifier, .linkDisconnected))
        }
        return actions
    }

    // MARK: Helpers

    private static func complete(
        _ open: inout OpenState, _ identifier: L2CAPSignalingIdentifier, _ outcome: ConnectionParameterUpdateOutcome
    ) -> [Action] {
        guard let request = open.outstanding.removeValue(forKey: identifier) else { return [] }
        switch request {
        case .connectionParameterUpdate:
            return [
                .cancelTimer(Timer(identifier: identifier)), .connectionParameterUpdateCompleted(identifier, outcome),
            ]
        }
    }

    private static func allocateIdentifier(_ open: inout OpenState) throws(L2CAPError) -> L2CAPSignalingIdentifier {
        var candidate = open.nextIdentifier
        for _ in 0..<255 {
            if open.outstanding[candidate] == nil {
                open.nextIdentifier = candidate.next
                return candidate
            }
            candidate = candidate.next
        }
        throw .noIdentifierAvailable("255 signalling requests outstanding")
    }

    /// The code and a valid identifier of a command too long or malformed to decode, if they can be read.
    private static func peekHeader(_ payload: ByteBuffer) -> (L2CAPSignalingCode, L2CAPSignalingIdentifier)? {
        guard let code = payload.getInteger(at: payload.readerIndex, as: UInt8.self),
            let raw = payload.getInteger(at: payload.readerIndex + 1, as: UInt8.self),
            let identifier = L2CAPSignalingIdentifier(rawValue: raw)
        else { return nil }
        return (L2CAPSignalingCode(code), identifier)
    }
}
