import BLECore
import BLEHCI
import BLEHost
import Testing

/// A `HostMachine` on its own: no transport, no scheduler, no driver. The rig plays the driver's part by hand:
/// it hands out operation ids, records every action in order, and answers commands the way a well-behaved
/// controller described by `profile` would (the scripted controller's default answers) when a test asks.
struct MachineRig {
    var machine: HostMachine
    var profile = ControllerProfile()
    /// Every action, in the order the machine produced them.
    private(set) var actions: [HostAction] = []
    private var nextID: UInt64 = 1
    /// Commands sent and not yet answered by `answerCommands`.
    private var unanswered: [HCICommandPacket] = []

    init(configure: (inout HostConfiguration) -> Void = { _ in }) {
        var configuration = HostConfiguration()
        configure(&configuration)
        machine = HostMachine(configuration: configuration)
    }

    // MARK: Events in

    @discardableResult
    mutating func request(_ request: HostRequest) -> HostOperationID {
        let id = HostOperationID(rawValue: nextID)
        nextID += 1
        record(machine.requested(request, id: id))
        return id
    }

    mutating func feed(_ event: HCIEvent) { record(machine.received(.event(event.packet))) }
    mutating func feed(_ meta: HCILEMetaEvent) { feed(.leMeta(meta)) }

    mutating func feedACL(_ handle: ConnectionHandle, channel: UInt16, _ payload: [UInt8]) {
        let frame = le16(UInt16(payload.count)) + le16(channel) + payload
        let packet = HCIACLDataPacket(handle: handle, packetBoundary: .firstFlushable, data: frame)
        record(machine.received(.acl(packet)))
    }

    mutating func fire(_ timer: HostTimerID) { record(machine.timerFired(timer)) }

    mutating func close(reason: String?) { record(machine.transportClosed(reason: reason)) }

    mutating func record(_ new: [HostAction]) {
        actions += new
        for case .send(.command(let command)) in new { unanswered.append(command) }
    }

    /// Answers the oldest unanswered command as the profile's controller would; returns its opcode.
    @discardableResult
    mutating func answerNext(with answer: ScriptedAnswer? = nil) -> HCIOpcode? {
        guard !unanswered.isEmpty else { return nil }
        let command = unanswered.removeFirst()
        let credits = profile.commandCredits
        switch answer ?? ScriptedController.defaultAnswer(command, profile) {
        case .complete(let bytes):
            feed(
                .commandComplete(
                    .init(numHCICommandPackets: credits, opcode: command.opcode, returnParameters: [0] + bytes)))
        case .completeFailure(let status):
            feed(.commandComplete(.init(numHCICommandPackets: credits, opcode: command.opcode, failure: status)))
        case .status(let status):
            feed(.commandStatus(.init(status: status, numHCICommandPackets: credits, opcode: command.opcode)))
        case .events(let events):
            for event in events { feed(event) }
        case .silent:
            break
        }
        return command.opcode
    }

    /// Answers commands, and the commands those answers cause, until none is left (at most `limit`).
    mutating func answerCommands(limit: Int = 100) {
        var answered = 0
        while answered < limit, answerNext() != nil { answered += 1 }
    }

    /// Runs the start-up sequence; expects it to succeed, then forgets its traffic.
    @discardableResult
    mutating func started() throws -> ControllerInfo {
        let id = request(.start)
        answerCommands()
        guard case .success(.controller(let info)) = result(of: id) else {
            Issue.record("start-up did not complete: \(String(describing: result(of: id)))")
            throw RigError.notStarted
        }
        forget()
        return info
    }

    /// A link comes up (LE Connection Complete).
    mutating func connect(_ handle: UInt16, role: HCIRole) {
        feed(
            .connectionComplete(
                .init(
                    handle: ConnectionHandle(handle), role: role, peerAddress: HostHarness.peerAddress,
                    connectionInterval: 24, peripheralLatency: 0, supervisionTimeout: 200)))
    }

    mutating func forget() {
        actions = []
        unanswered = []
    }

    // MARK: Reading the actions

    var sent: [HCIPacket] { actions.compactMap { if case .send(let p) = $0 { p } else { nil } } }
    var opcodes: [HCIOpcode] { sent.compactMap { if case .command(let c) = $0 { c.opcode } else { nil } } }
    var acl: [HCIACLDataPacket] { sent.compactMap { if case .acl(let a) = $0 { a } else { nil } } }
    var events: [HostEvent] { actions.compactMap { if case .emit(let e) = $0 { e } else { nil } } }

    /// The ATT payloads sent on a link (one ACL packet each: the rig's links have room for them).
    func att(on handle: ConnectionHandle) -> [[UInt8]] {
        acl.filter { $0.handle == handle && u16($0.data, 2) == 0x0004 }.map { Array($0.data.dropFirst(4)) }
    }

    func result(of id: HostOperationID) -> Result<HostOutput, HostError>? {
        for case .complete(id, let result) in actions { return result }
        return nil
    }

    func completions(of id: HostOperationID) -> Int {
        actions.filter { if case .complete(id, _) = $0 { true } else { false } }.count
    }

    /// The timers started and not cancelled, in order.
    var runningTimers: [HostTimerID] {
        var running: [HostTimerID] = []
        for action in actions {
            switch action {
            case .startTimer(let id, _): running.append(id)
            case .cancelTimer(let id): running.removeAll { $0 == id }
            default: break
            }
        }
        return running
    }

    enum RigError: Error { case notStarted }
}
