import BLECore
import BLEHCI
import BLETransport

/// What the radio's agenda holds.
enum RadioEvent {
    /// Host work scheduled through `HostScheduler.schedule(after:)`.
    case hostWork(@Sendable () -> Void)
    /// A packet a host sent to its controller, queued at the virtual time it was sent.
    case hostPacket(controller: Int, HCIPacket)
    /// The start of an advertising event.
    case advertising(controller: Int, generation: UInt64)
    /// The 1.28 s limit of high duty cycle directed advertising.
    case advertisingTimeout(controller: Int, generation: UInt64)
    /// A connection event (anchor point) of a link.
    case connection(link: Int, counter: Int, generation: UInt64)
    /// The end of one exchange of a connection event (the central's PDU, T_IFS, the peripheral's, T_IFS).
    case exchange(link: Int, generation: UInt64)
    /// A packet for a host whose bytes have crossed a slow host link.
    case toHost(controller: Int, HCIPacket)
    /// A controller powered off in good order: its links end now, and their peers hear it.
    case linksEndedByPowerOff(controller: Int)
    /// A controller's hardware fails: it forgets everything, as after HCI_Reset, and tells its host.
    case hardwareError(controller: Int, code: UInt8)
    /// A controller's firmware hangs: it forgets everything, as after HCI_Reset, and stops answering its host.
    case hang(controller: Int, duration: Int64?)
    /// A hung controller's firmware has restarted (a watchdog): it answers its host again, from its defaults,
    /// unless it hung again since (`hang` counts them).
    case hangEnded(controller: Int, hang: UInt64)
}

/// What processing an event asks the radio to do once its lock is released, in order.
enum RadioEffect: Sendable {
    /// Record a host packet as it reaches the controller (trace only).
    case fromHost(name: String, HCIPacket)
    /// Deliver a packet to a host.
    case toHost(pipe: HCIPipe, name: String, HCIPacket)
    /// Run host work.
    case run(@Sendable () -> Void)
    /// Close a host's transport (its controller vanished).
    case close(pipe: HCIPipe, reason: String)
    /// A link-layer packet on the air, for the air capture.
    case air(AirPacket)
}

/// The whole simulated world: clock, random generator, controllers and links. It lives inside the radio's
/// `Mutex` and is only ever touched with that lock held; it never calls out (host deliveries are collected as
/// `effects` and performed by the radio after unlocking).
///
/// Its stored properties, and those of the `Link`s and `ControllerState`s it holds, are `@exclusivity(unchecked)`:
/// the lock already makes every access exclusive, and the runtime's check of each of the dozens of small
/// accesses an exchange makes (a thread-local access set, entered and left each time) was a tenth of a streaming
/// link's run. Nothing in them may be passed `inout` while the same property is read.
final class World {
    @exclusivity(unchecked) var clock = VirtualClock<RadioEvent>()
    @exclusivity(unchecked) var random: SimulationRandom
    @exclusivity(unchecked) var controllers: [ControllerState] = []
    /// The controllers that scan or initiate (kept by the controllers themselves).
    let listeners = ListenerSet()
    @exclusivity(unchecked) var links: [Int: Link] = [:]
    @exclusivity(unchecked) var nextLinkID = 0
    @exclusivity(unchecked) var packetLossRate: Double = 0
    @exclusivity(unchecked) var effects: [RadioEffect] = []
    /// Whether link-layer packets are recorded (an air capture is open).
    @exclusivity(unchecked) var capturingAir = false
    /// Scratch space of `earliestAnchor`: live anchors set aside while it looks past them.
    @exclusivity(unchecked) var aside: [ScheduledAnchor] = []

    init(seed: UInt64) {
        random = SimulationRandom(seed: seed)
    }

    var now: Int64 { clock.now }

    // MARK: Processing

    func process(_ event: RadioEvent) {
        switch event {
        case .hostWork(let work):
            effects.append(.run(work))
        case .hostPacket(let index, let packet):
            let controller = controllers[index]
            effects.append(.fromHost(name: controller.name, packet))
            guard controller.powered, !controller.hung else { return }
            receiveFromHost(controller, packet)
        case .advertising(let index, let generation):
            advertisingEvent(controllers[index], generation: generation)
        case .advertisingTimeout(let index, let generation):
            advertisingTimedOut(controllers[index], generation: generation)
        case .connection(let id, let counter, let generation):
            guard let link = links[id], link.generation == generation, link.scheduled else { return }
            connectionEvent(link, counter: counter)
        case .exchange(let id, let generation):
            guard let link = links[id], link.generation == generation, link.event != nil else { return }
            exchangeEnded(link)
        case .toHost(let index, let packet):
            let controller = controllers[index]
            guard !controller.hung else { return }
            effects.append(.toHost(pipe: controller.pipe, name: controller.name, packet))
        case .linksEndedByPowerOff(let index):
            terminateAllLinks(controllers[index])
        case .hardwareError(let index, let code):
            // Its links, advertising, scanning and initiation are gone (the peers' links time out); the host
            // hears Hardware Error (Vol 4, Part E, 7.7.16) and is expected to reset it.
            let controller = controllers[index]
            guard controller.powered else { return }
            reset(controller)
            emitEvent(controller, code: 0x10, [code])
        case .hang(let index, let duration):
            // Its links, advertising, scanning and initiation stop with its firmware (the peers' links time
            // out); its host hears nothing, not even a Hardware Error, and what it sends is lost.
            let controller = controllers[index]
            guard controller.powered else { return }
            if !controller.hung { reset(controller) }
            controller.hung = true
            controller.hangs &+= 1
            if let duration {
                clock.schedule(
                    at: VirtualTime.after(now, duration), .hangEnded(controller: index, hang: controller.hangs))
            }
        case .hangEnded(let index, let hang):
            if controllers[index].hangs == hang { controllers[index].hung = false }
        }
    }

