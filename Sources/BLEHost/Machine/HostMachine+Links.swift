import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import DequeModule
import NIOCore

extension HostMachine {
    /// LE Connection Complete (either form): a link is up, or an initiation ended.
    mutating func connectionComplete(
        status: HCIStatus, handle: ConnectionHandle, role: HCIRole, peer: BluetoothAddress,
        interval: UInt16, latency: UInt16, timeout: UInt16
    ) {
        guard status == .success else {
            // An initiation that failed or was cancelled (0x02 after LE Create Connection Cancel), or directed
            // advertising that timed out (peripheral role: nothing to report upward but the end of advertising).
            if role == .central || connecting.expectsCompletion {
                runConnect(connecting.connectionComplete(status: status, peer: peer))
            } else {
                advertisingEnded()
            }
            return
        }
        if links.contains(handle) {
            // A controller gives a new connection a handle no other link has (Vol 4, Part E, 7.7.65.1). One that
            // reuses a live link's handle must have lost that link without saying so: it is taken as gone, so
            // that what was pending on it fails instead of vanishing with it, and the apps hear of its end
            // before they hear of the new one.
            counters.reusedConnectionHandles += 1
            log(
                .warning,
                "the controller reported a new connection on \(handle), which a link already has: that link is taken as lost",
                connection: handle)
            linkDown(
                handle, reason: .unspecifiedError,
                error: HostError(.disconnected, "the controller reported another connection on this link's handle"),
                emit: true)
        }
        let linkRole: LinkRole = role == .central ? .central : .peripheral
        // A peer that resolves is known by its identity address above; the link keeps the addresses on the air
        // (pairing computes with them, Vol 3, Part H, 2.2.3 and 2.2.7).
        let identity = heard(from: peer)
        let info = LinkInfo(
            handle: handle, role: linkRole, peer: identity, interval: interval, latency: latency,
            supervisionTimeout: timeout)
        if linkRole == .central {
            _ = connectTargetEnded(onAir: peer)
            runConnect(connecting.connectionComplete(status: .success, peer: peer))
        }
        links.insert(
            Link(
                info: info, preferredMTU: configuration.preferredMTU, peerAddress: peer,
                localAddress: self.info?.address ?? .zero),
            for: handle)
        acl.order.append(handle)
        server.connected(handle)
        emit(.connected(info))
        // Legacy advertising stops when a central connects (Vol 6, Part B, 4.4.2).
        if linkRole == .peripheral { advertisingEnded() }
        if linkRole == .central {
            // As iOS does, the central offers its MTU at once; requests the application makes meanwhile queue
            // behind the exchange.
            startClientOperation(
                .exchangeMTU(clientRxMTU: UInt16(clamping: configuration.preferredMTU)), on: handle, id: nil)
        }
        if let info = self.info,
            HCISupportedCommands(octets: info.supportedCommands).supports(HCILESetDataLength.opcode),
            configuration.preferredDataLength > 27
        {
            let octets = UInt16(clamping: configuration.preferredDataLength)
            let command = HCILESetDataLength(
                handle: handle, txOctets: octets, txTime: StartupSequence.txTime(octets, on: configuration.preferredPHY)
            )
            enqueue(command.packet, for: .none)
        }
        // Only when the controller claims both the command and the PHY (LE features bit 8: 2M, bit 11: Coded).
        if linkRole == .central, let phy = configuration.preferredPHY, let info = self.info,
            HCISupportedCommands(octets: info.supportedCommands).supports(HCILESetPHY.opcode),
            phy == .le1M || info.leFeatures & (phy == .le2M ? 1 << 8 : 1 << 11) != 0
        {
            let command = HCILESetPHY(
                handle: handle, txPHYs: phy.preferences, rxPHYs: phy.preferences,
                phyOptions: phy == .leCoded ? 2 : 0)
            enqueue(command.packet, for: .none)
        }
        pumpACL()
    }

    /// The controller stopped advertising on its own: tell the layer above if it wanted advertising.
    mutating func advertisingEnded() {
        let (wasAdvertising, outputs) = advertising.ended()
        if wasAdvertising { emit(.advertisingEnded) }
        runAdvertising(outputs)
    }

