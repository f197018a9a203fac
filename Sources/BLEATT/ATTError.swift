/// An error of the ATT layer: a malformed PDU, a violated protocol rule, a dead bearer.
///
/// Equality is by ``code`` alone; the message is diagnostics. A peer's Error Response is not an `ATTError`: it
/// arrives as ``ATTRequestFailure/errorResponse(_:)`` with its ``ATTErrorCode``.
public struct ATTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. An open set.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A PDU ended before all its fields (or it was empty).
        public static let truncatedPDU = Code(rawValue: "truncated PDU")
        /// A length (a length field, a list's size, trailing bytes) did not fit the PDU's format.
        public static let invalidLength = Code(rawValue: "invalid length")
        /// A field held a value the format does not allow.
        public static let invalidValue = Code(rawValue: "invalid value")
        /// The peer broke a rule of the protocol (an unexpected or malformed response).
        public static let protocolViolation = Code(rawValue: "protocol violation")
        /// No response (or confirmation) came within 30 seconds; the bearer can carry no more ATT PDUs.
        public static let transactionTimeout = Code(rawValue: "transaction timeout")
        /// The bearer was closed earlier; nothing more can be sent on it.
        public static let bearerClosed = Code(rawValue: "bearer closed")
        /// A PDU this side was asked to send is longer than the ATT_MTU.
        public static let exceedsMTU = Code(rawValue: "PDU exceeds ATT_MTU")
        /// The request is not allowed now (e.g. a second Exchange MTU Request, a response sent as a request).
        public static let notAllowed = Code(rawValue: "not allowed")

        public var description: String { rawValue }
    }

    public var code: Code
    /// The opcode of the PDU concerned, when there is one.
    public var opcode: ATTOpcode?
    private var message: String

    public init(_ code: Code, opcode: ATTOpcode? = nil, _ message: String = "") {
        self.code = code
        self.opcode = opcode
        self.message = message
    }

    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        var text = "ATTError(\(code)"
        if let opcode { text += ", \(opcode)" }
        if !message.isEmpty { text += ": \(message)" }
        return text + ")"
    }
}

/// How far a failed ATT request's failure reaches.
///
/// - ``errorResponse(_:)``: the server refused this one request; the bearer is fine.
/// - ``rejected(_:)``: refused locally before anything was sent (too long for the MTU, not allowed); the
///   bearer is fine.
/// - ``bearerClosed(_:)``: the bearer is dead (transaction timeout, protocol violation); every pending and
///   later request on it fails too, and the link should be dropped.
/// - ``disconnected``: the link is gone.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.3.3 (Transaction).
public enum ATTRequestFailure: Error, Sendable, Hashable, CustomStringConvertible {
    case errorResponse(ATTPDU.ErrorResponse)
    case rejected(ATTError)
    case bearerClosed(ATTError)
    case disconnected

    public var description: String {
        switch self {
        case .errorResponse(let response):
            return "error response \(response.errorCode) for \(response.requestOpcode) at \(response.handle)"
        case .rejected(let error): return "rejected: \(error)"
        case .bearerClosed(let error): return "bearer closed: \(error)"
        case .disconnected: return "disconnected"
        }
    }
}
