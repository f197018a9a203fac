import BLECore
import BLEHCI
import BLETransport
import DequeModule
import Dispatch
import Synchronization

/// Which way an HCI packet crossed a controller's pipe.
public enum HCITraceDirection: Sendable, Hashable, CustomStringConvertible {
    /// From the host to the controller (commands, ACL data).
    case hostToController
    /// From the controller to the host (events, ACL data).
    case controllerToHost

    public var description: String { self == .hostToController ? "H>C" : "C>H" }
}

/// How `SimulatedRadio.run` relates virtual time to wall time.
public enum SimulationPacing: Sendable, Hashable {
    /// Jump from event to event (tests, benchmarks).
    case asFastAsPossible
    /// Sleep so that virtual time advances no faster than wall time (interactive tools).
    case realtime
}

/// Errors of the simulation driver.
public struct SimulationError: Error, Hashable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
    /// `run` was called while another `run` of the same radio was in progress.
    public static let alreadyRunning = SimulationError(message: "the radio is already running")
    /// An air capture file could not be created.
    static func cannotCapture(path: String) -> SimulationError {
        SimulationError(message: "cannot create the air capture \(path)")
    }
}

/// A simulated 2.4 GHz world linking any number of `VirtualController`s, on a virtual clock.
///
/// ## Function
/// The radio owns one agenda of events ordered by (virtual time, sequence number): advertising events,
/// connection events, packets hosts sent, and host timers (it is the `HostScheduler` of every host on it).
/// `run(for:)` / `run(until:)` take the events in order; after each one, the packets it produced are
/// delivered to the hosts (synchronously, through their `HCIPipe`s), and the callbacks they dispatched with
/// `dispatch(on:_:)` run, in order, before the next event is taken.
/// Whatever a host does in response — send a packet, start a timer — is queued at the current virtual time
/// with the next sequence number. Nothing else decides the order, so the same seed and the same inputs give
/// the same run, packet for packet (see `setTraceHandler`).
///
/// ## Physics
/// Positions and transmit power give RSSI and range through `RadioPropagation`; `packetLossRate` adds
/// independent random loss; every random choice draws from one seeded generator, in event order.
///
/// ## Concurrency
/// All state is in one `Mutex`; the lock is never held while calling out (host deliveries, host work,
/// trace handler), so hosts may call back into the radio from inside their callbacks.
///
/// The radio is the serial domain (`HostScheduler.execute`) of every host on it, and its *turn* says who works
/// in it. During a run the run loop holds the turn: what it runs (an event's effects, a dispatched callback, a
/// job of a task on the radio) is marked as in turn, and work it executes runs at once; work executed from any
/// other thread (a plain `Task`, a tool's own thread) waits in a lane the loop empties between events, in the
/// order it came. Outside a run nothing moves: a thread that executes work takes the turn if nobody holds it,
/// runs the work and what others queued meanwhile, and lets it go; a run that starts meanwhile waits for it.
public final class SimulatedRadio: HostScheduler, Sendable {
    let world: Mutex<World>
    private let dispatchState = Mutex(DispatchState())
    /// Boxed: a bare closure kept in a `Mutex` is re-abstracted on every access and the thunks pile up.
    private final class TraceHandler: Sendable {
        let call: @Sendable (Duration, String, HCITraceDirection, HCIPacket) -> Void
        init(_ call: @escaping @Sendable (Duration, String, HCITraceDirection, HCIPacket) -> Void) { self.call = call }
    }
    private let traceHandler = Mutex<TraceHandler?>(nil)
    private let airCapture = Mutex<AirCaptureFile?>(nil)
    /// The seed every random choice of this radio derives from (systems on it seed their own draws from it).
    public let seed: UInt64

    /// A callback dispatched during a run, with its queue. A struct and not a tuple: a closure inside a tuple
    /// kept in a generic collection is wrapped in a new closure on the way in and again on the way out.
    struct Callback {
        let queue: DispatchQueue
        let work: @Sendable () -> Void
    }

    /// Work executed from outside the turn (`execute`), waiting for it.
    struct Executed {
        let work: @Sendable () -> Void
    }

    /// Who works in the radio's serial domain.
    enum Turn {
        case free
        /// The run loop.
        case run
        /// A thread that executed work outside a run.
        case idle
    }

