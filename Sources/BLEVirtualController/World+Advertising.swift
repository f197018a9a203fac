/// Advertising, scanning and initiating: the link layer's advertising-channel states.
///
/// A scanner or initiator costs no events of its own: each advertising event looks, for every PDU it sends on
/// channel 37, 38 or 39, at which controllers are listening on that channel at that instant (inside their scan
/// window, on the channel their scan interval has rotated to) and in range, and plays the exchange out: a
/// report, SCAN_REQ/SCAN_RSP, or CONNECT_IND.
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.4 (non-connected states), 2.3 (advertising physical channel PDUs).
extension World {
    /// 0.625 ms, the unit of advertising and scan intervals.
    static let advertisingUnit: Int64 = 625 * VirtualTime.microsecond
    /// The time between the starts of high duty cycle directed advertising events (≤ 3.75 ms).
    static let highDutyInterval: Int64 = 3_750 * VirtualTime.microsecond
    /// How long an advertising event waits for room between a controller's connection events before it takes
    /// the air regardless (10 ms, the longest random advDelay: to a listener the wait looks like one).
    static let advertisingPatience: Int64 = 10 * VirtualTime.millisecond
    /// How long high duty cycle directed advertising lasts (1.28 s).
    static let highDutyDuration: Int64 = 1_280 * VirtualTime.millisecond

    func startAdvertising(_ c: ControllerState) {
        c.advertising = true
        c.advertisingGeneration &+= 1
        c.advertisingStart = now
        let generation = c.advertisingGeneration
        if c.advertisingParameters.type == .advDirectIndHighDuty {
            clock.schedule(at: now, .advertising(controller: c.index, generation: generation))
            clock.schedule(
                at: now + Self.highDutyDuration, .advertisingTimeout(controller: c.index, generation: generation))
        } else {
            // The first event comes one interval and one advDelay after the enable, as every later one does
            // after its predecessor: a scanner does not hear a new advertiser at the instant it starts.
            let first = now + Int64(c.advertisingParameters.intervalMin) * Self.advertisingUnit + advertisingDelay()
            clock.schedule(at: first, .advertising(controller: c.index, generation: generation))
        }
    }

    func stopAdvertising(_ c: ControllerState) {
        c.advertising = false
        c.advertisingGeneration &+= 1
    }

    /// advDelay, 0...10 ms, drawn afresh for every advertising event (Vol 6, Part B, 4.4.2.2.1).
    func advertisingDelay() -> Int64 {
        Int64(random.uniform(through: 10_000)) * VirtualTime.microsecond
    }

    func advertisingTimedOut(_ c: ControllerState, generation: UInt64) {
        guard c.advertising, c.advertisingGeneration == generation else { return }
        stopAdvertising(c)
        emitConnectionComplete(
            c, status: Status.advertisingTimeout, handle: 0, role: 1, peer: .none,
            interval: 0, latency: 0, timeout: 0)
    }

    /// Which advertising channel `s` listens on at `time`, if any, and whether it is initiating.
    func listening(_ s: ControllerState, at time: Int64) -> (channel: Int, initiating: Bool)? {
        let interval: UInt16
        let window: UInt16
        let start: Int64
        let initiating: Bool
        if let i = s.initiating {
            (interval, window, start, initiating) = (i.scanInterval, i.scanWindow, i.start, true)
        } else if s.scanning {
            (interval, window, start, initiating) = (
                s.scanParameters.interval, s.scanParameters.window, s.scanStart, false
            )
        } else {
            return nil
        }
        // Listening needs the radio: not while it serves a connection event or advertises.
        guard s.airBusyUntil <= time, s.advertisingUntil <= time else { return nil }
        let intervalNs = Int64(interval) * Self.advertisingUnit
        let elapsed = time - start
        guard elapsed >= 0 else { return nil }
        let k = elapsed / intervalNs
        guard elapsed - k * intervalNs < Int64(window) * Self.advertisingUnit else { return nil }
        return (37 + Int(k % 3), initiating)
    }

