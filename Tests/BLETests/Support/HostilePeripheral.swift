import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLETransport
import BLEVirtualController
import Foundation
import Synchronization

/// A peripheral on the simulated radio that does not play by the rules: its ATT and L2CAP side follows a script
/// of misbehaviours instead of our GATT server.
///
/// ### Overview
/// It is a host of its own, written for tests, on a `VirtualController` of the radio: it speaks raw HCI through
/// the controller's host transport (as the controller's own tests do), so nothing of our host stack stands
/// between its bytes and the central under test. It resets its controller, advertises ``service`` with the
/// name "hostile", and takes the first central that connects.
///
/// ### Function
/// What it receives on the ATT channel goes through its ``Script``: the first ``Misbehaviour`` whose
/// ``Trigger`` matches (and that has uses left) says what to do (``Act``): answer honestly, send raw bytes on
/// ATT, on the signalling channel or on any channel, say nothing, disconnect, vanish from the air, or do any
/// of these later. With no rule matching it answers honestly, through a `GATTServer` over a small database
/// (``Handles``): GAP and GATT services with a Database Hash, then ``service`` with a readable and writable
/// value, a long value, a notifying and an indicating characteristic, and one with a user description. It
/// answers an Exchange MTU Request with ``mtu`` and refuses pairing. The link's start (``Trigger/connected``),
/// each confirmation of an indication and each signalling command may trigger acts too.
///
/// Everything it sends and receives on ATT and signalling is recorded (``received``, ``sentCount``), so a test
/// can check what the central did, and it keeps to its controller's ACL buffers (8 of 251 octets), so a flood is
/// paced by the air, not dropped.
final class HostilePeripheral: Sendable {
    static let service = BluetoothUUID(string: "0B57113E-0000-4000-8000-00805F9B34FB")!
    static let value = BluetoothUUID(string: "0B57113E-0001-4000-8000-00805F9B34FB")!
    static let long = BluetoothUUID(string: "0B57113E-0002-4000-8000-00805F9B34FB")!
    static let notifier = BluetoothUUID(string: "0B57113E-0003-4000-8000-00805F9B34FB")!
    static let indicator = BluetoothUUID(string: "0B57113E-0004-4000-8000-00805F9B34FB")!
    static let described = BluetoothUUID(string: "0B57113E-0005-4000-8000-00805F9B34FB")!

    /// The value the long characteristic holds at first: 100 octets, 0x00, 0x01, ...
    static let longValue = (0..<100).map { UInt8($0) }

    /// Where the honest database put things.
    struct Handles: Sendable {
        var service: ClosedRange<AttributeHandle>
        var value: AttributeHandle
        var long: AttributeHandle
        var notifier: AttributeHandle
        var notifierCCCD: AttributeHandle
        var indicator: AttributeHandle
        var indicatorCCCD: AttributeHandle
        var described: AttributeHandle
        var userDescription: AttributeHandle
    }

    /// An ATT PDU from the central: its bytes, decoded when they decode, and how many of its opcode came before.
    struct Request: Sendable, CustomStringConvertible {
        var bytes: [UInt8]
        var pdu: ATTPDU?
        /// How many PDUs of this opcode the central sent before this one.
        var ordinal: Int
        var opcode: ATTOpcode { ATTOpcode(bytes.first ?? 0) }
        /// The handle a read, write or prepared write names; for a search, its starting handle.
        var handle: AttributeHandle? {
            guard bytes.count >= 3 else { return nil }
            let code = bytes[0]
            guard [0x04, 0x06, 0x08, 0x0A, 0x0C, 0x10, 0x12, 0x16, 0x52].contains(code) else { return nil }
            return AttributeHandle(UInt16(bytes[1]) | UInt16(bytes[2]) << 8)
        }
        /// The type a Read By Type or Read By Group Type asks for.
        var searchedType: BluetoothUUID? {
            switch pdu {
            case .readByTypeRequest(let r): r.attributeType
            case .readByGroupTypeRequest(let r): r.attributeGroupType
            default: nil
            }
        }
        var description: String { bytes.map { String(format: "%02x", $0) }.joined() }
    }