    struct DispatchState {
        /// Callbacks dispatched and not finished (those queued for the run loop, the one it runs, and those
        /// dispatched before the run began that are still on their queues).
        var outstanding = 0
        /// Callbacks dispatched during the run, for the run loop to run in this order.
        var queued: Deque<Callback> = []
        /// The run loop, waiting for callbacks dispatched before the run to end.
        var waiter: CheckedContinuation<Void, Never>?
        var running = false
        /// Jobs of tasks that prefer the radio as their executor, in the order they were enqueued.
        var jobs: Deque<UnownedJob> = []
        var turn = Turn.free
        /// Work executed from outside the turn, in the order it came.
        var lane: Deque<Executed> = []
        /// A run waiting for a thread that holds the turn outside a run.
        var runWaiter: CheckedContinuation<Void, Never>?
    }

    /// This radio's mark on the threads that work in its turn (`TurnMarker`).
    private var domain: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// A radio whose every random choice derives from `seed`.
    public init(seed: UInt64) {
        self.seed = seed
        self.world = Mutex(World(seed: seed))
    }

    // MARK: World

    /// Virtual time since the radio was created.
    public var now: Duration { VirtualTime.duration(world.withLock { $0.now }) }

    /// Probability (0...1) that any single packet is lost, independently of distance. Default 0.
    public var packetLossRate: Double {
        get { world.withLock { $0.packetLossRate } }
        set {
            world.withLock { w in
                w.packetLossRate = min(max(newValue, 0), 1)
                for id in w.links.keys.sorted() { if let link = w.links[id] { w.wake(link) } }
            }
        }
    }

    /// Adds a powered-on controller to the radio.
    ///
    /// - Parameters:
    ///   - name: names the controller in traces; also seeds its address when `address` is nil.
    ///   - address: its identity. A public address is what Read BD_ADDR reports. With nil, a random static
    ///     address is derived from the radio's seed and `name`; Read BD_ADDR then reports 00:00:00:00:00:00
    ///     and the static address is preloaded as the random address (own address type random works at once,
    ///     and HCI Reset restores it, as for a controller with a factory-programmed static address).
    ///   - position: where it stands on the radio's plane, in metres (distance sets RSSI and range).
    ///   - txPower: its transmit power in dBm.
    ///   - aclBufferLength: `LE_ACL_Data_Packet_Length` (default 251).
    ///   - aclBufferCount: `Total_Num_LE_ACL_Data_Packets` (default 8).
    ///   - maximumConnections: the links it holds at once, as central and peripheral together (default 32, at
    ///     least 1); beyond, LE Create Connection answers Connection Limit Exceeded (0x09) and its advertising
    ///     takes no connection.
    ///   - hostLink: how long HCI packets take between it and its host (default: no time).
    public func addController(
        name: String, address: BluetoothAddress? = nil,
        position: RadioPosition = .init(x: 0, y: 0), txPower: Int8 = 0,
        aclBufferLength: Int = 251, aclBufferCount: Int = 8, maximumConnections: Int = 32,
        hostLink: HostControllerLink = .ideal
    ) -> VirtualController {
        let identity = address ?? Self.staticAddress(seed: seed, name: name)
        let pipe = HCIPipe()
        let index = world.withLock { w in
            let index = w.controllers.count
            w.controllers.append(
                ControllerState(
                    index: index, name: name, pipe: pipe, identity: identity, position: position, txPower: txPower,
                    aclBufferLength: max(27, aclBufferLength), aclBufferCount: max(1, aclBufferCount),
                    maximumConnections: max(1, maximumConnections), hostLink: hostLink, listeners: w.listeners))
            return index
        }
        pipe.attachController { [weak self] packet in
            self?.hostSent(controller: index, packet)
        }
        return VirtualController(radio: self, index: index, name: name, address: identity, pipe: pipe)
    }

    /// A random static address (two most significant bits 0b11) from the seed and a name.
    static func staticAddress(seed: UInt64, name: String) -> BluetoothAddress {
        var random = SimulationRandom(seed: seed ^ stableHash(name))
        let value = random.next()
        var bytes = (0..<6).map { UInt8((value >> (8 * UInt64($0))) & 0xFF) }
        bytes[0] |= 0xC0
        if bytes[1...].allSatisfy({ $0 == 0xFF }) { bytes[5] = 0xFE }
        return BluetoothAddress(bytes: bytes, type: .randomDevice)
    }

    /// Moves a controller; its links are re-evaluated at their next event (and time out if now out of range).
    public func move(_ controller: VirtualController, to position: RadioPosition) {
        world.withLock { w in
            w.controllers[controller.index].position = position
            for id in w.links.keys.sorted() {
                if let link = w.links[id], link.side(of: controller.index) != nil { w.wake(link) }
            }
        }
    }

