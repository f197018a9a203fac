import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import BLESMP
import DequeModule
import NIOCore

/// The host for one controller as one value: every rule of the host stack, and none of its I/O.
///
/// ### Overview
/// The machine composes the pure machines below it (per link: the L2CAP recombiner and signalling channel,
/// the ATT bearer, the GATT client; once: the GATT server) with the host's own bookkeeping: HCI command
/// credits, LE ACL credits and fragmentation, the link table, the scan and advertising machines, the start-up
/// sequence and the connection being initiated. It holds no closures, no timer handles, no transport, no lock.
///
/// ### Function
/// Events come in through a handful of mutating methods: `requested(_:id:)` (a request of the layer above,
/// carrying the operation id the driver gave it), `received(_:)` (an HCI packet from the controller),
/// `timerFired(_:)` and `transportClosed(reason:)`; and a few requests that answer at once
/// (`writeWithoutResponse`, `notify`, `addService`, ...). Each returns the `HostAction`s it produced, in
/// order: packets to send, timers to start or cancel by id, operations to complete, events to emit. The
/// driver performs them in that order, and feeds in the next event only through these methods.
///
/// ### Implementation
/// Within one event, helpers append to `pending`, which the entry point hands back whole. A link is changed in
/// place in `links`, never copied out and written back. HCI commands queue with what they are for
/// (`CommandPurpose`) instead of a callback, and timers carry what they are for (`TimerPurpose`) under an id
/// that is never reused, so a late expiry of a cancelled timer finds nothing and is ignored.
public struct HostMachine: Sendable {
    public let configuration: HostConfiguration
    /// What the controller reported during initialisation (nil until the start-up sequence finished).
    public internal(set) var info: ControllerInfo?
    /// Whether the transport closed: the machine then refuses every request.
    public private(set) var isClosed = false

    var commands = CommandFlow()
    var acl = ACLFlow()
    var links = LinkTable()
    var scan = ScanMachine()
    var advertising = AdvertisingMachine()
    /// Connection initiation toward the peers the layer above waits for, and the parameters asked for.
    var connecting = ConnectMachine()
    var connectParameters = ConnectionParameters()
    var connectCancelTimer: HostTimerID?
    var connectTurnTimer: HostTimerID?
    var startup: StartupSequence?
    /// Bringing back a controller after a reset that failed.
    var restart = ControllerRestart()

    var server: GATTServer
    /// GATT client operations by the id the client knows them by; nil for the machine's own (the MTU exchange
    /// a central starts on connecting), whose results nobody waits for.
    var clientOperations: [GATTOperationID: HostOperationID?] = [:]
    var nextClientOperation: UInt64 = 1
    /// Indication ids, kept apart from the ids the GATT clients give their ATT requests.
    var nextIndication: UInt64 = 1 << 62
    /// `notify` refused because a queue was full: `.readyToNotify` follows when there is room.
    var notifyRefused = false
    /// Operations waiting for data to be delivered, and how many of their packets the controller has yet to
    /// report completed (a notification to three subscribers waits for three).
    var pendingDeliveries: [HostOperationID: Int] = [:]
    /// Indications an operation waits on: delivered when the client confirms them.
    var indicationDeliveries: [ATTRequestID: (link: ConnectionHandle, id: HostOperationID)] = [:]
    /// Service Changed indications not yet confirmed (or failed): their links, and the database version each told.
    var serviceChangedIndications: [ATTRequestID: (link: ConnectionHandle, version: UInt64)] = [:]

    /// What the host dropped or gave up on, so far.
    public internal(set) var counters = HostCounters()

