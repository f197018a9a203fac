import DequeModule

/// LL control PDUs the virtual link layer exchanges, with the fields it needs. They travel between the two
/// controllers of a link as values; `payloadLength` is what they occupy on the air (opcode + CtrData).
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 2.4.2 (LL Control PDU), 5.1 (LL control procedures).
enum LLControlPDU {
    case connectionUpdateInd(interval: UInt16, latency: UInt16, timeout: UInt16, instant: Int?)
    case connectionParamReq(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16)
    case rejectExtInd(rejectOpcode: UInt8, error: UInt8)
    case lengthReq(DataLengths)
    case lengthRsp(DataLengths)
    case phyReq(tx: UInt8, rx: UInt8)
    case phyRsp(tx: UInt8, rx: UInt8)
    case phyUpdateInd(centralToPeripheral: UInt8, peripheralToCentral: UInt8, instant: Int?)
    case featureReq(features: UInt64)
    case featureRsp(features: UInt64)
    case versionInd(version: UInt8, company: UInt16, subversion: UInt16)
    case terminateInd(reason: UInt8)
    // The encryption start and pause procedures (Vol 6, Part B, 5.1.3; PDUs in 2.4.2.4-2.4.2.7, 2.4.2.11-2.4.2.12).
    /// LL_ENC_REQ: the LTK's Rand and EDIV, and the central's halves of the session key diversifier and IV.
    case encReq(rand: UInt64, ediv: UInt16, skd: UInt64, iv: UInt32)
    /// LL_ENC_RSP: the peripheral's halves of the session key diversifier and IV.
    case encRsp(skd: UInt64, iv: UInt32)
    case startEncReq
    case startEncRsp
    case pauseEncReq
    case pauseEncRsp
    /// LL_REJECT_IND (Vol 6, Part B, 2.4.2.14): an error code, for a peer that does not take LL_REJECT_EXT_IND.
    case rejectInd(error: UInt8)

    /// Opcode + CtrData length in bytes (Vol 6, Part B, 2.4.2).
    var payloadLength: Int {
        switch self {
        case .connectionUpdateInd: return 12
        case .connectionParamReq: return 24
        case .rejectExtInd: return 3
        case .lengthReq, .lengthRsp: return 9
        case .phyReq, .phyRsp: return 3
        case .phyUpdateInd: return 5
        case .featureReq, .featureRsp: return 9
        case .versionInd: return 6
        case .terminateInd: return 2
        case .encReq: return 23
        case .encRsp: return 13
        case .startEncReq, .startEncRsp, .pauseEncReq, .pauseEncRsp: return 1
        case .rejectInd: return 2
        }
    }

    /// LL control opcodes used in LL_REJECT_EXT_IND.
    static let connectionParamReqOpcode: UInt8 = 0x0F
    static let encReqOpcode: UInt8 = 0x03

