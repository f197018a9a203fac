import BLECore
import BLEHCI

/// Connection initiation toward every peer the layer above is waiting for, with at most one HCI command in
/// flight: one target is initiated directly (initiator filter policy "peer address"), several together through
/// the Filter Accept List, so a device that never appears blocks no other (Core Spec 5.4, Vol 4, Part E, 7.8.12,
/// 7.8.15, 7.8.16; Vol 6, Part B, 4.4.4).
///
/// ### Function
/// `setTargets` replaces the list of peers (the layer above keeps it: every app's pending connects). The
/// machine brings the controller to initiate toward the first `acceptListCapacity` of them: when the controller
/// initiates toward something else, it cancels (LE Create Connection Cancel) and waits for the Connection
/// Complete that confirms it; when idle, it programs the accept list (clear, then add each) and creates the
/// connection. A link that comes up takes its peer off the list; the rest are initiated again. A refusal
/// (Command Status with an error, a failed accept-list command) or a failed establishment ends the attempt for
/// the peers it was for: each is reported as failed and taken off the list; they are not retried, since the
/// layer above decides whether to ask again. With more peers than the accept list holds, the machine takes them
/// in turns: every `turn` it moves the ones initiated to the back of the list and initiates the next ones, so a
/// peer beyond the list's size is tried too, and a crowd of devices that never appear blocks no other for long.
///
/// ### Implementation
/// The accept list is kept as far as the controller's answers tell (nil: unknown, at first and after a refused
/// command, so it is cleared before use). Accept-list commands are refused while the controller initiates with
/// the list (Command Disallowed), so the machine only changes it while idle. The list's size is taken as
/// `acceptListCapacity` until the controller refuses an addition with Memory Capacity Exceeded: then the machine
/// initiates toward what fits, and keeps to that size. A controller that never confirms a
/// cancel (Bumble's answers Command Status and sends no Connection Complete, BLEHost.docc/Peers.md) is taken as
/// idle when the cancel timer, started with the cancel, fires.
struct ConnectMachine: Sendable {
    /// One command toward the initiation wanted.
    enum Command: Sendable, Hashable {
        case clearAcceptList
        case addToAcceptList(BluetoothAddress)
        /// LE Create Connection to one peer, or (nil) to whoever of the accept list is heard first.
        case create(peer: BluetoothAddress?)
        case cancel
    }

    enum Output: Sendable, Hashable {
        case send(Command)
        /// The attempt for this peer ended without a link; it is off the list.
        case failed(BluetoothAddress, HostError)
        /// Bound the wait for a cancel's Connection Complete (`cancelTimedOut` when it passes).
        case startCancelTimer
        case stopCancelTimer
        /// More peers wait than the accept list holds: `nextTurn` after `turn`.
        case startTurnTimer
        case stopTurnTimer
    }

    /// What the controller does, as far as its answers tell.
    enum Phase: Sendable, Hashable {
        case idle
        /// It initiates toward these peers (one directly, several through the accept list).
        case initiating([BluetoothAddress])
        /// A cancel was sent; the Connection Complete that confirms it has not come.
        case cancelling
    }

    /// The most peers initiated at once until the controller says its accept list holds fewer (8: any controller
    /// seen here holds at least that many).
    static let acceptListCapacity = 8
    /// How long the peers beyond the accept list's size wait for their turn.
    static let turn = Duration.seconds(2)

    private var capacity = Self.acceptListCapacity
    private var turnTimerRunning = false
    /// A cancel was taken as done without its Connection Complete: one that comes late is that one's, not news.
    private var unconfirmedCancel = false

    private(set) var targets: [BluetoothAddress] = []
    private(set) var phase = Phase.idle
    /// The command in flight and the peers it is for.
    private var inFlight: (command: Command, peers: [BluetoothAddress])?
    /// Unknown at first: whatever a previous host left there is cleared before the first use.
    private var acceptList: Set<BluetoothAddress>?

    /// Held off while the host changes its random address (LE Set Random Address is refused while the
    /// controller initiates): an initiation under way is cancelled, and the peers wait until `resume`.
    private(set) var paused = false

    init() {}

    /// The peers the controller should initiate toward now.
    private var wanted: [BluetoothAddress] { paused ? [] : Array(targets.prefix(capacity)) }

    /// Whether the controller is idle with nothing in flight (what a paused machine waits for).
    var isQuiet: Bool { inFlight == nil && phase == .idle }

    mutating func pause() -> [Output] {
        paused = true
        return advance()
    }

    mutating func resume() -> [Output] {
        paused = false
        return advance() + turnTimer()
    }

    /// Whether a failed or cancelled LE Connection Complete is this machine's (the controller initiates or may).
    var expectsCompletion: Bool {
        if phase != .idle { return true }
        if case .create? = inFlight?.command { return true }
        return false
    }

