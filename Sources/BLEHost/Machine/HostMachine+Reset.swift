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
        let reason =
            "the controller reported a hardware error (code 0x\(code < 16 ? "0" : "")\(hex)) and is being reset"
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
                if let interrupted { complete(interrupted.id, .failure(error)) }
                continue
            }
            commandFinished(command.purpose, opcode: command.opcode, .failure(error))
        }
        commands.credits = 1
        for handle in links.keys.sorted() {
            linkDown(handle, reason: .hardwareFailure, error: error, emit: false)
        }
        acl = ACLFlow()
        emit(.controllerResetting(reason))
        startInitialisation(id: Self.restartOperation)
    }

    /// The host's own initialisation ended: the layer above hears how.
    mutating func restartCompleted(_ result: Result<HostOutput, HostError>) {
        switch result {
        case .success(.controller(let info)):
            emit(.controllerRestarted(.success(info)))
        case .success:
            emit(
                .controllerRestarted(
                    .failure(HostError(.protocolError, "the controller's initialisation gave nothing"))))
        case .failure(let error):
            emit(.controllerRestarted(.failure(error)))
        }
    }
}