    // MARK: Air capture

    /// Records an advertising-channel PDU from `sender` (type, TxAdd and RxAdd in the header, then `payload`).
    func airAdvertising(
        _ sender: ControllerState, at time: Int64, channel: Int, type: UInt8, txRandom: Bool, rxRandom: Bool,
        _ payload: [UInt8]
    ) {
        guard capturingAir else { return }
        let header = type | (txRandom ? 0x40 : 0) | (rxRandom ? 0x80 : 0)
        effects.append(
            .air(
                AirPacket(
                    time: time, channel: channel, accessAddress: 0x8E89_BED6,
                    pdu: [header, UInt8(payload.count)] + payload, crcInit: 0x55_5555, phy: .le1M, direction: 0,
                    rssi: Int8(clamping: Int(sender.txPower) - 40))))
    }

    /// Records one data-channel PDU of side `s` of `link` (LLID, the sequence bits and MD in its header).
    ///
    /// An encrypted PDU is recorded as a sniffer that follows the link's encryption shows it: decrypted with the
    /// receiver's session, its MIC kept after the payload (the length field counts it, as on the air), flagged
    /// "decrypted", "MIC checked" and "MIC valid", with the CRC of the bytes that were on the air, checked and valid.
    /// One whose MIC the receiver cannot check (different keys) is recorded as sent, "MIC checked" but not valid.
    func airData(_ link: Link, side s: Int, at time: Int64, channel: Int, more: Bool) {
        guard capturingAir else { return }
        let side = link.sides[s]
        let (llid, payload) = side.currentPlaintext(fromCentral: s == 0) ?? (0b01, [])
        let header = llid | (side.nesn << 2) | (side.sn << 3) | (more ? 0x10 : 0)
        var packet = AirPacket(
            time: time, channel: channel, accessAddress: link.accessAddress,
            pdu: [header, UInt8(payload.count)] + payload, crcInit: link.crcInit, phy: link.phy(from: s),
            direction: s == 0 ? 2 : 3, rssi: Int8(clamping: Int(controllers[side.controller].txPower) - 40))
        if let sealed = side.sealed {
            let onAir = [header, UInt8(sealed.count)] + sealed
            packet.micChecked = true
            if let opened = link.sides[1 - s].encryption.receive?.open(
                sealed, header: header, counter: side.sealedCounter, fromCentral: s == 0)
            {
                packet.pdu = [header, UInt8(sealed.count)] + opened + sealed.suffix(LLSession.micLength)
                packet.onAir = onAir
                packet.micValid = true
            } else {
                packet.pdu = onAir
            }
        }
        effects.append(.air(packet))
    }

    // MARK: Radio helpers

    func distance(_ a: ControllerState, _ b: ControllerState) -> Double {
        a.position.distance(to: b.position)
    }

    /// Whether a packet from `sender` reaches `receiver` (range and random loss).
    func delivered(from sender: ControllerState, to receiver: ControllerState) -> Bool {
        guard sender.powered, receiver.powered,
            RadioPropagation.reaches(
                txPower: sender.txPower, squaredDistance: sender.position.squaredDistance(to: receiver.position))
        else { return false }
        return !lost()
    }

    /// Draws a packet loss (no draw at all when the loss rate is zero, so lossless runs stay cheap).
    func lost() -> Bool {
        guard packetLossRate > 0 else { return false }
        return random.unit() < packetLossRate
    }

    /// The RSSI `receiver` reports for a packet from `sender`: mean power plus seeded ±2 dB jitter.
    func reportedRSSI(from sender: ControllerState, to receiver: ControllerState) -> Int8 {
        let mean = RadioPropagation.meanReceivedPower(txPower: sender.txPower, distance: distance(sender, receiver))
        // A position at infinity (or not a number) is out of range: the weakest RSSI HCI can report.
        guard mean.isFinite else { return -127 }
        let jitter = (random.unit() * 2 - 1) * RadioPropagation.reportedJitter
        return Int8(clamping: Int((mean + jitter).rounded()))
    }

    // MARK: Emitting to hosts

