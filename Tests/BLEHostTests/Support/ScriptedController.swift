import BLECore
import BLEHCI
import BLEHost
import BLETransport
import NIOCore
import Synchronization

/// What the scripted controller does with one command the host sent.
enum ScriptedAnswer: Sendable {
    /// Command Complete, success, with these return parameters (the bytes after the status).
    case complete([UInt8])
    /// Command Complete carrying only this (error) status, as real controllers send failures.
    case completeFailure(HCIStatus)
    /// Command Status with this status.
    case status(HCIStatus)
    /// These events, verbatim.
    case events([HCIEvent])
    /// Nothing at all: the controller drops the command (Bumble does this for several commands).
    case silent
}

/// How the default responder describes the controller during start-up.
struct ControllerProfile: Sendable {
    var address = BluetoothAddress(bytes: [0xC0, 0xFF, 0xEE, 0x00, 0x00, 0x01])
    var hciVersion = HCICoreVersion.v5_3
    var manufacturer: UInt16 = 0x05F1
    var supportedCommands = HCISupportedCommands(supporting: HCISupportedCommands.knownOpcodes)
    var leFeatures: LEFeatures = [.leEncryption, .connectionParametersRequest]
    /// LE Read Buffer Size: length and count (0, 0 means "use Read Buffer Size").
    var leBufferLength: UInt16 = 27
    var leBufferCount: UInt8 = 4
    /// Read Buffer Size (the shared ACL buffers).
    var aclBufferLength: UInt16 = 1021
    var aclBufferCount: UInt16 = 6
    /// Num_HCI_Command_Packets in every answer.
    var commandCredits: UInt8 = 1
}

/// The controller side of an `HCIPipe`, played by a test: it records every packet the host sends and answers
/// commands through a default responder (which completes the start-up sequence) that a test may override per
/// opcode. Answers are queued and handed to the host only by `pump()` (or `deliver`), so the host is never
/// re-entered from inside its own send.
final class ScriptedController: Sendable {
    private struct State {
        var sent: [HCIPacket] = []
        var pending: [HCIPacket] = []
        var overrides: [HCIOpcode: ScriptedAnswer] = [:]
        var custom: (@Sendable (HCICommandPacket) -> ScriptedAnswer?)?
        var profile: ControllerProfile
        var delivering = false
    }

    let pipe = HCIPipe()
    private let state: Mutex<State>

    init(profile: ControllerProfile = ControllerProfile()) {
        state = Mutex(State(profile: profile))
        pipe.attachController { [weak self] packet in self?.received(packet) }
    }

    var transport: any HCITransport { pipe.hostEnd }

    var profile: ControllerProfile {
        get { state.withLock { $0.profile } }
        set { state.withLock { $0.profile = newValue } }
    }

    // MARK: Scripting

    /// Answers every later command with this opcode so (replacing the default).
    func answer(_ opcode: HCIOpcode, with answer: ScriptedAnswer) {
        state.withLock { $0.overrides[opcode] = answer }
    }

    /// A responder consulted before the overrides and the defaults; returning nil falls through.
    func respond(_ body: (@Sendable (HCICommandPacket) -> ScriptedAnswer?)?) {
        state.withLock { $0.custom = body }
    }

    /// Drops every later command (and ACL data) on the floor; until `answerByDefault()`.
    func beSilent() { respond { _ in .silent } }

    func answerByDefault() {
        state.withLock {
            $0.custom = nil
            $0.overrides.removeAll()
        }
    }

    // MARK: Delivering

    /// Queues an event for the host.
    func queue(_ event: HCIEvent) { state.withLock { $0.pending.append(.event(event.packet)) } }

    /// Hands `event` to the host now, then everything it caused.
    func deliver(_ event: HCIEvent) {
        queue(event)
        pump()
    }

    func deliver(_ meta: HCILEMetaEvent) { deliver(.leMeta(meta)) }

