import BLECore
import BLEHCI
import BLEL2CAP
import DequeModule
import NIOCore

/// What an HCI command is for: who hears its answer.
enum CommandPurpose: Sendable, Hashable {
    /// A raw command of the layer above: the answer completes the operation as it came.
    case operation(HostOperationID)
    /// The current step of the start-up sequence.
    case startup
    /// The scan machine's command in flight.
    case scan
    /// The advertising machine's command in flight.
    case advertising
    /// The connect machine's command in flight.
    case connecting
    /// Read RSSI for this request.
    case readRSSI(HostOperationID)
    /// LE Connection Update applying a peripheral's L2CAP request: the answer goes back to the peer.
    case connectionUpdate(ConnectionHandle, L2CAPSignalingIdentifier)
    /// LE Enable Encryption on this link: a refusal fails what waited for the encryption.
    case encryption(ConnectionHandle)
    /// LE Set Random Address with the host's next private address.
    case randomAddress
    /// Read Local Version Information after a command timed out: is the controller alive?
    case probe
    /// A command the host sends on its own account and whose answer changes nothing (LE Set Data Length, a
    /// Long Term Key negative reply, a disconnection after a closed bearer).
    case none
}

/// HCI command flow control (Core Spec 5.4, Vol 4, Part E, 4.4): the controller says in every Command
/// Complete and Command Status how many commands it accepts (Num_HCI_Command_Packets); commands wait here
/// for a credit.
struct CommandFlow: Sendable {
    struct Queued: Sendable {
        var packet: HCICommandPacket
        var purpose: CommandPurpose
    }

    struct InFlight: Sendable {
        var opcode: HCIOpcode
        var purpose: CommandPurpose
        var timer: HostTimerID?
        /// How long it may wait for its answer.
        var timeout: Duration = .zero
    }

    var credits = 1
    var queue: Deque<Queued> = []
    var inFlight: [InFlight] = []
    /// Commands that timed out, by opcode: their answers, if they ever come, are discarded.
    var abandoned: [HCIOpcode: Int] = [:]
    /// Whether the probe a command timeout sends is under way (`HostMachine.commandTimedOut`).
    var probing = false
    /// The commands that timed out since the last probe was answered, for the reason a reset gives.
    var silentOpcodes: [HCIOpcode] = []

    /// Takes every command in flight and queued, in that order (the transport closed).
    mutating func removeAll() -> [InFlight] {
        let all = inFlight + queue.map { InFlight(opcode: $0.packet.opcode, purpose: $0.purpose, timer: nil) }
        inFlight = []
        queue = []
        return all
    }
}

extension HostMachine {
    /// Queues a command and sends what the credits allow.
    mutating func enqueue(_ packet: HCICommandPacket, for purpose: CommandPurpose) {
        guard !isClosed else {
            let error = HostError(.transportClosed, "\(packet.opcode) not sent: the transport is closed")
            commandFinished(purpose, opcode: packet.opcode, .failure(error))
            return
        }
        commands.queue.append(CommandFlow.Queued(packet: packet, purpose: purpose))
        pumpCommands()
    }

    mutating func pumpCommands() {
        while commands.credits > 0, let next = commands.queue.popFirst() {
            commands.credits -= 1
            // The first initialisation's commands wait longer (`startupCommandTimeout`); a restart's do not.
            let first = next.purpose == .startup && startup.map { $0.id != Self.restartOperation } == true
            let timeout = first ? configuration.startupCommandTimeout : configuration.commandTimeout
            let timer = startTimer(.command, after: timeout)
            commands.inFlight.append(
                .init(opcode: next.packet.opcode, purpose: next.purpose, timer: timer, timeout: timeout))
            send(.command(next.packet))
        }
    }