    func position(of index: Int) -> RadioPosition { world.withLock { $0.controllers[index].position } }

    /// Powers a controller off: it stops radiating, its host's transport closes, and its peers time out (or, with
    /// `terminatingLinks`, hear its links end at once, as from a controller powered off in good order).
    func vanish(_ index: Int, reason: String, terminatingLinks: Bool = false) {
        let pipe: HCIPipe? = world.withLock { w in
            let c = w.controllers[index]
            guard c.powered else { return nil }
            c.powered = false
            c.advertising = false
            c.advertisingGeneration &+= 1
            c.scanning = false
            c.initiating = nil
            // Ending links in good order tells the peers' hosts: that happens on the agenda, where what a
            // controller says reaches its host.
            if terminatingLinks {
                w.clock.schedule(at: w.now, .linksEndedByPowerOff(controller: index))
            } else {
                w.leaveAllLinks(c)
            }
            return c.pipe
        }
        pipe?.closeFromController(reason: reason)
    }

    func isPowered(_ index: Int) -> Bool { world.withLock { $0.controllers[index].powered } }

    func failHardware(_ index: Int, code: UInt8) {
        world.withLock { w in _ = w.clock.schedule(at: w.now, .hardwareError(controller: index, code: code)) }
    }

    func hang(_ index: Int, for duration: Duration?) {
        world.withLock { w in
            _ = w.clock.schedule(at: w.now, .hang(controller: index, duration: duration.map(VirtualTime.nanos)))
        }
    }

    // MARK: Trace

    /// Records every link-layer packet on the air from now on to `path`, as pcap with
    /// `LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR` (Wireshark shows advertising, CONNECT_IND, connection events with
    /// their empty packets, sequence numbers and retransmissions, as a sniffer would): channel, access address,
    /// the PDU and a correct CRC, stamped with virtual time. Recording changes nothing in the run. A capture
    /// already open is closed first.
    ///
    /// - Throws: `SimulationError` when the file cannot be created.
    public func startAirCapture(to path: String) throws {
        let file = try AirCaptureFile(path: path)
        airCapture.withLock { old in
            old?.close()
            old = file
        }
        world.withLock { $0.capturingAir = true }
    }

    /// Closes the air capture.
    public func stopAirCapture() {
        world.withLock { $0.capturingAir = false }
        airCapture.withLock { file in
            file?.close()
            file = nil
        }
    }

    /// Installs (or removes, with nil) a handler called for every HCI packet crossing any controller's pipe,
    /// in run order, with the virtual time and the controller's name. Host-to-controller packets are recorded
    /// when the controller takes them from its queue.
    public func setTraceHandler(_ handler: (@Sendable (Duration, String, HCITraceDirection, HCIPacket) -> Void)?) {
        let box = handler.map(TraceHandler.init)
        traceHandler.withLock { $0 = box }
    }