    /// What sets a misbehaviour off.
    enum Trigger: Sendable {
        /// The link came up (the peer's LE Connection Complete).
        case connected
        /// An ATT PDU from the central of this opcode that `matches` accepts.
        case att(ATTOpcode, matches: @Sendable (Request) -> Bool = { _ in true })
        /// A confirmation of one of the peer's indications.
        case confirmation
        /// A signalling command from the central (its code is the first octet).
        case signaling(matches: @Sendable ([UInt8]) -> Bool = { _ in true })

        /// A read of the characteristic value or descriptor at `handle`.
        static func read(_ handle: AttributeHandle) -> Trigger { .att(.readRequest) { $0.handle == handle } }
        /// A Write Request to `handle`.
        static func write(_ handle: AttributeHandle) -> Trigger { .att(.writeRequest) { $0.handle == handle } }
        /// A search (Read By Type, Read By Group Type) for `type`.
        static func search(_ opcode: ATTOpcode, for type: BluetoothUUID) -> Trigger {
            .att(opcode) { $0.searchedType == type }
        }
    }

    /// One thing the peer does.
    indirect enum Act: Sendable {
        /// What a correct server answers (nothing for a command or a confirmation).
        case honest
        /// These bytes as one ATT PDU.
        case att([UInt8])
        /// Bytes made from the request that set the misbehaviour off (for a trigger with no request, an empty one).
        case reply(@Sendable (Request) -> [UInt8])
        /// These bytes as one PDU on the LE signalling channel (0x0005).
        case signaling([UInt8])
        /// These bytes as one L2CAP frame on `channel`.
        case l2cap(channel: UInt16, [UInt8])
        /// These bytes as one ACL packet, with no L2CAP header added.
        case acl([UInt8], boundary: UInt8)
        /// HCI Disconnect, with this reason.
        case disconnect(HCIStatus)
        /// The controller powers off without a word: the central hears nothing more, and its link times out.
        case vanish
        /// `acts`, `count` times over.
        case repeated(Int, [Act])
        /// `acts`, once `delay` of virtual time has passed.
        case after(Duration, [Act])

        /// Nothing at all: a request left unanswered.
        static let silence = Act.repeated(0, [])
    }

    /// A rule of the script: when `trigger` matches, `acts` are done instead of the honest answer, at most
    /// `times` times.
    struct Misbehaviour: Sendable {
        var trigger: Trigger
        var acts: [Act]
        var times: Int

        init(_ trigger: Trigger, times: Int = .max, _ acts: [Act]) {
            self.trigger = trigger
            self.acts = acts
            self.times = times
        }
    }

    typealias Script = [Misbehaviour]

    struct State: Sendable {
        var script: Script
        var startup: [HCICommandPacket] = []
        var connection: ConnectionHandle?
        var wasConnected = false
        var disconnectReason: HCIStatus?
        var server: GATTServer
        var mtu: UInt16 = 23
        var offeredMTU: UInt16 = 247
        var credits = 8
        var outgoing: [HCIACLDataPacket] = []
        var incoming: [UInt8] = []
        var expected = 0
        var ordinals: [UInt8: Int] = [:]
        var received: [(time: Duration, request: Request)] = []
        var signaling: [[UInt8]] = []
        var confirmations = 0
        var sentCount = 0
        var indicationID: UInt8 = 0
        var signalingID: UInt8 = 0
    }

    let controller: VirtualController
    let radio: SimulatedRadio
    let handles: Handles
    /// The receive MTU the honest answer to an Exchange MTU Request offers.
    let offeredMTU: UInt16
    private let state: Mutex<State>

