import BLEHCI
import Testing

@testable import BLEHost

// Scanning and advertising as desired-versus-actual machines, driven against fake controllers that really scan
// or advertise. The exhaustive suites walk every order of start, stop and controller answer up to a bounded
// length and, after every step, compare what the API says, what the machine believes and what the controller
// really does. The scenario suites spell out the sequences a reader would ask about first.

// MARK: - Shared vocabulary

private func operation(_ number: UInt64) -> HostOperationID { HostOperationID(rawValue: number) }

/// How a request ended, in a form `#expect` can compare (a `Result<Void, _>` cannot be compared directly).
private enum RequestEnding: Hashable, CustomStringConvertible {
    case success
    case failure(HostError.Code)

    init(_ result: Result<Void, HostError>) {
        switch result {
        case .success: self = .success
        case .failure(let error): self = .failure(error.code)
        }
    }

    var description: String {
        switch self {
        case .success: "success"
        case .failure(let code): "failure(\(code))"
        }
    }
}

/// One thing a machine asked for, in terms common to both machines.
private enum BenchEffect {
    /// A command went to the fake controller, which had nothing waiting.
    case sent
    /// A command (described) went to the fake controller while another was still waiting there.
    case sentWhileBusy(String)
    case complete(HostOperationID, Result<Void, HostError>)
}

private let succeeded: Result<Void, HostError> = .success(())

private func failed(_ code: HostError.Code) -> Result<Void, HostError> { .failure(HostError(code, "failed")) }

/// How each request in `effects` ended (a request that ended twice shows its last ending).
private func endings(of effects: [BenchEffect]) -> [HostOperationID: RequestEnding] {
    var endings: [HostOperationID: RequestEnding] = [:]
    for case .complete(let id, let result) in effects { endings[id] = RequestEnding(result) }
    return endings
}

/// How a fake controller departs from a fresh, obliging one.
enum ControllerQuirk: String, Sendable, CaseIterable, CustomTestStringConvertible {
    /// Every command the spec allows succeeds.
    case obliging
    /// Another host left it scanning or advertising; the machine starts out believing it is off.
    case leftOn
    /// It refuses every enable with Command Disallowed.
    case refusesEnable
    /// It refuses to disable what is already off with Command Disallowed, as some older controllers do.
    case refusesRedundantDisable

    var testDescription: String { rawValue }
}

/// How a fake controller answers the command waiting at it.
private enum AnswerKind: Equatable {
    /// As the controller really would in its state.
    case asItWould
    /// Refused with this status, without being carried out (unless it would have been refused anyway).
    case refused(HCIStatus)
    /// No answer comes in time, so the host sees a timeout; the controller carried the command out or not.
    case lost(carriedOut: Bool)
}

private func refused(_ status: HCIStatus) -> Result<Void, HostError> {
    .failure(HostError(.hci(status), "refused with \(status)"))
}

private let timedOut: Result<Void, HostError> = .failure(HostError(.commandTimeout, "no answer in time"))

// MARK: - Fake scanner

/// A controller that really scans or not, holding what LE Set Scan Parameters and LE Set Scan Enable gave it.
private struct FakeScanner {
    let quirk: ControllerQuirk
    private(set) var scanning = false
    // What LE Set Scan Parameters carries, starting from the spec's defaults (passive, 10 ms, 10 ms).
    private(set) var active = false
    private(set) var interval: UInt16 = 0x0010
    private(set) var window: UInt16 = 0x0010
    // What LE Set Scan Enable carries.
    private(set) var filterDuplicates = false
    /// The command received and not yet answered.
    private(set) var pending: ScanMachine.Command?
    /// Every command received, in order.
    private(set) var wire: [ScanMachine.Command] = []

    init(_ quirk: ControllerQuirk = .obliging) {
        self.quirk = quirk
        if quirk == .leftOn {
            scanning = true
            filterDuplicates = true
        }
    }

    mutating func receive(_ command: ScanMachine.Command) -> Bool {
        wire.append(command)
        guard pending == nil else { return false }
        pending = command
        return true
    }

    /// What the controller answers to `command` in its present state.
    func verdict(on command: ScanMachine.Command) -> HCIStatus {
        switch command {
        case .setParameters:
            // Vol 4, Part E, 7.8.10: not while scanning.
            scanning ? .commandDisallowed : .success
        case .enable:
            quirk == .refusesEnable ? .commandDisallowed : .success
        case .disable:
            !scanning && quirk == .refusesRedundantDisable ? .commandDisallowed : .success
        }
    }

    /// Whether the waiting command would be carried out (so refusing it, or losing its answer, is a new case).
    var pendingWouldSucceed: Bool { pending.map { verdict(on: $0) == .success } ?? false }
    /// Whether the waiting command could be refused: anything but a disable, which the spec never refuses.
    var pendingCouldBeRefused: Bool { pendingWouldSucceed && pending != .disable }

    /// Carry out (or refuse) the waiting command and answer it.
    mutating func answer(_ kind: AnswerKind = .asItWould) -> Result<Void, HostError> {
        guard let command = pending else { return refused(.unknownCommand) }
        pending = nil
        var status = verdict(on: command)
        if status == .success, case .refused(let refusal) = kind { status = refusal }
        if status == .success && kind != .lost(carriedOut: false) { carryOut(command) }
        if case .lost = kind { return timedOut }
        return status == .success ? .success(()) : refused(status)
    }

    private mutating func carryOut(_ command: ScanMachine.Command) {
        switch command {
        case .setParameters(let parameters):
            active = parameters.active
            interval = parameters.interval
            window = parameters.window
        case .enable(let filter):
            scanning = true
            filterDuplicates = filter
        case .disable:
            scanning = false
        }
    }

