import BLECore
import BLEHCI
import BLETransport
import Logging
import Synchronization

/// Drives one ``HostMachine``: it owns the transport, the timers and the completions, feeds every event into
/// the machine, and performs the machine's actions strictly in the order the machine produced them.
///
/// ### Function
/// Events arrive on many threads: packets on the transport's (a NIO event loop, the HCI user channel's reading
/// queue, the simulated radio's run loop), timers on the scheduler's, requests on whatever queue or task the
/// application calls from. Packets and timers step the machine in the scheduler's serial domain, requests on
/// the caller's thread; each step takes the driver's lock, in the order the lock is taken, and appends the
/// actions it produced to one ordered outbox in the same lock section. The outbox is drained in
/// the scheduler's serial domain (`HostScheduler.execute`), one drain at a time: packets, completions and
/// events leave in the order the machine produced them, and never on an application's thread over a real
/// controller (the domain is `DispatchHostScheduler`'s queue).
///
/// On the simulated radio the domain is the radio's turn: a packet or a timer is already in it, so a host's
/// whole reaction to an event is done before the radio takes its next event, and two hosts on one radio never
/// race: that is what keeps a simulated run deterministic.
///
/// A completion or event handler may call straight back into the driver: its request steps the machine at
/// once, and its actions join the outbox behind the ones being performed.
///
/// ### Implementation
/// The machine is a value inside the lock; the driver keeps what the machine may not hold: the completion of
/// each operation id, the scheduled work of each timer id, the transport and the event handler. A timer that
/// fires after it was cancelled reaches the machine with an id it no longer knows and changes nothing.
public final class HostDriver: Sendable {
    let transport: any HCITransport
    let scheduler: any HostScheduler
    public let configuration: HostConfiguration
    /// Where the machine's `.log` actions go, with the link and the operation as metadata.
    let logger: Logger

    /// What a request's caller hears, once.
    typealias Completion = @Sendable (Result<HostOutput, HostError>) -> Void

    /// The event receiver, boxed: a bare closure kept in a `Mutex` is re-abstracted on every access, and the
    /// thunks pile up (measured: a third of a notification stream's time went to nested thunks).
    final class EventHandler: Sendable {
        let call: @Sendable (HostEvent) -> Void
        init(_ call: @escaping @Sendable (HostEvent) -> Void) { self.call = call }
    }

    struct State {
        var machine: HostMachine
        var outbox = DomainOutbox<HostAction>()
        var nextOperation: UInt64 = 1
        var completions: [HostOperationID: Completion] = [:]
        var timers: [HostTimerID: any ScheduledWork] = [:]
        var handler: EventHandler?

        /// A new operation id, its completion not yet known (registered only if the machine takes the request).
        mutating func reserveOperation() -> HostOperationID {
            defer { nextOperation += 1 }
            return HostOperationID(rawValue: nextOperation)
        }

        /// A new operation id whose completion is `completion`.
        mutating func register(_ completion: @escaping Completion) -> HostOperationID {
            let id = reserveOperation()
            completions[id] = completion
            return id
        }
    }

    let state: Mutex<State>

