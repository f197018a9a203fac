import DequeModule
import HeapModule

/// The connection state: connection events, acknowledged data, LL control procedures, supervision.
///
/// Each connection event plays out exchanges of one PDU from the central and one answer from the peripheral
/// until neither side has more to send or the next exchange would not fit in the event. An exchange costs
/// `T(central PDU) + T_IFS + T(peripheral PDU) + T_IFS`, and an event may use the whole interval: the last
/// exchange's trailing T_IFS is the margin before the next anchor. That gives exactly
/// `N = floor(interval / T_pair)` full-size exchanges per event, the bound of the throughput formula.
///
/// The exchanges take their time: each is an entry of the agenda at its end, where its PDUs are delivered and
/// acknowledged and Number Of Completed Packets reports what completed. A host that hands over data then (it
/// got its buffers back) has it sent in a later exchange of the same event, so a link whose host keeps the
/// controller's buffers filled uses the whole event. What is sent next is chosen when an exchange starts.
/// One controller has one radio: its links take turns. An event whose anchor finds either controller's radio
/// busy with another link's exchange is skipped (and that link yields its next colliding event, so they take
/// turns); an event ends before the next anchor of
/// another link of either controller that has an event scheduled, so two links of one controller never
/// transmit at once and each gets a share of the air. Advertising shares the radio too: an event whose anchor
/// falls in an advertising event of either controller is skipped, and an advertising event that waits for the
/// radio ends the connection event under way after its current exchange. The peripheral uses its latency: with nothing to send
/// it skips up to `latency` events in a row, and the central's packet of such an event goes unanswered.
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.5 (connection state), 5.1 (LL control procedures).
extension World {
    func schedule(_ link: Link, counter: Int) {
        link.generation &+= 1
        link.scheduled = true
        link.nextAnchor = link.anchor(ofCounter: counter)
        link.anchorStamp &+= 1
        let entry = ScheduledAnchor(anchor: link.nextAnchor, link: link.id, stamp: link.anchorStamp)
        for s in 0..<2 where link.sides[s].alive {
            let controller = controllers[link.sides[s].controller]
            controller.scheduledAnchors.insert(entry)
            if link.starved { controller.starvedAnchors.insert(entry) }
            // A controller that is seldom asked (its links' events skipped) drops its stale entries here, now
            // and then, so that its heaps stay within a few times its links.
            let bound = 4 * (controller.linkByHandle.count + 8)
            if controller.scheduledAnchors.count > bound || controller.starvedAnchors.count > bound {
                dropStaleAnchors(of: controller)
            }
        }
        clock.schedule(
            at: link.anchor(ofCounter: counter),
            .connection(link: link.id, counter: counter, generation: link.generation))
    }

    /// Gives an idle link its next connection event. The events skipped while idle were empty exchanges
    /// that succeeded (the link was in range and lossless, or it would not have been idle), so both sides
    /// count the last skipped anchor as their last reception.
    func wake(_ link: Link) {
        guard !link.scheduled, link.event == nil, !link.closed else { return }
        let counter = link.nextCounter(notBefore: now)
        let skipped = counter - 1
        if link.lastCounter >= 0, skipped > link.lastCounter {
            let t = link.anchor(ofCounter: skipped)
            for s in 0..<2 where link.sides[s].alive {
                link.sides[s].lastReceived = max(link.sides[s].lastReceived, t)
            }
        }
        schedule(link, counter: counter)
    }

    func canCommunicate(_ link: Link) -> Bool {
        guard link.sides[0].alive, link.sides[1].alive else { return false }
        let a = controllers[link.sides[0].controller]
        let b = controllers[link.sides[1].controller]
        guard a.powered, b.powered else { return false }
        let d2 = a.position.squaredDistance(to: b.position)
        return RadioPropagation.reaches(txPower: a.txPower, squaredDistance: d2)
            && RadioPropagation.reaches(txPower: b.txPower, squaredDistance: d2)
    }

