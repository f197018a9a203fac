import BLECore
import BLEHCI
import BLETransport
import DequeModule
import NIOCore
import Synchronization

extension Host {
    /// Sends a command that completes with Command Complete; `completion` gets its return parameters, or
    /// the status the controller refused it with, or a timeout (after `configuration.commandTimeout`, the
    /// credit is reclaimed so a controller that drops a command does not stall the host).
    public func send<C: HCISyncCommand>(
        _ command: C,
        completion: @escaping @Sendable (Result<C.ReturnParameters, HostError>) -> Void
    ) {
        withCore { core, effects in send(command, &core, &effects, completion: completion) }
    }

    /// Sends a command acknowledged by Command Status; `completion` reports that status (its outcome arrives
    /// later as an event).
    public func send<C: HCIAsyncCommand>(
        _ command: C, completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        withCore { core, effects in send(command, &core, &effects, completion: completion) }
    }

    func send<C: HCISyncCommand>(
        _ command: C, _ core: inout HostCore, _ effects: inout Effects,
        completion: @escaping @Sendable (Result<C.ReturnParameters, HostError>) -> Void
    ) {
        enqueue(command.packet, isAsync: false, &core, &effects) { outcome in
            completion(Self.decodeReturn(C.self, outcome))
        }
    }

    func send<C: HCIAsyncCommand>(
        _ command: C, _ core: inout HostCore, _ effects: inout Effects,
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        enqueue(command.packet, isAsync: true, &core, &effects) { outcome in
            switch outcome {
            case .status(let status) where status.status == .success: completion(.success(()))
            case .status(let status):
                completion(.failure(HostError(.hci(status.status), "\(C.opcode) was refused: \(status.status)")))
            case .complete(let complete):
                let status = complete.status ?? .unspecifiedError
                completion(.failure(HostError(.hci(status), "\(C.opcode) was refused: \(status)")))
            case .failed(let error): completion(.failure(error))
            }
        }
    }

    static func decodeReturn<C: HCISyncCommand>(_: C.Type, _ outcome: CommandOutcome) -> Result<
        C.ReturnParameters, HostError
    > {
        switch outcome {
        case .complete(let complete):
            guard let status = complete.status else {
                return .failure(HostError(.protocolError, "\(C.opcode) completed without a status"))
            }
            guard status == .success else {
                // Real controllers often send the status alone on error: the rest is not decoded.
                return .failure(HostError(.hci(status), "\(C.opcode) failed: \(status)"))
            }
            var buffer = ByteBuffer(bytes: complete.returnParameters.dropFirst())
            do {
                return .success(try C.ReturnParameters(decoding: &buffer))
            } catch {
                return .failure(HostError(.protocolError, "\(C.opcode) returned malformed parameters: \(error)"))
            }
        case .status(let status):
            // A controller may refuse any command with Command Status.
            let code = status.status == .success ? HCIStatus.unspecifiedError : status.status
            return .failure(HostError(.hci(code), "\(C.opcode) was refused: \(code)"))
        case .failed(let error):
            return .failure(error)
        }
    }

    func enqueue(
        _ packet: HCICommandPacket, isAsync: Bool, _ core: inout HostCore, _ effects: inout Effects,
        completion: @escaping @Sendable (CommandOutcome) -> Void
    ) {
        guard !core.closed else {
            let error = HostError(.transportClosed, "\(packet.opcode) not sent: the transport is closed")
            effects.call { completion(.failed(error)) }
            return
        }
        core.commandQueue.append(QueuedCommand(packet: packet, isAsync: isAsync, complete: completion))
        pumpCommands(&core, &effects)
    }

    func pumpCommands(_ core: inout HostCore, _ effects: inout Effects) {
        while core.commandCredits > 0, let next = core.commandQueue.popFirst() {
            core.commandCredits -= 1
            let serial = core.nextCommandSerial()
            let opcode = next.packet.opcode
            let timer = scheduler.schedule(after: configuration.commandTimeout) { [weak self] in
                self?.commandTimedOut(serial: serial)
            }
            core.inFlight.append(InFlightCommand(opcode: opcode, serial: serial, timer: timer, complete: next.complete))
            effects.send(.command(next.packet))
        }
    }

    func commandAnswered(
        opcode: HCIOpcode, credits: UInt8, outcome: CommandOutcome,
        _ core: inout HostCore, _ effects: inout Effects
    ) {
        // Num_HCI_Command_Packets is how many commands the controller now accepts.
        core.commandCredits = Int(credits)
        if let stale = core.abandonedCommands[opcode], stale > 0 {
            // The late answer to a command that already timed out: it must not complete a newer command
            // with the same opcode.
            core.abandonedCommands[opcode] = stale > 1 ? stale - 1 : nil
        } else if let index = core.inFlight.firstIndex(where: { $0.opcode == opcode }) {
            let command = core.inFlight.remove(at: index)
            command.timer?.cancel()
            effects.call { command.complete(outcome) }
        }
        pumpCommands(&core, &effects)
    }

    private func commandTimedOut(serial: UInt64) {
        withCore { core, effects in
            guard let index = core.inFlight.firstIndex(where: { $0.serial == serial }) else { return }
            let command = core.inFlight.remove(at: index)
            // The controller never answered: reclaim the credit so the host goes on, and remember that an
            // answer may still come late.
            core.commandCredits = max(core.commandCredits, 1)
            core.abandonedCommands[command.opcode, default: 0] += 1
            let error = HostError(.timeout, "\(command.opcode) got no answer within \(configuration.commandTimeout)")
            effects.call { command.complete(.failed(error)) }
            pumpCommands(&core, &effects)
        }
    }
}

extension HostCore {
    mutating func nextCommandSerial() -> UInt64 {
        commandSerial &+= 1
        return commandSerial
    }
}
