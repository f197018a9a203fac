/// The error the HCI layer throws: a malformed or short packet, an unknown packet indicator or command, or a
/// command that completed with a failure status.
///
/// Two errors are equal when their codes are equal; `status`, `opcode` and the message are diagnostics.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4 (HCI data formats).
public struct HCIError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as an open set of codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case truncated, lengthMismatch, invalidParameter, unknownPacketType, unknownCommand,
                commandFailed, unexpectedOpcode, unexpectedEvent
        }
        private var base: Base
        private init(_ base: Base) { self.base = base }

        /// The bytes ended before a field that the layout requires.
        public static let truncated = Code(.truncated)
        /// A length field disagrees with the bytes present.
        public static let lengthMismatch = Code(.lengthMismatch)
        /// A field holds a value outside its allowed range.
        public static let invalidParameter = Code(.invalidParameter)
        /// An H4 packet indicator that is not one of the five HCI packet types.
        public static let unknownPacketType = Code(.unknownPacketType)
        /// A command packet whose opcode no registered command type decodes.
        public static let unknownCommand = Code(.unknownCommand)
        /// A command completed with a status other than success; `HCIError.status` carries it.
        public static let commandFailed = Code(.commandFailed)
        /// A Command Complete or Command Status that answers a different opcode than the one expected.
        public static let unexpectedOpcode = Code(.unexpectedOpcode)
        /// An event packet decoded as a type whose event code (or subevent code) it does not carry.
        public static let unexpectedEvent = Code(.unexpectedEvent)

        public var description: String {
            switch base {
            case .truncated: return "truncated"
            case .lengthMismatch: return "length mismatch"
            case .invalidParameter: return "invalid parameter"
            case .unknownPacketType: return "unknown packet type"
            case .unknownCommand: return "unknown command"
            case .commandFailed: return "command failed"
            case .unexpectedOpcode: return "unexpected opcode"
            case .unexpectedEvent: return "unexpected event"
            }
        }
    }

    public var code: Code
    /// The controller's status, for `.commandFailed`.
    public var status: HCIStatus?
    /// The command concerned, when known.
    public var opcode: HCIOpcode?
    private var message: String

    public init(_ code: Code, _ message: String, status: HCIStatus? = nil, opcode: HCIOpcode? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.opcode = opcode
    }

    public static func == (a: HCIError, b: HCIError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        var text = "HCIError.\(code): \(message)"
        if let opcode { text += " [\(opcode)]" }
        if let status { text += " [status \(status)]" }
        return text
    }

    /// The status a controller answers a command packet with when decoding it failed with this error:
    /// Unknown HCI Command for an unknown opcode, Invalid HCI Command Parameters otherwise.
    public var statusForController: HCIStatus {
        if code == .unknownCommand { return .unknownCommand }
        if code == .commandFailed, let status { return status }
        return .invalidHCICommandParameters
    }

    // MARK: Factories

    public static func truncated(_ what: String) -> HCIError {
        HCIError(.truncated, "the bytes end before \(what)")
    }

    public static func lengthMismatch(_ what: String, declared: Int, present: Int) -> HCIError {
        HCIError(.lengthMismatch, "\(what) declares \(declared) bytes but \(present) are present")
    }

    public static func invalidParameter(_ what: String) -> HCIError {
        HCIError(.invalidParameter, what)
    }

    public static func unknownPacketType(_ indicator: UInt8) -> HCIError {
        HCIError(.unknownPacketType, "packet indicator \(HCIPacketType(rawValue: indicator)) is not an HCI packet type")
    }

    public static func unknownCommand(_ opcode: HCIOpcode) -> HCIError {
        HCIError(.unknownCommand, "no command type decodes this opcode", opcode: opcode)
    }

    public static func commandFailed(_ opcode: HCIOpcode, status: HCIStatus) -> HCIError {
        HCIError(.commandFailed, "the controller answered \(status)", status: status, opcode: opcode)
    }
}