    // MARK: HostScheduler

    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let delayNanos = VirtualTime.nanos(delay)
        let sequence = world.withLock { w in w.clock.schedule(at: VirtualTime.after(w.now, delayNanos), .hostWork(work))
        }
        return RadioScheduledWork(radio: self, sequence: sequence)
    }

    func cancel(sequence: UInt64) {
        world.withLock { $0.clock.cancel(sequence) }
    }

    /// Runs `work` on `queue`, counted: the run loop does not take another event until it has finished.
    /// While the radio runs, callbacks run one at a time, in the order they were dispatched, whatever their
    /// queues: two callbacks of one event on two queues (a packet to each side of a link) would otherwise race,
    /// and the requests they make (a host's next packet, a task's next job) would reach the agenda in an order
    /// the threads chose, so that a seed would not always give the same run. The run loop itself runs them,
    /// between events, each on its queue (`DispatchQueue.sync`: on the run loop's thread when the queue is free,
    /// so that a packet's way to an app costs no thread hand-over; the main queue's callbacks go to the main
    /// thread and the loop waits for them). A callback must not wait for another dispatched after it. Outside a
    /// run (a test feeding a system events from its own thread), each callback goes to its queue at once.
    public func dispatch(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        let (inTurn, waiter) = dispatchState.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
            s.outstanding += 1
            guard s.running else { return (false, nil) }
            s.queued.append(Callback(queue: queue, work: work))
            // A run loop waiting for callbacks dispatched before the run began takes this one now.
            defer { s.waiter = nil }
            return (true, s.waiter)
        }
        if inTurn {
            waiter?.resume()
            return
        }
        runOnItsQueue(work, on: queue)
    }

    /// Runs `work` in the radio's turn: at once when the caller is in it (an event's effects, a callback or a job
    /// the run loop runs), else, during a run, between two events, in the order executed work came; outside a
    /// run, on the caller's thread, which takes the turn (time does not move) and also runs what other threads
    /// executed while it held it.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        if isExecuting { return work() }
        let (take, waiter) = dispatchState.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
            if s.turn == .free {
                s.turn = .idle
                return (true, nil)
            }
            s.lane.append(Executed(work: work))
            guard s.turn == .run else { return (false, nil) }
            // A run loop waiting for callbacks looks at the lane too.
            defer { s.waiter = nil }
            return (false, s.waiter)
        }
        waiter?.resume()
        guard take else { return }
        TurnMarker.run(in: domain, work)
        holdTurnUntilLaneIsEmpty()
    }

    /// Whether a run waits for a thread that holds the turn outside a run (for tests of the turn).
    var runIsWaitingForTheTurn: Bool { dispatchState.withLock { $0.runWaiter != nil } }

    /// Whether the calling thread works in the radio's turn now.
    public var isExecuting: Bool { TurnMarker.current == domain }

    /// Runs what waits in the lane on this thread, which holds the turn outside a run, then lets the turn go (to
    /// a run waiting for it, if any).
    private func holdTurnUntilLaneIsEmpty() {
        while true {
            let next = dispatchState.withLock { s -> Executed? in
                if let next = s.lane.popFirst() { return next }
                if let waiter = s.runWaiter {
                    s.runWaiter = nil
                    s.turn = .run
                    waiter.resume()
                } else {
                    s.turn = .free
                }
                return nil
            }
            guard let next else { return }
            TurnMarker.run(in: domain, next.work)
        }
    }

    /// A run takes the turn, once a thread that holds it outside the run lets it go.
    private func takeTurnForRun() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = dispatchState.withLock { s -> Bool in
                guard s.turn == .free else {
                    s.runWaiter = continuation
                    return false
                }
                s.turn = .run
                return true
            }
            if now { continuation.resume() }
        }
    }

    /// A callback outside a run: on its queue at once, counted until it ends.
    private func runOnItsQueue(_ work: @escaping @Sendable () -> Void, on queue: DispatchQueue) {
        queue.async {
            work()
            self.dispatchFinished()
        }
    }

    /// A callback ended.
    private func dispatchFinished() {
        let waiter = dispatchState.withLock { s -> CheckedContinuation<Void, Never>? in
            s.outstanding -= 1
            guard s.outstanding == 0 || !s.queued.isEmpty else { return nil }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Marks the main queue: `DispatchQueue.main` is a new wrapper object at each use on Linux, so `===` cannot
    /// tell it (a queue that only targets the main queue is not recognised, and is waited for with `sync`).
    private static let mainQueueKey: DispatchSpecificKey<Void> = {
        let key = DispatchSpecificKey<Void>()
        DispatchQueue.main.setSpecific(key: key, value: ())
        return key
    }()

    /// Runs a callback dispatched during the run, on its queue, and waits for it.
    private func runInTurn(_ work: @escaping @Sendable () -> Void, on queue: DispatchQueue) async {
        if queue.getSpecific(key: Self.mainQueueKey) != nil {
            // The main queue's work runs on the main thread only: never `sync` to it from the main thread, and
            // do not hold another thread while the main thread gets to it.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                queue.async { [self] in
                    TurnMarker.run(in: domain, work)
                    done.resume()
                }
            }
        } else {
            queue.sync { TurnMarker.run(in: domain, work) }
        }
        dispatchState.withLock { $0.outstanding -= 1 }
    }

    /// The run is over: callbacks dispatched after its last settling (from other threads, while the loop was
    /// returning) go to their queues now, in order, as they would have outside a run.
    private func endRun() {
        let (stranded, laneLeft) = dispatchState.withLock { s -> (Deque<Callback>, Bool) in
            s.running = false
            // Work executed from outside while the loop was returning runs now, on this thread, in the turn.
            s.turn = s.lane.isEmpty ? .free : .idle
            defer { s.queued = [] }
            return (s.queued, !s.lane.isEmpty)
        }
        for callback in stranded { runOnItsQueue(callback.work, on: callback.queue) }
        if laneLeft { holdTurnUntilLaneIsEmpty() }
    }

    /// Waits until a callback dispatched outside the run ends, or one is dispatched in turn.
    private func awaitDispatches() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = dispatchState.withLock { s in
                if s.outstanding == 0 || !s.queued.isEmpty { return true }
                s.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// A packet from a host: queued for when its bytes have crossed the host link (at once on an ideal one),
    /// after everything already due then.
    func hostSent(controller index: Int, _ packet: HCIPacket) {
        world.withLock { w in
            let c = w.controllers[index]
            let arrival = VirtualTime.after(max(w.now, c.hostToControllerFree), c.hostLink.transferTime(of: packet))
            if c.hostLink != .ideal { c.hostToControllerFree = arrival }
            _ = w.clock.schedule(at: arrival, .hostPacket(controller: index, packet))
        }
    }

    // MARK: Running

    /// Processes every event due in the next `duration` of virtual time; returns with `now` advanced by it.
    /// Virtual time ends at `Int64.max / 2` nanoseconds (about 146 years): a run or a delay past it stops there.
    public func run(for duration: Duration, pacing: SimulationPacing = .asFastAsPossible) async throws {
        try await run(until: Self.later(now, by: duration), pacing: pacing)
    }

    /// Processes every event due up to `deadline` (virtual time since the radio started), in (time,
    /// sequence) order, waiting after each for the callbacks it dispatched; returns with `now == deadline`
    /// (or later, if `deadline` had already passed). Throws `CancellationError` if the task is cancelled.
    public func run(until deadline: Duration, pacing: SimulationPacing = .asFastAsPossible) async throws {
        _ = try await run(until: deadline, pacing: pacing, stoppingWhen: nil)
    }

    /// Runs for at most `limit` of virtual time, and stops as soon as `condition` holds once everything due at
    /// that instant has settled (checked before the first event and after each one); returns whether it did.
    /// Virtual time then stays at that instant rather than moving on to the end of `limit`. The condition is
    /// read on the run loop, between events, when no callback or radio task is running.
    @discardableResult
    public func run(
        for limit: Duration, until condition: @escaping () -> Bool, pacing: SimulationPacing = .asFastAsPossible
    ) async throws -> Bool {
        try await run(until: Self.later(now, by: limit), pacing: pacing, stoppingWhen: condition)
    }

    /// `time + span` in whole nanoseconds, saturating: a run "forever" (`.seconds(Int64.max)`) cannot overflow.
    static func later(_ time: Duration, by span: Duration) -> Duration {
        VirtualTime.duration(VirtualTime.after(VirtualTime.nanos(time), VirtualTime.nanos(span)))
    }

    /// The longest a real-time run sleeps before looking at its agenda again.
    static let realtimeStep = Duration.milliseconds(10)

    private func run(
        until deadline: Duration, pacing: SimulationPacing, stoppingWhen condition: (() -> Bool)?
    ) async throws -> Bool {
        let claimed = dispatchState.withLock { s in
            if s.running { return false }
            s.running = true
            return true
        }
        guard claimed else { throw SimulationError.alreadyRunning }
        await takeTurnForRun()
        defer { endRun() }

        let end = VirtualTime.nanos(deadline)
        let wallStart = ContinuousClock.now
        let virtualStart = world.withLock { $0.now }
        var effects: [RadioEffect] = []
        await settle()
        while true {
            if let condition, condition() { return true }
            try Task.checkCancellation()
            if pacing == .realtime {
                let next = world.withLock { w in min(w.clock.nextTime() ?? end, end) }
                let target = wallStart + VirtualTime.duration(max(0, next - virtualStart))
                let wallNow = ContinuousClock.now
                if target > wallNow {
                    // In steps of at most 10 ms: work scheduled meanwhile from outside the radio (a host on its own
                    // scheduler, over a transport) is looked at within 10 ms, not when the next event was due.
                    let step = min(target, wallNow + Self.realtimeStep)
                    try await Task.sleep(until: step, clock: .continuous)
                    if step < target {
                        // What was dispatched from outside meanwhile (an app's call on its own thread) runs now.
                        await settle()
                        continue
                    }
                }
            }
            // The effects' array goes back and forth between the world and the loop, keeping its room (a new
            // array per event was two allocations of a notification's fifty).
            let processed = world.withLock { w in
                guard let entry = w.clock.popDue(notAfter: end) else {
                    w.clock.advance(to: end)
                    return false
                }
                w.process(entry.payload)
                swap(&w.effects, &effects)
                return true
            }
            guard processed else { break }
            if !effects.isEmpty {
                perform(effects)
                effects.removeAll(keepingCapacity: true)
            }
            await settle()
        }
        return condition?() ?? false
    }

    /// Waits until nothing is left to do at this instant: no dispatched callback outstanding and no job of a
    /// task on the radio's executor queued. Callbacks and jobs run here, on the run loop, one at a time in the
    /// order they came; what they do (requests, more callbacks, more jobs) is settled before time moves on.
    private func settle() async {
        enum Next {
            case callback(DispatchQueue, @Sendable () -> Void)
            case executed(@Sendable () -> Void)
            case job(UnownedJob)
            case wait
            case done
        }
        while true {
            let next = dispatchState.withLock { s -> Next in
                if let callback = s.queued.popFirst() { return .callback(callback.queue, callback.work) }
                // Callbacks dispatched before the run began finish first, as before any job: a task's requests
                // and theirs reach the agenda in the order they were made.
                guard s.outstanding == 0 else { return .wait }
                if let executed = s.lane.popFirst() { return .executed(executed.work) }
                if let job = s.jobs.popFirst() { return .job(job) }
                return .done
            }
            switch next {
            case .callback(let queue, let work): await runInTurn(work, on: queue)
            case .executed(let work): TurnMarker.run(in: domain, work)
            case .job(let job): TurnMarker.run(in: domain) { job.runSynchronously(on: asUnownedTaskExecutor()) }
            case .wait: await awaitDispatches()
            case .done: return
            }
        }
    }

    private func perform(_ effects: [RadioEffect]) {
        TurnMarker.run(in: domain) { performInTurn(effects) }
    }

    private func performInTurn(_ effects: [RadioEffect]) {
        let trace = traceHandler.withLock { $0 }
        let time = trace == nil ? .zero : now
        for effect in effects {
            switch effect {
            case .fromHost(let name, let packet):
                trace?.call(time, name, .hostToController, packet)
            case .toHost(let pipe, let name, let packet):
                trace?.call(time, name, .controllerToHost, packet)
                pipe.deliverToHost(packet)
            case .run(let work):
                work()
            case .close(let pipe, let reason):
                pipe.closeFromController(reason: reason)
            case .air(let packet):
                airCapture.withLock { $0 }?.write(packet, now: world.withLock { $0.now })
            }
        }
    }
}

