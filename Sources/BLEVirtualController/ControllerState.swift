import BLECore
import BLETransport
import DequeModule
import HeapModule

/// Legacy advertising PDU types, as LE Set Advertising Parameters numbers them (`Advertising_Type`).
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.5; Vol 6, Part B, 2.3.1.
enum LegacyAdvertisingType: UInt8 {
    case advInd = 0x00
    case advDirectIndHighDuty = 0x01
    case advScanInd = 0x02
    case advNonconnInd = 0x03
    case advDirectIndLowDuty = 0x04

    var isConnectable: Bool { self == .advInd || isDirected }
    var isScannable: Bool { self == .advInd || self == .advScanInd }
    var isDirected: Bool { self == .advDirectIndHighDuty || self == .advDirectIndLowDuty }

    /// The advertising PDU's type in its header (Vol 6, Part B, 2.3): ADV_IND 0, ADV_DIRECT_IND 1,
    /// ADV_NONCONN_IND 2, ADV_SCAN_IND 6.
    var pduType: UInt8 {
        switch self {
        case .advInd: return 0x0
        case .advDirectIndHighDuty, .advDirectIndLowDuty: return 0x1
        case .advNonconnInd: return 0x2
        case .advScanInd: return 0x6
        }
    }

    /// `Event_Type` of the LE Advertising Report for this PDU (Vol 4, Part E, 7.7.65.2).
    var reportEventType: UInt8 {
        switch self {
        case .advInd: return 0x00
        case .advDirectIndHighDuty, .advDirectIndLowDuty: return 0x01
        case .advScanInd: return 0x02
        case .advNonconnInd: return 0x03
        }
    }
}

/// An address as the link layer compares it: 6 bytes in printed order plus "is random".
struct LinkAddress: Hashable {
    var bytes: [UInt8]
    var isRandom: Bool

    /// HCI `Address_Type` (0 public, 1 random).
    var hciType: UInt8 { isRandom ? 1 : 0 }
    var littleEndian: [UInt8] { bytes.reversed() }

    static let none = LinkAddress(bytes: [0, 0, 0, 0, 0, 0], isRandom: false)
}

struct AdvertisingParameters {
    var intervalMin: UInt16 = 0x0800  // units of 0.625 ms (1.28 s default)
    var intervalMax: UInt16 = 0x0800
    var type: LegacyAdvertisingType = .advInd
    var ownAddressType: UInt8 = 0
    var peerAddress = LinkAddress.none
    var channelMap: UInt8 = 0x07
    var filterPolicy: UInt8 = 0
}

struct ScanParameters {
    var active = false
    var interval: UInt16 = 0x0010  // units of 0.625 ms
    var window: UInt16 = 0x0010
    var ownAddressType: UInt8 = 0
    var filterPolicy: UInt8 = 0
}

struct InitiatingParameters {
    var scanInterval: UInt16
    var scanWindow: UInt16
    var useAcceptList: Bool
    var peer: LinkAddress
    var ownAddressType: UInt8
    var intervalMin: UInt16  // units of 1.25 ms
    var intervalMax: UInt16
    var latency: UInt16
    var supervisionTimeout: UInt16  // units of 10 ms
    var start: Int64
}

/// What the duplicate filter remembers during one scan-enable session.
struct SeenKey: Hashable {
    var address: LinkAddress
    var eventType: UInt8
}