    func holds(_ parameters: ScanParameters) -> Bool {
        active == parameters.active && interval == parameters.interval && window == parameters.window
    }

    func scans(with parameters: ScanParameters) -> Bool {
        scanning && holds(parameters) && filterDuplicates == parameters.filterDuplicates
    }
}

// MARK: - Fake advertiser

/// A controller that really advertises or not, holding the parameters, data and scan response it was given.
private struct FakeAdvertiser {
    let quirk: ControllerQuirk
    private(set) var advertising = false
    // The spec's defaults: ADV_IND every 1.28 s, no data.
    private(set) var parameters = AdvertisingParameters(kind: .connectable, intervalMin: 0x0800, intervalMax: 0x0800)
    private(set) var data: [UInt8] = []
    private(set) var scanResponse: [UInt8] = []
    private(set) var pending: AdvertisingMachine.Command?
    private(set) var wire: [AdvertisingMachine.Command] = []

    init(_ quirk: ControllerQuirk = .obliging) {
        self.quirk = quirk
        if quirk == .leftOn {
            advertising = true
            data = [0x02, 0x01, 0x06, 0x03, 0x09, 0x58, 0x58]
        }
    }

    mutating func receive(_ command: AdvertisingMachine.Command) -> Bool {
        wire.append(command)
        guard pending == nil else { return false }
        pending = command
        return true
    }

    func verdict(on command: AdvertisingMachine.Command) -> HCIStatus {
        switch command {
        case .setParameters:
            // Vol 4, Part E, 7.8.5: not while advertising. Data and scan response may change at any time.
            advertising ? .commandDisallowed : .success
        case .setData, .setScanResponse:
            .success
        case .enable:
            quirk == .refusesEnable ? .commandDisallowed : .success
        case .disable:
            !advertising && quirk == .refusesRedundantDisable ? .commandDisallowed : .success
        }
    }

    var pendingWouldSucceed: Bool { pending.map { verdict(on: $0) == .success } ?? false }
    var pendingCouldBeRefused: Bool { pendingWouldSucceed && pending != .disable }

    mutating func answer(_ kind: AnswerKind = .asItWould) -> Result<Void, HostError> {
        guard let command = pending else { return refused(.unknownCommand) }
        pending = nil
        var status = verdict(on: command)
        if status == .success, case .refused(let refusal) = kind { status = refusal }
        if status == .success && kind != .lost(carriedOut: false) { carryOut(command) }
        if case .lost = kind { return timedOut }
        return status == .success ? .success(()) : refused(status)
    }

    private mutating func carryOut(_ command: AdvertisingMachine.Command) {
        switch command {
        case .setParameters(let parameters): self.parameters = parameters
        case .setData(let data): self.data = data
        case .setScanResponse(let data): scanResponse = data
        case .enable: advertising = true
        case .disable: advertising = false
        }
    }

    /// Whether a central can connect now: legacy connectable advertising is on.
    var connectable: Bool { advertising && parameters.kind == .connectable }

    /// A central connects: the controller stops advertising on its own (Vol 6, Part B, 4.4.2).
    mutating func centralConnects() { advertising = false }

    func advertises(_ set: AdvertisingSet) -> Bool {
        advertising && parameters == set.parameters && data == set.data && scanResponse == set.scanResponse
    }
}

// MARK: - Benches: a machine wired to its fake controller

/// A machine and the fake controller it talks to, seen the same way for scanning and advertising.
private protocol MachineBench {
    associatedtype Wish: Hashable
    var desired: Wish? { get }
    var isSettled: Bool { get }
    var machineHasCommandInFlight: Bool { get }
    var controllerHasCommandPending: Bool { get }
    var pendingWouldSucceed: Bool { get }
    var pendingCouldBeRefused: Bool { get }
    /// Whether the controller really scans or advertises.
    var controllerIsOn: Bool { get }
    /// Whether a central could connect now (advertising only).
    var canConnect: Bool { get }
    /// Whether the controller really does `wish`, with every detail of it.
    func controllerDoes(_ wish: Wish) -> Bool
    /// Where the machine's view of the controller contradicts the controller, if anywhere.
    var viewMismatch: String? { get }

    mutating func start(_ wish: Wish, id: HostOperationID) -> [BenchEffect]
    mutating func stop(id: HostOperationID) -> [BenchEffect]
    mutating func answer(_ kind: AnswerKind) -> (Result<Void, HostError>, [BenchEffect])
    /// A central connects; returns what `ended()` said about whether advertising was wanted.
    mutating func centralConnects() -> (wasAdvertising: Bool, effects: [BenchEffect])
    mutating func close() -> [BenchEffect]
    /// An answer that arrives after the transport closed.
    mutating func lateAnswer() -> [BenchEffect]
}

private struct ScanBench: MachineBench {
    var machine = ScanMachine()
    var controller: FakeScanner

    init(_ quirk: ControllerQuirk = .obliging) { controller = FakeScanner(quirk) }

    var desired: ScanParameters? { machine.desired }
    var isSettled: Bool { machine.isSettled }
    var machineHasCommandInFlight: Bool { machine.inFlight != nil }
    var controllerHasCommandPending: Bool { controller.pending != nil }
    var pendingWouldSucceed: Bool { controller.pendingWouldSucceed }
    var pendingCouldBeRefused: Bool { controller.pendingCouldBeRefused }
    var controllerIsOn: Bool { controller.scanning }
    var canConnect: Bool { false }
    func controllerDoes(_ wish: ScanParameters) -> Bool { controller.scans(with: wish) }