// MARK: - The radio as a task executor

/// Async code under the radio's clock: a task started with `Task(executorPreference: radio)` (and its child
/// tasks, and every continuation it awaits) runs its jobs on the radio's run loop, between events, and virtual
/// time does not move while one is queued. A scenario written with async/await and driven by one plain
/// `radio.run(for:)` therefore finishes within the run, and the same seed gives the same trace.
///
/// What stays outside the radio's knowledge: a plain `Task {}` (it runs on the global executor, in wall-clock
/// time, while the radio may move on), `@MainActor` code and other actors (they run on their own executors; a
/// call into one leaves the radio until it returns, and the radio does not wait for it). Bring such work in by
/// starting it as a task that prefers the radio, or by awaiting it from one. Do not call `run` from a task on
/// the radio's executor: the run loop is what runs those tasks.
///
/// A task on the radio that loops on `Task.yield()` keeps the run loop busy at one instant for ever: wait for
/// an event instead, or for virtual time with `sleep(for:)` (every `HostScheduler` has it; the radio's counts
/// virtual time).
extension SimulatedRadio: TaskExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        dispatchState.withLock { $0.jobs.append(unowned) }
        // A run loop waiting for dispatched callbacks re-checks once they are done; nothing to wake here.
    }

    /// Suspends the calling task for `duration` of virtual time (`Task.sleep` measures wall-clock time, which
    /// the radio does not follow). Throws `CancellationError` at once if the task is or becomes cancelled. The
    /// radio's own name for `HostScheduler.sleep(for:)`, so that `import BLE` alone reaches it.
    public func sleep(for duration: Duration) async throws {
        try await (self as any HostScheduler).sleep(for: duration)
    }
}

/// Cancels a host timer on the radio.
struct RadioScheduledWork: ScheduledWork {
    let radio: SimulatedRadio
    let sequence: UInt64
    func cancel() { radio.cancel(sequence: sequence) }
}
