/// A transport named by a spec string, the one syntax used everywhere a controller is chosen (`--transport`,
/// `BLE_TRANSPORT`, tests).
///
/// The accepted forms (`TransportSpec.acceptedForms`):
///
/// | spec | meaning |
/// |---|---|
/// | `virtual` | a virtual controller on a simulated radio |
/// | `tcp-client:HOST:PORT` | H4 over TCP, we connect to a controller that listens (Bumble, RootCanal on 6402) |
/// | `tcp-server:HOST:PORT` | H4 over TCP, we listen and the controller connects (PORT 0: any free port) |
/// | `serial:DEVICE[,BAUD[,rtscts]]` | H4 over a UART (termios raw mode; BAUD defaults to 115200; `rtscts` turns on hardware flow control) |
/// | `hci-socket:N` | the Linux HCI user channel of `hciN` |
/// | `unix:PATH` | H4 over a Unix-domain stream socket, we connect to a controller listening at `PATH` (the `ble` tool's shared room) |
///
/// An IPv6 host goes in brackets (`tcp-client:[::1]:9000`). `description` prints the canonical spec, which parses
/// back to an equal value (a serial spec always prints its baud rate).
public enum TransportSpec: Sendable, Hashable, CustomStringConvertible {
    /// The default baud rate of `serial:` when none is given.
    public static let defaultBaudRate = 115_200

    /// A virtual controller on a simulated radio.
    case virtual
    /// H4 over TCP: connect to `host:port` (1...65535), where the controller listens.
    case tcpClient(host: String, port: Int)
    /// H4 over TCP: listen on `host:port` (0...65535, 0 picks a free port) for one controller to connect.
    case tcpServer(host: String, port: Int)
    /// H4 over a UART at `baudRate` bits per second, with RTS/CTS hardware flow control if `rtsCts`.
    case serial(device: String, baudRate: Int, rtsCts: Bool)
    /// The Linux HCI user channel of controller `hci<index>` (0...65534).
    case hciSocket(index: Int)
    /// H4 over a Unix-domain stream socket: connect to the controller listening at `path`.
    case unix(path: String)

    /// The longest socket path the system takes (`sun_path` holds 108 bytes with its terminating zero).
    public static let unixPathLimit = 107

    /// The kinds a spec can name: the text before the first `:`.
    ///
    /// An open set, so that a registry can also hold kinds this module does not parse arguments for.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }

        public static let virtual: Kind = "virtual"
        public static let tcpClient: Kind = "tcp-client"
        public static let tcpServer: Kind = "tcp-server"
        public static let serial: Kind = "serial"
        public static let hciSocket: Kind = "hci-socket"
        public static let unix: Kind = "unix"

        /// Every kind a spec string can name, in the order `acceptedForms` lists them.
        public static let all: [Kind] = [.virtual, .tcpClient, .tcpServer, .serial, .hciSocket, .unix]