    var viewMismatch: String? {
        let view = machine.controller
        if view.enabled != controller.scanning {
            return "the machine believes enabled = \(String(describing: view.enabled)), the controller "
                + (controller.scanning ? "scans" : "does not scan")
        }
        if let parameters = view.parameters, !controller.holds(parameters) {
            return "the machine believes the controller holds \(parameters), it does not"
        }
        if controller.scanning && view.filterDuplicates != controller.filterDuplicates {
            return "the machine believes filterDuplicates = \(view.filterDuplicates), the controller disagrees"
        }
        return nil
    }

    private mutating func deliver(_ outputs: [ScanMachine.Output]) -> [BenchEffect] {
        outputs.map { output in
            switch output {
            case .send(let command): controller.receive(command) ? .sent : .sentWhileBusy("\(command)")
            case .complete(let id, let result): .complete(id, result)
            }
        }
    }

    mutating func start(_ wish: ScanParameters, id: HostOperationID) -> [BenchEffect] {
        deliver(machine.start(wish, id: id))
    }

    mutating func stop(id: HostOperationID) -> [BenchEffect] { deliver(machine.stop(id: id)) }

    mutating func answer(_ kind: AnswerKind) -> (Result<Void, HostError>, [BenchEffect]) {
        let result = controller.answer(kind)
        return (result, deliver(machine.answered(result)))
    }

    mutating func centralConnects() -> (wasAdvertising: Bool, effects: [BenchEffect]) { (false, []) }

    mutating func close() -> [BenchEffect] { deliver(machine.closed(HostError(.transportClosed, "closed"))) }

    mutating func lateAnswer() -> [BenchEffect] { deliver(machine.answered(.success(()))) }
}

private struct AdvertisingBench: MachineBench {
    var machine = AdvertisingMachine()
    var controller: FakeAdvertiser

    init(_ quirk: ControllerQuirk = .obliging) { controller = FakeAdvertiser(quirk) }

    var desired: AdvertisingSet? { machine.desired }
    var isSettled: Bool { machine.isSettled }
    var machineHasCommandInFlight: Bool { machine.inFlight != nil }
    var controllerHasCommandPending: Bool { controller.pending != nil }
    var pendingWouldSucceed: Bool { controller.pendingWouldSucceed }
    var pendingCouldBeRefused: Bool { controller.pendingCouldBeRefused }
    var controllerIsOn: Bool { controller.advertising }
    var canConnect: Bool { controller.connectable }
    func controllerDoes(_ wish: AdvertisingSet) -> Bool { controller.advertises(wish) }

    var viewMismatch: String? {
        let view = machine.controller
        if view.enabled != controller.advertising {
            return "the machine believes enabled = \(String(describing: view.enabled)), the controller "
                + (controller.advertising ? "advertises" : "does not advertise")
        }
        if let parameters = view.parameters, parameters != controller.parameters {
            return "the machine believes the controller holds \(parameters), it holds \(controller.parameters)"
        }
        if let data = view.data, data != controller.data {
            return "the machine believes the advertising data is \(data), it is \(controller.data)"
        }
        if let data = view.scanResponse, data != controller.scanResponse {
            return "the machine believes the scan response is \(data), it is \(controller.scanResponse)"
        }
        return nil
    }

    private mutating func deliver(_ outputs: [AdvertisingMachine.Output]) -> [BenchEffect] {
        outputs.map { output in
            switch output {
            case .send(let command): controller.receive(command) ? .sent : .sentWhileBusy("\(command)")
            case .complete(let id, let result): .complete(id, result)
            }
        }
    }

    mutating func start(_ wish: AdvertisingSet, id: HostOperationID) -> [BenchEffect] {
        deliver(machine.start(wish, id: id))
    }

    mutating func stop(id: HostOperationID) -> [BenchEffect] { deliver(machine.stop(id: id)) }

    mutating func answer(_ kind: AnswerKind) -> (Result<Void, HostError>, [BenchEffect]) {
        let result = controller.answer(kind)
        return (result, deliver(machine.answered(result)))
    }

    mutating func centralConnects() -> (wasAdvertising: Bool, effects: [BenchEffect]) {
        controller.centralConnects()
        let (was, out) = machine.ended()
        return (was, deliver(out))
    }

    mutating func close() -> [BenchEffect] { deliver(machine.closed(HostError(.transportClosed, "closed"))) }

    mutating func lateAnswer() -> [BenchEffect] { deliver(machine.answered(.success(()))) }
}

extension MachineBench {
    /// Answers as the controller would until nothing is in flight; returns how requests ended on the way,
    /// including in `effects` (what the call that started it all returned).
    mutating func answerUntilIdle(after effects: [BenchEffect] = []) -> [HostOperationID: RequestEnding] {
        var all = effects
        var answers = 0
        while controllerHasCommandPending && answers < 16 {
            all += answer(.asItWould).1
            answers += 1
        }
        return endings(of: all)
    }
}

// MARK: - Exhaustive exploration

/// One event of an explored sequence.
private enum MachineStep: String, CustomStringConvertible {
    case startA
    case startB
    case stop
    /// The controller answers the command in flight as it really would.
    case answer
    /// The controller refuses the command in flight (one it would otherwise carry out).
    case refuse
    /// The command in flight times out, though the controller carried it out.
    case timeOutDone
    /// The command in flight times out, and the controller never carried it out.
    case timeOutUndone
    /// A central connects, which ends connectable advertising.
    case connect

    var description: String { rawValue }
}

/// Which kind of trouble an exploration adds to plain answers.
private enum Mishaps {
    /// The controller may refuse a command it would otherwise carry out.
    case refusals
    /// An answer may not come in time (a timeout), whether or not the controller carried the command out.
    case timeouts
}