    /// The PDU's payload on the air: opcode and CtrData (Vol 6, Part B, 2.4.2). Fields this model does not keep
    /// (window size and offset, preferred periodicity, the offsets of a parameters request) are sent as zero.
    var bytes: [UInt8] {
        var w = ByteWriter(capacity: payloadLength)
        func instant(_ value: Int?) -> UInt16 { UInt16(truncatingIfNeeded: value ?? 0) }
        switch self {
        case .connectionUpdateInd(let interval, let latency, let timeout, let at):
            w.u8(0x00)
            w.u8(1)
            w.u16(0)
            w.u16(interval)
            w.u16(latency)
            w.u16(timeout)
            w.u16(instant(at))
        case .connectionParamReq(let minI, let maxI, let latency, let timeout):
            w.u8(Self.connectionParamReqOpcode)
            w.u16(minI)
            w.u16(maxI)
            w.u16(latency)
            w.u16(timeout)
            w.u8(0)
            w.u16(0)
            for _ in 0..<6 { w.u16(0xFFFF) }
        case .rejectExtInd(let opcode, let error):
            w.u8(0x11)
            w.u8(opcode)
            w.u8(error)
        case .lengthReq(let lengths), .lengthRsp(let lengths):
            if case .lengthReq = self { w.u8(0x14) } else { w.u8(0x15) }
            w.u16(UInt16(clamping: lengths.rxOctets))
            w.u16(UInt16(clamping: lengths.rxTime))
            w.u16(UInt16(clamping: lengths.txOctets))
            w.u16(UInt16(clamping: lengths.txTime))
        case .phyReq(let tx, let rx), .phyRsp(let tx, let rx):
            if case .phyReq = self { w.u8(0x16) } else { w.u8(0x17) }
            w.u8(tx)
            w.u8(rx)
        case .phyUpdateInd(let c2p, let p2c, let at):
            w.u8(0x18)
            w.u8(c2p)
            w.u8(p2c)
            w.u16(instant(at))
        case .featureReq(let features), .featureRsp(let features):
            if case .featureReq = self { w.u8(0x08) } else { w.u8(0x09) }
            w.u64(features)
        case .versionInd(let version, let company, let subversion):
            w.u8(0x0C)
            w.u8(version)
            w.u16(company)
            w.u16(subversion)
        case .terminateInd(let reason):
            w.u8(0x02)
            w.u8(reason)
        case .encReq(let rand, let ediv, let skd, let iv):
            w.u8(Self.encReqOpcode)
            w.u64(rand)
            w.u16(ediv)
            w.u64(skd)
            w.u32(iv)
        case .encRsp(let skd, let iv):
            w.u8(0x04)
            w.u64(skd)
            w.u32(iv)
        case .startEncReq: w.u8(0x05)
        case .startEncRsp: w.u8(0x06)
        case .pauseEncReq: w.u8(0x0A)
        case .pauseEncRsp: w.u8(0x0B)
        case .rejectInd(let error):
            w.u8(0x0D)
            w.u8(error)
        }
        return w.bytes
    }
}

/// One HCI ACL packet from a host waiting to be carried in LL data PDUs.
struct PendingACL {
    var data: [UInt8]
    /// Bytes already acknowledged by the peer.
    var offset = 0
    /// Whether the first LL PDU starts an L2CAP message (HCI PB 0b00 / 0b10) or continues one (0b01).
    var startsMessage: Bool
}

/// The four values of the Data Length Update procedure: octets of LL payload and microseconds on the air, each
/// way (Vol 6, Part B, 4.5.10).
struct DataLengths: Equatable {
    var rxOctets: Int
    var rxTime: Int
    var txOctets: Int
    var txTime: Int

    /// 27 octets and 328 µs each way, what every link starts with.
    static let initial = DataLengths(rxOctets: 27, rxTime: 328, txOctets: 27, txTime: 328)
}

/// One side of a link: what this controller still has to send, and what it knows about the link.
struct LinkSide {
    var controller: Int
    var handle: UInt16
    /// False once this side's controller has left the link (terminated, timed out, reset, vanished).
    var alive = true
    var control = Deque<LLControlPDU>()
    var data = Deque<PendingACL>()
    /// PDUs of the encryption procedures: sent before anything else, and the only ones (with LL_TERMINATE_IND)
    /// sent while a procedure holds the rest.
    var encryptionControl = Deque<LLControlPDU>()
    var encryption = LinkEncryption()
    /// The PDU in flight as it goes on the air when this side encrypts: its payload encrypted, then the MIC; and the
    /// packet counter it was sealed with. A retransmission sends the same bytes (Vol 6, Part E, 2).
    var sealed: [UInt8]?
    var sealedCounter: UInt64 = 0
    /// The peer's LE features, once a feature exchange has told them.
    var peerFeatures: UInt64?
    /// The head of `control`/`data` has reached the peer but its acknowledgement was lost; the peer will
    /// discard the retransmission (SN/NESN), so it is not delivered twice.
    var headDelivered = false
    /// The PDU being sent until the peer acknowledges it (chosen once, then retransmitted as is).
    var current: Outgoing?
    /// Time this side last received a packet from the peer (for the supervision timeout).
    var lastReceived: Int64
    /// HCI ACL packets completed since the last Number Of Completed Packets event.
    var completed = 0

