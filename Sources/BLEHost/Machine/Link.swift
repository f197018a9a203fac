import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import DequeModule

/// One link and the machines that run on it.
struct Link: Sendable {
    var info: LinkInfo
    var recombiner = L2CAPRecombiner()
    var signaling: L2CAPSignalingChannel
    var bearer: ATTBearer
    var client: GATTClient
    /// ACL fragments waiting for a controller buffer, and what each is (for queue-depth accounting).
    var outgoing: Deque<OutgoingFragment> = []
    /// ACL packets the controller holds for this link, oldest first (not yet reported by Number Of Completed
    /// Packets): for each, the operation waiting for its delivery, if any.
    var inFlight: Deque<HostOperationID?> = []
    /// Current LL payload limit, from LE Data Length Change.
    var maxTxOctets = 27
    /// Write Commands queued in `outgoing` (their last fragment not yet handed to the controller).
    var queuedWriteCommands = 0
    /// A Write Command was refused (or filled the queue): `.readyToWriteWithoutResponse` follows when it drains.
    var writeCommandsRefused = false
    var queuedNotifications = 0
    /// Indications handed to the bearer and not yet confirmed.
    var pendingIndications = 0
    /// The running timers of the bearer and the signalling channel, by the ids the machine gave them.
    var attTimers: [ATTTimer: HostTimerID] = [:]
    var signalingTimers: [L2CAPSignalingChannel.Timer: HostTimerID] = [:]
    /// Pairing and encryption on this link.
    var security = LinkSecurity()
    /// The addresses on the air when the link came up (`info.peer` is the peer's identity when it resolved).
    var peerAddress: BluetoothAddress
    var localAddress: BluetoothAddress

    init(
        info: LinkInfo, preferredMTU: Int, peerAddress: BluetoothAddress? = nil, localAddress: BluetoothAddress = .zero
    ) {
        self.info = info
        self.peerAddress = peerAddress ?? info.peer
        self.localAddress = localAddress
        self.signaling = L2CAPSignalingChannel(role: info.role == .central ? .central : .peripheral)
        self.bearer = ATTBearer(localRxMTU: UInt16(clamping: preferredMTU))
        self.client = GATTClient(firstRequestID: 1)
    }
}

/// One ACL fragment waiting to go out.
struct OutgoingFragment: Sendable {
    enum Kind: Sendable { case other, writeCommand, notification }
    var packet: HCIACLDataPacket
    var kind: Kind
    /// Whether this is the last fragment of its PDU (the queue counters drop when it leaves).
    var isLast: Bool
    /// On the last fragment: the operation completed once the controller reports the packet delivered.
    var delivery: HostOperationID? = nil
}

/// LE ACL flow control (Core Spec 5.4, Vol 4, Part E, 4.1.1): credits are the controller's free LE ACL
/// buffers; links take turns for them.
struct ACLFlow: Sendable {
    /// The controller's LE ACL buffer size: fragments are cut to it.
    var length = 27
    var total = 1
    var credits = 1
    /// Links in the order they take turns sending.
    var order: [ConnectionHandle] = []
    var nextTurn = 0
    /// Fragments queued on all links together: with none, a pump looks at no link (it runs after nearly every
    /// event, and most links of a large host have nothing to send).
    var queued = 0
}