    /// Command Complete or Command Status.
    mutating func commandAnswered(opcode: HCIOpcode, credits: UInt8, _ answer: HCICommandAnswer) {
        // Num_HCI_Command_Packets is how many commands the controller now accepts.
        commands.credits = Int(credits)
        if let stale = commands.abandoned[opcode], stale > 0 {
            // The late answer to a command that already timed out: it must not complete a newer command with
            // the same opcode.
            commands.abandoned[opcode] = stale > 1 ? stale - 1 : nil
            counters.unexpectedCommandAnswers += 1
            log(.notice, "discarded a late answer to \(opcode), which had already timed out")
        } else if let index = commands.inFlight.firstIndex(where: { $0.opcode == opcode }) {
            let command = commands.inFlight.remove(at: index)
            if let timer = command.timer { cancelTimer(timer) }
            commandFinished(command.purpose, opcode: opcode, .success(answer))
        } else if opcode.rawValue != 0 {
            // (Opcode 0 only returns credits: Vol 4, Part E, 7.7.14.)
            counters.unexpectedCommandAnswers += 1
            log(.notice, "ignored an answer to \(opcode), which the host did not send")
        }
        pumpCommands()
    }

    /// A command got no answer within `configuration.commandTimeout`. Its request fails with `.commandTimeout` and
    /// the credit comes back, since a controller may ignore a command it does not support (Bumble's ignores Read
    /// RSSI, among others) and still be alive. Whether it is, a probe finds out: Read Local Version Information,
    /// which every controller answers (Vol 4, Part E, 7.4.1), sent before anything queued. If the probe goes
    /// unanswered too, the controller stopped answering: it is reset as after a hardware error
    /// (`controllerFailed`), so a hung controller costs two command timeouts, not every request from then on. The
    /// start-up sequence's own commands are not probed: a start-up that times out fails (and a restart is tried
    /// again later, `restartCompleted`).
    mutating func commandTimedOut(timer: HostTimerID) {
        guard let index = commands.inFlight.firstIndex(where: { $0.timer == timer }) else { return }
        let command = commands.inFlight.remove(at: index)
        // The controller never answered: reclaim the credit so the host goes on, and remember that an answer
        // may still come late.
        commands.credits = max(commands.credits, 1)
        commands.abandoned[command.opcode, default: 0] += 1
        counters.commandTimeouts += 1
        let error = HostError(.commandTimeout, "\(command.opcode) got no answer within \(command.timeout)")
        log(.warning, "the controller did not answer \(command.opcode) within \(command.timeout)")
        if command.purpose == .probe, startup == nil, restart.timer == nil {
            let opcodes = (commands.silentOpcodes + [command.opcode]).map { "\($0)" }.joined(separator: " and ")
            controllerFailed(
                reason: "the controller stopped answering commands (\(opcodes) got no answer within "
                    + "\(configuration.commandTimeout)) and is being reset")
            return
        }
        // Not while the controller is being initialised or a restart waits to be tried again: that already tells
        // whether it answers. The probe is queued before the command's owner hears of the timeout, since the
        // owner may send at once (the scan machine does) and take the credit first.
        if !isClosed, command.purpose != .startup, command.purpose != .probe, startup == nil, restart.timer == nil {
            commands.silentOpcodes.append(command.opcode)
            if !commands.probing {
                commands.probing = true
                commands.queue.prepend(CommandFlow.Queued(packet: probe(), purpose: .probe))
            }
        }
        commandFinished(command.purpose, opcode: command.opcode, .failure(error))
        pumpCommands()
    }

    /// A command every controller answers and that changes nothing (Vol 4, Part E, 7.4): Read Local Version
    /// Information, or another when an answer to that one is awaited late (it would be taken for that answer).
    private func probe() -> HCICommandPacket {
        let candidates: [HCICommandPacket] = [
            HCIReadLocalVersionInformation().packet, HCIReadBDADDR().packet,
            HCIReadLocalSupportedCommands().packet,
        ]
        return candidates.first { commands.abandoned[$0.opcode] == nil } ?? candidates[0]
    }

