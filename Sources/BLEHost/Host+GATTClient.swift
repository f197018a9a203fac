import BLEATT
import BLECore
import BLEGATT
import BLETransport
import DequeModule
import NIOCore
import Synchronization

extension GATTError.Code {
    /// The host's transport closed under a pending operation (reported as `HostError.Code.transportClosed`).
    static let hostTransportClosed = GATTError.Code(rawValue: "transport closed")
}

extension Host {
    /// Runs one GATT client procedure on a link; `completion` is called once, outside the host's lock.
    func runOperation(
        _ operation: GATTOperation, on handle: ConnectionHandle,
        completion: @escaping @Sendable (Result<GATTResult, HostError>) -> Void
    ) {
        withCore { core, effects in
            guard var link = core.links[handle] else {
                effects.call { completion(.failure(HostError(.invalidState, "no link \(handle)"))) }
                return
            }
            let id = GATTOperationID(core.nextOperationID)
            core.nextOperationID += 1
            core.clientOperations[id] = { result in completion(result.mapError(Self.hostError)) }
            let actions = link.client.start(operation, id: id)
            runClient(actions, &link, &core, &effects)
            core.links[handle] = link
            pumpACL(&core, &effects)
        }
    }

    static func hostError(_ error: GATTError) -> HostError {
        switch error.code {
        case .errorResponse:
            let code = error.attErrorCode ?? .unlikelyError
            return HostError(
                .att(code),
                "the peer refused: \(code.name ?? code.description)"
                    + (error.handle.map { " (handle \($0))" } ?? ""))
        case .disconnected: return HostError(.disconnected, "the link went down before the operation completed")
        case .hostTransportClosed:
            return HostError(.transportClosed, "the controller's transport closed before the operation completed")
        case .transactionTimeout:
            return HostError(.timeout, "the peer did not answer within the ATT transaction timeout (30 s)")
        case .bearerClosed: return HostError(.protocolError, "the ATT bearer closed: \(error)")
        case .rejected: return HostError(.invalidParameters, "\(error)")
        default: return HostError(.protocolError, "\(error)")
        }
    }

    /// Discovers primary services: all of them, or those of one type.
    public func discoverServices(
        on handle: ConnectionHandle, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        let operation: GATTOperation = uuid.map { .discoverPrimaryServices(uuid: $0) } ?? .discoverAllPrimaryServices
        runOperation(operation, on: handle) { result in
            completion(
                result.flatMap { r in
                    if case .services(let s) = r { return .success(s) }
                    return .failure(HostError(.protocolError, "unexpected result \(r)"))
                })
        }
    }

    /// Finds the services `service` includes.
    public func discoverIncludedServices(
        on handle: ConnectionHandle, in service: GATTService,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        runOperation(.findIncludedServices(service), on: handle) { result in
            completion(
                result.flatMap { r in
                    if case .includedServices(let s) = r { return .success(s) }
                    if case .services(let s) = r { return .success(s) }
                    return .failure(HostError(.protocolError, "unexpected result \(r)"))
                })
        }
    }

    /// Discovers the characteristics of `service`: all, or those of one type.
    public func discoverCharacteristics(
        on handle: ConnectionHandle, in service: GATTService, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTCharacteristic], HostError>) -> Void
    ) {
        runOperation(.discoverCharacteristics(service, uuid: uuid), on: handle) { result in
            completion(
                result.flatMap { r in
                    if case .characteristics(let c) = r { return .success(c) }
                    return .failure(HostError(.protocolError, "unexpected result \(r)"))
                })
        }
    }

    /// Discovers the descriptors of `characteristic`.
    public func discoverDescriptors(
        on handle: ConnectionHandle, of characteristic: GATTCharacteristic,
        completion: @escaping @Sendable (Result<[GATTDescriptor], HostError>) -> Void
    ) {
        runOperation(.discoverDescriptors(characteristic), on: handle) { result in
            completion(
                result.flatMap { r in
                    if case .descriptors(let d) = r { return .success(d) }
                    return .failure(HostError(.protocolError, "unexpected result \(r)"))
                })
        }
    }

    /// Reads an attribute's value, continuing with Read Blob for long values.
    public func read(
        on handle: ConnectionHandle, attribute: AttributeHandle,
        completion: @escaping @Sendable (Result<[UInt8], HostError>) -> Void
    ) {
        runOperation(.read(attribute), on: handle) { result in
            completion(
                result.flatMap { r in
                    if case .value(let v) = r { return .success(v) }
                    return .failure(HostError(.protocolError, "unexpected result \(r)"))
                })
        }
    }

    /// Writes an attribute's value with a response, with the long-write procedure when it does not fit
    /// ATT_MTU-3.
    public func write(
        on handle: ConnectionHandle, attribute: AttributeHandle, value: [UInt8],
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        runOperation(.write(attribute, value: value), on: handle) { result in
            completion(result.map { _ in () })
        }
    }

    /// Queues a Write Command. Returns false, sending nothing, when the link's queue is full or the value does
    /// not fit ATT_MTU-3; `.readyToWriteWithoutResponse` follows once there is room, after a refusal or after
    /// a write that filled the queue.
    public func writeWithoutResponse(on handle: ConnectionHandle, attribute: AttributeHandle, value: [UInt8]) -> Bool {
        withCore { core, effects -> Bool in
            guard var link = core.links[handle] else { return false }
            guard link.queuedWriteCommands < configuration.writeWithoutResponseQueueDepth else {
                link.writeCommandsRefused = true
                core.links[handle] = link
                return false
            }
            guard let pdu = try? link.client.writeWithoutResponse(attribute, value: value),
                let actions = try? link.bearer.sendUnacknowledged(pdu)
            else { return false }
            runBearer(actions, kind: .writeCommand, &link, &core, &effects)
            core.links[handle] = link
            pumpACL(&core, &effects)
            // The queue is now full: whoever queues Write Commands will wait for room, whether or not it tries
            // (and is refused) first, so `.readyToWriteWithoutResponse` must follow when it drains.
            if var after = core.links[handle], after.queuedWriteCommands >= configuration.writeWithoutResponseQueueDepth
            {
                after.writeCommandsRefused = true
                core.links[handle] = after
            }
            return true
        }
    }

    /// Whether a Write Command can be queued on this link now.
    public func canWriteWithoutResponse(on handle: ConnectionHandle) -> Bool {
        core.withLock { core in
            guard let link = core.links[handle] else { return false }
            return link.queuedWriteCommands < configuration.writeWithoutResponseQueueDepth
        }
    }

    /// The ATT_MTU of a link (23 until an exchange raised it).
    public func mtu(on handle: ConnectionHandle) -> Int {
        core.withLock { Int($0.links[handle]?.bearer.mtu ?? 23) }
    }
}