    var timers: [HostTimerID: TimerPurpose] = [:]
    var nextTimer: UInt64 = 1
    /// How many timers are running (started, not yet fired or cancelled).
    public var runningTimerCount: Int { timers.count }
    /// The peers whose pairing failed lately, and the wait before pairing with them again.
    var attempts = RepeatedAttempts()
    /// Pairing machines made so far: each one's random values come from the security seed and this count.
    var pairingsMade: UInt64 = 0
    /// Pairings whose last keys this side sent are still being delivered, by the delivery id their packets carry
    /// (ids of the machine's own, above any the driver gives): they complete when it completes, delivered or not
    /// (the keys this side received are kept either way).
    var pairingsDelivering:
        [HostOperationID: (handle: ConnectionHandle, result: SMPPairing.Result, request: HostOperationID?)] = [:]
    var nextPairingDelivery: UInt64 = 1 << 63
    /// This host's private addresses (`HostConfiguration.privacy`): nil without privacy.
    var addressPrivacy: AddressPrivacy?
    /// The peers whose private addresses this host resolves, and where each was last heard.
    var resolution = PeerResolution()

    /// What the current event produced so far.
    var pending: [HostAction] = []

    /// A failed controller's links are being torn down before its reset: no ACL data goes to it meanwhile.
    var tearingDownForReset = false

    /// The buffer incoming events and ACL data are decoded through, one packet at a time: unshared again once a
    /// packet's work is done, so `clear` reuses it (two allocations a packet fewer); whatever still holds part
    /// of it (the recombiner's partial PDU) keeps its copy, since a shared buffer is copied on write.
    var incoming = ByteBuffer()

    public init(configuration: HostConfiguration = HostConfiguration()) {
        self.configuration = configuration
        self.server = GATTServer(
            database: GATTDatabase(
                deviceName: configuration.deviceName, appearance: configuration.appearance,
                databaseHash: configuration.servesDatabaseHash))
    }

    // MARK: Events in

    /// A request of the layer above. Every request completes exactly once with `id`, through a
    /// `.complete(id, _)` action, possibly among the ones returned here.
    public mutating func requested(_ request: HostRequest, id: HostOperationID) -> [HostAction] {
        guard !isClosed else {
            complete(id, .failure(HostError(.transportClosed, "\(request.name) was refused: the transport is closed")))
            return takeActions()
        }
        switch request {
        case .start:
            startInitialisation(id: id)
        case .command(let packet):
            enqueue(packet, for: .operation(id))
        case .startScan(let parameters):
            runScan(scan.start(parameters, id: id))
        case .stopScan:
            runScan(scan.stop(id: id))
        case .startAdvertising(let parameters, let data, let scanResponse):
            guard data.count <= 31, scanResponse.count <= 31 else {
                complete(
                    id,
                    .failure(
                        HostError(
                            .invalidParameters,
                            "legacy advertising data and scan responses hold at most 31 octets each "
                                + "(\(data.count) and \(scanResponse.count) given)")))
                return takeActions()
            }
            let set = AdvertisingSet(parameters: parameters, data: data, scanResponse: scanResponse)
            runAdvertising(advertising.start(set, id: id))
        case .stopAdvertising:
            runAdvertising(advertising.stop(id: id))
        case .setConnectTargets(let peers, let parameters):
            connectParameters = parameters
            setConnectTargets(peers)
            complete(id, .success(.done))
        case .disconnect(let handle, let reason):
            enqueue(HCIDisconnect(handle: handle, reason: reason).packet, for: .operation(id))
        case .readRSSI(let handle):
            enqueue(HCIReadRSSI(handle: handle).packet, for: .readRSSI(id))
        case .gatt(let operation, let handle):
            startClientOperation(operation, on: handle, id: id)
        case .pair(let handle):
            pair(handle, id: id)
        case .encrypt(let handle, let key):
            encrypt(handle, key: key, id: id)
        case .answerPairing(let handle, let answer):
            answerPairing(handle, answer, id: id)
        case .replyLongTermKey(let handle, let key):
            replyLongTermKey(handle, key: key, id: id)
        case .setResolvingList(let identities):
            setResolvingList(identities)
            complete(id, .success(.done))
        }
        return takeActions()
    }

