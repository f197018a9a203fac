import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import BLETransport
import DequeModule
import NIOCore
import Synchronization

extension Host {
    /// LE Connection Complete (either form): a link is up, or an initiation ended.
    func connectionComplete(
        status: HCIStatus, handle: ConnectionHandle, role: HCIRole, peer: BluetoothAddress,
        interval: UInt16, latency: UInt16, timeout: UInt16,
        _ core: inout HostCore, _ effects: inout Effects
    ) {
        guard status == .success else {
            // An initiation that failed or was cancelled (0x02 after LE Create Connection Cancel), or directed
            // advertising that timed out (peripheral role: nothing to report upward but the end of advertising).
            if role == .central || core.initiating != nil, let target = core.initiating {
                core.initiating = nil
                let error =
                    status == .unknownConnectionIdentifier
                    ? HostError(.hci(status), "the connection attempt was cancelled")
                    : HostError(.hci(status), "the connection failed: \(status)")
                effects.emit(.connectionFailed(peer: target, error: error))
            } else if core.advertising {
                core.advertising = false
                effects.emit(.advertisingEnded)
            }
            return
        }
        let linkRole: LinkRole = role == .central ? .central : .peripheral
        let info = LinkInfo(
            handle: handle, role: linkRole, peer: peer, interval: interval, latency: latency,
            supervisionTimeout: timeout)
        var link = Link(info: info, preferredMTU: configuration.preferredMTU)
        if linkRole == .central { core.initiating = nil }
        core.server.connected(handle)
        effects.emit(.connected(info))
        if linkRole == .peripheral && core.advertising {
            // Legacy advertising stops when a central connects (Vol 6, Part B, 4.4.2).
            core.advertising = false
            effects.emit(.advertisingEnded)
        }
        if linkRole == .central {
            // As iOS does, the central offers its MTU at once; requests the application makes meanwhile queue
            // behind the exchange.
            let id = GATTOperationID(core.nextOperationID)
            core.nextOperationID += 1
            let actions = link.client.start(
                .exchangeMTU(clientRxMTU: UInt16(clamping: configuration.preferredMTU)), id: id)
            core.clientOperations[id] = { _ in }
            runClient(actions, &link, &core, &effects)
        }
        core.links[handle] = link
        core.linkOrder.append(handle)
        if let info = core.info,
            HCISupportedCommands(octets: info.supportedCommands).supports(HCILESetDataLength.opcode) == true,
            configuration.preferredDataLength > 27
        {
            let octets = UInt16(clamping: configuration.preferredDataLength)
            send(HCILESetDataLength(handle: handle, txOctets: octets, txTime: (octets + 14) * 8), &core, &effects) {
                _ in
            }
        }
        pumpACL(&core, &effects)
    }

    /// A link went down (or the transport closed): every operation pending on it completes with `error`
    /// before `.disconnected` is emitted.
    func linkDown(
        _ handle: ConnectionHandle, reason: HCIStatus, error: HostError, emit: Bool,
        _ core: inout HostCore, _ effects: inout Effects
    ) {
        guard var link = core.links.removeValue(forKey: handle) else { return }
        core.linkOrder.removeAll { $0 == handle }
        for (_, work) in link.attTimers { work.work.cancel() }
        for (_, work) in link.signalingTimers { work.cancel() }
        // The controller frees the buffers of a closed link (Vol 4, Part E, 4.3).
        core.aclCredits = min(core.aclCredits + link.inFlight, core.aclTotal)
        // Fail what the client was doing with the caller's error, then let the bearer and client wind down.
        let failed = link.client.linkDisconnected()
        for action in failed {
            if case .complete(let id, _) = action, let completion = core.clientOperations.removeValue(forKey: id) {
                let code: GATTError.Code = error.code == .transportClosed ? .hostTransportClosed : .disconnected
                effects.call { completion(.failure(GATTError(code, error.message))) }
            }
        }
        _ = link.bearer.linkDisconnected()
        _ = link.signaling.linkDisconnected()
        core.server.disconnected(handle)
        if emit { effects.emit(.disconnected(handle, reason: reason)) }
        pumpACL(&core, &effects)
        // An application refused because this link's queue was full must not wait for it to drain.
        checkNotifyRoom(&core, &effects)
    }

    // MARK: ACL out

    /// Queues an L2CAP PDU on a link, fragmented to the controller's LE ACL buffer size.
    func queueL2CAP(
        _ payload: ByteBuffer, channel: L2CAPChannelID, kind: OutgoingPacket.Kind,
        _ link: inout Link, _ core: HostCore
    ) {
        let frame = L2CAPBasicFrame(channelID: channel, payload: payload)
        let fragments = L2CAPFragmenter(maximumFragmentLength: core.aclLength).fragments(of: frame)
        for (i, fragment) in fragments.enumerated() {
            let packet = HCIACLDataPacket(
                handle: link.info.handle,
                packetBoundary: .init(rawValue: fragment.boundary.rawValue),
                data: Array(fragment.data.readableBytesView))
            link.outgoing.append(OutgoingPacket(packet: packet, kind: kind, isLast: i == fragments.count - 1))
        }
        switch kind {
        case .writeCommand: link.queuedWriteCommands += 1
        case .notification: link.queuedNotifications += 1
        case .other: break
        }
    }