    /// One advertising event: the PDU on each enabled channel, in channel order, each heard by whoever listens.
    func advertisingEvent(_ c: ControllerState, generation: UInt64) {
        guard c.advertising, c.advertisingGeneration == generation, c.powered,
            let advA = c.ownAddress(type: c.advertisingParameters.ownAddressType)
        else { return }
        let p = c.advertisingParameters
        let payload = p.type.isDirected ? 12 : 6 + c.advertisingData.count
        let pduTime = LEPhy.le1M.airTime(payload: payload)
        // One radio, shared with the controller's links (a scheduler with priorities, as silicon has): an
        // advertising event waits for the exchange in flight, ends the connection event under way (it waits
        // at most one exchange), and waits for room before the next anchor, until it has waited
        // `advertisingPatience`: then it takes the air, and an anchor it covers is skipped. A link that fills
        // every event therefore delays advertising by a few milliseconds, and never silences it.
        let channelCount = Int64((0..<3).filter { p.channelMap & (1 << UInt8($0)) != 0 }.count)
        let duration = channelCount * (pduTime + 2 * interFrameSpace + 400 * VirtualTime.microsecond)
        let waitingSince = c.advertisingIsWaiting ? c.advertisingWaiting?.since ?? now : now
        let urgent = now - waitingSince >= Self.advertisingPatience
        if let retry = advertisingRetry(c, duration: duration, urgent: urgent) {
            c.advertisingWaiting = (generation, waitingSince)
            clock.schedule(at: retry, .advertising(controller: c.index, generation: generation))
            return
        }
        c.advertisingWaiting = nil
        c.advertisingUntil = now + duration
        var t = now
        channels: for channel in 37...39 where p.channelMap & (1 << UInt8(channel - 37)) != 0 {
            airAdvertising(
                c, at: t, channel: channel, type: p.type.pduType, txRandom: advA.isRandom,
                rxRandom: p.type.isDirected && p.peerAddress.isRandom,
                advA.littleEndian + (p.type.isDirected ? p.peerAddress.littleEndian : c.advertisingData))
            // Only the controllers that scan or initiate can hear it, in index order.
            for index in listeners.indices where index != c.index {
                let s = controllers[index]
                guard s.powered, let (listened, initiating) = listening(s, at: t), listened == channel else { continue }
                guard delivered(from: c, to: s) else { continue }
                // A controller may scan and initiate at once (Vol 6, Part B, 1.1.1): what the initiator does not
                // connect to, the scanner reports.
                if initiating,
                    tryConnect(initiator: s, advertiser: c, advA: advA, at: t + pduTime, channel: channel)
                {
                    break channels
                }
                if s.scanning { scanned(by: s, advertiser: c, advA: advA, at: t + pduTime, channel: channel) }
            }
            // The PDU, T_IFS, room for a SCAN_REQ/SCAN_RSP, then the next channel.
            t += pduTime + 2 * interFrameSpace + 400 * VirtualTime.microsecond
        }
        guard c.advertising, c.advertisingGeneration == generation else { return }
        let next: Int64
        if p.type == .advDirectIndHighDuty {
            next = now + Self.highDutyInterval
        } else {
            next = now + Int64(p.intervalMin) * Self.advertisingUnit + advertisingDelay()
        }
        clock.schedule(at: next, .advertising(controller: c.index, generation: generation))
    }

    /// When an advertising event of `duration` that `c` would start now must try again, if it cannot start: the
    /// end of the exchange its radio serves (the event under way ends there, as an advertising event waits), or
    /// just after the next scheduled anchor it would cover, unless it is `urgent`. Always later than now.
    func advertisingRetry(_ c: ControllerState, duration: Int64, urgent: Bool) -> Int64? {
        if c.airBusyUntil > now { return c.airBusyUntil }
        // An exchange ending right now, whose entry has not run yet: just after it.
        if c.linkByHandle.values.contains(where: { links[$0]?.event != nil }) { return now + 1 }
        if urgent { return nil }
        let anchor = earliestAnchor(of: c, excluding: nil, after: now, starvedOnly: false)
        if anchor != .max, now + duration > anchor { return anchor + 1 }
        return nil
    }

    /// Whether directed advertising from `c` targets `s` (TargetA is `s`'s own address for the state it is in).
    func isTarget(_ c: ControllerState, _ s: ControllerState, ownAddressType: UInt8) -> Bool {
        guard let own = s.ownAddress(type: ownAddressType) else { return false }
        return c.advertisingParameters.peerAddress == own
    }