    /// The peers to connect to, in the order asked (duplicates ignored).
    mutating func setTargets(_ peers: [BluetoothAddress]) -> [Output] {
        var seen = Set<BluetoothAddress>()
        // The order of the peers already known is kept (their turns), new ones join at the back.
        let fresh = peers.filter { seen.insert($0).inserted }
        let kept = targets.filter { seen.contains($0) }
        targets = kept + fresh.filter { !kept.contains($0) }
        return advance() + turnTimer()
    }

    /// The peers initiated so far had their turn: they go to the back, and the next ones are initiated.
    mutating func nextTurn() -> [Output] {
        turnTimerRunning = false
        guard targets.count > capacity else { return [] }
        targets = Array(targets.dropFirst(capacity)) + targets.prefix(capacity)
        return advance() + turnTimer()
    }

    /// Starts or stops the turn timer as the number of peers requires.
    private mutating func turnTimer() -> [Output] {
        let needed = targets.count > capacity
        guard needed != turnTimerRunning else { return [] }
        turnTimerRunning = needed
        return [needed ? .startTurnTimer : .stopTurnTimer]
    }

    /// The controller answered the command in flight (Command Complete or Command Status), or it timed out.
    mutating func answered(_ result: Result<Void, HostError>) -> [Output] {
        guard let (command, peers) = inFlight else { return [] }
        inFlight = nil
        var out: [Output] = []
        switch (command, result) {
        case (.clearAcceptList, .success):
            acceptList = []
        case (.addToAcceptList(let peer), .success):
            acceptList?.insert(peer)
        case (.addToAcceptList, .failure(let error))
        where error.code == .hci(.memoryCapacityExceeded) && (acceptList?.count ?? 0) > 0:
            // The list is smaller than assumed: initiate toward what fits, and keep to that size.
            capacity = acceptList?.count ?? 1
        case (.clearAcceptList, .failure(let error)), (.addToAcceptList, .failure(let error)):
            acceptList = nil
            out += fail(peers, error)
        case (.create, .success):
            phase = .initiating(peers)
        case (.create, .failure(let error)):
            out += fail(peers, error)
        case (.cancel, .success):
            break  // the Connection Complete that confirms it follows
        case (.cancel, .failure):
            // Nothing left to cancel: the initiation ended meanwhile, and its Connection Complete came or comes.
            phase = .idle
            out.append(.stopCancelTimer)
        }
        return out + advance() + turnTimer()
    }

    /// LE Connection Complete in the central role, or a failed one while this machine initiates: a link is up
    /// (`status` success), a cancel is confirmed (Unknown Connection Identifier), or the attempt failed.
    mutating func connectionComplete(status: HCIStatus, peer: BluetoothAddress) -> [Output] {
        if status == .unknownConnectionIdentifier, phase != .cancelling, unconfirmedCancel {
            // The late confirmation of a cancel taken as done: the controller initiates anew meanwhile.
            unconfirmedCancel = false
            return []
        }
        var out: [Output] = []
        if phase == .cancelling { out.append(.stopCancelTimer) }
        let initiated: [BluetoothAddress]
        if case .initiating(let peers) = phase { initiated = peers } else { initiated = [] }
        phase = .idle
        if status == .success {
            targets.removeAll { $0 == peer }
        } else if status != .unknownConnectionIdentifier {
            let ended = initiated.contains(peer) ? [peer] : initiated
            out += fail(ended, HostError(.hci(status), "the connection failed: \(status)"))
        }
        return out + advance() + turnTimer()
    }

    /// The cancel was never confirmed: take the controller as idle.
    mutating func cancelTimedOut() -> [Output] {
        guard phase == .cancelling else { return [] }
        phase = .idle
        unconfirmedCancel = true
        return advance()
    }

    /// The transport closed: nothing more is initiated (the layer above hears of the close itself).
    mutating func closed() {
        paused = false
        turnTimerRunning = false
        unconfirmedCancel = false
        targets = []
        phase = .idle
        inFlight = nil
        acceptList = nil
    }

    private mutating func fail(_ peers: [BluetoothAddress], _ error: HostError) -> [Output] {
        targets.removeAll { peers.contains($0) }
        return peers.map { .failed($0, error) }
    }

    private mutating func send(_ command: Command, for peers: [BluetoothAddress]) -> [Output] {
        inFlight = (command, peers)
        return [.send(command)]
    }

    /// The one command that brings the controller closer to initiating toward `wanted`, if none is in flight.
    private mutating func advance() -> [Output] {
        guard inFlight == nil else { return [] }
        let want = wanted
        switch phase {
        case .cancelling:
            return []
        case .initiating(let peers):
            guard Set(peers) != Set(want) else { return [] }
            phase = .cancelling
            return send(.cancel, for: peers) + [.startCancelTimer]
        case .idle:
            guard let first = want.first else { return [] }
            if want.count == 1 { return send(.create(peer: first), for: want) }
            let needed = Set(want)
            guard let list = acceptList, list.isSubset(of: needed) else { return send(.clearAcceptList, for: want) }
            if let missing = want.first(where: { !list.contains($0) }) {
                return send(.addToAcceptList(missing), for: want)
            }
            return send(.create(peer: nil), for: want)
        }
    }
}