/// Everything one virtual controller knows: its HCI configuration and its link-layer state machines
/// (advertising, scanning, initiating), plus the connection handles of its links.
///
/// Lives inside the radio's world, under its lock; never touched from outside it.
final class ControllerState {
    let index: Int
    let name: String
    let pipe: HCIPipe
    /// The identity this controller was built with: a public address (reported by Read BD_ADDR) or a random
    /// static one (preloaded as the random address, as if programmed at the factory).
    let identity: BluetoothAddress
    @exclusivity(unchecked) var position: RadioPosition
    @exclusivity(unchecked) var txPower: Int8
    let aclBufferLength: Int
    let aclBufferCount: Int
    /// Links this controller can hold at once, in both roles (Connection Limit Exceeded beyond).
    let maximumConnections: Int
    /// How long HCI packets take to and from the host, and when each direction is next free.
    let hostLink: HostControllerLink
    @exclusivity(unchecked) var hostToControllerFree: Int64 = 0
    @exclusivity(unchecked) var controllerToHostFree: Int64 = 0
    /// Until when this controller's one radio serves an exchange of one of its links: nothing else of it uses
    /// the air before then.
    @exclusivity(unchecked) var airBusyUntil: Int64 = 0
    /// Until when its radio is advertising: no connection event of its links starts before then (one that
    /// would is skipped), and a scanner cannot listen meanwhile.
    @exclusivity(unchecked) var advertisingUntil: Int64 = 0
    /// Since when an advertising event has been waiting for the radio, if one is: a connection event under way
    /// ends after its current exchange to let it in, and after `World.advertisingPatience` it takes the air
    /// even if it covers the next anchor of a link (that event is skipped).
    /// Kept with the advertising generation it belongs to, so advertising that stopped or restarted leaves no
    /// stale wait behind.
    @exclusivity(unchecked) var advertisingWaiting: (generation: UInt64, since: Int64)?
    var advertisingIsWaiting: Bool { advertising && advertisingWaiting?.generation == advertisingGeneration }
    /// Whether the radio is free at `time`: no exchange in flight and no advertising event.
    func radioFree(at time: Int64) -> Bool { airBusyUntil <= time && advertisingUntil <= time }
    @exclusivity(unchecked) var powered = true
    /// Whether its firmware hangs (`VirtualController.hang`): it drops what its host sends and sends nothing.
    @exclusivity(unchecked) var hung = false
    /// Counts hangs, so that the end of an earlier one does not end a later one.
    @exclusivity(unchecked) var hangs: UInt64 = 0

    // HCI configuration
    @exclusivity(unchecked) var eventMask: UInt64 = 0x0000_1FFF_FFFF_FFFF
    @exclusivity(unchecked) var leEventMask: UInt64 = 0x0000_0000_0000_001F
    @exclusivity(unchecked) var eventMaskPage2: UInt64 = 0
    @exclusivity(unchecked) var leHostSupported = false
    /// The name Read Local Name reports (UTF-8): the controller's name until Write Local Name changes it.
    @exclusivity(unchecked) var localName: [UInt8] = []
    @exclusivity(unchecked) var randomAddress: [UInt8]?
    @exclusivity(unchecked) var acceptList = Set<LinkAddress>()
    @exclusivity(unchecked) var suggestedTxOctets = 27
    @exclusivity(unchecked) var suggestedTxTime = 328
    /// A new link's own data lengths: the host's suggested defaults to transmit, the most this controller
    /// receives (251 octets, or 17,040 µs: a 251-octet PDU on LE Coded).
    var localDataLengths: DataLengths {
        DataLengths(rxOctets: 251, rxTime: 17_040, txOctets: suggestedTxOctets, txTime: suggestedTxTime)
    }
    @exclusivity(unchecked) var defaultPhys: (all: UInt8, tx: UInt8, rx: UInt8) = (0, 0, 0)
    /// HCI ACL packets accepted from the host whose LL PDUs are not all acknowledged yet.
    @exclusivity(unchecked) var aclInFlight = 0

    // Advertising state
    @exclusivity(unchecked) var advertisingParameters = AdvertisingParameters()
    @exclusivity(unchecked) var advertisingData: [UInt8] = []
    @exclusivity(unchecked) var scanResponseData: [UInt8] = []
    @exclusivity(unchecked) var advertising = false
    @exclusivity(unchecked) var advertisingGeneration: UInt64 = 0
    @exclusivity(unchecked) var advertisingStart: Int64 = 0

    // Scanning state
    @exclusivity(unchecked) var scanParameters = ScanParameters()
    var scanning = false {
        didSet { if scanning != oldValue { updateListening() } }
    }
    @exclusivity(unchecked) var filterDuplicates = false
    @exclusivity(unchecked) var scanStart: Int64 = 0
    @exclusivity(unchecked) var seen = Set<SeenKey>()

    // Initiating state
    var initiating: InitiatingParameters? {
        didSet { if (initiating == nil) != (oldValue == nil) { updateListening() } }
    }

    /// The world's controllers that listen on the advertising channels; this one is in it while it scans or
    /// initiates, so that an advertising event looks at those only.
    let listeners: ListenerSet

    private func updateListening() { listeners.set(index, listening: scanning || initiating != nil) }