    init(
        on radio: SimulatedRadio, name: String = "hostile", position: RadioPosition = RadioPosition(x: 2, y: 0),
        mtu: UInt16 = 247, script: Script = []
    ) {
        self.radio = radio
        self.offeredMTU = mtu
        controller = radio.addController(name: name, position: position)
        var database = GATTDatabase(deviceName: name)
        let layout = try! database.add(
            GATTServiceDefinition(
                uuid: Self.service,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: Self.value, properties: [.read, .write, .writeWithoutResponse],
                        permissions: [.readable, .writeable], value: [0x01, 0x02, 0x03]),
                    GATTCharacteristicDefinition(
                        uuid: Self.long, properties: [.read, .write], permissions: [.readable, .writeable],
                        value: Self.longValue),
                    GATTCharacteristicDefinition(
                        uuid: Self.notifier, properties: [.notify, .read], permissions: [.readable], value: [0]),
                    GATTCharacteristicDefinition(
                        uuid: Self.indicator, properties: [.indicate, .read], permissions: [.readable], value: [0]),
                    GATTCharacteristicDefinition(
                        uuid: Self.described, properties: [.read], permissions: [.readable], value: [0x2A],
                        descriptors: [
                            GATTDescriptorDefinition(uuid: .characteristicUserDescription, value: Array("d".utf8))
                        ]),
                ]))
        let c = layout.characteristics
        handles = Handles(
            service: layout.service.handleRange, value: c[0].characteristic.valueHandle,
            long: c[1].characteristic.valueHandle, notifier: c[2].characteristic.valueHandle,
            notifierCCCD: c[2].clientConfigurationHandle!, indicator: c[3].characteristic.valueHandle,
            indicatorCCCD: c[3].clientConfigurationHandle!, described: c[4].characteristic.valueHandle,
            userDescription: c[4].descriptors[0].handle)
        var initial = State(script: script, server: GATTServer(database: database))
        initial.offeredMTU = mtu
        state = Mutex(initial)
        state.withLock { $0.startup = Self.startupCommands(name: name) }
        controller.hostTransport.setReceiver { [weak self] event in
            guard let self, case .packet(let packet) = event else { return }
            self.received(packet)
        }
        sendNextStartupCommand()
    }

    // MARK: What a test reads

    /// Every ATT PDU the central sent, in order, with the time it arrived.
    var received: [(time: Duration, request: Request)] { state.withLock { $0.received } }
    /// The ATT PDUs the central sent with this opcode.
    func received(_ opcode: ATTOpcode) -> [Request] { received.map(\.request).filter { $0.opcode == opcode } }
    /// Every signalling PDU the central sent.
    var signaling: [[UInt8]] { state.withLock { $0.signaling } }
    /// How many of the peer's indications the central confirmed.
    var confirmations: Int { state.withLock { $0.confirmations } }
    /// How many ATT PDUs the peer sent.
    var sentCount: Int { state.withLock { $0.sentCount } }
    var isConnected: Bool { state.withLock { $0.connection != nil } }
    /// The reason of the link's end, once it ended.
    var disconnectReason: HCIStatus? { state.withLock { $0.disconnectReason } }
    /// Whether the central wrote this configuration into a CCCD of the honest database.
    func subscription(_ characteristicValue: AttributeHandle) -> GATTClientConfiguration {
        state.withLock { s in
            guard let c = s.connection else { return [] }
            return s.server.configuration(of: c, characteristicValue: characteristicValue)
        }
    }

    /// Replaces the script (for what happens from now on).
    func setScript(_ script: Script) { state.withLock { $0.script = script } }

    /// Does `acts` now, as if a misbehaviour had been triggered.
    func perform(_ acts: [Act]) {
        let packets = state.withLock { s in
            var packets: [HCIPacket] = []
            Self.perform(acts, request: Request(bytes: [], pdu: nil, ordinal: 0), in: &s, self, &packets)
            return packets
        }
        send(packets)
    }

    // MARK: PDU builders (little-endian, field by field)

    static func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
    static func le16(_ handle: AttributeHandle) -> [UInt8] { le16(handle.rawValue) }

    /// Handle Value Notification.
    static func notification(_ handle: AttributeHandle, _ value: [UInt8]) -> [UInt8] {
        [0x1B] + le16(handle) + value
    }
    /// Handle Value Indication.
    static func indication(_ handle: AttributeHandle, _ value: [UInt8]) -> [UInt8] { [0x1D] + le16(handle) + value }
    /// Error Response.
    static func error(_ request: ATTOpcode, _ handle: AttributeHandle, _ code: ATTErrorCode) -> [UInt8] {
        [0x01, request.rawValue] + le16(handle) + [code.rawValue]
    }
    /// Read By Group Type Response listing primary services with 16-bit UUIDs.
    static func services(_ groups: [(AttributeHandle, AttributeHandle, UInt16)]) -> [UInt8] {
        [0x11, 6] + groups.flatMap { le16($0.0) + le16($0.1) + le16($0.2) }
    }
    /// Read By Type Response listing characteristic declarations with 16-bit UUIDs.
    static func characteristics(_ declarations: [(AttributeHandle, UInt8, AttributeHandle, UInt16)]) -> [UInt8] {
        [0x09, 7] + declarations.flatMap { le16($0.0) + [$0.1] + le16($0.2) + le16($0.3) }
    }
    /// Find Information Response with 16-bit UUIDs.
    static func information(_ entries: [(AttributeHandle, UInt16)]) -> [UInt8] {
        [0x05, 0x01] + entries.flatMap { le16($0.0) + le16($0.1) }
    }
    /// An L2CAP LE signalling command: code, identifier, length, data.
    static func signalingCommand(_ code: UInt8, identifier: UInt8, _ data: [UInt8], length: UInt16? = nil) -> [UInt8] {
        [code, identifier] + le16(length ?? UInt16(data.count)) + data
    }
    /// Connection Parameter Update Request (intervals in 1.25 ms, timeout in 10 ms).
    static func connectionParameterUpdate(
        identifier: UInt8, intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16
    ) -> [UInt8] {
        signalingCommand(
            0x12, identifier: identifier, le16(intervalMin) + le16(intervalMax) + le16(latency) + le16(timeout))
    }

    // MARK: HCI

    private static func startupCommands(name: String) -> [HCICommandPacket] {
        func command(_ opcode: UInt16, _ parameters: [UInt8]) -> HCICommandPacket {
            HCICommandPacket(opcode: HCIOpcode(rawValue: opcode), parameters: parameters)
        }
        let flags: [UInt8] = [2, 0x01, 0x06]
        let uuid: [UInt8] = [17, 0x07] + service.attWireBytes
        let nameBytes = Array(name.utf8.prefix(9))
        let data = flags + uuid + [UInt8(nameBytes.count + 1), 0x09] + nameBytes
        return [
            command(0x0C03, []),  // Reset
            command(0x0C01, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x3F]),  // Set Event Mask
            command(0x2001, [0xFF, 0xFD, 0, 0, 0, 0, 0, 0]),  // LE Set Event Mask (no Enhanced Connection Complete)
            // LE Set Advertising Parameters: 20 ms, ADV_IND, own address random (the static one), all channels.
            command(0x2006, le16(0x0020) + le16(0x0020) + [0, 1, 0] + [0, 0, 0, 0, 0, 0] + [0x07, 0]),
            command(0x2008, [UInt8(data.count)] + data + [UInt8](repeating: 0, count: 31 - data.count)),
            command(0x200A, [1]),  // LE Set Advertising Enable
        ]
    }

    private func sendNextStartupCommand() {
        let next = state.withLock { s -> HCICommandPacket? in s.startup.isEmpty ? nil : s.startup.removeFirst() }
        if let next { controller.hostTransport.send(.command(next)) }
    }

    private func send(_ packets: [HCIPacket]) {
        for packet in packets { controller.hostTransport.send(packet) }
    }

    private func received(_ packet: HCIPacket) {
        switch packet {
        case .event(let event):
            receivedEvent(event)
        case .acl(let acl):
            let packets = state.withLock { s in
                var packets: [HCIPacket] = []
                Self.receivedACL(acl, in: &s, self, &packets)
                return packets
            }
            send(packets)
        default:
            break
        }
    }

    private func receivedEvent(_ event: HCIEventPacket) {
        let p = event.parameters
        switch event.code.rawValue {
        case 0x0E, 0x0F:  // Command Complete, Command Status
            sendNextStartupCommand()
        case 0x05 where p.count >= 4:  // Disconnection Complete
            state.withLock { s in
                if let c = s.connection { s.server.disconnected(c) }
                s.connection = nil
                s.disconnectReason = HCIStatus(rawValue: p[3])
                s.outgoing = []
            }
        case 0x13 where p.count >= 1:  // Number Of Completed Packets
            let packets = state.withLock { s in
                for i in 0..<Int(p[0]) where p.count >= 1 + 4 * (i + 1) {
                    s.credits += Int(UInt16(p[3 + 4 * i]) | UInt16(p[4 + 4 * i]) << 8)
                }
                var packets: [HCIPacket] = []
                Self.pump(&s, &packets)
                return packets
            }
            send(packets)
        case 0x3E where p.count >= 4 && p[0] == 0x01 && p[1] == 0x00:  // LE Connection Complete, success
            let handle = ConnectionHandle(UInt16(p[2]) | UInt16(p[3] & 0x0F) << 8)
            let packets = state.withLock { s in
                s.connection = handle
                s.wasConnected = true
                s.server.connected(handle)
                var packets: [HCIPacket] = []
                Self.trigger(.connected, request: Request(bytes: [], pdu: nil, ordinal: 0), in: &s, self, &packets)
                return packets
            }
            send(packets)
        default:
            break
        }
    }

    // MARK: The machine (under the lock; packets to send are collected and sent after)

    private static func receivedACL(
        _ acl: HCIACLDataPacket, in s: inout State, _ peer: HostilePeripheral, _ packets: inout [HCIPacket]
    ) {
        if acl.packetBoundary.isFirst {
            s.incoming = acl.data
            s.expected = acl.data.count >= 2 ? Int(UInt16(acl.data[0]) | UInt16(acl.data[1]) << 8) + 4 : Int.max
        } else {
            s.incoming += acl.data
        }
        guard s.incoming.count >= s.expected, s.incoming.count >= 4 else { return }
        let frame = s.incoming
        s.incoming = []
        let channel = UInt16(frame[2]) | UInt16(frame[3]) << 8
        let payload = Array(frame[4..<s.expected])
        switch channel {
        case 0x0004: receivedATT(payload, in: &s, peer, &packets)
        case 0x0005:
            s.signaling.append(payload)
            trigger(.signaling(), signaling: payload, in: &s, peer, &packets)
        case 0x0006:
            // SMP: Pairing Failed, Pairing Not Supported.
            queueFrame(channel: 0x0006, [0x05, 0x05], in: &s, &packets)
        default: break
        }
    }

    private static func receivedATT(
        _ bytes: [UInt8], in s: inout State, _ peer: HostilePeripheral, _ packets: inout [HCIPacket]
    ) {
        guard let code = bytes.first else { return }
        let ordinal = s.ordinals[code, default: 0]
        s.ordinals[code] = ordinal + 1
        let request = Request(bytes: bytes, pdu: try? ATTPDU(bytes: bytes), ordinal: ordinal)
        s.received.append((peer.radio.now, request))
        if code == ATTOpcode.handleValueConfirmation.rawValue {
            s.confirmations += 1
            trigger(.confirmation, request: request, in: &s, peer, &packets)
            return
        }
        trigger(.att(request.opcode), request: request, in: &s, peer, &packets)
    }

    /// Runs the first misbehaviour that matches, or the honest answer.
    private static func trigger(
        _ event: Trigger, request: Request = Request(bytes: [], pdu: nil, ordinal: 0), signaling: [UInt8] = [],
        in s: inout State, _ peer: HostilePeripheral, _ packets: inout [HCIPacket]
    ) {
        let index = s.script.firstIndex { rule in
            guard rule.times > 0 else { return false }
            switch (rule.trigger, event) {
            case (.connected, .connected), (.confirmation, .confirmation): return true
            case (.att(let opcode, let matches), .att(let received, _)):
                return opcode == received && matches(request)
            case (.signaling(let matches), .signaling): return matches(signaling)
            default: return false
            }
        }
        guard let index else {
            if case .att = event { honest(request, in: &s, &packets) }
            return
        }
        s.script[index].times -= 1
        perform(s.script[index].acts, request: request, in: &s, peer, &packets)
    }

    fileprivate static func perform(
        _ acts: [Act], request: Request, in s: inout State, _ peer: HostilePeripheral, _ packets: inout [HCIPacket]
    ) {
        for act in acts {
            switch act {
            case .honest:
                honest(request, in: &s, &packets)
            case .att(let bytes):
                queueFrame(channel: 0x0004, bytes, in: &s, &packets)
                s.sentCount += 1
            case .reply(let make):
                queueFrame(channel: 0x0004, make(request), in: &s, &packets)
                s.sentCount += 1
            case .signaling(let bytes):
                queueFrame(channel: 0x0005, bytes, in: &s, &packets)
            case .l2cap(let channel, let bytes):
                queueFrame(channel: channel, bytes, in: &s, &packets)
            case .acl(let bytes, let boundary):
                guard let c = s.connection else { continue }
                s.outgoing.append(
                    HCIACLDataPacket(handle: c, packetBoundary: .init(rawValue: boundary), data: bytes))
                pump(&s, &packets)
            case .disconnect(let reason):
                guard let c = s.connection else { continue }
                packets.append(
                    .command(
                        HCICommandPacket(
                            opcode: HCIOpcode(rawValue: 0x0406), parameters: le16(c.rawValue) + [reason.rawValue])))
            case .vanish:
                s.connection = nil
                s.outgoing = []
                let controller = peer.controller
                _ = peer.radio.schedule(after: .zero) { controller.vanish(reason: "the hostile peer vanished") }
            case .repeated(let count, let inner):
                for _ in 0..<max(0, count) { perform(inner, request: request, in: &s, peer, &packets) }
            case .after(let delay, let inner):
                _ = peer.radio.schedule(after: delay) { [weak peer] in
                    guard let peer else { return }
                    let packets = peer.state.withLock { s in
                        var packets: [HCIPacket] = []
                        perform(inner, request: request, in: &s, peer, &packets)
                        return packets
                    }
                    peer.send(packets)
                }
            }
        }
    }

    /// What a correct server does with `request`.
    private static func honest(_ request: Request, in s: inout State, _ packets: inout [HCIPacket]) {
        guard let c = s.connection, !request.bytes.isEmpty else { return }
        let kind = request.opcode.kind
        guard let pdu = request.pdu else {
            if kind == .request {
                queueFrame(channel: 0x0004, error(request.opcode, .init(0), .invalidPDU), in: &s, &packets)
            }
            return
        }
        if case .exchangeMTURequest(let mtuRequest) = pdu {
            queueFrame(channel: 0x0004, [0x03] + le16(s.offeredMTU), in: &s, &packets)
            s.mtu = max(23, min(mtuRequest.clientRxMTU, s.offeredMTU))
            s.server.mtuChanged(c, to: s.mtu)
            return
        }
        guard kind == .request || kind == .command else { return }
        for action in s.server.received(pdu, from: c) {
            switch action {
            case .respond(_, let response):
                queueFrame(channel: 0x0004, response.bytes, in: &s, &packets)
            case .readRequest(let id, _, _, _):
                for a in s.server.respond(to: id, result: .unlikelyError) {
                    if case .respond(_, let r) = a { queueFrame(channel: 0x0004, r.bytes, in: &s, &packets) }
                }
            case .writeRequests(let id?, _, _):
                for a in s.server.respond(to: id, result: .unlikelyError) {
                    if case .respond(_, let r) = a { queueFrame(channel: 0x0004, r.bytes, in: &s, &packets) }
                }
            default:
                break
            }
        }
    }

    /// Queues `payload` as one L2CAP basic frame on `channel`, in ACL packets of at most 251 octets.
    private static func queueFrame(
        channel: UInt16, _ payload: [UInt8], in s: inout State, _ packets: inout [HCIPacket]
    ) {
        guard let c = s.connection else { return }
        let frame = le16(UInt16(truncatingIfNeeded: payload.count)) + le16(channel) + payload
        var offset = 0
        while offset < frame.count {
            let part = Array(frame[offset..<min(frame.count, offset + 251)])
            s.outgoing.append(
                HCIACLDataPacket(handle: c, packetBoundary: .init(rawValue: offset == 0 ? 0 : 1), data: part))
            offset += part.count
        }
        pump(&s, &packets)
    }

    private static func pump(_ s: inout State, _ packets: inout [HCIPacket]) {
        while s.credits > 0, !s.outgoing.isEmpty {
            s.credits -= 1
            packets.append(.acl(s.outgoing.removeFirst()))
        }
    }
}
