import BLEATT
import BLECore
import BLEHCI
import BLESMP
import BLETransport
import DequeModule
import Synchronization

/// Tunables of a host. The defaults suit the virtual controller and common dongles.
public struct HostConfiguration: Sendable {
    /// How long a command may wait for Command Complete/Status before its credit is reclaimed and it fails.
    public var commandTimeout: Duration = .seconds(2)
    /// How long a command of the first initialisation (HCI_Reset and the start-up sequence when the transport
    /// opens) may wait: a controller just opened may take a while to come up (an emulator making a device for a
    /// new connection, a dongle resetting), and the open fails if it runs out. Linux gives its initialisation
    /// 10 s likewise. A restart after a hardware error keeps `commandTimeout`: the controller was answering.
    public var startupCommandTimeout: Duration = .seconds(10)
    /// The ATT transaction timeout (Core Spec 5.4, Vol 3, Part F, 3.3.3): 30 s.
    public var attTransactionTimeout: Duration = .seconds(30)
    /// The ATT_MTU this host offers in an MTU exchange, 23...517.
    public var preferredMTU: Int = 517
    /// The LL payload this host asks for with LE Set Data Length after connecting, 27...251.
    public var preferredDataLength: Int = 251
    /// The PHY this host prefers on its links (nil: the controller's choice). It is set as the default PHY at
    /// start-up, so a peer's PHY request meets it, and a central asks for it with LE Set PHY after connecting
    /// (Vol 6, Part B, 5.1.10).
    public var preferredPHY: LinkPHY?
    /// What a central asks for in LE Create Connection: interval range, peripheral latency, supervision timeout.
    public var connectionParameters = ConnectionParameters()
    /// Whether scans send scan requests to scannable advertisers (active, the default, as a phone scans) or only
    /// listen (passive: no scan responses; Vol 6, Part B, 4.4.3).
    public var activeScanning = true
    /// Write Commands queued in the host per link before `canSendWriteWithoutResponse` turns false. These
    /// wait behind what the controller's LE ACL buffers already hold, so an application sees the refusal
    /// only after the controller's buffers and this queue are both full.
    public var writeWithoutResponseQueueDepth: Int = 8
    /// Notifications queued in the host per link before `notify` refuses (`updateValue` returns false),
    /// behind what the controller's LE ACL buffers already hold. After a refusal, `.readyToNotify` comes when
    /// every link's queue (notifications and indications) is down to half this depth (at most `depth / 2`).
    public var notificationQueueDepth: Int = 8
    /// The GAP Device Name this host's GATT server shows.
    public var deviceName: String = "swift-ble"
    /// The GAP Appearance value (Assigned Numbers 2.6), 0 = unknown.
    public var appearance: UInt16 = 0
    /// Whether this host's GATT server has a Database Hash (false: as a server older than Core 5.1).
    public var servesDatabaseHash = true
    /// Seed for the host's own random choices (the random static address when the controller has no public
    /// address). Real hosts pass entropy; simulations pass something derived from the radio's seed.
    public var randomSeed: UInt64 = 0x5EED
    /// How this host pairs; nil: it does not (a Pairing Request is answered with Pairing Not Supported and an
    /// LTK request with a negative reply).
    public var security: HostSecurityConfiguration?
    /// LE privacy (Core Spec 5.4, Vol 3, Part C, 10.7): the host advertises, scans and connects from resolvable
    /// private addresses it generates from its IRK and renews every `rotationPeriod`, and distributes its IRK
    /// and identity address when it bonds; nil: it uses its public or static address.
    public var privacy: HostPrivacyConfiguration?

    public init() {}
}

/// How a host keeps its address private (Core Spec 5.4, Vol 3, Part C, 10.7; Vol 6, Part B, 1.3.2.2).
public struct HostPrivacyConfiguration: Sendable, Hashable {
    /// The host's Identity Resolving Key: 16 octets, least significant first (as Identity Information carries
    /// it). Peers that bonded with it resolve this host's private addresses with it.
    public var resolvingKey: [UInt8]
    /// The identity address distributed with the IRK: a public address or a static random one; nil: the
    /// controller's public address, or (without one) the static random address the host chooses.
    public var identityAddress: BluetoothAddress?
    /// How long one resolvable private address is used before the host generates the next: T_GAP(private_addr_int),
    /// 15 minutes as the spec recommends (Vol 3, Part C, Appendix A).
    public var rotationPeriod: Duration