    // Data length (Vol 6, Part B, 4.5.10): this side's own maxima (transmit from its host, receive what the
    // controller supports: 251 octets, 17,040 µs, a 251-octet PDU on LE Coded) and the effective values.
    var local: DataLengths
    /// The peer's maxima, as its last LL_LENGTH_REQ or LL_LENGTH_RSP gave them.
    var remote = DataLengths.initial
    var effective = DataLengths.initial
    /// The longest LL payload this side sends: the effective octets, as far as they fit in the effective time on
    /// the PHY it transmits on.
    var txPayloadLimit = 27
    // Preferred PHYs from the host (bit 0 1M, bit 1 2M); 0 means "no preference".
    var preferredTx: UInt8 = 0
    var preferredRx: UInt8 = 0
    /// Local host procedures waiting for an answer from the peer.
    var awaitingFeatures = false
    var awaitingVersion = false
    var awaitingPhy = false
    var awaitingParamReq = false
    var sentVersion = false
    /// The sequence number of what this side sends and the next one it expects (Vol 6, Part B, 4.5.9): kept as a
    /// sniffer would see them, for air captures.
    var sn: UInt8 = 0
    var nesn: UInt8 = 0
    /// The reason a local Disconnect gave; set while LL_TERMINATE_IND is outstanding.
    var terminating: UInt8?
    var terminateStart: Int64 = 0

    var hasPendingTraffic: Bool { current != nil || hasSendable }

    /// Whether something could be sent after the PDU in flight: an encryption procedure's PDU, or, unless a
    /// procedure holds them, other control PDUs and data; LL_TERMINATE_IND always.
    var hasSendable: Bool {
        if !encryptionControl.isEmpty { return true }
        guard encryption.holdsTraffic else { return !control.isEmpty || !data.isEmpty }
        return control.contains { if case .terminateInd = $0 { true } else { false } }
    }

    /// The payload of the data PDU in flight: its piece of the oldest ACL packet (nil for a control PDU or none).
    var currentData: [UInt8]? {
        guard case .data(let length, _)? = current, let head = data.first,
            head.offset + length <= head.data.count
        else { return nil }
        return Array(head.data[head.offset..<head.offset + length])
    }

    /// The PDU in flight before any encryption: its header's first octet (the LLID; the sequence bits and MD are
    /// left out, as the CCM's AAD leaves them out) and its payload. Nil for an empty PDU.
    func currentPlaintext(fromCentral: Bool) -> (header: UInt8, payload: [UInt8])? {
        switch current {
        case .data(_, let start)?:
            guard let bytes = currentData else { return nil }
            return (start ? 0b10 : 0b01, bytes)
        case .control(let pdu)?:
            var bytes = pdu.bytes
            // A feature request from the peripheral is LL_PERIPHERAL_FEATURE_REQ (Vol 6, Part B, 2.4.2.15).
            if !fromCentral, case .featureReq = pdu { bytes[0] = 0x0E }
            return (0b11, bytes)
        case nil:
            return nil
        }
    }

    /// Whether something waits behind the PDU in flight (the MD bit).
    var hasMoreThanCurrent: Bool {
        guard case .data(let length, _)? = current else { return current != nil && hasSendable }
        // A procedure that began while this data PDU was in flight holds the rest of the data.
        if encryption.holdsTraffic { return hasSendable }
        guard let head = data.first else { return !control.isEmpty }
        return head.offset + length < head.data.count || data.count > 1 || !control.isEmpty
            || !encryptionControl.isEmpty
    }