    /// Hands an ACL data packet to the host now, then everything it caused.
    func deliverACL(handle: ConnectionHandle, boundary: HCIACLDataPacket.PacketBoundaryFlag, _ data: [UInt8]) {
        state.withLock {
            $0.pending.append(.acl(HCIACLDataPacket(handle: handle, packetBoundary: boundary, data: data)))
        }
        pump()
    }

    /// Hands the host one L2CAP B-frame (header added here) in ACL packets of at most `fragmentLength` bytes
    /// (nil: one packet, however long), the first flagged "first flushable" as LE controllers send.
    func deliverL2CAP(handle: ConnectionHandle, channel: L2CAPChannelID, _ payload: [UInt8], fragmentLength: Int? = nil)
    {
        let frame = le16(UInt16(payload.count)) + le16(channel.rawValue) + payload
        let size = fragmentLength ?? frame.count
        var offset = 0
        repeat {
            let end = min(offset + size, frame.count)
            state.withLock {
                $0.pending.append(
                    .acl(
                        HCIACLDataPacket(
                            handle: handle, packetBoundary: offset == 0 ? .firstFlushable : .continuing,
                            data: Array(frame[offset..<end]))))
            }
            offset = end
        } while offset < frame.count
        pump()
    }

    /// Hands queued packets to the host, one at a time, until none is left (answers the host's sends cause
    /// are queued and delivered in turn). Re-entrant calls return at once; the outer loop delivers.
    func pump() {
        let owner = state.withLock { state -> Bool in
            if state.delivering { return false }
            state.delivering = true
            return true
        }
        guard owner else { return }
        while let next = state.withLock({ $0.pending.isEmpty ? nil : $0.pending.removeFirst() }) {
            pipe.deliverToHost(next)
        }
        state.withLock { $0.delivering = false }
    }

    /// Closes the link from the controller's side.
    func vanish(reason: String) { pipe.closeFromController(reason: reason) }

    // MARK: Reading what the host sent

    var sent: [HCIPacket] { state.withLock { $0.sent } }

    var commands: [HCICommandPacket] {
        sent.compactMap { if case .command(let c) = $0 { return c } else { return nil } }
    }

    var opcodes: [HCIOpcode] { commands.map(\.opcode) }

    var acl: [HCIACLDataPacket] {
        sent.compactMap { if case .acl(let a) = $0 { return a } else { return nil } }
    }

    /// The L2CAP B-frames the host sent on `handle`, reassembled from its ACL fragments: channel and payload.
    /// A trailing incomplete frame is left out.
    func l2cap(on handle: ConnectionHandle) -> [(channel: L2CAPChannelID, payload: [UInt8])] {
        var frames: [(L2CAPChannelID, [UInt8])] = []
        var partial: [UInt8] = []
        for packet in acl where packet.handle == handle {
            if packet.packetBoundary.isFirst { partial = packet.data } else { partial += packet.data }
            guard partial.count >= 4 else { continue }
            let length = Int(u16(partial, 0))
            if partial.count >= 4 + length {
                frames.append((L2CAPChannelID(rawValue: u16(partial, 2)), Array(partial[4..<4 + length])))
                partial = []
            }
        }
        return frames
    }

    /// The payloads of the ATT PDUs the host sent on `handle`.
    func att(on handle: ConnectionHandle) -> [[UInt8]] {
        l2cap(on: handle).filter { $0.channel == .att }.map(\.payload)
    }

    func clear() { state.withLock { $0.sent.removeAll() } }

    // MARK: Receiving