    /// Whether the link must run its next event rather than idle until someone wakes it.
    func needsEvents(_ link: Link) -> Bool {
        !link.established || link.sides[0].hasPendingTraffic || link.sides[1].hasPendingTraffic
            || link.pendingUpdate != nil || link.pendingPhy != nil || packetLossRate > 0 || !canCommunicate(link)
    }

    func connectionEvent(_ link: Link, counter: Int) {
        link.scheduled = false
        link.lastCounter = counter
        let t = now
        applyInstants(link, counter: counter, at: t)
        guard canCommunicate(link) else { return endEvent(link, counter: counter, anchor: t) }
        // A radio busy with another link or advertising at the anchor: this event does not happen.
        let radios = [controllers[link.sides[0].controller], controllers[link.sides[1].controller]]
        guard radios.allSatisfy({ $0.radioFree(at: t) }) else {
            link.starved = true
            link.peripheralMissed = true
            return endEvent(link, counter: counter, anchor: t)
        }
        link.event = (counter, t, 0, t, 0)
        // Peripheral latency (Vol 6, Part B, 4.5.1): with nothing to send, the peripheral sleeps through up to
        // `latency` events, listening at every (latency + 1)th; the central's packet of an event it sleeps
        // through goes unanswered, and what it carried waits.
        if link.established, link.latency > 0, !link.sides[1].hasPendingTraffic, !link.peripheralMissed,
            (counter - link.peripheralListened) % (Int(link.latency) + 1) != 0
        {
            link.sides[0].pickNext(fromCentral: true)
            let packet = link.sides[0].currentAirTime(on: link.phyCentralToPeripheral)
            radios[0].airBusyUntil = max(radios[0].airBusyUntil, t + packet)
            airData(link, side: 0, at: t, channel: link.channel(ofCounter: counter), more: false)
            return endEvent(link, counter: counter, anchor: t)
        }
        link.peripheralListened = counter
        startExchange(link)
    }

    /// The earliest anchor, at or after `time`, of another link of either of `link`'s controllers that has an
    /// event scheduled (only starved ones, with `starvedOnly`): this link's event must be over by then.
    func nextOtherAnchor(_ link: Link, after time: Int64, starvedOnly: Bool = false) -> Int64 {
        min(
            earliestAnchor(
                of: controllers[link.sides[0].controller], excluding: link.id, after: time, starvedOnly: starvedOnly),
            earliestAnchor(
                of: controllers[link.sides[1].controller], excluding: link.id, after: time, starvedOnly: starvedOnly))
    }

    /// The earliest anchor at or after `time` of a link of `c` (other than `excluding`) that has an event
    /// scheduled (and lost its last one, with `starvedOnly`), or `Int64.max`. The controller keeps its links'
    /// scheduled anchors in a heap, so this costs the stale entries it drops, not a look at every link.
    func earliestAnchor(of c: ControllerState, excluding: Int?, after time: Int64, starvedOnly: Bool) -> Int64 {
        var set = aside
        defer {
            for entry in set { starvedOnly ? c.starvedAnchors.insert(entry) : c.scheduledAnchors.insert(entry) }
            set.removeAll(keepingCapacity: true)
            aside = set
        }
        while let top = starvedOnly ? c.starvedAnchors.min : c.scheduledAnchors.min {
            guard let other = links[top.link], other.scheduled, other.anchorStamp == top.stamp,
                !starvedOnly || other.starved, isMember(other, of: c)
            else {
                // Stale: the link's event came, it was scheduled again, it left `c`, or it no longer waits.
                _ = starvedOnly ? c.starvedAnchors.removeMin() : c.scheduledAnchors.removeMin()
                continue
            }
            guard other.id == excluding || top.anchor < time else { return top.anchor }
            // Live but not what is asked: set aside and put back afterwards.
            set.append(starvedOnly ? c.starvedAnchors.removeMin() : c.scheduledAnchors.removeMin())
        }
        return .max
    }

