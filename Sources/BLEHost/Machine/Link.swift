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

/// The machine's links by handle, a value like the rest of the machine.
///
/// A dictionary of links would do, but `links[handle]?.field = x` on one copies the whole `Link` out and back
/// in (the standard library's optional `_modify` moves the value into an `Optional` and initialises the storage
/// again from a copy of it), and a `Link` holds a dozen machines: a streaming link paid for several such copies
/// per notification, a quarter of its profile. Here each link sits in a box of its own, copied on write (a
/// copy of the machine shares the boxes until one side changes a link), so the same expression changes the
/// stored link in place. The boxes are found by the handle's value, not by hashing it (a handle has 12 bits).
///
/// Reading and changing go through addresses, not coroutines: a `_read` or `_modify` whose frame does not fit
/// the caller's small buffer is allocated on the heap, and the table's were 16 of a notification's 77
/// allocations.
struct LinkTable: Sendable {
    /// One link, at a fixed address for the box's life. Shared only between copies of a table, and then
    /// never changed: a change to a shared box goes to a new one first.
    private final class Box: @unchecked Sendable {
        let link: UnsafeMutablePointer<Link?>
        init(_ value: Link?) {
            link = .allocate(capacity: 1)
            link.initialize(to: value)
        }
        deinit {
            link.deinitialize(count: 1)
            link.deallocate()
        }
    }

    /// What a missing handle reads: nil, never written.
    private nonisolated(unsafe) static let noLink: UnsafeMutablePointer<Link?> = {
        let pointer = UnsafeMutablePointer<Link?>.allocate(capacity: 1)
        pointer.initialize(to: nil)
        return pointer
    }()

    /// By handle value; as long as the highest handle in use needs.
    private var boxes: [Box?] = []
    private(set) var count = 0

    /// The link with this handle, or nil. Changed in place (`links[handle]?.pendingIndications += 1`); a change
    /// through a missing handle does nothing. A link comes with `insert(_:for:)` and goes with
    /// `removeValue(forKey:)`: assigning to the subscript is not how (a missing handle's address is a shared nil).
    subscript(handle: ConnectionHandle) -> Link? {
        unsafeAddress { UnsafePointer(box(handle)?.link ?? Self.noLink) }
        unsafeMutableAddress { uniqueBox(handle)?.link ?? Self.noLink }
    }

    /// Adds `link` under `handle`, replacing any link there.
    mutating func insert(_ link: Link, for handle: ConnectionHandle) {
        let index = Int(handle.rawValue)
        if index >= boxes.count { boxes.append(contentsOf: repeatElement(nil, count: index + 1 - boxes.count)) }
        if boxes[index] == nil { count += 1 }
        boxes[index] = Box(link)
    }

    private func box(_ handle: ConnectionHandle) -> Box? {
        let index = Int(handle.rawValue)
        return index < boxes.count ? boxes[index] : nil
    }

    /// The box of `handle`'s link, this table's own.
    private mutating func uniqueBox(_ handle: ConnectionHandle) -> Box? {
        let index = Int(handle.rawValue)
        guard index < boxes.count, boxes[index] != nil else { return nil }
        if !isKnownUniquelyReferenced(&boxes[index]!) {
            boxes[index] = Box(boxes[index]!.link.pointee)
        }
        return boxes[index]
    }

    /// Whether there is a link with this handle (`links[handle] != nil` copied the link to compare it).
    func contains(_ handle: ConnectionHandle) -> Bool { box(handle) != nil }

    @discardableResult
    mutating func removeValue(forKey handle: ConnectionHandle) -> Link? {
        let index = Int(handle.rawValue)
        guard index < boxes.count, let box = boxes[index] else { return nil }
        boxes[index] = nil
        count -= 1
        return box.link.pointee
    }

    /// Whether any handle in use satisfies `predicate` (which reads its link through the subscript, in place):
    /// `keys.contains` made the list of handles first.
    func containsHandle(where predicate: (ConnectionHandle) -> Bool) -> Bool {
        for index in boxes.indices where boxes[index] != nil {
            if predicate(ConnectionHandle(UInt16(index))) { return true }
        }
        return false
    }

    /// The handles in use, lowest first.
    var keys: [ConnectionHandle] {
        boxes.indices.compactMap { boxes[$0] == nil ? nil : ConnectionHandle(UInt16($0)) }
    }
    var values: some Sequence<Link> { boxes.lazy.compactMap { $0?.link.pointee } }
    var isEmpty: Bool { count == 0 }
}