    public init(
        resolvingKey: [UInt8], identityAddress: BluetoothAddress? = nil, rotationPeriod: Duration = .seconds(900)
    ) {
        self.resolvingKey = resolvingKey
        self.identityAddress = identityAddress
        self.rotationPeriod = rotationPeriod
    }
}

/// A peer's identity address and the IRK that resolves its private addresses: an entry of the host's resolving
/// list (kept by the host, since neither our controller nor Bumble's resolves addresses).
public struct ResolvableIdentity: Sendable, Hashable {
    public var address: BluetoothAddress
    /// 16 octets, least significant first.
    public var resolvingKey: [UInt8]

    public init(address: BluetoothAddress, resolvingKey: [UInt8]) {
        self.address = address
        self.resolvingKey = resolvingKey
    }
}

/// How a host pairs (the Security Manager, Core Spec 5.4, Vol 3, Part H).
public struct HostSecurityConfiguration: Sendable, Hashable {
    public var ioCapability: IOCapability = .noInputNoOutput
    /// Keys are kept (the layer above stores them).
    public var bonding = true
    /// MITM protection is required: a pairing that cannot give it fails.
    public var mitm = false
    public var secureConnections = true
    public var secureConnectionsOnly = false
    /// The IRK and identity address this host distributes, if it has one.
    public var identity: SMPPairing.Identity?
    /// The keys this host lists to send, and asks of the peer (`SMPPairing.Configuration`'s: nil, the default,
    /// follows `bonding`).
    public var distributedKeys: KeyDistribution?
    public var requestedKeys: KeyDistribution?
    /// At least 16 octets of entropy for the pairings' random values (nonces, passkeys, keys): a real host passes
    /// its system's secure random octets; a simulation passes something derived from its seed.
    public var seed: [UInt8]

    public init(seed: [UInt8]) {
        self.seed = seed
    }
}

/// What a pairing asks the user (through the layer above).
public enum PairingPrompt: Sendable, Hashable {
    /// Show this six-digit passkey; the peer's user types it.
    case displayPasskey(UInt32)
    /// Ask for the passkey the peer shows; answer with `.passkey`.
    case enterPasskey
    /// Ask the user to accept: Just Works (no value) or Numeric Comparison (the value both sides show); answer
    /// with `.accept`.
    case confirm(numericValue: UInt32?)
}

/// The user's answer to a `PairingPrompt`.
public enum PairingAnswer: Sendable, Hashable {
    case accept(Bool)
    /// The passkey typed, or nil when the user cancelled.
    case passkey(UInt32?)
}

