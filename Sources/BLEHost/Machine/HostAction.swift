import BLECore
import BLEGATT
import BLEHCI
import BLESMP

/// Names one request of the layer above, from the moment it is made to its one completion.
///
/// The driver hands out ids; the machine only carries them, so two requests never share one and a completion
/// can only reach the request it belongs to.
public struct HostOperationID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "op#\(rawValue)" }
}

/// Names one timer the machine started. A timer that fires after it was cancelled or restarted carries an id
/// the machine no longer knows, and is ignored.
public struct HostTimerID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "timer#\(rawValue)" }
}

/// A request of the layer above, carried into the machine with its operation id.
public enum HostRequest: Sendable, Hashable {
    /// Reset and initialise the controller; completes with `.controller(info)`.
    case start
    /// Send a raw HCI command; completes with `.command(answer)` (the caller decodes the return parameters).
    case command(HCICommandPacket)
    /// Scan with these parameters; completes when the controller scans, or fails.
    case startScan(ScanParameters)
    /// Stop scanning; completes when the controller has stopped.
    case stopScan
    /// Advertise; completes when the controller advertises.
    case startAdvertising(AdvertisingParameters, data: [UInt8], scanResponse: [UInt8])
    /// Stop advertising; completes when the controller has stopped.
    case stopAdvertising
    /// The peers to connect to now (every pending connect of the layer above), with these parameters; replaces
    /// the earlier list and completes at once. Each peer ends as `.connected` or `.connectionFailed`; one taken
    /// off the list is no longer initiated (see `ConnectMachine`).
    case setConnectTargets([BluetoothAddress], ConnectionParameters)
    /// Disconnect a link; completes when the controller accepted (`.disconnected` follows as an event).
    case disconnect(ConnectionHandle, reason: HCIStatus)
    /// Read a link's RSSI; completes with `.rssi(dBm)`.
    case readRSSI(ConnectionHandle)
    /// Run a GATT client procedure on a link; completes with `.gatt(result)`.
    case gatt(GATTOperation, on: ConnectionHandle)
    /// Central: pair; peripheral: send a Security Request. Completes with `.paired(result)` once the keys are
    /// distributed, or fails (`.pairingFailed`). Needs `HostConfiguration.security`.
    case pair(ConnectionHandle)
    /// Central: encrypt the link with a kept key; completes on Encryption Change.
    case encrypt(ConnectionHandle, key: SMPPairing.LongTermKey)
    /// The user's answer to a `.pairingPrompt`; completes at once.
    case answerPairing(ConnectionHandle, PairingAnswer)
    /// Peripheral: the answer to `.longTermKeyRequested` (nil: no key, a negative reply).
    case replyLongTermKey(ConnectionHandle, key: [UInt8]?)
    /// The peers whose private addresses the host resolves (replacing the earlier list); completes at once.
    /// Advertising reports and links from an address one of them resolves carry its identity address, and a
    /// connection to an identity address goes to the private address it was last heard from.
    case setResolvingList([ResolvableIdentity])
}

/// How the controller answered a raw command.
public enum HCICommandAnswer: Sendable, Hashable {
    case complete(HCIEvent.CommandComplete)
    case status(HCIEvent.CommandStatus)
}

/// What a request produced.
public enum HostOutput: Sendable, Hashable {
    case done
    case controller(ControllerInfo)
    case command(HCICommandAnswer)
    case rssi(Int)
    case gatt(GATTResult)
    case paired(SMPPairing.Result)
}

/// Something the host noticed that no request or event reports: the driver logs it (the machine holds no
/// logger). Nothing the host drops is dropped in silence.
public struct HostLogEntry: Sendable, Hashable {
    public enum Level: Sendable, Hashable { case debug, info, notice, warning, error }
    public var level: Level
    public var message: String
    /// The link it concerns, if any.
    public var connection: ConnectionHandle?
    /// The operation it concerns, if any.
    public var operation: HostOperationID?

    public init(
        _ level: Level, _ message: String, connection: ConnectionHandle? = nil, operation: HostOperationID? = nil
    ) {
        self.level = level
        self.message = message
        self.connection = connection
        self.operation = operation
    }
}

/// What the host dropped or gave up on, counted since it started (the log says each one).
public struct HostCounters: Sendable, Hashable {
    /// HCI events the controller sent that could not be decoded.
    public var malformedEvents = 0
    /// ACL data dropped: for a link the host does not know, or that did not reassemble.
    public var droppedACLPackets = 0
    /// HCI commands the controller did not answer in time.
    public var commandTimeouts = 0
    /// Answers that came for no command in flight (late answers to timed-out commands among them).
    public var unexpectedCommandAnswers = 0
    /// Write Commands our GATT server refused (a Write Command is never answered, so only this says so).
    public var refusedWriteCommands = 0
    /// Controller resets: after a Hardware Error, or after the controller stopped answering commands.
    public var controllerResets = 0
    /// Connections the controller reported on a handle already in use (the link it had was taken as lost).
    public var reusedConnectionHandles = 0

    public init() {}
}

/// What the machine asks its driver to do, in order.
public enum HostAction: Sendable, Hashable {
    /// Hand this packet to the transport.
    case send(HCIPacket)
    /// Start a timer; feed `timerFired(id)` when it expires.
    case startTimer(HostTimerID, after: Duration)
    /// Cancel a timer (it may still fire: the machine then ignores it).
    case cancelTimer(HostTimerID)
    /// The request with this id is over.
    case complete(HostOperationID, Result<HostOutput, HostError>)
    /// Tell the layer above.
    case emit(HostEvent)
    /// Log this.
    case log(HostLogEntry)
}