        public var description: String { rawValue }
    }

    /// The accepted forms, as error messages and help texts show them.
    public static let acceptedForms =
        "virtual, tcp-client:HOST:PORT, tcp-server:HOST:PORT, serial:DEVICE[,BAUD[,rtscts]], hci-socket:N or unix:PATH"

    /// This spec's kind.
    public var kind: Kind {
        switch self {
        case .virtual: return .virtual
        case .tcpClient: return .tcpClient
        case .tcpServer: return .tcpServer
        case .serial: return .serial
        case .hciSocket: return .hciSocket
        case .unix: return .unix
        }
    }

    /// The canonical spec string.
    public var description: String {
        switch self {
        case .virtual:
            return "virtual"
        case .tcpClient(let host, let port):
            return "tcp-client:\(Self.printHost(host)):\(port)"
        case .tcpServer(let host, let port):
            return "tcp-server:\(Self.printHost(host)):\(port)"
        case .serial(let device, let baudRate, let rtsCts):
            return "serial:\(device),\(baudRate)" + (rtsCts ? ",rtscts" : "")
        case .hciSocket(let index):
            return "hci-socket:\(index)"
        case .unix(let path):
            return "unix:\(path)"
        }
    }

    /// Parses a spec string; surrounding white space is ignored (an environment variable read from a file).
    ///
    /// - Throws: `TransportSpecError`, whose message says what is wrong and lists the accepted forms.
    public init(parsing text: String) throws(TransportSpecError) {
        let spec = Self.trimmed(text)
        func fail(_ code: TransportSpecError.Code, _ problem: String) -> TransportSpecError {
            TransportSpecError(code, spec: spec, problem: problem)
        }
        guard !spec.isEmpty else { throw fail(.empty, "the spec is empty") }

        let kindText: Substring
        let arguments: Substring?
        if let colon = spec.firstIndex(of: ":") {
            kindText = spec[..<colon]
            arguments = spec[spec.index(after: colon)...]
        } else {
            kindText = spec[...]
            arguments = nil
        }

        switch Kind(rawValue: String(kindText)) {
        case .virtual:
            guard arguments == nil else { throw fail(.unexpectedArgument, "virtual takes no arguments") }
            self = .virtual

        case .tcpClient, .tcpServer:
            let isClient = kindText == Kind.tcpClient.rawValue
            let form = isClient ? "tcp-client:HOST:PORT" : "tcp-server:HOST:PORT"
            guard let arguments, !arguments.isEmpty else {
                throw fail(.missingArgument, "\(kindText) needs a host and a port (\(form))")
            }
            let (host, portText) = try Self.splitHostPort(arguments, form: form, fail: fail)
            guard let port = Self.decimal(portText), port <= 65535 else {
                throw fail(.invalidPort, "'\(portText)' is not a TCP port (0...65535)")
            }
            if isClient {
                guard port != 0 else { throw fail(.invalidPort, "tcp-client cannot connect to port 0") }
                self = .tcpClient(host: host, port: port)
            } else {
                self = .tcpServer(host: host, port: port)
            }

        case .serial:
            guard let arguments, !arguments.isEmpty else {
                throw fail(.missingArgument, "serial needs a device (serial:DEVICE[,BAUD[,rtscts]])")
            }
            let fields = arguments.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count <= 3 else {
                throw fail(.unexpectedArgument, "serial takes at most a device, a baud rate and 'rtscts'")
            }
            let device = String(fields[0])
            guard !device.isEmpty else { throw fail(.missingArgument, "serial needs a device before the baud rate") }
            var baudRate = Self.defaultBaudRate
            if fields.count >= 2 {
                guard let rate = Self.decimal(fields[1]), rate > 0, rate <= 100_000_000 else {
                    throw fail(.invalidBaudRate, "'\(fields[1])' is not a baud rate (a positive number such as 115200)")
                }
                baudRate = rate
            }
            var rtsCts = false
            if fields.count == 3 {
                guard fields[2] == "rtscts" else {
                    throw fail(.invalidOption, "'\(fields[2])' is not a serial option (the only one is 'rtscts')")
                }
                rtsCts = true
            }
            self = .serial(device: device, baudRate: baudRate, rtsCts: rtsCts)

        case .hciSocket:
            guard let arguments, !arguments.isEmpty else {
                throw fail(.missingArgument, "hci-socket needs a controller index (hci-socket:0 for hci0)")
            }
            // `hci0` is what hciconfig prints; accept it as the index it names.
            let digits = arguments.hasPrefix("hci") ? arguments.dropFirst(3) : arguments
            guard let index = Self.decimal(digits), index <= 0xFFFE else {
                throw fail(.invalidIndex, "'\(arguments)' is not a controller index (0...65534, as in hci0)")
            }
            self = .hciSocket(index: index)

        case .unix:
            guard let arguments, !arguments.isEmpty else {
                throw fail(.missingArgument, "unix needs the socket's path (unix:PATH)")
            }
            guard arguments.utf8.count <= Self.unixPathLimit else {
                throw fail(
                    .invalidPath,
                    "the socket path is \(arguments.utf8.count) bytes, longer than the system's \(Self.unixPathLimit)")
            }
            self = .unix(path: String(arguments))

        default:
            throw fail(.unknownKind, "'\(kindText)' is not a transport kind")
        }
    }

    // MARK: - Parsing helpers

    private static func trimmed(_ text: String) -> String {
        var scalars = Substring(text)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }

    /// A run of ASCII digits (no sign, no spaces) as a number, or nil.
    private static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 9, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text)
    }

    /// Splits `HOST:PORT` or `[IPV6]:PORT`.
    private static func splitHostPort(
        _ text: Substring, form: String,
        fail: (TransportSpecError.Code, String) -> TransportSpecError
    ) throws(TransportSpecError) -> (String, Substring) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw fail(.invalidHost, "the IPv6 address has no closing ']' (\(form), e.g. [::1]:9000)")
            }
            let host = text[text.index(after: text.startIndex)..<close]
            guard !host.isEmpty else { throw fail(.invalidHost, "the host in brackets is empty") }
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else {
                throw fail(.missingArgument, "a port must follow the bracketed host (\(form))")
            }
            return (String(host), rest.dropFirst())
        }
        guard let colon = text.lastIndex(of: ":") else {
            throw fail(.missingArgument, "no port after the host (\(form))")
        }
        let host = text[..<colon]
        guard !host.isEmpty else { throw fail(.invalidHost, "the host is empty (\(form))") }
        guard !host.contains(":") else {
            throw fail(.invalidHost, "an IPv6 host goes in brackets, e.g. [::1]:9000")
        }
        return (String(host), text[text.index(after: colon)...])
    }

    private static func printHost(_ host: String) -> String {
        host.contains(":") ? "[\(host)]" : host
    }
}

