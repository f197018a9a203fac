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

    enum Output: Sendable, Equatable {
        case send(Command)
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

    /// What the controller holds, as far as its answers tell (nil: unknown).
    struct ControllerState: Sendable, Hashable {
        var enabled: Bool? = false
        var parameters: AdvertisingParameters?
        var data: [UInt8]?
        var scanResponse: [UInt8]?
    }

    private(set) var desired: AdvertisingSet?
    private(set) var controller = ControllerState()
    /// The command on the wire, if any, and the wish it was sent for.
    private var sent: (command: Command, wish: AdvertisingSet?)?
    /// Requests waiting for the controller; all want `desired` (the others were overtaken when it changed).
    private var waiting: [(id: HostOperationID, wants: AdvertisingSet?)] = []
    private var disallowed = 0

    /// The command on the wire, if any.
    var inFlight: Command? { sent?.command }

    init() {}

    /// Whether the layer above wants to advertise.
    var isAdvertising: Bool { desired != nil }

    var isSettled: Bool { inFlight == nil && waiting.isEmpty && nextCommand() == nil }

    mutating func start(_ set: AdvertisingSet, id: HostOperationID) -> [Output] {
        var out = supersede(with: set)
        waiting.append((id, set))
        out += advance()
        return out
    }

    mutating func stop(id: HostOperationID) -> [Output] {
        var out = supersede(with: nil)
        waiting.append((id, nil))
        out += advance()
        return out
    }

    /// The controller stopped advertising on its own (a central connected, or directed advertising timed
    /// out). Returns whether the layer above wanted advertising (and should hear that it ended).
    mutating func ended() -> (wasAdvertising: Bool, out: [Output]) {
        let was = desired != nil
        controller.enabled = false
        var out = supersede(with: nil)
        out += advance()
        return (was, out)
    }

    /// The controller answered the command in flight, or it timed out. As in ``ScanMachine``: a refusal means
    /// no effect, a timeout an unknown one, and waiting requests fail only for a command sent for what is still
    /// desired.
    mutating func answered(_ result: Result<Void, HostError>) -> [Output] {
        guard let (command, wish) = sent else { return [] }
        sent = nil
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
        case .failure(let error) where error.code == .timeout:
            forget(what: command)
            out += giveUp(wish, error)
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
                out += giveUp(wish, error)
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

    /// A command sent for `wish` failed: if that is still what is desired, the requests waiting for it fail and
    /// the wish is dropped rather than retried forever.
    private mutating func giveUp(_ wish: AdvertisingSet?, _ error: HostError) -> [Output] {
        guard wish == desired else { return [] }
        let failed = waiting.map { Output.complete($0.id, .failure(error)) }
        waiting = []
        desired = nil
        return failed
    }

    mutating func closed(_ error: HostError) -> [Output] {
        let out = waiting.map { Output.complete($0.id, .failure(error)) }
        waiting = []
        sent = nil
        desired = nil
        disallowed = 0
        controller = ControllerState()
        return out
    }

    // MARK: Steps

    private mutating func supersede(with wanted: AdvertisingSet?) -> [Output] {
        desired = wanted
        var out: [Output] = []
        waiting.removeAll { request in
            guard request.wants != wanted else { return false }
            if request.wants == nil {
                out.append(.complete(request.id, .success(())))
            } else {
                let error = HostError(.cancelled, "advertising was stopped or replaced before it started")
                out.append(.complete(request.id, .failure(error)))
            }
            return true
        }
        return out
    }

    private func nextCommand() -> Command? {
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