/// What caused a batch of machine outputs, for judging the completions in it.
private enum OutputCause<Wish: Hashable> {
    /// A start (`wish` non-nil) or a stop.
    case request(Wish?)
    /// The controller answered a command that was sent while `desired` was `servedWish`.
    case answer(Result<Void, HostError>, servedWish: Wish?)
    case ended
}

/// One path through the tree of sequences: the bench after the steps so far, and the bookkeeping that judges it.
private struct ExplorationRun<B: MachineBench> {
    struct Request {
        var id: HostOperationID
        var wish: B.Wish?
    }

    var bench: B
    let a: B.Wish
    let b: B.Wish
    /// Whether the machine's starting belief (the controller is off) is true. When another host left the
    /// controller on, the machine can only learn otherwise from an answer, so until one has come (a timeout
    /// tells nothing) its agreement with the controller is not judged.
    let startsTrue: Bool
    let mishaps: Mishaps
    var steps: [MachineStep] = []
    var nextID: UInt64 = 1
    var open: [HostOperationID: B.Wish?] = [:]
    /// What `desired` was when the command now in flight was sent (the outer optional: whether one is).
    var served: B.Wish?? = nil
    var answersHeard = 0
    var lastRequest: Request?
    var lastEnding: RequestEnding?
    var endedSinceLastRequest = false
    var problem: String?

    init(_ bench: B, a: B.Wish, b: B.Wish, startsTrue: Bool, mishaps: Mishaps) {
        self.bench = bench
        self.a = a
        self.b = b
        self.startsTrue = startsTrue
        self.mishaps = mishaps
    }

    /// Whether the machine could know what the controller does (see `startsTrue`).
    var beliefGrounded: Bool { startsTrue || answersHeard > 0 }

    var possibleSteps: [MachineStep] {
        var steps: [MachineStep] = [.startA, .startB, .stop]
        if bench.controllerHasCommandPending {
            steps.append(.answer)
            switch mishaps {
            case .refusals:
                if bench.pendingCouldBeRefused { steps.append(.refuse) }
            case .timeouts:
                // A command the controller would refuse is not carried out either way.
                if bench.pendingWouldSucceed { steps.append(.timeOutDone) }
                steps.append(.timeOutUndone)
            }
        }
        if bench.canConnect { steps.append(.connect) }
        return steps
    }

    mutating func fail(_ message: String) {
        if problem == nil { problem = "after \(steps.map(\.description).joined(separator: ", ")): \(message)" }
    }

    mutating func perform(_ step: MachineStep) {
        steps.append(step)
        switch step {
        case .startA: request(a)
        case .startB: request(b)
        case .stop: request(nil)
        case .answer, .refuse, .timeOutDone, .timeOutUndone:
            let servedWish = served ?? nil
            served = nil
            let kind: AnswerKind =
                switch step {
                case .refuse: .refused(.unspecifiedError)
                case .timeOutDone: .lost(carriedOut: true)
                case .timeOutUndone: .lost(carriedOut: false)
                default: .asItWould
                }
            let (result, effects) = bench.answer(kind)
            if step != .timeOutDone && step != .timeOutUndone { answersHeard += 1 }
            take(effects, cause: .answer(result, servedWish: servedWish))
        case .connect:
            let wanted = bench.desired != nil
            let (wasAdvertising, effects) = bench.centralConnects()
            if wasAdvertising != wanted { fail("ended() said wasAdvertising = \(wasAdvertising)") }
            endedSinceLastRequest = true
            take(effects, cause: .ended)
        }
        checkAfterStep()
    }

    private mutating func request(_ wish: B.Wish?) {
        let id = operation(nextID)
        nextID += 1
        open[id] = wish
        lastRequest = Request(id: id, wish: wish)
        lastEnding = nil
        endedSinceLastRequest = false
        if let wish {
            take(bench.start(wish, id: id), cause: .request(wish))
        } else {
            take(bench.stop(id: id), cause: .request(nil))
        }
    }

    private mutating func take(_ effects: [BenchEffect], cause: OutputCause<B.Wish>) {
        var sends = 0
        for effect in effects {
            switch effect {
            case .sent, .sentWhileBusy:
                sends += 1
                if case .sentWhileBusy(let command) = effect {
                    fail("\(command) was sent while another command was in flight")
                } else if sends > 1 {
                    fail("two commands were sent at once")
                }
                served = .some(bench.desired)
            case .complete(let id, let result):
                judge(id, result, cause: cause)
            }
        }
    }

    private mutating func judge(_ id: HostOperationID, _ result: Result<Void, HostError>, cause: OutputCause<B.Wish>) {
        guard let wish = open.removeValue(forKey: id) else {
            fail(id.rawValue < nextID ? "\(id) completed a second time" : "\(id) completed but was never made")
            return
        }
        let ending = RequestEnding(result)
        if id == lastRequest?.id { lastEnding = ending }
        func what() -> String { wish == nil ? "stop \(id)" : "start \(id)" }
        switch result {
        case .success:
            if let wish {
                // Success means the controller does exactly this, now.
                if bench.desired != wish { fail("\(what()) succeeded but is no longer what is desired") }
                if !bench.controllerDoes(wish) { fail("\(what()) succeeded but the controller does not do it") }
            } else if case .request(let newWish) = cause, newWish != nil {
                // A stop overtaken by a start: moot, and success by definition.
            } else if bench.controllerIsOn && beliefGrounded {
                fail("\(what()) succeeded while the controller is still on")
            }
        case .failure(let error) where error.code == .cancelled:
            var overtaken = false
            switch cause {
            case .request, .ended: overtaken = bench.desired != wish
            case .answer: break
            }
            if wish == nil || !overtaken { fail("\(what()) was cancelled although nothing overtook it") }
        case .failure(let error):
            // A request fails only when the controller refused a command sent on its behalf.
            guard case .answer(.failure(let refused), let servedWish) = cause, refused.code == error.code,
                servedWish == wish
            else {
                fail("\(what()) failed with \(error.code) although no command sent for it was refused")
                return
            }
        }
    }