    /// A packet from the controller.
    public mutating func received(_ packet: HCIPacket) -> [HostAction] {
        // After the transport closed, nothing it still delivers counts.
        guard !isClosed else { return [] }
        switch packet {
        case .event(let packet):
            do {
                handle(try HCIEvent(packet, decodingIn: &incoming))
            } catch {
                // Nothing sensible can be done with it; a command it might have completed times out and its
                // credit is reclaimed. But it is said and counted.
                counters.malformedEvents += 1
                if Self.worthLogging(counters.malformedEvents) {
                    log(
                        .warning,
                        "dropped a malformed HCI event from the controller (\(error)): \(packet) (\(counters.malformedEvents) so far)"
                    )
                }
            }
        case .acl(let packet):
            receivedACL(packet)
        default:
            // A command or SCO/ISO packet from the controller: nothing this host takes.
            log(.debug, "ignored a packet a controller does not send to an LE host: \(packet)")
        }
        return takeActions()
    }

    /// Whether the n-th occurrence of something that can repeat at the peer's pace is logged: the first ones and
    /// then ever more rarely (1, 2, 4, 8, ...), so that a peer cannot flood the log; the counters keep them all.
    static func worthLogging(_ n: Int) -> Bool { n > 0 && n & (n - 1) == 0 }

    /// A timer the machine started has expired.
    public mutating func timerFired(_ id: HostTimerID) -> [HostAction] {
        guard let purpose = timers.removeValue(forKey: id) else { return [] }
        switch purpose {
        case .command:
            commandTimedOut(timer: id)
        case .att(let handle, let timer):
            guard links[handle]?.attTimers[timer] == id else { break }
            links[handle]?.attTimers[timer] = nil
            let actions = links[handle]?.bearer.timerFired(timer) ?? []
            runBearer(actions, on: handle, kind: .other)
            pumpACL()
        case .connectCancel:
            guard connectCancelTimer == id else { break }
            connectCancelTimer = nil
            log(.warning, "the controller did not confirm LE Create Connection Cancel; taking it as done")
            runConnect(connecting.cancelTimedOut())
        case .connectTurn:
            guard connectTurnTimer == id else { break }
            connectTurnTimer = nil
            runConnect(connecting.nextTurn())
        case .signaling(let handle, let timer):
            guard links[handle]?.signalingTimers[timer] == id else { break }
            links[handle]?.signalingTimers[timer] = nil
            let actions = links[handle]?.signaling.timerFired(timer) ?? []
            runSignaling(actions, on: handle)
            pumpACL()
        case .security(let handle):
            securityTimerFired(id, on: handle)
        case .repeatedAttempts(let peer):
            repeatedAttemptsTimerFired(id, for: peer)
        case .addressRotation:
            addressRotationDue(timer: id)
        case .restart:
            restartDue(timer: id)
        }
        return takeActions()
    }

    /// The transport to the controller closed: every pending request fails, every link goes down (without a
    /// `.disconnected` each), and `.transportClosed` is the last event.
    public mutating func transportClosed(reason: String?) -> [HostAction] {
        close(
            HostError(.transportClosed, "the controller's transport closed" + (reason.map { ": \($0)" } ?? "")),
            reason: reason)
    }

    /// The host is shut down by the system above it: as `transportClosed`, with every pending request failing
    /// with `.shutDown`. The driver closes the transport after.
    public mutating func shutDown() -> [HostAction] {
        close(HostError(.shutDown, "the system was shut down"), reason: "the system was shut down")
    }

    private mutating func close(_ error: HostError, reason: String?) -> [HostAction] {
        guard !isClosed else { return [] }
        isClosed = true
        if let timer = restart.timer { cancelTimer(timer) }
        restart.timer = nil
        // The scan and advertising machines let go of their commands first, so failing those commands below
        // finds nothing in flight there.
        stopControllerMachines(error)
        for command in commands.removeAll() {
            if let timer = command.timer { cancelTimer(timer) }
            commandFinished(command.purpose, opcode: command.opcode, .failure(error))
        }
        for handle in links.keys.sorted() {
            linkDown(handle, reason: .connectionTerminatedByLocalHost, error: error, emit: false)
        }
        emit(.transportClosed(reason))
        return takeActions()
    }