    /// A link went down (or the transport closed): every operation pending on it completes with an error
    /// before `.disconnected` is emitted.
    mutating func linkDown(_ handle: ConnectionHandle, reason: HCIStatus, error: HostError, emit shouldEmit: Bool) {
        guard var link = links.removeValue(forKey: handle) else { return }
        acl.queued -= link.outgoing.count
        acl.order.removeAll { $0 == handle }
        if acl.nextTurn >= acl.order.count { acl.nextTurn = 0 }
        for timer in link.attTimers.values.sorted() { cancelTimer(timer) }
        for timer in link.signalingTimers.values.sorted() { cancelTimer(timer) }
        // The controller frees the buffers of a closed link (Vol 4, Part E, 4.3).
        acl.credits = min(acl.credits + link.inFlight.count, acl.total)
        // Fail what the client was doing, then let the bearer and client wind down.
        let failure: HostError
        switch error.code {
        case .transportClosed:
            failure = HostError(.transportClosed, "the controller's transport closed before the operation completed")
        case .shutDown:
            failure = HostError(.shutDown, "the system was shut down before the operation completed")
        default:
            failure = HostError(.disconnected, "the link went down before the operation completed")
        }
        for action in link.client.linkDisconnected() {
            guard case .complete(let operation, _) = action,
                let waiting = clientOperations.removeValue(forKey: operation)
            else { continue }
            if let id = waiting { complete(id, .failure(failure)) }
        }
        // Data waiting to be delivered never will be: its operation fails (once, however many packets it had).
        for id in link.inFlight.compactMap({ $0 }) + link.outgoing.compactMap(\.delivery)
        where pendingDeliveries.removeValue(forKey: id) != nil {
            complete(id, .failure(failure))
        }
        for (request, waiting) in indicationDeliveries.sorted(by: { $0.key.rawValue < $1.key.rawValue })
        where waiting.link == handle {
            indicationDeliveries[request] = nil
            if pendingDeliveries.removeValue(forKey: waiting.id) != nil { complete(waiting.id, .failure(failure)) }
        }
        serviceChangedIndications = serviceChangedIndications.filter { $0.value.link != handle }
        securityLinkDown(link, failure: failure)
        _ = link.bearer.linkDisconnected()
        _ = link.signaling.linkDisconnected()
        server.disconnected(handle)
        if shouldEmit { emit(.disconnected(handle, reason: reason)) }
        pumpACL()
        // An application refused because this link's queue was full must not wait for it to drain.
        checkNotifyRoom()
    }

    // MARK: ACL out

    /// Queues an L2CAP PDU on a link, fragmented to the controller's LE ACL buffer size.
    mutating func queueL2CAP(
        _ payload: ByteBuffer, channel: L2CAPChannelID, kind: OutgoingFragment.Kind, on handle: ConnectionHandle,
        delivery: HostOperationID? = nil
    ) {
        guard links.contains(handle) else { return }
        let frame = L2CAPBasicFrame(channelID: channel, payload: payload)
        if frame.encodedLength <= acl.length {
            // One packet (a notification on a link with a full-size buffer): the frame's bytes are written once,
            // straight into the packet.
            if let delivery { addDelivery(delivery) }
            let packet = HCIACLDataPacket(handle: handle, packetBoundary: .firstNonFlushable, data: frame.bytes)
            links[handle]?.outgoing.append(.init(packet: packet, kind: kind, isLast: true, delivery: delivery))
            acl.queued += 1
        } else {
            // acl.length > 0: start-up adopts only a non-zero buffer length the controller gives (else 27).
            let fragments = L2CAPFragmenter(maximumFragmentLength: acl.length).fragments(of: frame)
            for (i, fragment) in fragments.enumerated() {
                let packet = HCIACLDataPacket(
                    handle: handle, packetBoundary: .init(rawValue: fragment.boundary.rawValue),
                    data: Array(fragment.data.readableBytesView))
                let isLast = i == fragments.count - 1
                if isLast, let delivery { addDelivery(delivery) }
                links[handle]?.outgoing.append(
                    .init(packet: packet, kind: kind, isLast: isLast, delivery: isLast ? delivery : nil))
                acl.queued += 1
            }
        }
        switch kind {
        case .writeCommand: links[handle]?.queuedWriteCommands += 1
        case .notification: links[handle]?.queuedNotifications += 1
        case .other: break
        }
    }