    /// Rebuilds `c`'s anchor heaps with their live entries only.
    func dropStaleAnchors(of c: ControllerState) {
        func live(_ e: ScheduledAnchor, starved: Bool) -> Bool {
            guard let link = links[e.link] else { return false }
            return link.scheduled && link.anchorStamp == e.stamp && (!starved || link.starved) && isMember(link, of: c)
        }
        c.scheduledAnchors = Heap(c.scheduledAnchors.unordered.filter { live($0, starved: false) })
        c.starvedAnchors = Heap(c.starvedAnchors.unordered.filter { live($0, starved: true) })
    }

    /// Whether `link` is one of `c`'s links (a side of it on `c` is still there).
    func isMember(_ link: Link, of c: ControllerState) -> Bool {
        for s in 0..<2 where link.sides[s].controller == c.index {
            if c.linkByHandle[link.sides[s].handle] == link.id { return true }
        }
        return false
    }

    /// Chooses what each side sends next and starts the exchange, or ends the event when there is nothing to
    /// send (after the first exchange, which always happens) or the exchange would not fit before the next
    /// anchor.
    func startExchange(_ link: Link) {
        guard var event = link.event else { return }
        link.sides[0].pickNext(fromCentral: true)
        link.sides[1].pickNext(fromCentral: false)
        let idle = !link.sides[0].hasPendingTraffic && !link.sides[1].hasPendingTraffic
        stampInstant(link, side: 0, counter: event.counter)
        // An encrypted PDU carries a 4-octet MIC after its payload (Vol 6, Part B, 2.4; Part E, 1).
        let pair =
            link.sides[0].currentAirTime(on: link.phyCentralToPeripheral)
            + link.sides[1].currentAirTime(on: link.phyPeripheralToCentral) + 2 * interFrameSpace
        let start = event.anchor + event.used
        let radios = [controllers[link.sides[0].controller], controllers[link.sides[1].controller]]
        if event.used > 0 {
            // Later exchanges fit before the next anchor, before another link's next anchor, and on free radios
            // that no advertising event is waiting for.
            if idle || event.used + pair > link.interval || start + pair > nextOtherAnchor(link, after: start)
                || !radios.allSatisfy({ $0.radioFree(at: start) && !$0.advertisingIsWaiting })
            {
                return endEvent(link, counter: event.counter, anchor: event.anchor)
            }
        } else if start + pair > nextOtherAnchor(link, after: start, starvedOnly: true) {
            // The first exchange would cover the anchor of a link that lost its last event to this controller's
            // radio: this event yields, and the links take turns.
            link.starved = true
            return endEvent(link, counter: event.counter, anchor: event.anchor)
        }
        link.starved = false
        event.start = start
        event.pair = pair
        link.event = event
        for s in 0..<2 {
            let radio = controllers[link.sides[s].controller]
            radio.airBusyUntil = max(radio.airBusyUntil, start + pair)
        }
        link.generation &+= 1
        clock.schedule(at: event.start + pair, .exchange(link: link.id, generation: link.generation))
    }