    /// Chooses the next PDU if none is in flight: the encryption procedures' PDUs first, then other control PDUs,
    /// then a piece of the oldest ACL packet; while a procedure runs, only its PDUs and LL_TERMINATE_IND. A side
    /// that encrypts seals the PDU now, with the next packet counter.
    mutating func pickNext(fromCentral: Bool) {
        guard current == nil else { return }
        sealed = nil
        if let pdu = encryptionControl.popFirst() {
            current = .control(pdu)
        } else if encryption.holdsTraffic {
            if let i = control.firstIndex(where: { if case .terminateInd = $0 { true } else { false } }) {
                current = .control(control.remove(at: i))
            }
        } else if let pdu = control.popFirst() {
            current = .control(pdu)
        } else if let head = data.first {
            let length = min(head.data.count - head.offset, txPayloadLimit)
            current = .data(length: length, start: head.offset == 0 && head.startsMessage)
        }
        // An empty PDU is never encrypted (Vol 6, Part E, 1).
        if let session = encryption.transmit, let (header, payload) = currentPlaintext(fromCentral: fromCentral) {
            sealedCounter = encryption.transmitCounter
            sealed = session.seal(payload, header: header, counter: sealedCounter, fromCentral: fromCentral)
            encryption.transmitCounter += 1
        }
    }

    /// Payload length of what this side sends next (0: an empty PDU), without a MIC.
    var currentPayloadLength: Int {
        switch current {
        case .control(let pdu): return pdu.payloadLength
        case .data(let length, _): return length
        case nil: return 0
        }
    }

    /// Whether what this side sends next carries a MIC, which takes 4 octets more of air time.
    var currentHasMIC: Bool { sealed != nil }

    /// Air time of what this side sends next on `phy`.
    func currentAirTime(on phy: LEPhy) -> Int64 { phy.airTime(payload: currentPayloadLength, mic: currentHasMIC) }
}

/// A PDU in flight on one side of a link.
enum Outgoing {
    case control(LLControlPDU)
    /// `length` bytes from the head ACL packet's offset; `start` selects LLID 0b10 (start) over 0b01.
    case data(length: Int, start: Bool)
}

