import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import BLETransport
import DequeModule
import NIOCore
import Synchronization

/// Everything the host knows, guarded by its lock. Plain data and pure machines only.
struct HostCore {
    let configuration: HostConfiguration
    var info: ControllerInfo?
    var closed = false

    // HCI command flow (Core Spec 5.4, Vol 4, Part E, 4.4).
    var commandCredits = 1
    var commandQueue: Deque<QueuedCommand> = []
    var inFlight: [InFlightCommand] = []
    var commandSerial: UInt64 = 0
    /// Commands that timed out, by opcode: their answers, if they ever come, are discarded.
    var abandonedCommands: [HCIOpcode: Int] = [:]
    var timerSerial: UInt64 = 0

    // LE ACL flow (Vol 4, Part E, 4.1.1): credits are the controller's free LE ACL buffers.
    var aclLength = 27
    var aclTotal = 1
    var aclCredits = 1
    /// Links in the order they take turns sending.
    var linkOrder: [ConnectionHandle] = []
    var nextLinkTurn = 0
    var links: [ConnectionHandle: Link] = [:]

    // GAP.
    var scanning = false
    var advertising = false
    var initiating: BluetoothAddress?

    // GATT.
    var server: GATTServer
    var clientOperations: [GATTOperationID: @Sendable (Result<GATTResult, GATTError>) -> Void] = [:]
    var nextOperationID: UInt64 = 1
    var nextIndicationID: UInt64 = 1 << 62
    /// Subscribers refused by `notify` wait for room; when it frees up, `readyToNotify` follows.
    var notifyRefused = false

    init(configuration: HostConfiguration) {
        self.configuration = configuration
        self.server = GATTServer(
            database: GATTDatabase(
                deviceName: configuration.deviceName,
                appearance: configuration.appearance))
    }
}

/// How a command ended.
enum CommandOutcome: Sendable {
    case complete(HCIEvent.CommandComplete)
    case status(HCIEvent.CommandStatus)
    case failed(HostError)
}

struct QueuedCommand {
    var packet: HCICommandPacket
    var isAsync: Bool
    var complete: @Sendable (CommandOutcome) -> Void
}

struct InFlightCommand {
    var opcode: HCIOpcode
    var serial: UInt64
    var timer: (any ScheduledWork)?
    var complete: @Sendable (CommandOutcome) -> Void
}

/// One link and the machines that run on it.
struct Link {
    var info: LinkInfo
    var recombiner = L2CAPRecombiner()
    var signaling: L2CAPSignalingChannel
    var bearer: ATTBearer
    var client: GATTClient
    /// ACL packets waiting for a controller buffer, and what each is (for queue-depth accounting).
    var outgoing: Deque<OutgoingPacket> = []
    /// ACL packets the controller holds for this link (not yet reported by Number Of Completed Packets).
    var inFlight = 0
    /// Current LL payload limit, from LE Data Length Change.
    var maxTxOctets = 27
    /// Write Commands queued in `outgoing` (their last fragment not yet handed to the controller).
    var queuedWriteCommands = 0
    var writeCommandsRefused = false
    var queuedNotifications = 0
    /// Indications handed to the bearer and not yet confirmed.
    var pendingIndications = 0
    var attTimers: [ATTTimer: TimerEntry] = [:]
    var signalingTimers: [L2CAPSignalingChannel.Timer: any ScheduledWork] = [:]

    init(info: LinkInfo, preferredMTU: Int) {
        self.info = info
        self.signaling = L2CAPSignalingChannel(role: info.role == .central ? .central : .peripheral)
        self.bearer = ATTBearer(localRxMTU: UInt16(clamping: preferredMTU))
        self.client = GATTClient(firstRequestID: 1)
    }
}

/// One ACL fragment waiting to go out.
struct OutgoingPacket {
    enum Kind { case other, writeCommand, notification }
    var packet: HCIACLDataPacket
    var kind: Kind
    /// Whether this is the last fragment of its PDU (the queue counters drop when it leaves).
    var isLast: Bool
}

/// A running timer and the serial that tells a stale expiry from the current one.
struct TimerEntry {
    var work: any ScheduledWork
    var serial: UInt64
}