    /// The exchange in flight is over: its PDUs reach the other side (unless lost), the acknowledged ones
    /// complete, and the next exchange starts.
    func exchangeEnded(_ link: Link) {
        guard var event = link.event else { return }
        // A side that left during the exchange (reset, power off, vanished): nothing more is carried.
        guard canCommunicate(link) else { return endEvent(link, counter: event.counter, anchor: event.anchor) }
        let start = event.start
        event.used += event.pair
        link.event = event
        let counter = event.counter
        var lostOne = false
        let channel = link.channel(ofCounter: counter)
        let centralPDU = link.sides[0].currentAirTime(on: link.phyCentralToPeripheral)
        airData(link, side: 0, at: start, channel: channel, more: link.sides[0].hasMoreThanCurrent)
        exchange: do {
            // Central -> peripheral. A lost packet ends the event: the peripheral does not answer.
            if lost() {
                lostOne = true
                link.peripheralMissed = true
                break exchange
            }
            received(sn: link.sides[0].sn, nesn: link.sides[0].nesn, by: &link.sides[1])
            airData(
                link, side: 1, at: start + centralPDU + interFrameSpace, channel: channel,
                more: link.sides[1].hasMoreThanCurrent)
            link.sides[1].lastReceived = start
            deliverCurrent(link, from: 0, counter: counter)
            // A peripheral that left (a MIC failure) answers nothing more.
            if link.closed || !link.sides[1].alive { break exchange }
            // Peripheral -> central. A lost answer leaves the central's PDU unacknowledged; the peripheral
            // already has it and will discard the retransmission.
            if lost() {
                lostOne = true
                break exchange
            }
            received(sn: link.sides[1].sn, nesn: link.sides[1].nesn, by: &link.sides[0])
            link.peripheralMissed = false
            link.sides[0].lastReceived = start
            // The central's host learns of the link when the first packet from the peripheral arrives,
            // before anything that packet carries (an LL_LENGTH_REQ's Data Length Change, say).
            if !link.established { establish(link) }
            acknowledge(link, side: 0)
            deliverCurrent(link, from: 1, counter: counter)
            if link.closed || !link.sides[0].alive { break exchange }
            acknowledge(link, side: 1)
        }
        emitCompletedPackets(link)
        if link.closed || lostOne || !canCommunicate(link) {
            return endEvent(link, counter: counter, anchor: event.anchor)
        }
        startExchange(link)
    }

    /// The sequence bits of a received PDU (Vol 6, Part B, 4.5.9): a NESN other than the receiver's SN
    /// acknowledges what it sent last; an SN equal to its NESN is new data, which it acknowledges in turn.
    func received(sn: UInt8, nesn: UInt8, by receiver: inout LinkSide) {
        if nesn != receiver.sn { receiver.sn ^= 1 }
        if sn == receiver.nesn { receiver.nesn ^= 1 }
    }

    /// The event is over: supervision, and the next event if the link needs one.
    func endEvent(_ link: Link, counter: Int, anchor: Int64) {
        link.event = nil
        superviseTimeouts(link, at: anchor)
        emitCompletedPackets(link)
        if link.closed { return }
        // The next event's anchor is never in the past, even after an exchange that ran over the interval (a
        // long PDU on LE Coded).
        if needsEvents(link) { schedule(link, counter: max(counter + 1, link.nextCounter(notBefore: now))) }
    }

    /// The first packet from the peripheral reached the central: the central's host gets LE Connection
    /// Complete, and controllers whose hosts suggested longer PDUs start the data length update.
    func establish(_ link: Link) {
        link.established = true
        let central = controllers[link.sides[0].controller]
        emitConnectionComplete(
            central, status: Status.success, handle: link.sides[0].handle, role: 0,
            peer: link.centralPeer, interval: link.intervalUnits, latency: link.latency,
            timeout: link.timeoutUnits)
        for s in 0..<2 where link.sides[s].local.txOctets > 27 || link.sides[s].local.txTime > 328 {
            // Unless the host already asked for one (LE Set Data Length before the link was established).
            let queued = link.sides[s].control.contains { if case .lengthReq = $0 { true } else { false } }
            if case .control(.lengthReq)? = link.sides[s].current { continue }
            if queued { continue }
            link.sides[s].control.append(.lengthReq(link.sides[s].local))
        }
    }

    /// Supervision: a side that has heard nothing from its peer for the supervision timeout (six intervals
    /// before the connection is established) leaves the link.
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.5.2 (supervision timeout).
    func superviseTimeouts(_ link: Link, at t: Int64) {
        for s in 0..<2 where link.sides[s].alive {
            let limit = link.established ? link.supervisionTimeout : 6 * link.interval
            guard t - link.sides[s].lastReceived > limit else { continue }
            let controller = controllers[link.sides[s].controller]
            if !link.established && s == 0 {
                emitConnectionComplete(
                    controller, status: Status.connectionFailedToBeEstablished, handle: 0, role: 0,
                    peer: link.centralPeer, interval: 0, latency: 0, timeout: 0)
            } else {
                let reason: UInt8
                if !link.established {
                    reason = Status.connectionFailedToBeEstablished
                } else if link.sides[s].terminating != nil {
                    reason = Status.localHostTerminated
                } else {
                    reason = Status.connectionTimeout
                }
                emitDisconnectionComplete(controller, handle: link.sides[s].handle, reason: reason)
            }
            leave(link, side: s)
        }
    }