    private mutating func checkAfterStep() {
        guard problem == nil else { return }
        if bench.machineHasCommandInFlight != bench.controllerHasCommandPending {
            fail("the machine's command in flight and the controller's pending command disagree")
            return
        }
        guard !bench.machineHasCommandInFlight else { return }
        // Nothing in flight: the machine must be done, and (when it could know) agree with the controller.
        if !bench.isSettled { fail("nothing is in flight but the machine is not settled") }
        if !open.isEmpty {
            let ids = open.keys.sorted().map(\.description).joined(separator: ", ")
            fail("nothing is in flight but \(ids) never completed")
        }
        guard beliefGrounded else { return }
        if let wish = bench.desired {
            if !bench.controllerDoes(wish) { fail("the API wants \(wish) but the controller does not do it") }
        } else if bench.controllerIsOn {
            fail("the API wants nothing but the controller is on")
        }
        if let mismatch = bench.viewMismatch { fail(mismatch) }
    }

    /// Answer whatever is in flight until nothing is, then judge the end state.
    mutating func settle(within limit: Int) {
        var answers = 0
        while problem == nil && bench.controllerHasCommandPending && answers < limit {
            perform(.answer)
            answers += 1
        }
        guard problem == nil else { return }
        if bench.controllerHasCommandPending {
            fail("still busy after \(limit) answers")
            return
        }
        // The API ends where the last request left it: its wish if it succeeded, nothing if it failed.
        guard let last = lastRequest, !endedSinceLastRequest else { return }
        switch lastEnding {
        case .success?:
            if bench.desired != last.wish { fail("the last request succeeded but desired is not its wish") }
        case .failure(.cancelled)?:
            fail("the last request was cancelled though nothing came after it")
        case .failure?:
            if bench.desired != nil { fail("the last request failed but desired is not nil") }
        case nil:
            fail("the last request never completed")
        }
    }

    /// Close the transport now: every open request fails once with that error and nothing more is sent.
    mutating func closeAndCheck() {
        let expected = open
        let effects = bench.close()
        var seen: Set<HostOperationID> = []
        for effect in effects {
            switch effect {
            case .sent, .sentWhileBusy:
                fail("a command was sent after the transport closed")
            case .complete(let id, let result):
                if expected[id] == nil || !seen.insert(id).inserted { fail("closing completed \(id) wrongly") }
                if RequestEnding(result) != .failure(.transportClosed) {
                    fail("closing completed \(id) with \(RequestEnding(result))")
                }
            }
        }
        if seen.count != expected.count { fail("closing left requests without an answer") }
        if bench.desired != nil || bench.machineHasCommandInFlight { fail("closing left the machine busy") }
        if !bench.lateAnswer().isEmpty { fail("an answer after closing made the machine act") }
    }
}

/// Walks every sequence of at most `depth` steps from `bench`; returns how many it walked and the problems
/// found, shortest sequence first. A sequence that shows a problem is not extended.
private func explore<B: MachineBench>(
    _ bench: B, a: B.Wish, b: B.Wish, startsTrue: Bool, mishaps: Mishaps, depth: Int
) -> (sequences: Int, problems: [String]) {
    var sequences = 0
    var problems: [(steps: Int, text: String)] = []

    func visit(_ run: ExplorationRun<B>, _ remaining: Int) {
        sequences += 1
        // Answering until idle is itself a path of the tree, walked below while steps remain; so settle here
        // only where the walk stops, or where there is nothing to answer and only the end state is judged.
        if remaining == 0 || !run.bench.controllerHasCommandPending {
            var settled = run
            settled.settle(within: 16)
            if let problem = settled.problem {
                problems.append((settled.steps.count, problem))
                return
            }
        }
        // Closing matters where something is waiting; on an idle machine it has nothing to fail.
        if !run.open.isEmpty || run.bench.machineHasCommandInFlight {
            var closed = run
            closed.closeAndCheck()
            if let problem = closed.problem {
                problems.append((run.steps.count, problem + " (then the transport closed)"))
                return
            }
        }
        guard remaining > 0 else { return }
        for step in run.possibleSteps {
            var next = run
            next.perform(step)
            if let problem = next.problem {
                problems.append((next.steps.count, problem))
                continue
            }
            visit(next, remaining - 1)
        }
    }

    visit(ExplorationRun(bench, a: a, b: b, startsTrue: startsTrue, mishaps: mishaps), depth)
    let shortest = problems.sorted { $0.steps < $1.steps }.prefix(6).map(\.text)
    return (sequences, shortest)
}

/// How long the explored sequences are. Six steps give every order of two starts and a stop with the answers
/// they draw, plus room for a refusal or a connection, and stay well under a second per case in debug builds.
private let explorationDepth = 6

// MARK: - Exhaustive: scanning

@Suite struct ScanMachineExhaustiveTests {
    /// How the second scan differs from the first: in the enable command's flag, or in the parameters.
    enum Difference: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case filterDuplicates
        case active
        var testDescription: String { rawValue }
    }

    @Test(arguments: ControllerQuirk.allCases, Difference.allCases)
    func noOrderOfStartsStopsAndAnswersLeavesTheAPIAndTheControllerDisagreeing(
        quirk: ControllerQuirk, difference: Difference
    ) {
        explore(quirk, difference, .refusals)
    }

    // Lost answers on an obliging controller and on one left on; the other quirks add little here.
    @Test(arguments: [ControllerQuirk.obliging, .leftOn], Difference.allCases)
    func commandsThatTimeOutDoNotLeaveTheAPIAndTheControllerDisagreeing(
        quirk: ControllerQuirk, difference: Difference
    ) {
        explore(quirk, difference, .timeouts)
    }

    private func explore(_ quirk: ControllerQuirk, _ difference: Difference, _ mishaps: Mishaps) {
        let a = ScanParameters(active: true, interval: 0x0060, window: 0x0030, filterDuplicates: false)
        var b = a
        switch difference {
        case .filterDuplicates: b.filterDuplicates = true
        case .active: b.active = false
        }
        let (sequences, problems) = BLEHostTests.explore(
            ScanBench(quirk), a: a, b: b, startsTrue: quirk != .leftOn, mishaps: mishaps, depth: explorationDepth)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        if problems.isEmpty { #expect(sequences > 1000) }
    }
}

