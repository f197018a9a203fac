import BLEATT
import BLECore

/// An error of the GATT layer.
///
/// Equality is by ``code`` and, for an error response, the peer's ``attErrorCode``; the message and handle
/// are diagnostics.
public struct GATTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, and so how far it reaches. An open set.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The server answered one request with an Error Response (``GATTError/attErrorCode``); the bearer is fine.
        public static let errorResponse = Code(rawValue: "error response")
        /// The ATT bearer closed (transaction timeout, protocol violation); nothing more works on this link.
        public static let bearerClosed = Code(rawValue: "bearer closed")
        /// The bearer closed because a transaction got no answer within 30 s (Vol 3, Part F, 3.3.3).
        public static let transactionTimeout = Code(rawValue: "transaction timeout")
        /// The link was lost.
        public static let disconnected = Code(rawValue: "disconnected")
        /// Refused locally before anything was sent.
        public static let rejected = Code(rawValue: "rejected")
        /// The server's response did not make sense for the procedure.
        public static let invalidResponse = Code(rawValue: "invalid response")
        /// A Prepare Write Response did not echo the part that was sent (the write was cancelled).
        public static let writeVerificationFailed = Code(rawValue: "write verification failed")
        /// A service definition cannot be placed in the database.
        public static let invalidDefinition = Code(rawValue: "invalid definition")
        public var description: String { rawValue }
    }

    public var code: Code
    /// The peer's error code, for ``Code/errorResponse``.
    public var attErrorCode: ATTErrorCode?
    /// The handle the error concerns, when known.
    public var handle: AttributeHandle?
    private var message: String

    public init(_ code: Code, attErrorCode: ATTErrorCode? = nil, handle: AttributeHandle? = nil, _ message: String = "")
    {
        self.code = code
        self.attErrorCode = attErrorCode
        self.handle = handle
        self.message = message
    }

    /// The GATT view of a failed ATT request.
    public init(failure: ATTRequestFailure) {
        switch failure {
        case .errorResponse(let response):
            self.init(
                .errorResponse, attErrorCode: response.errorCode, handle: response.handle,
                "\(response.requestOpcode)")
        case .rejected(let error): self.init(.rejected, "\(error)")
        case .bearerClosed(let error):
            self.init(error.code == .transactionTimeout ? .transactionTimeout : .bearerClosed, "\(error)")
        case .disconnected: self.init(.disconnected)
        }
    }

    public static func == (a: Self, b: Self) -> Bool { a.code == b.code && a.attErrorCode == b.attErrorCode }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(attErrorCode)
    }

    public var description: String {
        var text = "GATTError(\(code)"
        if let attErrorCode { text += " \(attErrorCode)" }
        if let handle { text += " at \(handle)" }
        if !message.isEmpty { text += ": \(message)" }
        return text + ")"
    }
}