    private func received(_ packet: HCIPacket) {
        state.withLock { state in
            state.sent.append(packet)
            guard case .command(let command) = packet else { return }
            let answer =
                state.custom?(command) ?? state.overrides[command.opcode] ?? Self.defaultAnswer(command, state.profile)
            let credits = state.profile.commandCredits
            switch answer {
            case .complete(let bytes):
                state.pending.append(
                    .event(
                        HCIEvent.CommandComplete(
                            numHCICommandPackets: credits, opcode: command.opcode, returnParameters: [0] + bytes
                        ).packet))
            case .completeFailure(let status):
                state.pending.append(
                    .event(
                        HCIEvent.CommandComplete(
                            numHCICommandPackets: credits, opcode: command.opcode, failure: status
                        ).packet))
            case .status(let status):
                state.pending.append(
                    .event(
                        HCIEvent.CommandStatus(
                            status: status, numHCICommandPackets: credits, opcode: command.opcode
                        ).packet))
            case .events(let events):
                state.pending.append(contentsOf: events.map { .event($0.packet) })
            case .silent:
                break
            }
        }
    }

    /// What a well-behaved controller described by `profile` answers.
    static func defaultAnswer(_ command: HCICommandPacket, _ profile: ControllerProfile) -> ScriptedAnswer {
        switch command.opcode {
        case .readLocalVersionInformation:
            return .complete(
                HCIReadLocalVersionInformation.ReturnParameters(
                    hciVersion: profile.hciVersion, hciSubversion: 1, lmpVersion: profile.hciVersion,
                    companyIdentifier: profile.manufacturer, lmpSubversion: 2
                ).bytes)
        case .readLocalSupportedCommands:
            return .complete(profile.supportedCommands.octets)
        case .readBDADDR:
            return .complete(HCIReadBDADDR.ReturnParameters(address: profile.address).bytes)
        case .leReadBufferSize:
            return .complete(
                HCILEReadBufferSize.ReturnParameters(
                    leACLDataPacketLength: profile.leBufferLength, totalNumLEACLDataPackets: profile.leBufferCount
                ).bytes)
        case .readBufferSize:
            return .complete(
                HCIReadBufferSize.ReturnParameters(
                    aclDataPacketLength: profile.aclBufferLength, synchronousDataPacketLength: 64,
                    totalNumACLDataPackets: profile.aclBufferCount, totalNumSynchronousDataPackets: 8
                ).bytes)
        case .leReadLocalSupportedFeatures:
            return .complete(HCILEReadLocalSupportedFeatures.ReturnParameters(leFeatures: profile.leFeatures).bytes)
        case .leRand:
            return .complete(HCILERand.ReturnParameters(randomNumber: 0x0123_4567_89AB_CDEF).bytes)
        default:
            if let decoded = try? decodeCommand(command), decoded is any HCIAsyncCommand {
                return .status(.success)
            }
            // Commands returning the connection handle they concern get it back (their first parameter).
            if let decoded = try? decodeCommand(command) as? any HCISyncCommand, returnsHandle(decoded),
                command.parameters.count >= 2
            {
                return .complete(Array(command.parameters.prefix(2)))
            }
            return .complete([])
        }
    }
}

private func returnsHandle<C: HCISyncCommand>(_: C) -> Bool {
    C.ReturnParameters.self == HCIConnectionHandleReturn.self
}

/// Collects what the host reports, in order.
final class EventLog: Sendable {
    private let state = Mutex<[HostEventEntry]>([])

    enum HostEventEntry: Sendable {
        case event(HostEvent)
        case note(String)
    }

    func record(_ event: HostEvent) { state.withLock { $0.append(.event(event)) } }
    func note(_ text: String) { state.withLock { $0.append(.note(text)) } }

    var entries: [HostEventEntry] { state.withLock { $0 } }
    var events: [HostEvent] { entries.compactMap { if case .event(let e) = $0 { return e } else { return nil } } }
    func clear() { state.withLock { $0.removeAll() } }
}

/// Holds the result a completion handler delivered (or nil while none has).
final class Outcome<T: Sendable>: Sendable {
    private let state = Mutex<[T]>([])
    var value: T? { state.withLock { $0.last } }
    var count: Int { state.withLock { $0.count } }
    func set(_ value: T) { state.withLock { $0.append(value) } }
    var handler: @Sendable (T) -> Void { { [self] in set($0) } }
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