/// A connection between a central (`sides[0]`) and a peripheral (`sides[1]`).
///
/// Anchors are computed, not stored: event `counterBase + k` happens at `anchorBase + k · interval`. A link
/// with nothing to send, in range, with no pending instant, schedules no events at all (`scheduled == false`);
/// whoever gives it work (`World.wake`) computes the next anchor. The empty-PDU exchanges of the skipped
/// events are taken as having happened, so `lastReceived` is brought forward to the last skipped anchor.
final class Link {
    let id: Int
    @exclusivity(unchecked) var sides: [LinkSide]
    @exclusivity(unchecked) var interval: Int64  // nanoseconds
    @exclusivity(unchecked) var intervalUnits: UInt16  // units of 1.25 ms
    @exclusivity(unchecked) var latency: UInt16
    @exclusivity(unchecked) var timeoutUnits: UInt16  // units of 10 ms
    @exclusivity(unchecked) var anchorBase: Int64
    @exclusivity(unchecked) var counterBase: Int
    /// Event counter of the last connection event processed (-1 before the first).
    @exclusivity(unchecked) var lastCounter = -1
    @exclusivity(unchecked) var scheduled = false
    /// Counts the link's schedulings: the entry its controllers keep for the latest one carries it.
    @exclusivity(unchecked) var anchorStamp: UInt64 = 0
    /// The anchor of the event scheduled next (valid while `scheduled`).
    @exclusivity(unchecked) var nextAnchor: Int64 = 0
    /// The event counter the peripheral last listened at: with peripheral latency L and nothing to send, it
    /// listens at every (L + 1)th event from there.
    @exclusivity(unchecked) var peripheralListened = 0
    /// An event the peripheral should have listened at did not happen (radio busy, packet lost): it listens at
    /// every event until an exchange succeeds, so latency and a miss cannot add up to a supervision timeout.
    @exclusivity(unchecked) var peripheralMissed = false
    /// This link's last event was skipped because a radio was busy with another link: that link yields its
    /// next first exchange to this one if they collide, so two links whose anchors keep colliding take turns.
    @exclusivity(unchecked) var starved = false
    /// The connection event under way, if any: its counter, its anchor, the air time its exchanges used before
    /// the one in flight, and that one's start and length.
    @exclusivity(unchecked) var event: (counter: Int, anchor: Int64, used: Int64, start: Int64, pair: Int64)?
    @exclusivity(unchecked) var generation: UInt64 = 0
    @exclusivity(unchecked) var established = false
    @exclusivity(unchecked) var phyCentralToPeripheral = LEPhy.le1M
    @exclusivity(unchecked) var phyPeripheralToCentral = LEPhy.le1M
    @exclusivity(unchecked) var pendingUpdate:
        (interval: UInt16, latency: UInt16, timeout: UInt16, instant: Int, initiator: Int)?
    @exclusivity(unchecked) var pendingPhy: (c2p: LEPhy, p2c: LEPhy, instant: Int, initiator: Int)?
    /// Remote version/feature caches (the version exchange happens once per connection).
    /// The central's host has an LE Remote Connection Parameter Request to answer.
    @exclusivity(unchecked) var pendingParamRequestFromPeer = false
    /// The advertiser's address, for the central's LE Connection Complete.
    @exclusivity(unchecked) var centralPeer = LinkAddress.none
    /// The initiator's address, as the peripheral knows it.
    @exclusivity(unchecked) var peripheralPeer = LinkAddress.none
    /// What CONNECT_IND gave the link, for air captures: derived from the link's id, so capturing draws no
    /// randomness and changes nothing in the run.
    var accessAddress: UInt32 { 0x5065_4D8B ^ (UInt32(truncatingIfNeeded: id) &* 0x9E37_79B1) }
    var crcInit: UInt32 { (0x55_5555 ^ (UInt32(truncatingIfNeeded: id) &* 0x0001_0F3B)) & 0xFF_FFFF }
    /// Channel selection algorithm #1's hop increment, 5...16, with every data channel used.
    var hop: Int { 5 + id % 12 }

    /// The data channel of event `counter` (CSA #1 with all 37 channels used: the unmapped channel advances by
    /// `hop` every event).
    func channel(ofCounter counter: Int) -> Int { (hop * (counter + 1)) % 37 }
    @exclusivity(unchecked) var closed = false

    var supervisionTimeout: Int64 { Int64(timeoutUnits) * 10 * VirtualTime.millisecond }

    init(
        id: Int, central: LinkSide, peripheral: LinkSide, intervalUnits: UInt16, latency: UInt16,
        timeoutUnits: UInt16, firstAnchor: Int64
    ) {
        self.id = id
        self.sides = [central, peripheral]
        self.intervalUnits = intervalUnits
        self.interval = Int64(intervalUnits) * 1_250 * VirtualTime.microsecond
        self.latency = latency
        self.timeoutUnits = timeoutUnits
        self.anchorBase = firstAnchor
        self.counterBase = 0
    }

    func anchor(ofCounter counter: Int) -> Int64 {
        anchorBase + Int64(counter - counterBase) * interval
    }

    /// The first event counter after the last processed one whose anchor is at or after `time`.
    func nextCounter(notBefore time: Int64) -> Int {
        var counter = lastCounter + 1
        if time > anchorBase {
            let elapsed = time - anchorBase
            let k = counterBase + Int((elapsed + interval - 1) / interval)
            counter = max(counter, k)
        }
        return max(counter, counterBase)
    }

    func side(of controller: Int) -> Int? {
        if sides[0].controller == controller && sides[0].alive { return 0 }
        if sides[1].controller == controller && sides[1].alive { return 1 }
        return nil
    }

    func phy(from side: Int) -> LEPhy { side == 0 ? phyCentralToPeripheral : phyPeripheralToCentral }
}