    /// Number Of Completed Packets: one event per side that completed something, after each exchange (and at the
    /// event's end), so that the host can refill the controller's buffers within the connection event.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.19.
    func emitCompletedPackets(_ link: Link) {
        for s in 0..<2 where link.sides[s].alive && link.sides[s].completed > 0 {
            var w = ByteWriter(capacity: 5)
            w.u8(1)
            w.u16(link.sides[s].handle)
            w.u16(link.sides[s].completed)
            link.sides[s].completed = 0
            emitEvent(controllers[link.sides[s].controller], code: 0x13, w.bytes)
        }
    }

    /// Fills in the instant of an LL_CONNECTION_UPDATE_IND / LL_PHY_UPDATE_IND when it is first sent: six
    /// events ahead, the minimum the spec gives the peripheral to receive it.
    func stampInstant(_ link: Link, side: Int, counter: Int) {
        guard case .control(let pdu)? = link.sides[side].current else { return }
        switch pdu {
        case .connectionUpdateInd(let i, let l, let to, nil):
            link.sides[side].current = .control(
                .connectionUpdateInd(interval: i, latency: l, timeout: to, instant: counter + 6))
        case .phyUpdateInd(let c2p, let p2c, nil) where c2p != 0 || p2c != 0:
            link.sides[side].current = .control(
                .phyUpdateInd(centralToPeripheral: c2p, peripheralToCentral: p2c, instant: counter + 6))
        default:
            break
        }
    }

    /// Hands what `from` is sending to the other side, once (a retransmission after a lost acknowledgement is
    /// recognised and dropped by the receiver). The receiver decrypts an encrypted PDU with its own session; one
    /// whose MIC fails ends the link on the receiver's side.
    func deliverCurrent(_ link: Link, from s: Int, counter: Int) {
        guard let out = link.sides[s].current, !link.sides[s].headDelivered else { return }
        link.sides[s].headDelivered = true
        let r = 1 - s
        guard let bytes = read(link, by: r) else { return micFailure(link, side: r) }
        switch out {
        case .data(_, let start):
            guard !bytes.isEmpty else { return }
            emitACL(
                controllers[link.sides[r].controller], handle: link.sides[r].handle,
                boundary: start ? 0b10 : 0b01, data: bytes)
        case .control(let pdu):
            received(pdu, link: link, by: r, counter: counter)
        }
    }

    /// The peer acknowledged what `s` sent: advance its queue and count completed HCI packets.
    func acknowledge(_ link: Link, side s: Int) {
        guard link.sides[s].alive, let out = link.sides[s].current else { return }
        link.sides[s].current = nil
        link.sides[s].sealed = nil
        link.sides[s].headDelivered = false
        guard case .data(let length, _) = out, !link.sides[s].data.isEmpty else { return }
        link.sides[s].data[0].offset += length
        if link.sides[s].data[0].offset >= link.sides[s].data[0].data.count {
            link.sides[s].data.removeFirst()
            link.sides[s].completed += 1
            controllers[link.sides[s].controller].aclInFlight -= 1
        }
    }