/// What went wrong in the host, and how far the failure reaches.
///
/// Two errors are equal when their codes are equal; a refusal's code includes the peer's status (HCI or ATT).
/// The message and where the error was made are diagnostics.
public struct HostError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong. An open set: a `switch` over codes needs a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case hci(HCIStatus)
            case att(ATTErrorCode)
            case commandTimeout, transactionTimeout, disconnected, transportClosed, invalidState, invalidParameters
            case protocolError, unsupported, cancelled, shutDown, pairingFailed, controllerReset
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The controller answered a command with this status.
        public static func hci(_ status: HCIStatus) -> Code { Code(.hci(status)) }
        /// The peer answered an ATT request with this error (the failure reaches that request only).
        public static func att(_ code: ATTErrorCode) -> Code { Code(.att(code)) }
        /// The controller did not answer an HCI command within the command timeout (its credit is reclaimed).
        public static let commandTimeout = Code(.commandTimeout)
        /// The peer did not answer within the ATT transaction timeout (the bearer is then unusable).
        public static let transactionTimeout = Code(.transactionTimeout)
        /// The link went down while the operation was pending.
        public static let disconnected = Code(.disconnected)
        /// The transport to the controller closed.
        public static let transportClosed = Code(.transportClosed)
        /// The operation does not fit the current state (not connected, already scanning, ...).
        public static let invalidState = Code(.invalidState)
        /// Bad arguments (a value too long, an unknown handle, ...).
        public static let invalidParameters = Code(.invalidParameters)
        /// The peer broke the protocol (an unexpected or malformed PDU).
        public static let protocolError = Code(.protocolError)
        /// The controller does not support what was asked.
        public static let unsupported = Code(.unsupported)
        /// A later request overtook this one before it took effect (a scan stopped before it started).
        public static let cancelled = Code(.cancelled)
        /// The host was shut down (`HostDriver.shutDown`) while the operation was pending, or before it came.
        public static let shutDown = Code(.shutDown)
        /// Pairing failed (the message says how: a reason sent or received, the timer, the encryption).
        public static let pairingFailed = Code(.pairingFailed)
        /// The controller reported a hardware error and was reset: what it was doing is gone.
        public static let controllerReset = Code(.controllerReset)

        /// The controller's status of an ``hci(_:)`` code.
        public var hciStatus: HCIStatus? {
            if case .hci(let status) = base { return status }
            return nil
        }

        /// The peer's ATT code of an ``att(_:)`` code.
        public var attErrorCode: ATTErrorCode? {
            if case .att(let code) = base { return code }
            return nil
        }

        public var description: String {
            switch base {
            case .hci(let status): return "hci(\(status))"
            case .att(let code): return "att(\(code))"
            default: return "\(base)"
            }
        }
    }

    public let code: Code
    private let diagnostics: Diagnostics

    private struct Diagnostics: Sendable {
        var message: String
        var file: String
        var line: UInt
    }

    public init(_ code: Code, _ message: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.diagnostics = Diagnostics(message: message, file: file, line: line)
    }

    /// What happened, in words.
    public var message: String { diagnostics.message }
    /// The controller's status, when the controller refused.
    public var hciStatus: HCIStatus? { code.hciStatus }
    /// The peer's ATT code, when the peer refused.
    public var attErrorCode: ATTErrorCode? { code.attErrorCode }

    public var description: String { diagnostics.message }
    public var debugDescription: String {
        "HostError.\(code): \(diagnostics.message) [\(diagnostics.file):\(diagnostics.line)]"
    }
    public static func == (a: HostError, b: HostError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// What the controller told the host about itself during initialisation.
public struct ControllerInfo: Sendable, Hashable {
    /// The address the controller uses now (with privacy on, the current resolvable private address).
    public var address: BluetoothAddress
    /// With privacy on, the identity address behind `address` (public or static random); nil otherwise.
    public var identityAddress: BluetoothAddress?
    public var hciVersion: UInt8 = 0
    public var manufacturer: UInt16 = 0
    /// LE ACL data packet length and count the host fragments and paces to.
    public var leBufferLength: Int = 27
    public var leBufferCount: Int = 1
    public var leFeatures: UInt64 = 0
    public var supportedCommands: [UInt8] = []
}

/// One advertising report, as the host hands it up.
public struct AdvertisingReport: Sendable, Hashable {
    public enum Kind: UInt8, Sendable, Hashable {
        case connectableUndirected = 0  // ADV_IND
        case connectableDirected = 1  // ADV_DIRECT_IND
        case scannableUndirected = 2  // ADV_SCAN_IND
        case nonConnectableUndirected = 3  // ADV_NONCONN_IND
        case scanResponse = 4  // SCAN_RSP
        public var isConnectable: Bool { self == .connectableUndirected || self == .connectableDirected }
    }
    public var kind: Kind
    public var address: BluetoothAddress
    public var rssi: Int?
    public var data: [UInt8]

    public init(kind: Kind, address: BluetoothAddress, rssi: Int?, data: [UInt8]) {
        self.kind = kind
        self.address = address
        self.rssi = rssi
        self.data = data
    }
}

/// The role this host plays on a link.
public enum LinkRole: Sendable, Hashable {
    case central
    case peripheral
}

/// An LE physical layer (Core Spec 5.4, Vol 6, Part A, 3.2).
public enum LinkPHY: Sendable, Hashable, CustomStringConvertible {
    case le1M
    case le2M
    /// LE Coded, long range (asked for with S=8 coding).
    case leCoded

    var preferences: HCIPHYPreferences {
        switch self {
        case .le1M: .le1M
        case .le2M: .le2M
        case .leCoded: .leCoded
        }
    }

    init?(_ phy: HCIPHY) {
        switch phy {
        case .le1M: self = .le1M
        case .le2M: self = .le2M
        case .leCoded: self = .leCoded
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .le1M: "LE 1M"
        case .le2M: "LE 2M"
        case .leCoded: "LE Coded"
        }
    }
}

/// A link: as it was established, then as the LL procedures changed it (connection update, PHY update, data
/// length change).
public struct LinkInfo: Sendable, Hashable {
    public var handle: ConnectionHandle
    public var role: LinkRole
    public var peer: BluetoothAddress
    /// Connection interval in units of 1.25 ms.
    public var interval: UInt16
    public var latency: UInt16
    /// Supervision timeout in units of 10 ms.
    public var supervisionTimeout: UInt16
    /// The PHYs this side transmits and receives on.
    public var txPHY: LinkPHY = .le1M
    public var rxPHY: LinkPHY = .le1M
    /// The LL payloads each direction carries at most (27 until a data length update).
    public var maxTxOctets = 27
    public var maxRxOctets = 27
    /// Whether the link is encrypted now (the last Encryption Change or Key Refresh said so).
    public var encrypted = false

    public init(
        handle: ConnectionHandle, role: LinkRole, peer: BluetoothAddress, interval: UInt16, latency: UInt16,
        supervisionTimeout: UInt16
    ) {
        self.handle = handle
        self.role = role
        self.peer = peer
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
    }
}

/// Scan settings (Core Spec 5.4, Vol 4, Part E, 7.8.10).
public struct ScanParameters: Sendable, Hashable {
    public var active: Bool = true
    /// Units of 0.625 ms.
    public var interval: UInt16 = 0x0060  // 60 ms
    /// Units of 0.625 ms.
    public var window: UInt16 = 0x0030  // 30 ms
    public var filterDuplicates: Bool = false
    public init(active: Bool = true, interval: UInt16 = 0x0060, window: UInt16 = 0x0030, filterDuplicates: Bool = false)
    {
        self.active = active
        self.interval = interval
        self.window = window
        self.filterDuplicates = filterDuplicates
    }
}

/// Advertising settings (Core Spec 5.4, Vol 4, Part E, 7.8.5).
public struct AdvertisingParameters: Sendable, Hashable {
    public enum Kind: UInt8, Sendable, Hashable {
        case connectable = 0  // ADV_IND
        case scannable = 2  // ADV_SCAN_IND
        case nonConnectable = 3  // ADV_NONCONN_IND
    }
    public var kind: Kind = .connectable
    /// Units of 0.625 ms (0x00A0 = 100 ms).
    public var intervalMin: UInt16 = 0x00A0
    public var intervalMax: UInt16 = 0x00A0
    public init(kind: Kind = .connectable, intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00A0) {
        self.kind = kind
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
    }
}

/// Parameters for a new connection (Core Spec 5.4, Vol 4, Part E, 7.8.12).
public struct ConnectionParameters: Sendable, Hashable {
    /// Units of 1.25 ms; 0x0018 = 30 ms, what phones commonly pick.
    public var intervalMin: UInt16 = 0x0018
    public var intervalMax: UInt16 = 0x0028
    public var latency: UInt16 = 0
    /// Units of 10 ms; 0x01F4 = 5 s.
    public var supervisionTimeout: UInt16 = 0x01F4
    public init(
        intervalMin: UInt16 = 0x0018, intervalMax: UInt16 = 0x0028, latency: UInt16 = 0,
        supervisionTimeout: UInt16 = 0x01F4
    ) {
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
    }
}