    /// Hands queued fragments to the controller while it has free buffers, taking links in turn.
    mutating func pumpACL() {
        // Nothing leaves once the transport closed, nor while a failed controller's links are torn down before
        // its reset (each link's end frees credits the others' queued packets would take, to a controller whose
        // buffers are about to be thrown away).
        guard !isClosed, !tearingDownForReset else { return }
        var notificationsDrained = false
        while acl.credits > 0, acl.queued > 0, !acl.order.isEmpty {
            var sent = false
            for step in 0..<acl.order.count {
                let index = (acl.nextTurn + step) % acl.order.count
                let handle = acl.order[index]
                guard let next = links[handle]?.outgoing.popFirst() else { continue }
                acl.queued -= 1
                acl.credits -= 1
                links[handle]?.inFlight.append(next.delivery)
                send(.acl(next.packet))
                if next.isLast {
                    switch next.kind {
                    case .writeCommand:
                        writeCommandLeft(handle)
                    case .notification:
                        links[handle]?.queuedNotifications -= 1
                        notificationsDrained = true
                    case .other:
                        break
                    }
                }
                acl.nextTurn = (index + 1) % acl.order.count
                sent = true
                break
            }
            if !sent { break }
        }
        if notificationsDrained { checkNotifyRoom() }
    }

    private mutating func writeCommandLeft(_ handle: ConnectionHandle) {
        links[handle]?.queuedWriteCommands -= 1
        guard links[handle]?.writeCommandsRefused == true,
            let queued = links[handle]?.queuedWriteCommands, queued < configuration.writeWithoutResponseQueueDepth
        else { return }
        links[handle]?.writeCommandsRefused = false
        emit(.readyToWriteWithoutResponse(handle))
    }

    // MARK: ACL in

    mutating func receivedACL(_ packet: HCIACLDataPacket) {
        let handle = packet.handle
        guard links.contains(handle) else {
            counters.droppedACLPackets += 1
            return log(.notice, "dropped ACL data for \(handle), which is not a link", connection: handle)
        }
        guard let boundary = L2CAPPacketBoundary(rawValue: packet.packetBoundary.rawValue) else {
            counters.droppedACLPackets += 1
            return log(.warning, "dropped ACL data with an invalid packet boundary flag", connection: handle)
        }
        // A packet that is a whole ATT PDU, the usual case, is read where it is: a notification's value is then
        // copied once on its way from the ACL packet to the event.
        if let (channel, payload) = links[handle]?.recombiner.wholeFrame(in: packet.data, boundary: boundary),
            channel == .att
        {
            let actions = links[handle]?.bearer.received(bytes: payload) ?? []
            runBearer(actions, on: handle, kind: .other)
            pumpACL()
            return
        }
        incoming.clear()
        incoming.writeBytes(packet.data)
        guard let output = links[handle]?.recombiner.receive(incoming, boundary: boundary) else { return }
        for error in output.errors {
            counters.droppedACLPackets += 1
            log(.warning, "dropped ACL data that did not reassemble: \(error)", connection: handle)
        }
        guard let frame = output.frame else { return }
        switch frame.channelID {
        case .att:
            let actions = links[handle]?.bearer.received(frame.payload) ?? []
            runBearer(actions, on: handle, kind: .other)
        case .leSignaling:
            let actions = links[handle]?.signaling.received(frame.payload) ?? []
            runSignaling(actions, on: handle)
        case .smp:
            receivedSMP(frame.payload, on: handle)
        default:
            // Unknown fixed channels are dropped (Vol 3, Part A, 2.1).
            log(
                .debug, "dropped a frame on channel \(frame.channelID), which this host does not serve",
                connection: handle)
        }
        pumpACL()
    }

    // MARK: Signalling

    mutating func runSignaling(_ actions: [L2CAPSignalingChannel.Action], on handle: ConnectionHandle) {
        for action in actions {
            switch action {
            case .send(let command):
                queueL2CAP(command.encoded, channel: .leSignaling, kind: .other, on: handle)
            case .startTimer(let timer, let after):
                guard links.contains(handle) else { continue }
                if let running = links[handle]?.signalingTimers[timer] { cancelTimer(running) }
                let id = startTimer(.signaling(handle, timer), after: after)
                links[handle]?.signalingTimers[timer] = id
            case .cancelTimer(let timer):
                if let running = links[handle]?.signalingTimers.removeValue(forKey: timer) { cancelTimer(running) }
            case .requestConnectionUpdate(let parameters, let identifier):
                // Central: apply the peripheral's request through the controller, then answer.
                let update = HCILEConnectionUpdate(
                    handle: handle, connectionIntervalMin: parameters.minimumInterval,
                    connectionIntervalMax: parameters.maximumInterval, maxLatency: parameters.peripheralLatency,
                    supervisionTimeout: parameters.supervisionTimeout, minCELength: 0, maxCELength: 0)
                enqueue(update.packet, for: .connectionUpdate(handle, identifier))
            case .connectionParameterUpdateCompleted:
                break
            }
        }
    }
}