    /// A side leaves the link (terminated, timed out, reset or vanished); its queued data is dropped
    /// (the host treats its buffers as freed on Disconnection Complete, Vol 4, Part E, 4.3).
    func leave(_ link: Link, side s: Int) {
        guard link.sides[s].alive else { return }
        link.sides[s].alive = false
        let controller = controllers[link.sides[s].controller]
        controller.linkByHandle[link.sides[s].handle] = nil
        controller.aclInFlight -= link.sides[s].data.count
        link.sides[s].data.removeAll()
        link.sides[s].control.removeAll()
        link.sides[s].encryptionControl.removeAll()
        link.sides[s].current = nil
        link.sides[s].sealed = nil
        link.sides[s].completed = 0
        if !link.sides[1 - s].alive {
            link.closed = true
            links[link.id] = nil
        }
    }

    /// Drops every link of `c` without telling its host (reset, power off); the peers will time out.
    func leaveAllLinks(_ c: ControllerState) {
        for id in links.keys.sorted() {
            guard let link = links[id], let side = link.side(of: c.index) else { continue }
            leave(link, side: side)
            wake(link)
        }
    }

    /// Ends every link of `c` as a controller that powers off in good order does: each peer hears LL_TERMINATE_IND
    /// with Remote Device Terminated due to Power Off (0x15) and its host gets Disconnection Complete; `c`'s own
    /// host, which is going away, hears nothing. (The terminate is taken as acknowledged at once.)
    func terminateAllLinks(_ c: ControllerState) {
        for id in links.keys.sorted() {
            guard let link = links[id], let side = link.side(of: c.index) else { continue }
            let peer = 1 - side
            // A central whose link was not yet established never heard of it: its attempt simply goes on.
            if link.sides[peer].alive && (link.established || peer == 1) {
                emitDisconnectionComplete(
                    controllers[link.sides[peer].controller], handle: link.sides[peer].handle,
                    reason: Status.remotePowerOff)
                leave(link, side: peer)
            }
            leave(link, side: side)
            wake(link)
        }
    }

    // MARK: Instants

    func applyInstants(_ link: Link, counter: Int, at t: Int64) {
        if let update = link.pendingUpdate, counter >= update.instant {
            link.pendingUpdate = nil
            link.anchorBase = t
            link.counterBase = counter
            link.intervalUnits = update.interval
            link.interval = Int64(update.interval) * 1_250 * VirtualTime.microsecond
            link.latency = update.latency
            link.timeoutUnits = update.timeout
            link.sides[1].awaitingParamReq = false
            for s in 0..<2 where link.sides[s].alive {
                emitConnectionUpdateComplete(link, side: s, status: Status.success)
            }
        }
        if let phy = link.pendingPhy, counter >= phy.instant {
            link.pendingPhy = nil
            let changed = phy.c2p != link.phyCentralToPeripheral || phy.p2c != link.phyPeripheralToCentral
            link.phyCentralToPeripheral = phy.c2p
            link.phyPeripheralToCentral = phy.p2c
            for s in 0..<2 where link.sides[s].alive && (changed || link.sides[s].awaitingPhy) {
                emitPhyUpdateComplete(link, side: s)
            }
            // The times allowed may hold fewer octets on the new PHY (Vol 6, Part B, 4.5.10).
            if changed { for s in 0..<2 { updateEffectiveLengths(link, side: s) } }
        }
    }

    /// LE Connection Update Complete (Vol 4, Part E, 7.7.65.3).
    func emitConnectionUpdateComplete(_ link: Link, side s: Int, status: UInt8) {
        var w = ByteWriter(capacity: 9)
        w.u8(status)
        w.u16(link.sides[s].handle)
        w.u16(link.intervalUnits)
        w.u16(link.latency)
        w.u16(link.timeoutUnits)
        emitLEEvent(controllers[link.sides[s].controller], subevent: 0x03, w.bytes)
    }

    /// LE PHY Update Complete (Vol 4, Part E, 7.7.65.12), from side `s`'s point of view.
    func emitPhyUpdateComplete(_ link: Link, side s: Int) {
        link.sides[s].awaitingPhy = false
        var w = ByteWriter(capacity: 5)
        w.u8(0)
        w.u16(link.sides[s].handle)
        w.u8(link.phy(from: s).rawValue)
        w.u8(link.phy(from: 1 - s).rawValue)
        emitLEEvent(controllers[link.sides[s].controller], subevent: 0x0C, w.bytes)
    }