// MARK: - Exhaustive: advertising

@Suite struct AdvertisingMachineExhaustiveTests {
    /// How the second advertising set differs from the first: in its data (changeable while advertising), or in
    /// its parameters (not).
    enum Difference: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case data
        case parameters
        var testDescription: String { rawValue }
    }

    @Test(arguments: ControllerQuirk.allCases, Difference.allCases)
    func noOrderOfStartsStopsAnswersAndConnectionsLeavesTheAPIAndTheControllerDisagreeing(
        quirk: ControllerQuirk, difference: Difference
    ) {
        explore(quirk, difference, .refusals)
    }

    // Lost answers on an obliging controller and on one left on; the other quirks add little here.
    @Test(arguments: [ControllerQuirk.obliging, .leftOn], Difference.allCases)
    func commandsThatTimeOutDoNotLeaveTheAPIAndTheControllerDisagreeing(
        quirk: ControllerQuirk, difference: Difference
    ) {
        explore(quirk, difference, .timeouts)
    }

    private func explore(_ quirk: ControllerQuirk, _ difference: Difference, _ mishaps: Mishaps) {
        let a = AdvertisingSet(
            parameters: AdvertisingParameters(), data: [0x02, 0x01, 0x06], scanResponse: [0x03, 0x09, 0x41, 0x42])
        var b = a
        switch difference {
        case .data: b.data = [0x02, 0x01, 0x04]
        case .parameters: b.parameters = AdvertisingParameters(intervalMin: 0x0100, intervalMax: 0x0140)
        }
        let (sequences, problems) = BLEHostTests.explore(
            AdvertisingBench(quirk), a: a, b: b, startsTrue: quirk != .leftOn, mishaps: mishaps,
            depth: explorationDepth)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        if problems.isEmpty { #expect(sequences > 1000) }
    }
}

// MARK: - Scenarios: scanning

@Suite struct ScanMachineScenarioTests {
    let a = ScanParameters(active: true, interval: 0x0060, window: 0x0030, filterDuplicates: false)
    let b = ScanParameters(active: false, interval: 0x0100, window: 0x0050, filterDuplicates: true)

    @Test func startThenStopAtOncePutsOnlySetScanParametersOnTheWire() {
        var machine = ScanMachine()
        #expect(machine.start(a, id: operation(1)) == [.send(.setParameters(a))])
        // The stop comes while LE Set Scan Parameters is on the wire: the start is overtaken, nothing follows it.
        #expect(machine.stop(id: operation(2)) == [.complete(operation(1), failed(.cancelled))])
        #expect(machine.answered(succeeded) == [.complete(operation(2), succeeded)])
        #expect(machine.inFlight == nil)
        #expect(!machine.isScanning)
        #expect(machine.isSettled)
    }

    @Test func stopWithNothingRunningSendsNothingAndCompletesAtOnce() {
        var machine = ScanMachine()
        #expect(machine.stop(id: operation(1)) == [.complete(operation(1), succeeded)])
        #expect(machine.inFlight == nil)
        #expect(!machine.isScanning)
    }