    /// A scanner heard an advertising PDU: report it, and for an active scanner and a scannable PDU, send
    /// SCAN_REQ and report the SCAN_RSP if it comes back.
    func scanned(
        by s: ControllerState, advertiser c: ControllerState, advA: LinkAddress, at time: Int64, channel: Int
    ) {
        let type = c.advertisingParameters.type
        if type.isDirected && !isTarget(c, s, ownAddressType: s.scanParameters.ownAddressType) { return }
        if s.scanParameters.filterPolicy & 1 == 1 && !s.acceptList.contains(advA) { return }
        report(
            s, eventType: type.reportEventType, address: advA,
            data: type.isDirected ? [] : c.advertisingData, from: c)
        guard s.scanParameters.active, type.isScannable else { return }
        // SCAN_REQ (scanner -> advertiser), then SCAN_RSP (advertiser -> scanner).
        if c.advertisingParameters.filterPolicy & 1 == 1,
            let scanA = s.ownAddress(type: s.scanParameters.ownAddressType), !c.acceptList.contains(scanA)
        {
            return
        }
        if let scanA = s.ownAddress(type: s.scanParameters.ownAddressType) {
            airAdvertising(
                s, at: time + interFrameSpace, channel: channel, type: 0x3, txRandom: scanA.isRandom,
                rxRandom: advA.isRandom, scanA.littleEndian + advA.littleEndian)
        }
        guard delivered(from: s, to: c), delivered(from: c, to: s) else { return }
        airAdvertising(
            c, at: time + 2 * interFrameSpace + LEPhy.le1M.airTime(payload: 12), channel: channel, type: 0x4,
            txRandom: advA.isRandom, rxRandom: false, advA.littleEndian + c.scanResponseData)
        report(s, eventType: 0x04, address: advA, data: c.scanResponseData, from: c)
    }

    /// LE Advertising Report with one report, after the duplicate filter.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.2.
    func report(_ s: ControllerState, eventType: UInt8, address: LinkAddress, data: [UInt8], from c: ControllerState) {
        if s.filterDuplicates {
            let key = SeenKey(address: address, eventType: eventType)
            if s.seen.contains(key) { return }
            s.seen.insert(key)
        }
        guard leEventEnabled(s, subevent: 0x02) else { return }
        var w = ByteWriter(capacity: 12 + data.count)
        w.u8(1)  // Num_Reports
        w.u8(eventType)
        w.u8(address.hciType)
        w.append(address.littleEndian)
        w.u8(UInt8(data.count))
        w.append(data)
        w.i8(reportedRSSI(from: c, to: s))
        emitLEEvent(s, subevent: 0x02, w.bytes)
    }

    /// The transmit window offset (units of 1.25 ms, below one interval) a central gives a new link so that its
    /// anchors fall as far as they can from those of the central's other links: the central's scheduler spreads
    /// its links over its one radio, and each gets its share of the air (Vol 6, Part B, 4.5.3 lets it choose).
    func anchorOffset(for central: ControllerState, interval: Int64, earliest: Int64) -> UInt16 {
        let unit = 1_250 * VirtualTime.microsecond
        let slots = max(1, Int(interval / unit))
        // Every link's anchors, whether or not it has an event scheduled now (an idle link's come back with data).
        let others = central.linkByHandle.values.compactMap { id -> Int64? in
            guard let link = links[id], !link.closed else { return nil }
            return link.anchor(ofCounter: link.nextCounter(notBefore: earliest))
        }
        guard !others.isEmpty, slots > 1 else { return 0 }
        // For each candidate offset, its nearest distance to another link's anchor, modulo the new interval.
        func distance(_ slot: Int) -> Int64 {
            let anchor = earliest + Int64(slot) * unit
            return others.map { other in
                let d = ((anchor - other) % interval + interval) % interval
                return min(d, interval - d)
            }.min() ?? interval
        }
        var best = 0
        var bestDistance: Int64 = -1
        for slot in 0..<slots {
            let d = distance(slot)
            if d > bestDistance {
                best = slot
                bestDistance = d
            }
        }
        return UInt16(best)
    }

    /// Whether `c` has a link to the device at `peer`, in either role.
    func isConnected(_ c: ControllerState, to peer: LinkAddress) -> Bool {
        c.linkByHandle.values.contains { id in
            guard let link = links[id], !link.closed else { return false }
            return (link.sides[0].controller == c.index ? link.centralPeer : link.peripheralPeer) == peer
        }
    }