/// A spec string that does not name a transport. The message says what is wrong and lists the accepted forms.
/// Equal when the codes are equal.
public struct TransportSpecError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong with the spec.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// Nothing but white space.
        public static let empty = Code(rawValue: 1)
        /// The text before the first `:` is not a kind this module knows.
        public static let unknownKind = Code(rawValue: 2)
        /// A required part (host, port, device, index) is absent.
        public static let missingArgument = Code(rawValue: 3)
        /// A part the kind does not take is present.
        public static let unexpectedArgument = Code(rawValue: 4)
        /// The host is empty, or an IPv6 address is not bracketed.
        public static let invalidHost = Code(rawValue: 5)
        /// The port is not a number in range.
        public static let invalidPort = Code(rawValue: 6)
        /// The baud rate is not a positive number.
        public static let invalidBaudRate = Code(rawValue: 7)
        /// A serial option other than `rtscts`.
        public static let invalidOption = Code(rawValue: 8)
        /// The HCI controller index is not a number in range.
        public static let invalidIndex = Code(rawValue: 9)
        /// A socket path too long for the system.
        public static let invalidPath = Code(rawValue: 10)

        public var description: String {
            switch self {
            case .empty: return "empty"
            case .unknownKind: return "unknownKind"
            case .missingArgument: return "missingArgument"
            case .unexpectedArgument: return "unexpectedArgument"
            case .invalidHost: return "invalidHost"
            case .invalidPort: return "invalidPort"
            case .invalidBaudRate: return "invalidBaudRate"
            case .invalidOption: return "invalidOption"
            case .invalidIndex: return "invalidIndex"
            case .invalidPath: return "invalidPath"
            default: return "code \(rawValue)"
            }
        }
    }

    public var code: Code
    /// The spec as given (trimmed).
    public var spec: String
    /// What is wrong, in a few words.
    public var problem: String

    public init(_ code: Code, spec: String, problem: String) {
        self.code = code
        self.spec = spec
        self.problem = problem
    }

    /// An error with this code, for comparing (`#expect(throws: TransportSpecError(.invalidPort))`).
    public init(_ code: Code) { self.init(code, spec: "", problem: "") }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        // The problem may already quote the whole spec ("'garbage' is not a transport kind"): say it once.
        if problem.contains("'\(spec)'") { return "\(problem). Use \(TransportSpec.acceptedForms)" }
        return "'\(spec)' is not a transport spec: \(problem). Use \(TransportSpec.acceptedForms)"
    }
}
