import BLECore
import BLEHCI

/// What a host advertises: the parameters, the advertising data and the scan response.
struct AdvertisingSet: Sendable, Hashable {
    var parameters: AdvertisingParameters
    var data: [UInt8]
    var scanResponse: [UInt8]
}

/// Legacy advertising as two states held apart: what the layer above wants (`desired`) and what the controller
/// has been told (`controller`), with at most one HCI command in flight between them. The same shape as
/// ``ScanMachine``; see its documentation for how requests complete and are overtaken.
///
/// ### Function
/// To reach a set from off: LE Set Advertising Parameters, LE Set Advertising Data, LE Set Scan Response Data,
/// LE Set Advertising Enable (Core Spec 5.4, Vol 4, Part E, 7.8.5 to 7.8.9), each only when the controller does
/// not already hold that value. Parameters may not change while advertising, so a change of parameters
/// disables first; data and scan response may change while advertising, so they are replaced in place.
///
/// A central that connects ends legacy connectable advertising (Vol 6, Part B, 4.4.2); `ended()` records that,
/// and the wish is dropped: a peripheral advertises again only when asked to.
struct AdvertisingMachine: Sendable {
    enum Command: Sendable, Hashable {
        case setParameters(AdvertisingParameters)
        case setData([UInt8])
        case setScanResponse([UInt8])
        case enable
        case disable
    }

    typealias Output = DesiredStateOutput<Command>

    /// What the controller holds, as far as its answers tell (nil: unknown).
    struct ControllerState: Sendable, Hashable {
        var enabled: Bool? = false
        var parameters: AdvertisingParameters?
        var data: [UInt8]?
        var scanResponse: [UInt8]?
    }

    private var wishes = DesiredState<AdvertisingSet, Command>()
    private(set) var controller = ControllerState()
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

    /// What the layer above wants: nil for no advertising.
    var desired: AdvertisingSet? { wishes.desired }

    /// The command on the wire, if any.
    var inFlight: Command? { wishes.sent?.command }

    /// Whether the layer above wants to advertise.
    var isAdvertising: Bool { desired != nil }

    var isSettled: Bool { inFlight == nil && !wishes.hasWaiting && nextCommand() == nil }

    mutating func start(_ set: AdvertisingSet, id: HostOperationID) -> [Output] {
        wishes.request(set, id: id, overtaken: Self.overtaken) + advance()
    }

    mutating func stop(id: HostOperationID) -> [Output] {
        wishes.request(nil, id: id, overtaken: Self.overtaken) + advance()
    }

    private static let overtaken = "advertising was stopped or replaced before it started"

    /// The controller stopped advertising on its own (a central connected, or directed advertising timed
    /// out). Returns whether the layer above wanted advertising (and should hear that it ended).
    mutating func ended() -> (wasAdvertising: Bool, out: [Output]) {
        let was = desired != nil
        controller.enabled = false
        return (was, wishes.change(to: nil, overtaken: Self.overtaken) + advance())
    }

    /// The controller answered the command in flight, or it timed out. As in ``ScanMachine``: a refusal means
    /// no effect, a timeout an unknown one, and waiting requests fail only for a command sent for what is still
    /// desired.
    mutating func answered(_ result: Result<Void, HostError>) -> [Output] {
        guard let (command, wish) = wishes.takeSent() else { return [] }
        var out: [Output] = []
        switch result {
        case .success:
            switch command {
            case .disable: controller.enabled = false
            case .enable: controller.enabled = true
            case .setParameters(let parameters):
                controller.parameters = parameters
                disallowed = 0
            case .setData(let data): controller.data = data
            case .setScanResponse(let data): controller.scanResponse = data
            }
        case .failure(let error) where error.code == .commandTimeout:
            forget(what: command)
            out += wishes.giveUp(wish, error)
        case .failure(let error):
            switch command {
            case .disable:
                // A controller that refuses to disable what is off: take it at its word.
                controller.enabled = false
            case .setParameters where error.code == .hci(.commandDisallowed) && disallowed == 0:
                // It advertises on someone else's account: stop it, then try again.
                disallowed += 1
                controller.enabled = nil
            case .setParameters, .setData, .setScanResponse, .enable:
                disallowed = 0
                if command != .enable { forget(what: command) }
                out += wishes.giveUp(wish, error)
            }
        }
        out += advance()
        return out
    }

    /// What the controller holds for the field `command` sets is no longer known.
    private mutating func forget(what command: Command) {
        switch command {
        case .enable, .disable: controller.enabled = nil
        case .setParameters: controller.parameters = nil
        case .setData: controller.data = nil
        case .setScanResponse: controller.scanResponse = nil
        }
    }

    mutating func closed(_ error: HostError) -> [Output] {
        paused = false
        disallowed = 0
        controller = ControllerState()
        return wishes.closed(error)
    }

    // MARK: Steps

    private func nextCommand() -> Command? {
        if paused { return controller.enabled == false ? nil : .disable }
        guard let wanted = desired else { return controller.enabled == false ? nil : .disable }
        if controller.parameters != wanted.parameters {
            return controller.enabled == false ? .setParameters(wanted.parameters) : .disable
        }
        if controller.data != wanted.data { return .setData(wanted.data) }
        if controller.scanResponse != wanted.scanResponse { return .setScanResponse(wanted.scanResponse) }
        if controller.enabled != true { return .enable }
        return nil
    }

    private mutating func advance() -> [Output] {
        let next = nextCommand()
        // Paused and off: a wish to advertise waits for `resume` rather than completing.
        if paused && next == nil && desired != nil { return [] }
        return wishes.advance(next)
    }
}
