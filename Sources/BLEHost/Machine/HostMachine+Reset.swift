import BLECore
import BLEHCI

extension HostMachine {
    /// The id of the host's own initialisation after a controller reset (no request of the layer above has it:
    /// the driver's ids count up from 1).
    static let restartOperation = HostOperationID(rawValue: .max)

    /// The controller reported a hardware error (Core Spec 5.4, Vol 4, Part E, 7.7.16): whatever it held (its
    /// links, scan, advertising, initiation, the commands it had taken) may be gone, so the host takes it as
    /// reset. Every command pending fails with `.controllerReset`, the scan, advertising and connect machines start
    /// over from off (their requests fail), every link goes down (its operations failing first, without a
    /// `.disconnected` each, as when the transport closes), then the layer above hears `.controllerResetting`, and
    /// the host initialises the controller again (HCI_Reset first), ending with `.controllerRestarted`. The GATT database is the host's and
    /// stays; the resolving list and the privacy identity stay, and a new private address is set.
    mutating func controllerFailed(code: UInt8) {
        let hex = String(code, radix: 16, uppercase: true)
        controllerFailed(
            reason: "the controller reported a hardware error (code 0x\(code < 16 ? "0" : "")\(hex)) and is being reset"
        )
    }

    /// The controller cannot be trusted any more (a hardware error, or it stopped answering commands, `reason`
    /// says which): it is reset as `controllerFailed(code:)` describes.
    mutating func controllerFailed(reason: String) {
        log(.error, reason)
        counters.controllerResets += 1
        let error = HostError(.controllerReset, reason)
        stopControllerMachines(error)
        resolution.requested = []
        addressPrivacy = nil
        // A start-up under way is abandoned with the rest: the restart below replaces it (its request hears
        // the failure).
        let interrupted = startup
        startup = nil
        for command in commands.removeAll() {
            if let timer = command.timer { cancelTimer(timer) }
            if command.purpose == .startup {
                // The host's own restart is replaced by the one below, not failed (a failed restart would be
                // tried again later, and managers would see the controller off in between).
                if let interrupted, interrupted.id != Self.restartOperation {
                    complete(interrupted.id, .failure(error))
                }
                continue
            }
            commandFinished(command.purpose, opcode: command.opcode, .failure(error))
        }
        commands.credits = 1
        // HCI_Reset ends whatever the controller had taken: an answer to a command it never answered does not come
        // after it, and keeping those opcodes would discard the answers of the initialisation's own commands.
        commands.abandoned = [:]
        commands.probing = false
        commands.silentOpcodes = []
        if let timer = restart.timer { cancelTimer(timer) }
        restart.timer = nil
        tearingDownForReset = true
        for handle in links.keys.sorted() {
            linkDown(handle, reason: .hardwareFailure, error: error, emit: false)
        }
        tearingDownForReset = false
        acl = ACLFlow()
        emit(.controllerResetting(reason))
        startInitialisation(id: Self.restartOperation)
    }

    /// The host's own initialisation ended: the layer above hears how. One that failed (a controller that does
    /// not answer HCI_Reset, or refuses a step) is tried again after 1 s, then 2, 4, … up to 32 s between tries,
    /// until it succeeds or the transport closes: the layer above shows the controller off meanwhile, and on
    /// again when it answers (a dongle's firmware that restarts slowly, a controller that hung for a while).
    mutating func restartCompleted(_ result: Result<HostOutput, HostError>) {
        switch result {
        case .success(.controller(let info)):
            if restart.failures > 0 {
                log(.notice, "the controller answered again after \(restart.failures) failed restarts")
            }
            restart.failures = 0
            emit(.controllerRestarted(.success(info)))
        case .success:
            restartFailed(HostError(.protocolError, "the controller's initialisation gave nothing"))
        case .failure(let error):
            restartFailed(error)
        }
    }

    private mutating func restartFailed(_ error: HostError) {
        guard !isClosed else {
            // The transport closed under it: nothing will be tried again, and `.transportClosed` says the rest.
            emit(.controllerRestarted(.failure(error)))
            return
        }
        restart.failures += 1
        let delay = Duration.seconds(1 << min(restart.failures - 1, 5))
        if Self.worthLogging(restart.failures) {
            log(
                .error,
                "the controller did not come back after a reset (\(error.message)); trying again in \(delay)"
                    + (restart.failures > 1 ? " (\(restart.failures) tries so far)" : ""))
        }
        if let timer = restart.timer { cancelTimer(timer) }
        restart.timer = startTimer(.restart, after: delay)
        emit(.controllerRestarted(.failure(error)))
    }

    /// The wait after a failed restart is over: the controller is initialised again, HCI_Reset first.
    mutating func restartDue(timer: HostTimerID) {
        guard restart.timer == timer else { return }
        restart.timer = nil
        // The layer above started the controller meanwhile: that start-up decides.
        guard startup == nil else { return }
        startInitialisation(id: Self.restartOperation)
    }
}

/// The host's tries at bringing back a controller it reset.
struct ControllerRestart: Sendable {
    /// Restarts that failed in a row.
    var failures = 0
    /// The wait before the next try.
    var timer: HostTimerID?
}
