import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP

extension GATTError.Code {
    /// The host's transport closed under a pending operation (reported as `HostError.Code.transportClosed`).
    static let hostTransportClosed = GATTError.Code(rawValue: "transport closed")
}

extension HostMachine {
    /// Performs an ATT bearer's actions on one link. `kind` tags the PDUs sent (Write Commands and notifications
    /// count against their queue depths).
    /// `delivery` names the operation completed when the PDU sent here is delivered (a Write Command's).
    mutating func runBearer(
        _ actions: [ATTBearer.Action], on handle: ConnectionHandle, kind: OutgoingFragment.Kind,
        delivery: HostOperationID? = nil
    ) {
        for action in actions {
            guard links.contains(handle) else { return }
            switch action {
            case .send(let pdu):
                queueL2CAP(pdu, channel: .att, kind: kind, on: handle, delivery: delivery)
            case .startTimer(let timer, _):
                // Both ATT timers are the transaction timeout (Vol 3, Part F, 3.3.3): the configured one.
                if let running = links[handle]?.attTimers[timer] { cancelTimer(running) }
                let id = startTimer(.att(handle, timer), after: configuration.attTransactionTimeout)
                links[handle]?.attTimers[timer] = id
            case .cancelTimer(let timer):
                if let running = links[handle]?.attTimers.removeValue(forKey: timer) { cancelTimer(running) }
            case .complete(let request, let result):
                let clientActions = links[handle]?.client.requestCompleted(request, result) ?? []
                runClient(clientActions, on: handle)
            case .indicationComplete(let request, let failure):
                if let sent = serviceChangedIndications.removeValue(forKey: request), failure == nil {
                    server.serviceChangedConfirmed(by: handle, version: sent.version)
                }
                if let (_, id) = indicationDeliveries.removeValue(forKey: request) {
                    if failure == nil {
                        packetDelivered(for: id)
                    } else if let failure, pendingDeliveries.removeValue(forKey: id) != nil {
                        complete(id, .failure(Self.indicationError(failure)))
                    }
                }
                if let pending = links[handle]?.pendingIndications {
                    links[handle]?.pendingIndications = max(0, pending - 1)
                }
                checkNotifyRoom()
            case .request(let pdu), .command(let pdu):
                runServer(server.received(pdu, from: handle))
            case .notification(let notification):
                emit(
                    .valueUpdated(
                        handle, attribute: notification.handle, value: notification.value, isIndication: false))
            case .indication(let indication):
                emit(.valueUpdated(handle, attribute: indication.handle, value: indication.value, isIndication: true))
            case .mtuChanged(let mtu):
                links[handle]?.client.mtuChanged(mtu)
                server.mtuChanged(handle, to: mtu)
                emit(.mtuChanged(handle, mtu: Int(mtu)))
            case .closeBearer:
                // The bearer is unusable (transaction timeout or a protocol violation): no ATT PDU may be sent on
                // this link any more, so the link goes (Vol 3, Part F, 3.3.3).
                let disconnect = HCIDisconnect(handle: handle, reason: .remoteUserTerminatedConnection)
                enqueue(disconnect.packet, for: .none)
            }
        }
    }

    mutating func runClient(_ actions: [GATTClient.Action], on handle: ConnectionHandle) {
        for action in actions {
            switch action {
            case .sendRequest(let pdu, let request):
                let bearerActions = links[handle]?.bearer.sendRequest(pdu, id: request) ?? []
                runBearer(bearerActions, on: handle, kind: .other)
            case .complete(let operation, let result):
                guard let waiting = clientOperations.removeValue(forKey: operation), let id = waiting else { continue }
                complete(id, result.map { .gatt($0) }.mapError(Self.hostError))
            }
        }
    }

    mutating func runServer(_ actions: [GATTServer.Action]) {
        for action in actions {
            switch action {
            case .respond(let connection, let pdu):
                let bearerActions = links[connection]?.bearer.sendResponse(pdu) ?? []
                runBearer(bearerActions, on: connection, kind: .other)
            case .readRequest(let id, let connection, let attribute, let offset):
                emit(.serverRead(id, connection, attribute: attribute, offset: offset))
            case .writeRequests(let id, let connection, let writes):
                emit(.serverWrite(id, connection, writes))
            case .subscriptionChanged(let connection, let value, let configuration):
                emit(
                    .subscriptionChanged(
                        connection, attribute: value, notify: configuration.contains(.notification),
                        indicate: configuration.contains(.indication)))
            case .valueWritten:
                break
            case .writeCommandRefused(let connection, let attribute, let code):
                counters.refusedWriteCommands += 1
                if Self.worthLogging(counters.refusedWriteCommands) {
                    log(
                        .notice,
                        "refused a Write Command to \(attribute): \(code.name ?? code.description) (never answered; \(counters.refusedWriteCommands) so far)",
                        connection: connection)
                }
            }
        }
    }

    /// After notifications drained: tell the application it may update subscribers again, if it was refused,
    /// once every link's queue is down to half its depth. Telling it at the first free place would have it
    /// refill one place at a time, each refill costing the application a callback and a refused update; from
    /// half, it sends half a queue per callback and the controller's buffers stay as full.
    mutating func checkNotifyRoom() {
        guard notifyRefused else { return }
        let lowWater = configuration.notificationQueueDepth / 2
        // By handle, read in place (the values would be copies).
        let full = links.containsHandle { handle in
            (links[handle]?.queuedNotifications ?? 0) + (links[handle]?.pendingIndications ?? 0) > lowWater
        }
        if !full {
            notifyRefused = false
            emit(.readyToNotify)
        }
    }

