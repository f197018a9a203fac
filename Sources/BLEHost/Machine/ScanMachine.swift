import BLECore
import BLEHCI

/// Scanning as two states held apart: what the layer above wants (`desired`) and what the controller has been
/// told (`controller`), with at most one HCI command in flight between them.
///
/// ### Function
/// `start` and `stop` only change `desired`; `answered` records what the controller now does. After each
/// event, `advance` picks the one command that brings the controller closer to `desired`, unless a command is
/// already in flight. So a burst of starts and stops never puts stale commands on the wire: `start` followed
/// at once by `stop` sends LE Set Scan Parameters (already in flight when `stop` came) and nothing after it, and
/// when every command has been answered, the controller scans exactly when `desired` says it should.
///
/// Each request carries an operation id. A start completes when the controller scans with its parameters; a
/// stop when the controller has stopped. A request overtaken by a later one before it took effect completes
/// with `HostError.Code.cancelled` (a start overtaken by a stop) or success (a stop overtaken by a start: the
/// stop is moot, nothing was left running on its account). A command the controller refuses, or does not
/// answer, fails the requests waiting only when it was sent for what is still desired; then the wish is dropped
/// (`desired` becomes nil) rather than retried. A command sent for a wish since overtaken fails nobody.
///
/// ### Implementation
/// The controller's state is kept field by field (enabled, parameters, duplicate filter), each `nil` when
/// unknown. LE Set Scan Parameters is refused with Command Disallowed while the controller scans (Core Spec
/// 5.4, Vol 4, Part E, 7.8.10); a controller another host left scanning answers so, and the machine then
/// marks it enabled, disables it and tries once more. Disabling is never refused on its account: a
/// controller that refuses to disable what is already off is taken at its word that it is off. A command that
/// times out leaves the field it sets unknown, so the next step sends it (or a disable) again: the machine
/// keeps asking, one command timeout apart, until the controller answers or the transport closes.
struct ScanMachine: Sendable {
    /// One command toward the desired state.
    enum Command: Sendable, Hashable {
        case setParameters(ScanParameters)
        case enable(filterDuplicates: Bool)
        case disable
    }

    typealias Output = DesiredStateOutput<Command>

    /// What the controller is doing, as far as its answers tell.
    struct ControllerState: Sendable, Hashable {
        /// Whether it scans (nil: unknown).
        var enabled: Bool? = false
        /// The parameters it holds (nil: unknown or never set).
        var parameters: ScanParameters?
        /// The duplicate filter it scans with.
        var filterDuplicates = false
    }

    private var wishes = DesiredState<ScanParameters, Command>()
    private(set) var controller = ControllerState()
    /// Command Disallowed answers to LE Set Scan Parameters since the last success: the second gives up.
    private var disallowed = 0

    /// Held off while the host changes its random address (LE Set Random Address is refused while legacy
    /// advertising or scanning is enabled, Vol 4, Part E, 7.8.4): the controller is brought to off, and requests
    /// to turn it on wait until `resume`.
    private(set) var paused = false

    init() {}

    /// Whether the controller is off with nothing in flight (what a paused machine waits for).
    var isQuiet: Bool { inFlight == nil && controller.enabled == false }

    mutating func pause() -> [Output] {
        paused = true
        return advance()
    }

    mutating func resume() -> [Output] {
        paused = false
        return advance()
    }

    /// What the layer above wants: nil for no scan.
    var desired: ScanParameters? { wishes.desired }

    /// Whether the layer above wants a scan (advertising reports are passed up only then).
    var isScanning: Bool { desired != nil }

    /// A scan the host runs for itself (to hear where a peer it connects to by identity now advertises): the
    /// controller scans with it when the layer above does not want a scan of its own.
    private(set) var background: ScanParameters?

    /// What the controller should do: the layer above's scan, else the host's own.
    var effective: ScanParameters? { desired ?? background }

    mutating func setBackground(_ parameters: ScanParameters?) -> [Output] {
        guard parameters != background else { return [] }
        background = parameters
        return advance()
    }

    /// The command on the wire, if any.
    var inFlight: Command? { wishes.sent?.command }

    /// Whether nothing is in flight and the controller does what is desired.
    var isSettled: Bool { inFlight == nil && !wishes.hasWaiting && nextCommand() == nil }

    /// Scan with `parameters` (replacing any earlier ones).
    mutating func start(_ parameters: ScanParameters, id: HostOperationID) -> [Output] {
        wishes.request(parameters, id: id, overtaken: Self.overtaken) + advance()
    }

    /// Stop scanning.
    mutating func stop(id: HostOperationID) -> [Output] {
        wishes.request(nil, id: id, overtaken: Self.overtaken) + advance()
    }

    private static let overtaken = "the scan was stopped before it started"

    /// The controller answered the command in flight, or it timed out.
    ///
    /// A refusal means the command had no effect (a refused disable is taken to mean the controller is off); a
    /// timeout means its effect is unknown, and the machine finds out by sending a command again, one command
    /// timeout later: it keeps trying until the controller answers or the transport closes, so that once the
    /// controller answers again, it does what the API says. Either
    /// way, the requests waiting fail only when the command was sent for what is still desired: a command
    /// sent for a wish since overtaken fails nobody, and the machine goes on toward the current one.
    mutating func answered(_ result: Result<Void, HostError>) -> [Output] {
        guard let (command, wish) = wishes.takeSent() else { return [] }
        var out: [Output] = []
        switch result {
        case .success:
            switch command {
            case .disable:
                controller.enabled = false
            case .setParameters(let parameters):
                controller.parameters = parameters
                disallowed = 0
            case .enable(let filterDuplicates):
                controller.enabled = true
                controller.filterDuplicates = filterDuplicates
            }
        case .failure(let error) where error.code == .commandTimeout:
            switch command {
            case .disable, .enable: controller.enabled = nil
            case .setParameters: controller.parameters = nil
            }
            out += wishes.giveUp(wish, error)
        case .failure(let error):
            switch command {
            case .disable:
                // A controller that refuses to disable what is off: take it at its word.
                controller.enabled = false
            case .setParameters where error.code == .hci(.commandDisallowed) && disallowed == 0:
                // It scans on someone else's account: stop it, then set the parameters again.
                disallowed += 1
                controller.enabled = nil
            case .setParameters:
                disallowed = 0
                controller.parameters = nil
                out += wishes.giveUp(wish, error)
            case .enable:
                out += wishes.giveUp(wish, error)
            }
        }
        out += advance()
        return out
    }

    /// The transport closed: every request fails with `error`; nothing more can be sent.
    mutating func closed(_ error: HostError) -> [Output] {
        paused = false
        background = nil
        disallowed = 0
        controller = ControllerState(enabled: false)
        return wishes.closed(error)
    }

    // MARK: Steps

    private func nextCommand() -> Command? {
        if paused { return controller.enabled == false ? nil : .disable }
        guard let wanted = effective else { return controller.enabled == false ? nil : .disable }
        if controller.parameters != wanted {
            return controller.enabled == false ? .setParameters(wanted) : .disable
        }
        if controller.enabled == true && controller.filterDuplicates != wanted.filterDuplicates { return .disable }
        if controller.enabled != true { return .enable(filterDuplicates: wanted.filterDuplicates) }
        return nil
    }

    /// The next command toward `desired`, or the completions when it is reached.
    private mutating func advance() -> [Output] {
        let next = nextCommand()
        // Paused and off: a wish to scan waits for `resume` rather than completing.
        if paused && next == nil && desired != nil { return [] }
        return wishes.advance(next)
    }
}