    // MARK: LL control PDUs

    /// Side `r` received an LL control PDU from its peer.
    func received(_ pdu: LLControlPDU, link: Link, by r: Int, counter: Int) {
        let receiver = controllers[link.sides[r].controller]
        let handle = link.sides[r].handle
        switch pdu {
        case .connectionUpdateInd(let interval, let latency, let timeout, let instant):
            link.pendingUpdate = (interval, latency, timeout, instant ?? counter + 6, 1 - r)

        case .connectionParamReq(let minI, let maxI, let latency, let timeout):
            // Connection Parameters Request procedure (Vol 6, Part B, 5.1.7): the central's host decides.
            if leEventEnabled(receiver, subevent: 0x06) {
                link.pendingParamRequestFromPeer = true
                var w = ByteWriter(capacity: 10)
                w.u16(handle)
                w.u16(minI)
                w.u16(maxI)
                w.u16(latency)
                w.u16(timeout)
                emitLEEvent(receiver, subevent: 0x06, w.bytes)
            } else {
                // A host that masked the request event cannot answer it: reject (Vol 4, Part E, 7.7.65.6).
                link.sides[r].control.append(
                    .rejectExtInd(
                        rejectOpcode: LLControlPDU.connectionParamReqOpcode,
                        error: Status.unsupportedRemoteFeature))
            }

        case .encReq, .encRsp, .startEncReq, .startEncRsp, .pauseEncReq, .pauseEncRsp, .rejectInd:
            receivedEncryptionPDU(pdu, link: link, by: r)

        case .rejectExtInd(let opcode, _) where opcode == LLControlPDU.encReqOpcode:
            receivedEncryptionPDU(pdu, link: link, by: r)

        case .rejectExtInd(let opcode, let error):
            if opcode == LLControlPDU.connectionParamReqOpcode && link.sides[r].awaitingParamReq {
                link.sides[r].awaitingParamReq = false
                emitConnectionUpdateComplete(link, side: r, status: error)
            }

        case .lengthReq(let peer):
            link.sides[r].control.append(.lengthRsp(link.sides[r].local))
            link.sides[r].remote = peer
            updateEffectiveLengths(link, side: r)

        case .lengthRsp(let peer):
            link.sides[r].remote = peer
            updateEffectiveLengths(link, side: r)

        case .phyReq:
            if r == 1 {
                link.sides[1].control.append(.phyRsp(tx: link.sides[1].preferredTx, rx: link.sides[1].preferredRx))
            } else {
                decidePhy(link)
            }

        case .phyRsp:
            if r == 0 { decidePhy(link) }

        case .phyUpdateInd(let c2p, let p2c, let instant):
            if c2p == 0 && p2c == 0 {
                // Nothing changes: the procedure ends now for whoever asked.
                for s in 0..<2 where link.sides[s].awaitingPhy { emitPhyUpdateComplete(link, side: s) }
            } else {
                link.pendingPhy = (
                    LEPhy(bit: c2p) ?? link.phyCentralToPeripheral,
                    LEPhy(bit: p2c) ?? link.phyPeripheralToCentral,
                    instant ?? counter + 6, 0
                )
            }

        case .featureReq(let features):
            link.sides[r].peerFeatures = features
            link.sides[r].control.append(.featureRsp(features: leLocalFeatures))

        case .featureRsp(let features):
            link.sides[r].peerFeatures = features
            if link.sides[r].awaitingFeatures {
                link.sides[r].awaitingFeatures = false
                var w = ByteWriter(capacity: 11)
                w.u8(0)
                w.u16(handle)
                w.u64(features)
                emitLEEvent(receiver, subevent: 0x04, w.bytes)
            }

        case .versionInd:
            if !link.sides[r].sentVersion {
                link.sides[r].sentVersion = true
                link.sides[r].control.append(
                    .versionInd(
                        version: ControllerVersion.version,
                        company: ControllerVersion.company,
                        subversion: ControllerVersion.subversion))
            }
            if link.sides[r].awaitingVersion {
                link.sides[r].awaitingVersion = false
                emitRemoteVersion(receiver, handle: handle)
            }

        case .terminateInd(let reason):
            // The receiver leaves with the peer's reason; the sender, acknowledged, with "terminated by local
            // host" (Vol 6, Part B, 5.1.3).
            let s = 1 - r
            let sender = controllers[link.sides[s].controller]
            emitDisconnectionComplete(receiver, handle: handle, reason: reason)
            emitDisconnectionComplete(sender, handle: link.sides[s].handle, reason: Status.localHostTerminated)
            leave(link, side: r)
            leave(link, side: s)
        }
    }