    /// What the transport's end and a controller's reset share: the scan, advertising and connect machines start
    /// over from off (their requests fail with `error`), and the connect and address-rotation timers stop.
    mutating func stopControllerMachines(_ error: HostError) {
        runScan(scan.closed(error))
        runAdvertising(advertising.closed(error))
        connecting.closed()
        if let timer = addressPrivacy?.timer { cancelTimer(timer) }
        addressPrivacy?.timer = nil
        if let timer = connectCancelTimer { cancelTimer(timer) }
        connectCancelTimer = nil
        if let timer = connectTurnTimer { cancelTimer(timer) }
        connectTurnTimer = nil
    }

    // MARK: Actions out

    mutating func takeActions() -> [HostAction] {
        defer { pending = [] }
        return pending
    }

    mutating func send(_ packet: HCIPacket) { pending.append(.send(packet)) }

    mutating func log(
        _ level: HostLogEntry.Level, _ message: String, connection: ConnectionHandle? = nil,
        operation: HostOperationID? = nil
    ) {
        pending.append(.log(HostLogEntry(level, message, connection: connection, operation: operation)))
    }
    mutating func emit(_ event: HostEvent) { pending.append(.emit(event)) }

    mutating func complete(_ id: HostOperationID, _ result: Result<HostOutput, HostError>) {
        if let pairing = pairingsDelivering.removeValue(forKey: id) {
            return pairingCompleted(on: pairing.handle, pairing.result, request: pairing.request)
        }
        if id == Self.restartOperation { return restartCompleted(result) }
        pending.append(.complete(id, result))
    }

    mutating func startTimer(_ purpose: TimerPurpose, after delay: Duration) -> HostTimerID {
        let id = HostTimerID(rawValue: nextTimer)
        nextTimer += 1
        timers[id] = purpose
        pending.append(.startTimer(id, after: delay))
        return id
    }

    mutating func cancelTimer(_ id: HostTimerID) {
        guard timers.removeValue(forKey: id) != nil else { return }
        pending.append(.cancelTimer(id))
    }
}

/// What a timer is for.
enum TimerPurpose: Sendable, Hashable {
    /// An HCI command's answer timeout (the command in flight holds the id).
    case command
    /// An ATT bearer's transaction timer on a link.
    case att(ConnectionHandle, ATTTimer)
    /// An L2CAP signalling channel's response timer on a link.
    case signaling(ConnectionHandle, L2CAPSignalingChannel.Timer)
    /// The wait for the Connection Complete that confirms LE Create Connection Cancel.
    case connectCancel
    /// The turn of the peers initiated now, when more wait than the accept list holds.
    case connectTurn
    /// The Security Manager's 30 s timer on a link (Vol 3, Part H, 3.4).
    case security(ConnectionHandle)
    /// A peer's wait after a failed pairing, or a quiet interval after it (Vol 3, Part H, 2.3.6).
    case repeatedAttempts(BluetoothAddress)
    /// The current resolvable private address has been used for its period.
    case addressRotation
    /// The wait before trying again to initialise a controller whose restart failed.
    case restart
}

extension HostRequest {
    /// How a refusal names the request.
    var name: String {
        switch self {
        case .start: "controller initialisation"
        case .command(let packet): "\(packet.opcode)"
        case .startScan: "starting a scan"
        case .stopScan: "stopping the scan"
        case .startAdvertising: "starting advertising"
        case .stopAdvertising: "stopping advertising"
        case .setConnectTargets: "connecting"
        case .disconnect: "disconnecting"
        case .readRSSI: "reading the RSSI"
        case .gatt: "the GATT operation"
        case .pair: "pairing"
        case .encrypt: "encrypting the link"
        case .answerPairing: "answering the pairing"
        case .replyLongTermKey: "answering the LTK request"
        case .setResolvingList: "setting the resolving list"
        }
    }
}