    // MARK: GATT client

    /// Starts a GATT client procedure on a link; `id` nil for the machine's own, whose result nobody hears.
    mutating func startClientOperation(_ operation: GATTOperation, on handle: ConnectionHandle, id: HostOperationID?) {
        guard links.contains(handle) else {
            if let id { complete(id, .failure(HostError(.invalidState, "no link \(handle)"))) }
            return
        }
        let operationID = GATTOperationID(nextClientOperation)
        nextClientOperation += 1
        clientOperations[operationID] = .some(id)
        let actions = links[handle]?.client.start(operation, id: operationID) ?? []
        runClient(actions, on: handle)
        pumpACL()
    }

    /// Why an indication was not confirmed.
    static func indicationError(_ failure: ATTRequestFailure) -> HostError {
        switch failure {
        case .disconnected: HostError(.disconnected, "the link went down before the client confirmed the indication")
        case .bearerClosed(let error) where error.code == .transactionTimeout:
            HostError(
                .transactionTimeout, "the client did not confirm the indication within the ATT transaction timeout")
        case .bearerClosed(let error): HostError(.protocolError, "the ATT bearer closed: \(error)")
        case .rejected(let error): HostError(.invalidParameters, "the indication was refused: \(error)")
        case .errorResponse(let response): HostError(.att(response.errorCode), "the client refused the indication")
        }
    }

    static func hostError(_ error: GATTError) -> HostError {
        switch error.code {
        case .errorResponse:
            let code = error.attErrorCode ?? .unlikelyError
            return HostError(
                .att(code),
                "the peer refused: \(code.name ?? code.description)" + (error.handle.map { " (handle \($0))" } ?? ""))
        case .disconnected:
            return HostError(.disconnected, "the link went down before the operation completed")
        case .hostTransportClosed:
            return HostError(.transportClosed, "the controller's transport closed before the operation completed")
        case .transactionTimeout:
            return HostError(.transactionTimeout, "the peer did not answer within the ATT transaction timeout (30 s)")
        case .bearerClosed:
            return HostError(.protocolError, "the ATT bearer closed: \(error)")
        case .rejected:
            return HostError(.invalidParameters, "\(error)")
        case .invalidResponse where error.attErrorCode != nil:
            // A response the client refuses for a reason ATT has a code for (a value longer than 512 octets).
            return HostError(.att(error.attErrorCode!), "\(error)")
        default:
            return HostError(.protocolError, "\(error)")
        }
    }

    /// Queues a Write Command. Returns false, sending nothing, when the link's queue is full or the value does
    /// not fit ATT_MTU-3; `.readyToWriteWithoutResponse` follows once there is room, after a refusal or after a
    /// write that filled the queue. When accepted and `delivery` is given, that operation completes once the
    /// controller reports the command's last packet delivered (Number Of Completed Packets: the peer's link layer
    /// acknowledged it), or fails when the link goes down first.
    public mutating func writeWithoutResponse(
        on handle: ConnectionHandle, attribute: AttributeHandle, value: [UInt8], delivery: HostOperationID? = nil
    ) -> (accepted: Bool, actions: [HostAction]) {
        let accepted = queueWriteCommand(on: handle, attribute: attribute, value: value, delivery: delivery)
        return (accepted, takeActions())
    }

    private mutating func queueWriteCommand(
        on handle: ConnectionHandle, attribute: AttributeHandle, value: [UInt8], delivery: HostOperationID?
    ) -> Bool {
        guard let queued = links[handle]?.queuedWriteCommands else { return false }
        let depth = configuration.writeWithoutResponseQueueDepth
        guard queued < depth else {
            links[handle]?.writeCommandsRefused = true
            return false
        }
        guard let pdu = try? links[handle]?.client.writeWithoutResponse(attribute, value: value),
            let encoded = try? links[handle]?.bearer.sendUnacknowledged(pdu)
        else { return false }
        if let delivery { beginDelivery(delivery) }
        queueL2CAP(encoded, channel: .att, kind: .writeCommand, on: handle, delivery: delivery)
        if let delivery { endDelivery(delivery) }
        pumpACL()
        // The queue is now full: whoever queues Write Commands will wait for room, whether or not it tries (and is
        // refused) first, so `.readyToWriteWithoutResponse` must follow when it drains.
        if let after = links[handle]?.queuedWriteCommands, after >= depth {
            links[handle]?.writeCommandsRefused = true
        }
        return true
    }

    /// Whether a Write Command can be queued on this link now.
    public func canWriteWithoutResponse(on handle: ConnectionHandle) -> Bool {
        guard let queued = links[handle]?.queuedWriteCommands else { return false }
        return queued < configuration.writeWithoutResponseQueueDepth
    }

    /// The ATT_MTU of a link (23 until an exchange raised it).
    public func mtu(on handle: ConnectionHandle) -> Int {
        Int(links[handle]?.bearer.mtu ?? 23)
    }

    /// A link's parameters as the LL procedures left them; nil when there is no such link.
    public func linkInfo(on handle: ConnectionHandle) -> LinkInfo? { links[handle].map(Self.info) }

    /// The links up now, by handle.
    public var linkInfos: [LinkInfo] { links.values.map(Self.info).sorted { $0.handle < $1.handle } }

    /// A link's parameters with its encryption as its security state has it.
    private static func info(_ link: Link) -> LinkInfo {
        var info = link.info
        info.encrypted = link.security.encrypted
        return info
    }
}