    /// Effective data lengths after an LL_LENGTH_REQ/RSP exchange or a PHY change: each direction carries the
    /// smaller of the sender's maximum transmit and the receiver's maximum receive octets, and takes at most the
    /// smaller of their times, but never less than a 27-octet PDU takes on the PHY (328 µs, or 2,704 µs on LE
    /// Coded). What a side sends is cut to the octets that fit in its time, so a link that moves to LE Coded
    /// with times asked for on LE 1M sends short PDUs. A host whose values changed gets LE Data Length Change.
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.5.10; Vol 4, Part E, 7.7.65.7.
    func updateEffectiveLengths(_ link: Link, side a: Int) {
        let (local, remote) = (link.sides[a].local, link.sides[a].remote)
        let (tx, rx) = (link.phy(from: a), link.phy(from: 1 - a))
        let effective = DataLengths(
            rxOctets: min(local.rxOctets, remote.txOctets),
            rxTime: max(min(local.rxTime, remote.txTime), Int(rx.maxTime(octets: 27))),
            txOctets: min(local.txOctets, remote.rxOctets),
            txTime: max(min(local.txTime, remote.rxTime), Int(tx.maxTime(octets: 27))))
        link.sides[a].txPayloadLimit = min(effective.txOctets, tx.octets(within: effective.txTime))
        guard effective != link.sides[a].effective else { return }
        link.sides[a].effective = effective
        guard link.sides[a].alive else { return }
        var w = ByteWriter(capacity: 10)
        w.u16(link.sides[a].handle)
        w.u16(UInt16(clamping: effective.txOctets))
        w.u16(UInt16(clamping: effective.txTime))
        w.u16(UInt16(clamping: effective.rxOctets))
        w.u16(UInt16(clamping: effective.rxTime))
        emitLEEvent(controllers[link.sides[a].controller], subevent: 0x07, w.bytes)
    }

    /// The central chooses the PHYs from both sides' preferences (2M where both allow it) and sends
    /// LL_PHY_UPDATE_IND (Vol 6, Part B, 5.1.10).
    func decidePhy(_ link: Link) {
        // The fastest PHY both ends allow: 2M, then 1M, then Coded; no common one keeps the current PHY.
        func choose(_ tx: UInt8, _ rx: UInt8, current: LEPhy) -> LEPhy {
            let allowed = (tx == 0 ? 0b111 : tx) & (rx == 0 ? 0b111 : rx)
            if allowed & 0b010 != 0 { return .le2M }
            if allowed & 0b001 != 0 { return .le1M }
            if allowed & 0b100 != 0 { return .leCoded }
            return current
        }
        let c2p = choose(link.sides[0].preferredTx, link.sides[1].preferredRx, current: link.phyCentralToPeripheral)
        let p2c = choose(link.sides[1].preferredTx, link.sides[0].preferredRx, current: link.phyPeripheralToCentral)
        link.sides[0].control.append(
            .phyUpdateInd(
                centralToPeripheral: c2p == link.phyCentralToPeripheral ? 0 : c2p.bit,
                peripheralToCentral: p2c == link.phyPeripheralToCentral ? 0 : p2c.bit, instant: nil))
    }
}