    /// The anchors of this controller's links that have an event scheduled (`World.earliestAnchor`), and of
    /// those among them that lost their last event to a colliding one.
    @exclusivity(unchecked) var scheduledAnchors = Heap<ScheduledAnchor>()
    @exclusivity(unchecked) var starvedAnchors = Heap<ScheduledAnchor>()

    // Links
    @exclusivity(unchecked) var linkByHandle: [UInt16: Int] = [:]
    @exclusivity(unchecked) var nextHandle: UInt16 = 0x0001

    init(
        index: Int, name: String, pipe: HCIPipe, identity: BluetoothAddress, position: RadioPosition,
        txPower: Int8, aclBufferLength: Int, aclBufferCount: Int, maximumConnections: Int = 32,
        hostLink: HostControllerLink = .ideal, listeners: ListenerSet = ListenerSet()
    ) {
        self.listeners = listeners
        self.hostLink = hostLink
        self.maximumConnections = maximumConnections
        self.index = index
        self.name = name
        self.pipe = pipe
        self.identity = identity
        self.position = position
        self.txPower = txPower
        self.aclBufferLength = aclBufferLength
        self.aclBufferCount = aclBufferCount
        resetConfiguration()
    }

    /// Read BD_ADDR: the public address, or all zeros for a controller that has only a static random one.
    var publicAddressBytes: [UInt8] {
        identity.type.isRandom ? [0, 0, 0, 0, 0, 0] : identity.bytes
    }

    /// The address used for `Own_Address_Type` 0 (public) or 1/2/3 (random; no resolving list, so the
    /// RPA types fall back to their identity as the spec allows when no IRK is known).
    func ownAddress(type: UInt8) -> LinkAddress? {
        switch type {
        case 0x00, 0x02: return LinkAddress(bytes: publicAddressBytes, isRandom: false)
        case 0x01, 0x03:
            guard let random = randomAddress else { return nil }
            return LinkAddress(bytes: random, isRandom: true)
        default: return nil
        }
    }

    /// Restores the state the controller has after power-on or HCI_Reset (links are handled by the world).
    func resetConfiguration() {
        eventMask = 0x0000_1FFF_FFFF_FFFF
        leEventMask = 0x1F
        eventMaskPage2 = 0
        leHostSupported = false
        localName = Array(name.utf8.prefix(248))
        randomAddress = identity.type.isRandom ? identity.bytes : nil
        acceptList = []
        suggestedTxOctets = 27
        suggestedTxTime = 328
        defaultPhys = (0, 0, 0)
        aclInFlight = 0
        advertisingParameters = AdvertisingParameters()
        advertisingData = []
        scanResponseData = []
        advertising = false
        advertisingGeneration &+= 1
        scanParameters = ScanParameters()
        scanning = false
        filterDuplicates = false
        seen = []
        initiating = nil
    }

    func allocateHandle() -> UInt16 {
        while linkByHandle[nextHandle] != nil || nextHandle > 0x0EFF {
            nextHandle = nextHandle >= 0x0EFF ? 0x0001 : nextHandle + 1
        }
        let handle = nextHandle
        nextHandle = nextHandle >= 0x0EFF ? 0x0001 : nextHandle + 1
        return handle
    }
}

/// The indices of the controllers that scan or initiate, in increasing order (the order an advertising event
/// hears them in, as when it looked at every controller).
final class ListenerSet {
    private(set) var indices: [Int] = []

    func set(_ index: Int, listening: Bool) {
        var low = 0
        var high = indices.count
        while low < high {
            let mid = (low + high) / 2
            if indices[mid] < index { low = mid + 1 } else { high = mid }
        }
        let present = low < indices.count && indices[low] == index
        if listening && !present { indices.insert(index, at: low) }
        if !listening && present { indices.remove(at: low) }
    }
}

/// A link's scheduled anchor as one of its controllers keeps it: valid while the link is still scheduled with
/// the same `stamp` (each scheduling pushes a new entry; stale ones are dropped when they surface).
struct ScheduledAnchor: Comparable {
    var anchor: Int64
    var link: Int
    var stamp: UInt64

    static func < (a: ScheduledAnchor, b: ScheduledAnchor) -> Bool {
        a.anchor != b.anchor ? a.anchor < b.anchor : a.link < b.link
    }
}