    /// Sends an HCI event to `controller`'s host unless the host masked it.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.1 (Set Event Mask), 7.8.1 (LE Set Event Mask).
    func emitEvent(_ controller: ControllerState, code: UInt8, _ parameters: [UInt8]) {
        let bit: UInt64?
        switch code {
        case 0x05: bit = 4  // Disconnection Complete
        case 0x08: bit = 7  // Encryption Change [v1]
        case 0x30: bit = 47  // Encryption Key Refresh Complete
        case 0x0C: bit = 11  // Read Remote Version Information Complete
        case 0x1A: bit = 25  // Data Buffer Overflow
        case 0x3E: bit = 61  // LE Meta
        default: bit = nil  // Command Complete/Status, Number Of Completed Packets: never masked
        }
        if let bit, controller.eventMask & (1 << bit) == 0 { return }
        send(controller, makeEventPacket(code: code, parameters: parameters))
    }

    /// Hands a packet to `controller`'s host: at once on an ideal host link, else once its bytes have crossed,
    /// after the packets ahead of it.
    func send(_ controller: ControllerState, _ packet: HCIPacket) {
        guard !controller.hung else { return }
        guard controller.hostLink != .ideal else {
            effects.append(.toHost(pipe: controller.pipe, name: controller.name, packet))
            return
        }
        let arrival = VirtualTime.after(
            max(now, controller.controllerToHostFree), controller.hostLink.transferTime(of: packet))
        controller.controllerToHostFree = arrival
        clock.schedule(at: arrival, .toHost(controller: controller.index, packet))
    }

    /// Whether an LE meta subevent would reach the host.
    func leEventEnabled(_ controller: ControllerState, subevent: UInt8) -> Bool {
        controller.eventMask & (1 << 61) != 0 && subevent >= 1
            && controller.leEventMask & (1 << UInt64(subevent - 1)) != 0
    }

    func emitLEEvent(_ controller: ControllerState, subevent: UInt8, _ parameters: [UInt8]) {
        guard leEventEnabled(controller, subevent: subevent) else { return }
        emitEvent(controller, code: 0x3E, [subevent] + parameters)
    }

    func emitACL(_ controller: ControllerState, handle: UInt16, boundary: UInt8, data: [UInt8]) {
        send(controller, makeACLPacket(handle: handle, boundary: boundary, data: data))
    }

    /// Command Complete with `Num_HCI_Command_Packets` = 1.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.14.
    func commandComplete(_ controller: ControllerState, _ opcode: UInt16, _ returnParameters: [UInt8]) {
        emitEvent(controller, code: 0x0E, [1, UInt8(opcode & 0xFF), UInt8(opcode >> 8)] + returnParameters)
    }

    /// Command Status with `Num_HCI_Command_Packets` = 1.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.15.
    func commandStatus(_ controller: ControllerState, _ opcode: UInt16, _ status: UInt8) {
        emitEvent(controller, code: 0x0F, [status, 1, UInt8(opcode & 0xFF), UInt8(opcode >> 8)])
    }

    /// Disconnection Complete (Vol 4, Part E, 7.7.5).
    func emitDisconnectionComplete(_ controller: ControllerState, handle: UInt16, reason: UInt8) {
        var w = ByteWriter(capacity: 4)
        w.u8(0)
        w.u16(handle)
        w.u8(reason)
        emitEvent(controller, code: 0x05, w.bytes)
    }

    // MARK: Host packets

    func receiveFromHost(_ controller: ControllerState, _ packet: HCIPacket) {
        switch decodeHostPacket(packet) {
        case .command(let opcode, let parameters):
            handleCommand(controller, opcode: opcode, parameters: parameters)
        case .acl(let handle, let boundary, let data):
            receiveACL(controller, handle: handle, boundary: boundary, data: data)
        case .ignored:
            break
        }
    }

    /// An HCI ACL packet from the host.
    ///
    /// Buffer policy (the spec leaves overruns to the controller): a packet longer than
    /// `LE_ACL_Data_Packet_Length`, or one sent while all `Total_Num_LE_ACL_Data_Packets` buffers are
    /// taken, is dropped and reported with Data Buffer Overflow (link type ACL), as a controller with
    /// fixed buffers would. Packets for an unknown handle are dropped silently. A start packet may carry an
    /// L2CAP message split across several HCI packets; each becomes one or more LL data PDUs of at most the
    /// connection's effective `maxTxOctets`.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 4.1.1 (data flow control), 5.4.2 (ACL packets), 7.7.26.
    func receiveACL(_ controller: ControllerState, handle: UInt16, boundary: UInt8, data: [UInt8]) {
        guard let id = controller.linkByHandle[handle], let link = links[id],
            let side = link.side(of: controller.index)
        else { return }
        if data.count > controller.aclBufferLength || controller.aclInFlight >= controller.aclBufferCount {
            emitEvent(controller, code: 0x1A, [0x01])
            return
        }
        if data.isEmpty {
            // Nothing to carry: the buffer is free at once.
            var w = ByteWriter(capacity: 5)
            w.u8(1)
            w.u16(handle)
            w.u16(1)
            emitEvent(controller, code: 0x13, w.bytes)
            return
        }
        controller.aclInFlight += 1
        link.sides[side].data.append(PendingACL(data: data, startsMessage: boundary != 0b01))
        wake(link)
    }
}