    /// Hands a command's outcome to whoever it was for.
    mutating func commandFinished(
        _ purpose: CommandPurpose, opcode: HCIOpcode, _ result: Result<HCICommandAnswer, HostError>
    ) {
        switch purpose {
        case .operation(let id):
            complete(id, result.map { .command($0) })
        case .startup:
            startupAnswered(result)
        case .scan:
            runScan(scan.answered(Self.statusOnly(opcode, result)))
        case .advertising:
            runAdvertising(advertising.answered(Self.statusOnly(opcode, result)))
        case .connecting:
            runConnect(connecting.answered(Self.statusOnly(opcode, result)))
        case .readRSSI(let id):
            complete(id, Self.decode(HCIReadRSSI.self, result).map { .rssi(Int($0.rssi)) })
        case .connectionUpdate(let handle, let identifier):
            let accepted = (try? Self.statusOnly(opcode, result).get()) != nil
            let actions =
                links[handle]?.signaling.respondToConnectionParameterUpdate(
                    identifier: identifier, accepted: accepted) ?? []
            runSignaling(actions, on: handle)
            pumpACL()
        case .encryption(let handle):
            if case .failure(let error) = Self.statusOnly(opcode, result) { encryptionRefused(handle, error) }
        case .randomAddress:
            randomAddressAnswered(Self.statusOnly(opcode, result))
        case .probe:
            // Answered (the controller is alive) or failed with the rest (a reset, the transport's end).
            commands.probing = false
            commands.silentOpcodes = []
        case .none:
            break
        }
    }

    /// Whether a command succeeded, whichever way it was answered: Command Status (success means pending) or
    /// Command Complete (its first return parameter is the status).
    static func statusOnly(_ opcode: HCIOpcode, _ result: Result<HCICommandAnswer, HostError>) -> Result<
        Void, HostError
    > {
        switch result {
        case .success(.status(let status)) where status.status == .success:
            return .success(())
        case .success(.status(let status)):
            return .failure(HostError(.hci(status.status), "\(opcode) was refused: \(status.status)"))
        case .success(.complete(let complete)):
            let status = complete.status ?? .unspecifiedError
            guard status == .success else { return .failure(HostError(.hci(status), "\(opcode) failed: \(status)")) }
            return .success(())
        case .failure(let error):
            return .failure(error)
        }
    }

    /// The return parameters of a command answered by Command Complete. Real controllers often send the status
    /// alone on error: the rest is decoded only on success.
    public static func decode<C: HCISyncCommand>(_: C.Type, _ result: Result<HCICommandAnswer, HostError>)
        -> Result<C.ReturnParameters, HostError>
    {
        switch result {
        case .success(.complete(let complete)):
            guard let status = complete.status else {
                return .failure(HostError(.protocolError, "\(C.opcode) completed without a status"))
            }
            guard status == .success else {
                return .failure(HostError(.hci(status), "\(C.opcode) failed: \(status)"))
            }
            var buffer = ByteBuffer(bytes: complete.returnParameters.dropFirst())
            do {
                return .success(try C.ReturnParameters(decoding: &buffer))
            } catch {
                return .failure(HostError(.protocolError, "\(C.opcode) returned malformed parameters: \(error)"))
            }
        case .success(.status(let status)):
            // A controller may refuse any command with Command Status.
            let code = status.status == .success ? HCIStatus.unspecifiedError : status.status
            return .failure(HostError(.hci(code), "\(C.opcode) was refused: \(code)"))
        case .failure(let error):
            return .failure(error)
        }
    }

    /// The outcome of a command answered by Command Status.
    public static func decodeStatus<C: HCIAsyncCommand>(_: C.Type, _ result: Result<HCICommandAnswer, HostError>)
        -> Result<Void, HostError>
    {
        switch result {
        case .success(.status(let status)) where status.status == .success:
            return .success(())
        case .success(.status(let status)):
            return .failure(HostError(.hci(status.status), "\(C.opcode) was refused: \(status.status)"))
        case .success(.complete(let complete)):
            let status = complete.status ?? .unspecifiedError
            return .failure(HostError(.hci(status), "\(C.opcode) was refused: \(status)"))
        case .failure(let error):
            return .failure(error)
        }
    }
}
