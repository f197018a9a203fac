/// Why a transport could not be opened, or why it failed. The message names the transport and says what to do
/// where there is something to do (bring an interface down, grant a capability). Equal when the codes are equal.
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// No opener is registered for the spec's kind.
        public static let notRegistered = Code(rawValue: 1)
        /// This platform or build cannot open this kind (the HCI user channel outside Linux).
        public static let unsupported = Code(rawValue: 2)
        /// Connecting to, or listening on, an address failed.
        public static let connectionFailed = Code(rawValue: 3)
        /// A device or socket could not be opened or configured.
        public static let openFailed = Code(rawValue: 4)
        /// The process lacks a permission or capability.
        public static let permissionDenied = Code(rawValue: 5)
        /// The device is in use (an HCI interface that is up, a user channel another process holds).
        public static let busy = Code(rawValue: 6)
        /// The device does not exist.
        public static let noSuchDevice = Code(rawValue: 7)
        /// Waiting for the other side took too long.
        public static let timedOut = Code(rawValue: 8)
        /// The transport was closed before it was ready.
        public static let closed = Code(rawValue: 9)

        public var description: String {
            switch self {
            case .notRegistered: return "notRegistered"
            case .unsupported: return "unsupported"
            case .connectionFailed: return "connectionFailed"
            case .openFailed: return "openFailed"
            case .permissionDenied: return "permissionDenied"
            case .busy: return "busy"
            case .noSuchDevice: return "noSuchDevice"
            case .timedOut: return "timedOut"
            case .closed: return "closed"
            default: return "code \(rawValue)"
            }
        }
    }

    public var code: Code
    /// The whole message, starting with the transport it concerns.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// An error with this code, for comparing.
    public init(_ code: Code) { self.init(code, "") }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { message }
}