    /// An initiator heard an advertising PDU: if it is connectable and from the peer it wants, it sends
    /// CONNECT_IND; if the advertiser hears it, both enter the connection state.
    func tryConnect(
        initiator s: ControllerState, advertiser c: ControllerState, advA: LinkAddress, at time: Int64, channel: Int
    ) -> Bool {
        guard let ip = s.initiating, let initA = s.ownAddress(type: ip.ownAddressType) else { return false }
        let type = c.advertisingParameters.type
        guard type.isConnectable else { return false }
        if ip.useAcceptList {
            guard s.acceptList.contains(advA) else { return false }
        } else {
            guard ip.peer == advA else { return false }
        }
        if type.isDirected && c.advertisingParameters.peerAddress != initA { return false }
        if c.advertisingParameters.filterPolicy & 2 != 0 && !c.acceptList.contains(initA) { return false }
        // An advertiser with no room for another link does not answer (its controller would refuse the
        // connection), and neither does one already connected to this initiator.
        guard c.linkByHandle.count < c.maximumConnections, !isConnected(c, to: initA) else { return false }
        // Nor does an initiator that gained a link (as a peripheral) since it was asked to connect.
        guard s.linkByHandle.count < s.maximumConnections else { return false }
        guard delivered(from: s, to: c) else { return false }
        // CONNECT_IND (34-byte payload) sent T_IFS after the advertising PDU; the first anchor follows
        // transmitWindowDelay (1.25 ms) with a zero transmitWindowOffset (Vol 6, Part B, 4.5.3).
        let connectIndEnd = time + interFrameSpace + LEPhy.le1M.airTime(payload: 34)
        let windowOffset = anchorOffset(
            for: s, interval: Int64(ip.intervalMin) * 1_250 * VirtualTime.microsecond,
            earliest: connectIndEnd + 1_250 * VirtualTime.microsecond)
        let firstAnchor =
            connectIndEnd + 1_250 * VirtualTime.microsecond + Int64(windowOffset) * 1_250
            * VirtualTime.microsecond
        s.initiating = nil
        stopAdvertising(c)
        let central = LinkSide(
            controller: s.index, handle: s.allocateHandle(), lastReceived: connectIndEnd,
            local: s.localDataLengths)
        let peripheral = LinkSide(
            controller: c.index, handle: c.allocateHandle(), lastReceived: connectIndEnd,
            local: c.localDataLengths)
        let link = Link(
            id: nextLinkID, central: central, peripheral: peripheral, intervalUnits: ip.intervalMin,
            latency: ip.latency, timeoutUnits: ip.supervisionTimeout, firstAnchor: firstAnchor)
        link.sides[0].preferredTx = s.defaultPhys.all & 1 != 0 ? 0 : s.defaultPhys.tx
        link.sides[0].preferredRx = s.defaultPhys.all & 2 != 0 ? 0 : s.defaultPhys.rx
        link.sides[1].preferredTx = c.defaultPhys.all & 1 != 0 ? 0 : c.defaultPhys.tx
        link.sides[1].preferredRx = c.defaultPhys.all & 2 != 0 ? 0 : c.defaultPhys.rx
        nextLinkID += 1
        links[link.id] = link
        s.linkByHandle[central.handle] = link.id
        c.linkByHandle[peripheral.handle] = link.id
        // The peripheral is connected as soon as it receives CONNECT_IND; the central reports after the
        // first connection event (see `connectionEvent`).
        emitConnectionComplete(
            c, status: Status.success, handle: peripheral.handle, role: 1, peer: initA,
            interval: link.intervalUnits, latency: link.latency, timeout: link.timeoutUnits)
        link.centralPeer = advA
        link.peripheralPeer = initA
        if capturingAir {
            // CONNECT_IND: InitA, AdvA, then LLData (Vol 6, Part B, 2.3.3.1): the link's access address, CRC
            // initial value, a 1.25 ms window at offset 0, interval, latency, timeout, every channel, hop, SCA 0.
            var w = ByteWriter(capacity: 34)
            w.append(initA.littleEndian)
            w.append(advA.littleEndian)
            w.u32(link.accessAddress)
            w.u24(link.crcInit)
            w.u8(1)
            w.u16(windowOffset)
            w.u16(link.intervalUnits)
            w.u16(link.latency)
            w.u16(link.timeoutUnits)
            w.append([0xFF, 0xFF, 0xFF, 0xFF, 0x1F])
            w.u8(UInt8(link.hop))
            airAdvertising(
                s, at: time + interFrameSpace, channel: channel, type: 0x5, txRandom: initA.isRandom,
                rxRandom: advA.isRandom, w.bytes)
        }
        schedule(link, counter: 0)
        return true
    }
}