    @Test func startingTwiceWithTheSameParametersSendsOneSequenceAndCompletesBoth() {
        var machine = ScanMachine()
        #expect(machine.start(a, id: operation(1)) == [.send(.setParameters(a))])
        #expect(machine.start(a, id: operation(2)) == [])
        #expect(machine.answered(succeeded) == [.send(.enable(filterDuplicates: false))])
        #expect(
            machine.answered(succeeded) == [
                .complete(operation(1), succeeded), .complete(operation(2), succeeded),
            ])
        // Asking again for what already runs completes at once.
        #expect(machine.start(a, id: operation(3)) == [.complete(operation(3), succeeded)])
        #expect(machine.isScanning)
    }

    @Test func stoppingAScanDisablesItAndCompletesOnceTheControllerStopped() {
        var bench = ScanBench()
        #expect(bench.answerUntilIdle(after: bench.start(a, id: operation(1))) == [operation(1): .success])
        #expect(bench.controller.scans(with: a))
        #expect(bench.machine.stop(id: operation(2)) == [.send(.disable)])
        #expect(bench.machine.answered(succeeded) == [.complete(operation(2), succeeded)])
        #expect(!bench.machine.isScanning)
    }

    @Test func aControllerLeftScanningByAnotherHostIsStoppedThenSetUpAsAsked() {
        var bench = ScanBench(.leftOn)
        let endings = bench.answerUntilIdle(after: bench.start(a, id: operation(1)))
        // LE Set Scan Parameters is refused while it scans; the machine stops it and tries again.
        #expect(
            bench.controller.wire == [.setParameters(a), .disable, .setParameters(a), .enable(filterDuplicates: false)])
        #expect(endings == [operation(1): .success])
        #expect(bench.controller.scans(with: a))
        #expect(bench.machine.controller.enabled == true)
    }

    @Test func aSecondCommandDisallowedGivesUpWithThatError() {
        let disallowed = refused(.commandDisallowed)
        var machine = ScanMachine()
        #expect(machine.start(a, id: operation(1)) == [.send(.setParameters(a))])
        #expect(machine.answered(disallowed) == [.send(.disable)])
        #expect(machine.answered(succeeded) == [.send(.setParameters(a))])
        #expect(machine.answered(disallowed) == [.complete(operation(1), disallowed)])
        #expect(machine.desired == nil)
        #expect(!machine.isScanning)
        #expect(machine.inFlight == nil)
        // Giving up is for that request: a later start tries afresh, disable and retry included.
        #expect(machine.start(a, id: operation(2)) == [.send(.setParameters(a))])
        #expect(machine.answered(disallowed) == [.send(.disable)])
    }

    @Test func aRefusedEnableFailsTheStartAndLeavesScanningOff() {
        var bench = ScanBench(.refusesEnable)
        let endings = bench.answerUntilIdle(after: bench.start(a, id: operation(1)))
        #expect(endings == [operation(1): .failure(.hci(.commandDisallowed))])
        // Command Disallowed on LE Set Scan Enable is not the cue to disable and retry.
        #expect(bench.controller.wire == [.setParameters(a), .enable(filterDuplicates: false)])
        #expect(!bench.machine.isScanning)
        #expect(!bench.controller.scanning)
        #expect(bench.machine.isSettled)
    }

    @Test func changingOnlyTheDuplicateFilterRestartsTheScanWithTheNewFilter() {
        var bench = ScanBench()
        _ = bench.answerUntilIdle(after: bench.start(a, id: operation(1)))
        let before = bench.controller.wire.count
        var filtered = a
        filtered.filterDuplicates = true
        let endings = bench.answerUntilIdle(after: bench.start(filtered, id: operation(2)))
        let sent = bench.controller.wire.dropFirst(before)
        #expect(sent.first == .disable)
        #expect(sent.last == .enable(filterDuplicates: true))
        #expect(endings == [operation(2): .success])
        #expect(bench.controller.scans(with: filtered))
    }

    @Test func closingTheTransportFailsEveryWaitingRequestOnce() {
        var machine = ScanMachine()
        _ = machine.start(a, id: operation(1))
        _ = machine.start(a, id: operation(2))
        let closed = HostError(.transportClosed, "the transport closed")
        #expect(
            machine.closed(closed) == [
                .complete(operation(1), .failure(closed)), .complete(operation(2), .failure(closed)),
            ])
        #expect(machine.desired == nil)
        #expect(machine.inFlight == nil)
        // An answer that straggles in afterwards changes nothing.
        #expect(machine.answered(succeeded) == [])
        #expect(machine.closed(closed) == [])
    }

    // The refused command was sent for a scan that no longer matters; the stop has nothing to do with it.
    @Test func aStopSucceedsEvenWhenTheControllerRefusesTheStartItOvertook() {
        var machine = ScanMachine()
        #expect(machine.start(a, id: operation(1)) == [.send(.setParameters(a))])
        #expect(machine.stop(id: operation(2)) == [.complete(operation(1), failed(.cancelled))])
        #expect(machine.answered(refused(.invalidHCICommandParameters)) == [.complete(operation(2), succeeded)])
        #expect(!machine.isScanning)
        #expect(machine.isSettled)
    }

    // Parameters the controller refused say nothing about different ones asked for since.
    @Test func aNewStartIsNotFailedByTheRefusalOfTheParametersItReplaced() {
        var bench = ScanBench()
        let first = bench.start(a, id: operation(1))
        let second = bench.start(b, id: operation(2))
        #expect(endings(of: first + second) == [operation(1): .failure(.cancelled)])
        let refusal = bench.answer(.refused(.invalidHCICommandParameters)).1
        let endings = bench.answerUntilIdle(after: refusal)
        #expect(endings == [operation(2): .success])
        #expect(bench.machine.isScanning)
        #expect(bench.controller.scans(with: b))
    }

    // A timeout says nothing about whether the controller carried the command out.
    @Test(arguments: [true, false])
    func anEnableWhoseAnswerIsLostLeavesTheAPIAndTheControllerAgreeing(carriedOut: Bool) {
        var bench = ScanBench()
        _ = bench.start(a, id: operation(1))
        _ = bench.answer(.asItWould)  // LE Set Scan Parameters
        #expect(bench.controller.pending == .enable(filterDuplicates: false))
        var endings = endings(of: bench.answer(.lost(carriedOut: carriedOut)).1)
        endings.merge(bench.answerUntilIdle()) { $1 }
        #expect(endings.count == 1)
        #expect(bench.controller.scanning == bench.machine.isScanning)
        if endings[operation(1)] == .success { #expect(bench.controller.scans(with: a)) }
    }

    @Test(arguments: [true, false])
    func aDisableWhoseAnswerIsLostLeavesTheAPIAndTheControllerAgreeing(carriedOut: Bool) {
        var bench = ScanBench()
        _ = bench.answerUntilIdle(after: bench.start(a, id: operation(1)))
        _ = bench.stop(id: operation(2))
        #expect(bench.controller.pending == .disable)
        var endings = endings(of: bench.answer(.lost(carriedOut: carriedOut)).1)
        endings.merge(bench.answerUntilIdle()) { $1 }
        #expect(endings.keys.contains(operation(2)))
        #expect(bench.controller.scanning == bench.machine.isScanning)
        if endings[operation(2)] == .success { #expect(!bench.controller.scanning) }
    }
}

// MARK: - Scenarios: advertising

@Suite struct AdvertisingMachineScenarioTests {
    let set = AdvertisingSet(
        parameters: AdvertisingParameters(), data: [0x02, 0x01, 0x06], scanResponse: [0x03, 0x09, 0x41, 0x42])

    /// A bench advertising `set`, with the commands that got it there cleared from view.
    private func advertising() -> (bench: AdvertisingBench, sentBefore: Int) {
        var bench = AdvertisingBench()
        let endings = bench.answerUntilIdle(after: bench.start(set, id: operation(1)))
        #expect(endings == [operation(1): .success])
        return (bench, bench.controller.wire.count)
    }

    @Test func startingFromOffSendsParametersDataScanResponseThenEnable() {
        let (bench, _) = advertising()
        #expect(
            bench.controller.wire == [
                .setParameters(set.parameters), .setData(set.data), .setScanResponse(set.scanResponse), .enable,
            ])
        #expect(bench.controller.advertises(set))
        #expect(bench.machine.isAdvertising)
    }

    @Test func aParameterChangeWhileAdvertisingDisablesFirst() {
        var (bench, before) = advertising()
        var changed = set
        changed.parameters = AdvertisingParameters(kind: .scannable, intervalMin: 0x0100, intervalMax: 0x0140)
        let endings = bench.answerUntilIdle(after: bench.start(changed, id: operation(2)))
        #expect(bench.controller.wire.dropFirst(before) == [.disable, .setParameters(changed.parameters), .enable])
        #expect(endings == [operation(2): .success])
        #expect(bench.controller.advertises(changed))
    }

    @Test func aDataOnlyChangeWhileAdvertisingSendsOnlySetAdvertisingData() {
        var (bench, before) = advertising()
        var changed = set
        changed.data = [0x02, 0x01, 0x04]
        let endings = bench.answerUntilIdle(after: bench.start(changed, id: operation(2)))
        #expect(bench.controller.wire.dropFirst(before) == [.setData(changed.data)])
        #expect(endings == [operation(2): .success])
        #expect(bench.controller.advertises(changed))
    }

    @Test func aCentralConnectingEndsAdvertisingAndSaysItWasWanted() {
        var (bench, before) = advertising()
        let (wasAdvertising, effects) = bench.centralConnects()
        #expect(wasAdvertising)
        #expect(effects.isEmpty)
        #expect(!bench.machine.isAdvertising)
        #expect(bench.machine.controller.enabled == false)
        // Stopping now has nothing to do; a second end reports that nothing was wanted.
        #expect(bench.machine.stop(id: operation(2)) == [.complete(operation(2), succeeded)])
        #expect(bench.machine.ended().wasAdvertising == false)
        #expect(bench.controller.wire.count == before)
        #expect(!bench.controller.advertising)
    }

    @Test func aCentralConnectingWhileADataChangeIsInFlightCancelsTheChange() {
        var (bench, _) = advertising()
        var changed = set
        changed.data = [0x02, 0x01, 0x04]
        #expect(endings(of: bench.start(changed, id: operation(2))).isEmpty)
        #expect(bench.controller.pending == .setData(changed.data))
        let (wasAdvertising, effects) = bench.centralConnects()
        #expect(wasAdvertising)
        // The wish is dropped with the advertising: a peripheral advertises again only when asked to.
        #expect(endings(of: effects) == [operation(2): .failure(.cancelled)])
        #expect(endings(of: bench.answer(.asItWould).1).isEmpty)
        #expect(bench.machine.isSettled)
        #expect(!bench.controller.advertising)
        #expect(!bench.machine.isAdvertising)
    }

    @Test func aControllerLeftAdvertisingByAnotherHostIsStoppedThenSetUpAsAsked() {
        var bench = AdvertisingBench(.leftOn)
        let endings = bench.answerUntilIdle(after: bench.start(set, id: operation(1)))
        #expect(
            bench.controller.wire == [
                .setParameters(set.parameters), .disable, .setParameters(set.parameters), .setData(set.data),
                .setScanResponse(set.scanResponse), .enable,
            ])
        #expect(endings == [operation(1): .success])
        #expect(bench.controller.advertises(set))
    }

    @Test func closingTheTransportFailsEveryWaitingRequestOnce() {
        var machine = AdvertisingMachine()
        _ = machine.start(set, id: operation(1))
        _ = machine.start(set, id: operation(2))
        let closed = HostError(.transportClosed, "the transport closed")
        #expect(
            machine.closed(closed) == [
                .complete(operation(1), .failure(closed)), .complete(operation(2), .failure(closed)),
            ])
        #expect(!machine.isAdvertising)
        #expect(machine.inFlight == nil)
        #expect(machine.answered(succeeded) == [])
    }

    @Test func aStopSucceedsEvenWhenTheControllerRefusesTheStartItOvertook() {
        var machine = AdvertisingMachine()
        #expect(machine.start(set, id: operation(1)) == [.send(.setParameters(set.parameters))])
        #expect(machine.stop(id: operation(2)) == [.complete(operation(1), failed(.cancelled))])
        #expect(machine.answered(refused(.invalidHCICommandParameters)) == [.complete(operation(2), succeeded)])
        #expect(!machine.isAdvertising)
        #expect(machine.isSettled)
    }

    @Test(arguments: [true, false])
    func anEnableWhoseAnswerIsLostLeavesTheAPIAndTheControllerAgreeing(carriedOut: Bool) throws {
        var bench = AdvertisingBench()
        _ = bench.start(set, id: operation(1))
        for _ in 0..<3 { _ = bench.answer(.asItWould) }  // parameters, data, scan response
        try #require(bench.controller.pending == .enable)
        var endings = endings(of: bench.answer(.lost(carriedOut: carriedOut)).1)
        endings.merge(bench.answerUntilIdle()) { $1 }
        #expect(endings.count == 1)
        #expect(bench.controller.advertising == bench.machine.isAdvertising)
    }
}
