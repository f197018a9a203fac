/// An error of the L2CAP layer: a malformed frame or command, a reassembly failure, or a misuse of the API.
///
/// Equality and hashing consider only `code`, so tests can compare with a freshly made error; the message is
/// diagnostic and shows in `description`.
public struct L2CAPError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. An open set: later versions may add codes.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Fewer octets than a header or a length field requires.
        public static let truncated = Code(rawValue: "truncated")
        /// A field holds a value the specification does not allow (a zero signalling identifier, octets after
        /// the one command of an LE C-frame, ...).
        public static let malformed = Code(rawValue: "malformed")
        /// A continuing ACL fragment arrived with no frame being reassembled.
        public static let unexpectedContinuation = Code(rawValue: "unexpectedContinuation")
        /// A new first fragment arrived while a frame was still incomplete; the incomplete frame was dropped.
        public static let incompleteFrameDropped = Code(rawValue: "incompleteFrameDropped")
        /// Fragments carried more octets than the basic header declared; the frame was dropped.
        public static let fragmentOverrun = Code(rawValue: "fragmentOverrun")
        /// A basic header declared a payload longer than the configured maximum; the frame was dropped.
        public static let frameTooLong = Code(rawValue: "frameTooLong")
        /// Connection parameters outside their ranges or inconsistent with each other.
        public static let invalidParameters = Code(rawValue: "invalidParameters")
        /// The operation is not one this device's role performs (a central does not send a Connection
        /// Parameter Update Request).
        public static let notAllowedForRole = Code(rawValue: "notAllowedForRole")
        /// Every signalling identifier is in use by an outstanding request.
        public static let noIdentifierAvailable = Code(rawValue: "noIdentifierAvailable")
        /// The link is gone.
        public static let linkDisconnected = Code(rawValue: "linkDisconnected")

        public var description: String { rawValue }
    }

    public let code: Code
    private let message: String

    public init(_ code: Code, _ message: String = "") {
        self.code = code
        self.message = message
    }

    public static func truncated(_ message: String = "") -> L2CAPError { L2CAPError(.truncated, message) }
    public static func malformed(_ message: String = "") -> L2CAPError { L2CAPError(.malformed, message) }
    public static func unexpectedContinuation(_ message: String = "") -> L2CAPError {
        L2CAPError(.unexpectedContinuation, message)
    }
    public static func incompleteFrameDropped(_ message: String = "") -> L2CAPError {
        L2CAPError(.incompleteFrameDropped, message)
    }
    public static func fragmentOverrun(_ message: String = "") -> L2CAPError { L2CAPError(.fragmentOverrun, message) }
    public static func frameTooLong(_ message: String = "") -> L2CAPError { L2CAPError(.frameTooLong, message) }
    public static func invalidParameters(_ message: String = "") -> L2CAPError {
        L2CAPError(.invalidParameters, message)
    }
    public static func notAllowedForRole(_ message: String = "") -> L2CAPError {
        L2CAPError(.notAllowedForRole, message)
    }
    public static func noIdentifierAvailable(_ message: String = "") -> L2CAPError {
        L2CAPError(.noIdentifierAvailable, message)
    }
    public static func linkDisconnected(_ message: String = "") -> L2CAPError {
        L2CAPError(.linkDisconnected, message)
    }

    public var description: String {
        message.isEmpty ? "L2CAPError.\(code)" : "L2CAPError.\(code): \(message)"
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