    public init(
        transport: any HCITransport, scheduler: any HostScheduler,
        configuration: HostConfiguration = HostConfiguration(), logger: Logger = Logger(label: "swift-ble.host")
    ) {
        self.transport = transport
        self.scheduler = scheduler
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "host"] = "\(configuration.deviceName)"
        self.logger = logger
        self.state = Mutex(State(machine: HostMachine(configuration: configuration)))
        transport.setReceiver { [weak self] event in self?.received(event) }
    }

    /// Installs the receiver of host events (the system). Events are delivered in the order the machine
    /// produced them, one at a time, never under the driver's lock.
    public func setEventHandler(_ handler: @escaping @Sendable (HostEvent) -> Void) {
        let box = EventHandler(handler)
        state.withLock { $0.handler = box }
    }

    /// What the controller reported during initialisation (nil until `start` succeeds).
    public var controllerInfo: ControllerInfo? { state.withLock { $0.machine.info } }

    /// What the host dropped or gave up on, so far (each one is also logged).
    public var counters: HostCounters { state.withLock { $0.machine.counters } }

    /// Whether the transport is still open.
    public var isOpen: Bool { state.withLock { !$0.machine.isClosed } }

    /// The links up now.
    public var links: [LinkInfo] { state.withLock { $0.machine.linkInfos } }

    /// The timers the machine has running: what a test of a fault checks came back to what the links and
    /// machines still at work need (none left behind by what ended).
    public var runningTimerCount: Int { state.withLock { $0.machine.runningTimerCount } }

    // MARK: Feeding the machine

    /// Starts a request: `completion` hears its result once, in the order the machine completed it.
    func request(_ request: HostRequest, completion: @escaping Completion) {
        let completion = logged(request, completion)
        step { state in
            let id = state.register(completion)
            return ((), state.machine.requested(request, id: id))
        }
    }

    /// Steps the machine with `body` under the lock, queues the actions it produced, and has them performed in
    /// the scheduler's domain unless a drain is already under way (it performs these too, in order).
    func step<T>(_ body: (inout State) -> (T, [HostAction])) -> T {
        step(inDomain: scheduler.isExecuting, body)
    }

    /// `step`, for a caller that knows whether it is in the domain (asked once per packet, not twice).
    private func step<T>(inDomain: Bool, _ body: (inout State) -> (T, [HostAction])) -> T {
        // In the domain, a drain starts at once and performs everything stepped so far, in order (a drain
        // scheduled from outside may not have run yet); from outside, one is scheduled in the domain.
        let (value, drain) = state.withLock { state -> (T, DomainOutbox<HostAction>.Start) in
            let (value, actions) = body(&state)
            return (value, state.outbox.append(contentsOf: actions, inDomain: inDomain))
        }
        switch drain {
        case .now: drainOutbox()
        case .scheduled: scheduler.execute { [self] in scheduledDrain() }
        case .none: break
        }
        return value
    }

    /// A drain scheduled from outside the domain, now in it: it performs what waits, unless a drain started in
    /// the domain meanwhile has (or is doing so).
    private func scheduledDrain() {
        let start = state.withLock { $0.outbox.scheduledDrainArrived() }
        if start { drainOutbox() }
    }

    /// Performs queued actions until the outbox is empty. Only one thread drains at a time.
    private func drainOutbox() {
        while true {
            let next = state.withLock { state -> Performable? in
                guard let action = state.outbox.next() else { return nil }
                return Self.prepare(action, &state, driver: self)
            }
            guard let next else { return }
            switch next {
            case .send(let packet):
                transport.send(packet)
            case .complete(let completion, let result):
                completion(result)
            case .emit(let handler, let event):
                log(event)
                handler.call(event)
            case .log(let entry):
                log(entry)
            case .nothing:
                break
            }
        }
    }

    /// What is left to do outside the lock once an action was taken from the outbox.
    private enum Performable {
        case send(HCIPacket)
        case complete(Completion, Result<HostOutput, HostError>)
        case emit(EventHandler, HostEvent)
        case log(HostLogEntry)
        case nothing
    }

    /// Timers are started and cancelled under the lock (a `HostScheduler` never runs work synchronously), so the
    /// handle is stored before the timer can fire; the rest is handed out to be performed outside it.
    private static func prepare(_ action: HostAction, _ state: inout State, driver: HostDriver) -> Performable {
        switch action {
        case .send(let packet):
            return .send(packet)
        case .startTimer(let id, let delay):
            state.timers[id] = driver.scheduler.schedule(after: delay) { [weak driver] in driver?.timerFired(id) }
            return .nothing
        case .cancelTimer(let id):
            state.timers.removeValue(forKey: id)?.cancel()
            return .nothing
        case .complete(let id, let result):
            guard let completion = state.completions.removeValue(forKey: id) else { return .nothing }
            return .complete(completion, result)
        case .emit(let event):
            guard let handler = state.handler else { return .nothing }
            return .emit(handler, event)
        case .log(let entry):
            return .log(entry)
        }
    }

    private func log(_ entry: HostLogEntry) {
        var metadata: Logger.Metadata = [:]
        if let connection = entry.connection { metadata["connection"] = "\(connection)" }
        if let operation = entry.operation { metadata["operation"] = "\(operation)" }
        let level: Logger.Level =
            switch entry.level {
            case .debug: .debug
            case .info: .info
            case .notice: .notice
            case .warning: .warning
            case .error: .error
            }
        logger.log(level: level, "\(entry.message)", metadata: metadata)
    }

    /// Shuts the host down: every pending request fails with `.shutDown`, every link is forgotten (the
    /// controller is going away with it), `.transportClosed` is the last event, and the transport is closed.
    public func shutDown() {
        step { ((), $0.machine.shutDown()) }
        transport.close()
    }

    private func timerFired(_ id: HostTimerID) {
        step { state in
            state.timers[id] = nil
            return ((), state.machine.timerFired(id))
        }
    }

    /// A packet or the transport's end, stepped in the domain: the actions of the packet before it (a response
    /// to a request, say) are performed before this one reaches the machine, so nothing the host decided on a
    /// link goes out after the host has heard the link end (a capture would show data on a handle already
    /// disconnected, and the controller would refuse it). Stepped on the transport's thread, a Disconnection
    /// Complete could overtake the drain that sends the response to the request before it.
    private func received(_ event: HCITransportEvent) {
        // In the domain already (the simulated radio's run loop; a recording transport that hands over in the
        // domain), the packet is stepped at once, with no closure made for it: this is every packet's path.
        guard scheduler.isExecuting else { return scheduler.execute { [self] in take(event) } }
        take(event)
    }

    /// Steps a packet or the transport's end, in the domain.
    private func take(_ event: HCITransportEvent) {
        switch event {
        case .packet(let packet):
            step(inDomain: true) { ((), $0.machine.received(packet)) }
        case .closed(let reason):
            step(inDomain: true) { ((), $0.machine.transportClosed(reason: reason)) }
        }
    }
}
