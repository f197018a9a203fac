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

    /// What the machine asks of the host.
    enum Output: Sendable, Equatable {
        /// Send this command; answer it with `answered(_:)`.
        case send(Command)
        /// The request with this id is over.
        case complete(HostOperationID, Result<Void, HostError>)

        static func == (a: Self, b: Self) -> Bool {
            switch (a, b) {
            case (.send(let x), .send(let y)): x == y
            case (.complete(let x, .success), .complete(let y, .success)): x == y
            case (.complete(let x, .failure(let e)), .complete(let y, .failure(let f))): x == y && e == f
            default: false
            }
        }
    }

    /// What the controller is doing, as far as its answers tell.
    struct ControllerState: Sendable, Hashable {
        /// Whether it scans (nil: unknown).
        var enabled: Bool? = false
        /// The parameters it holds (nil: unknown or never set).
        var parameters: ScanParameters?
        /// The duplicate filter it scans with.
        var filterDuplicates = false
    }

    /// What the layer above wants: nil for no scan.
    private(set) var desired: ScanParameters?
    private(set) var controller = ControllerState()
    /// The command on the wire, if any, and the wish it was sent for.
    private var sent: (command: Command, wish: ScanParameters?)?
    /// Requests waiting for the controller: the scan they asked for (nil: stopped). All want `desired`: the
    /// others were overtaken when it changed.
    private var waiting: [(id: HostOperationID, wants: ScanParameters?)] = []
    /// Command Disallowed answers to LE Set Scan Parameters since the last success: the second gives up.
    private var disallowed = 0

    init() {}

    /// Whether the layer above wants a scan (advertising reports are passed up only then).
    var isScanning: Bool { desired != nil }

    /// The command on the wire, if any.
    var inFlight: Command? { sent?.command }

    /// Whether nothing is in flight and the controller does what is desired.
    var isSettled: Bool { inFlight == nil && waiting.isEmpty && nextCommand() == nil }

    /// Scan with `parameters` (replacing any earlier ones).
    mutating func start(_ parameters: ScanParameters, id: HostOperationID) -> [Output] {
        var out = supersede(with: parameters)
        waiting.append((id, parameters))
        out += advance()
        return out
    }

    /// Stop scanning.
    mutating func stop(id: HostOperationID) -> [Output] {
        var out = supersede(with: nil)
        waiting.append((id, nil))
        out += advance()
        return out
    }

    /// The controller answered the command in flight, or it timed out.
    ///
    /// A refusal means the command had no effect (a refused disable is taken to mean the controller is off); a
    /// timeout means its effect is unknown, and the machine finds out by sending a command again, one command
    /// timeout later: it keeps trying until the controller answers or the transport closes, so that once the
    /// controller answers again, it does what the API says. Either
    /// way, the requests waiting fail only when the command was sent for what is still desired: a command
    /// sent for a wish since overtaken fails nobody, and the machine goes on toward the current one.
    mutating func answered(_ result: Result<Void, HostError>) -> [Output] {
        guard let (command, wish) = sent else { return [] }
        sent = nil
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
        case .failure(let error) where error.code == .timeout:
            switch command {
            case .disable, .enable: controller.enabled = nil
            case .setParameters: controller.parameters = nil
            }
            out += giveUp(wish, error)
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
                out += giveUp(wish, error)
            case .enable:
                out += giveUp(wish, error)
            }
        }
        out += advance()
        return out
    }

    /// A command sent for `wish` failed: if that is still what is desired, the controller will not do it, so
    /// the requests waiting for it fail and the wish is dropped rather than retried forever.
    private mutating func giveUp(_ wish: ScanParameters?, _ error: HostError) -> [Output] {
        guard wish == desired else { return [] }
        let failed = waiting.map { Output.complete($0.id, .failure(error)) }
        waiting = []
        desired = nil
        return failed
    }

    /// The transport closed: every request fails with `error`; nothing more can be sent.
    mutating func closed(_ error: HostError) -> [Output] {
        let out = waiting.map { Output.complete($0.id, .failure(error)) }
        waiting = []
        sent = nil
        desired = nil
        disallowed = 0
        controller = ControllerState(enabled: false)
        return out
    }

    // MARK: Steps

    private func nextCommand() -> Command? {
        guard let wanted = desired else { return controller.enabled == false ? nil : .disable }
        if controller.parameters != wanted {
            return controller.enabled == false ? .setParameters(wanted) : .disable
        }
        if controller.enabled == true && controller.filterDuplicates != wanted.filterDuplicates { return .disable }
        if controller.enabled != true { return .enable(filterDuplicates: wanted.filterDuplicates) }
        return nil
    }

    /// `desired` changes: requests for something else are overtaken.
    private mutating func supersede(with wanted: ScanParameters?) -> [Output] {
        desired = wanted
        var out: [Output] = []
        waiting.removeAll { request in
            guard request.wants != wanted else { return false }
            if request.wants == nil {
                out.append(.complete(request.id, .success(())))
            } else {
                out.append(
                    .complete(request.id, .failure(HostError(.cancelled, "the scan was stopped before it started"))))
            }
            return true
        }
        return out
    }

    /// The next command toward `desired`, or the completions when it is reached.
    private mutating func advance() -> [Output] {
        guard sent == nil else { return [] }
        if let next = nextCommand() {
            sent = (next, desired)
            return [.send(next)]
        }
        let done = waiting
        waiting = []
        return done.map { .complete($0.id, .success(())) }
    }
}