    /// Hands queued fragments to the controller while it has free buffers, taking links in turn.
    func pumpACL(_ core: inout HostCore, _ effects: inout Effects) {
        var notificationsDrained = false
        while core.aclCredits > 0, !core.linkOrder.isEmpty {
            var sent = false
            for step in 0..<core.linkOrder.count {
                let index = (core.nextLinkTurn + step) % core.linkOrder.count
                let handle = core.linkOrder[index]
                guard var link = core.links[handle], let next = link.outgoing.popFirst() else { continue }
                core.aclCredits -= 1
                link.inFlight += 1
                effects.send(.acl(next.packet))
                if next.isLast {
                    switch next.kind {
                    case .writeCommand:
                        link.queuedWriteCommands -= 1
                        if link.writeCommandsRefused
                            && link.queuedWriteCommands < configuration.writeWithoutResponseQueueDepth
                        {
                            link.writeCommandsRefused = false
                            effects.emit(.readyToWriteWithoutResponse(handle))
                        }
                    case .notification:
                        link.queuedNotifications -= 1
                        notificationsDrained = true
                    case .other: break
                    }
                }
                core.links[handle] = link
                core.nextLinkTurn = (index + 1) % core.linkOrder.count
                sent = true
                break
            }
            if !sent { break }
        }
        if notificationsDrained { checkNotifyRoom(&core, &effects) }
    }

    // MARK: ACL in

    func receivedACL(_ packet: HCIACLDataPacket, _ core: inout HostCore, _ effects: inout Effects) {
        guard var link = core.links[packet.handle],
            let boundary = L2CAPPacketBoundary(rawValue: packet.packetBoundary.rawValue)
        else { return }
        let output = link.recombiner.receive(ByteBuffer(bytes: packet.data), boundary: boundary)
        if let frame = output.frame {
            switch frame.channelID {
            case .att:
                let actions = link.bearer.received(frame.payload)
                runBearer(actions, kind: .other, &link, &core, &effects)
            case .leSignaling:
                let actions = link.signaling.received(frame.payload)
                runSignaling(actions, &link, &core, &effects)
            case .smp:
                // Pairing is a later layer: refuse politely (Pairing Failed, Pairing Not Supported 0x05) so the
                // peer does not wait for its SMP timeout. Never answer a Pairing Failed.
                if let code = frame.payload.getInteger(at: frame.payload.readerIndex, as: UInt8.self), code != 0x05 {
                    queueL2CAP(ByteBuffer(bytes: [0x05, 0x05]), channel: .smp, kind: .other, &link, core)
                }
            default:
                break  // Unknown fixed channels are dropped (Vol 3, Part A, 2.1).
            }
        }
        core.links[packet.handle] = link
        pumpACL(&core, &effects)
    }

    // MARK: Signalling

    func runSignaling(
        _ actions: [L2CAPSignalingChannel.Action], _ link: inout Link, _ core: inout HostCore,
        _ effects: inout Effects
    ) {
        for action in actions {
            switch action {
            case .send(let command):
                queueL2CAP(command.encoded, channel: .leSignaling, kind: .other, &link, core)
            case .startTimer(let timer, let after):
                link.signalingTimers[timer]?.cancel()
                let handle = link.info.handle
                link.signalingTimers[timer] = scheduler.schedule(after: after) { [weak self] in
                    self?.withCore { core, effects in
                        guard var link = core.links[handle] else { return }
                        link.signalingTimers[timer] = nil
                        let actions = link.signaling.timerFired(timer)
                        self?.runSignaling(actions, &link, &core, &effects)
                        core.links[handle] = link
                        self?.pumpACL(&core, &effects)
                    }
                }
            case .cancelTimer(let timer):
                link.signalingTimers.removeValue(forKey: timer)?.cancel()
            case .requestConnectionUpdate(let parameters, let identifier):
                // Central: apply the peripheral's request through the controller, then answer.
                let handle = link.info.handle
                let update = HCILEConnectionUpdate(
                    handle: handle, connectionIntervalMin: parameters.minimumInterval,
                    connectionIntervalMax: parameters.maximumInterval, maxLatency: parameters.peripheralLatency,
                    supervisionTimeout: parameters.supervisionTimeout, minCELength: 0, maxCELength: 0)
                send(update, &core, &effects) { [weak self] result in
                    self?.withCore { core, effects in
                        guard var link = core.links[handle] else { return }
                        let actions = link.signaling.respondToConnectionParameterUpdate(
                            identifier: identifier, accepted: (try? result.get()) != nil)
                        self?.runSignaling(actions, &link, &core, &effects)
                        core.links[handle] = link
                        self?.pumpACL(&core, &effects)
                    }
                }
            case .connectionParameterUpdateCompleted:
                break
            }
        }
    }
}
