import BLECore
import BLEHCI
import BLEHost
import BLETransport
import Dispatch
import Synchronization
import Testing

@testable import BLESystem

/// `SystemCore`'s outbox: what the machine and the host tell the managers waits in the controller's serial
/// domain, so a restoration (`transfer`, then `replace`) can come between a step and the drain that performs
/// it. What was queued for the kept manager (the machine's deliveries, a notification on its link among them) must
/// reach its successor: none of it may reach neither.
@Suite struct SystemCoreOutboxTests {
    static let peer = BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice)
    /// A system on a domain that runs only when the test says (`HeldDomain.runAll`), with no controller.
    fileprivate static func core(_ name: String) throws -> (HeldDomain, SystemCore) {
        let domain = HeldDomain()
        let core = SystemCore(
            name: name, transport: HCIPipe().hostEnd, scheduler: domain,
            store: try SystemStore(path: nil, seed: 1, now: { 0 }))
        return (domain, core)
    }

    static let link = LinkInfo(
        handle: ConnectionHandle(7), role: .central, peer: peer, interval: 24, latency: 0, supervisionTimeout: 400)

    /// A kept manager is told nothing: what reaches it is noted, the first event that wakes its app relaunches it,
    /// and the manager that restores it gets the notes in order: those before it took over as it takes it (to
    /// apply to the kept one), then, once in its place, those noted while it took over and what was still
    /// queued, before anything later.
    @Test func whatReachesAKeptManagerIsNotedAndReachesTheOneRestoredInItsPlaceInOrder() throws {
        let (domain, core) = try Self.core("outbox")
        let relaunched = Mutex<[String]>([])
        core.onRelaunch { id in relaunched.withLock { $0.append(id) } }
        let app = core.app(id: "restored")
        let kept = RecordingSession()
        core.register(kept, app: app)
        #expect(core.connect(kept, to: Self.peer) == nil)
        core.keepForRestoration(ObjectIdentifier(kept), restoreIdentifier: "r")
        domain.runAll()
        // The controller connects: noted, and the app relaunched for it.
        core.handle(.connected(Self.link))
        domain.runAll()
        #expect(relaunched.withLock { $0 } == ["restored"])
        func value(_ byte: UInt8) -> HostEvent {
            .valueUpdated(Self.link.handle, attribute: AttributeHandle(3), value: [byte], isIndication: false)
        }
        let taken = try #require(core.takeKept(app, role: .central, restoreIdentifier: "r"))
        #expect(taken.manager == ObjectIdentifier(kept))
        #expect(taken.notes == [.linkAttached(Self.link)])
        // While the restored manager takes over: one notification noted, one still queued.
        let first = value(1)
        domain.execute { core.handle(first) }
        domain.runAll()
        core.handle(value(2))
        let restored = RecordingSession()
        core.replaceKept(kept, with: restored, app: app, scan: nil)
        core.handle(value(3))
        domain.runAll()

        #expect(kept.log.isEmpty, "the kept manager was told \(kept.log)")
        #expect(restored.log == ["value 1", "value 2", "value 3"], "\(restored.log)")
        #expect(relaunched.withLock { $0 } == ["restored"], "relaunched once")
        // And the link is the restored manager's: its end reaches it.
        core.handle(.disconnected(Self.link.handle, reason: .connectionTimeout))
        domain.runAll()
        #expect(restored.log.last == "down 7", "\(restored.log)")
    }
}

extension SystemCoreOutboxTests {
    /// A restorer tells the state it sees, then takes the kept manager's place: when the state changed in between
    /// (Bluetooth switched off from another thread), it is told the new one, and not when nothing changed.
    @Test func aRestorerToldAStateThatChangedBeforeItTookThePlaceIsToldTheNewOne() throws {
        for switchedOff in [false, true] {
            let (domain, core) = try Self.core("told")
            core.setPower(.poweredOn)
            let app = core.app(id: "server")
            let kept = RecordingSession()
            core.register(kept, app: app, role: .peripheral)
            domain.runAll()
            if switchedOff { core.setBluetoothEnabled(false) }
            let restored = RecordingSession()
            core.replace(kept, with: restored, app: app, role: .peripheral, told: .poweredOn)
            domain.runAll()
            let told = restored.log.filter { $0.hasPrefix("power") }
            #expect(told.count == (switchedOff ? 1 : 0), "\(restored.log)")
            #expect(told.allSatisfy { $0.hasPrefix("power poweredOff") })
        }
    }

    /// What a take-over steps in the domain is performed after it (`holdingDrains`), in order: a notification
    /// routed meanwhile reaches its manager only then.
    @Test func whatIsSteppedWhileDrainsAreHeldIsPerformedAfter() throws {
        let (domain, core) = try Self.core("held")
        let manager = RecordingSession()
        core.register(manager)
        #expect(core.connect(manager, to: Self.peer) == nil)
        core.handle(.connected(Self.link))
        domain.runAll()
        let logged = Mutex<[[String]]>([])
        domain.execute {
            core.holdingDrains {
                core.handle(
                    .valueUpdated(Self.link.handle, attribute: AttributeHandle(3), value: [9], isIndication: false))
                logged.withLock { $0.append(manager.log) }
            }
            logged.withLock { $0.append(manager.log) }
        }
        domain.runAll()
        #expect(logged.withLock { $0 } == [["attached 7"], ["attached 7", "value 9"]])
    }
}

extension SystemCoreOutboxTests {
    /// A manager kept as its app is terminated is told no more notifications on its link, though who the link's
    /// notifications reach was kept from the one before (the route is made again once the manager is noted for).
    @Test func aNotificationForAManagerKeptAsItsAppEndsIsNotedNotTold() throws {
        let (domain, core) = try Self.core("kept")
        let relaunched = Mutex<[String]>([])
        core.onRelaunch { id in relaunched.withLock { $0.append(id) } }
        let app = core.app(id: "ended")
        app.setBackgroundModes([.bluetoothCentral])
        let kept = RecordingSession()
        core.register(kept, app: app)
        #expect(core.connect(kept, to: Self.peer) == nil)
        core.handle(.connected(Self.link))
        let notification = HostEvent.valueUpdated(
            Self.link.handle, attribute: AttributeHandle(3), value: [1], isIndication: false)
        domain.execute { core.handle(notification) }
        domain.runAll()
        #expect(kept.log == ["attached 7", "value 1"])
        let candidate = SystemCore.RestorationCandidate(
            manager: ObjectIdentifier(kept), role: .central, restoreIdentifier: "r", restorable: true)
        let keeping = core.restorationKeeps(app, cause: .bySystem, candidates: [candidate])
        #expect(keeping == [candidate])
        #expect(core.terminate(app, cause: .bySystem, keeping: keeping).isEmpty)
        domain.execute { core.handle(notification) }
        domain.runAll()
        #expect(kept.log == ["attached 7", "value 1"], "the kept manager was told \(kept.log)")
        // Not subscribed: nothing to relaunch the app for; noted all the same.
        #expect(relaunched.withLock { $0 }.isEmpty)
        #expect(core.takeKept(app, role: .central, restoreIdentifier: "r")?.notes.count == 1)
    }
}

extension SystemCoreOutboxTests {
    /// The notification path in the domain, when nothing waits (performed at once, with who is on the link kept
    /// from one notification to the next): each notification reaches the managers on its link as they are then,
    /// as one joins, one leaves, one is unregistered.
    @Test func notificationsReachTheManagersOnTheLinkAsTheyAreThen() throws {
        let (domain, core) = try Self.core("notify")
        let first = RecordingSession()
        let second = RecordingSession()
        let other = RecordingSession()
        core.register(first)
        core.register(second)
        core.register(other)
        #expect(core.connect(first, to: Self.peer) == nil)
        core.handle(.connected(Self.link))
        domain.runAll()
        let note = HostEvent.valueUpdated(
            Self.link.handle, attribute: AttributeHandle(3), value: [0x2A], isIndication: false)
        func notify() {
            domain.execute { core.handle(note) }
            domain.runAll()
        }
        func counts() -> [Int] {
            [first.log, second.log, other.log].map { $0.filter { $0.hasPrefix("value") }.count }
        }
        notify()
        #expect(counts() == [1, 0, 0])
        #expect(core.connect(second, to: Self.peer) != nil, "the link is up: the second joins it at once")
        notify()
        #expect(counts() == [2, 1, 0])
        _ = core.cancelConnection(first, from: Self.peer)
        notify()
        #expect(counts() == [2, 2, 0])
        core.unregister(second)
        notify()
        #expect(counts() == [2, 2, 0])
        #expect(other.log.isEmpty, "\(other.log)")
    }
}

extension SystemCoreOutboxTests {
    /// A manager whose app ends while host events for it wait in the queue is told its end, and not those events
    /// (a connection event would make it a peripheral for nobody).
    @Test func aTerminatedAppsManagerIsToldItsEndAndNotTheHostsEventsQueuedBefore() throws {
        let (domain, core) = try Self.core("ended")
        let app = core.app(id: "ended")
        let watcher = RecordingSession()
        core.register(watcher, app: app)
        core.watchConnections(watcher)
        domain.runAll()
        // Another app's link comes up; before the domain runs, the watcher's app ends.
        core.handle(.connected(Self.link))
        #expect(core.terminate(app, cause: .bySystem, keeping: []).isEmpty, "nothing was kept to let go of")
        domain.runAll()
        #expect(watcher.log == ["terminated"], "\(watcher.log)")
    }
}

/// A serial domain that runs nothing until the test says: work handed over waits, in order, and runs in
/// `runAll`, marked as in the domain. Time stands still: timers never fire (the host's command timeouts would
/// take the silent controller away).
private final class HeldDomain: HostScheduler {
    private let queue = Mutex<[@Sendable () -> Void]>([])
    private let running = Mutex(false)

    var now: Duration { .zero }

    @discardableResult
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        Nothing()
    }

    /// Queued, as a scheduler must (one that ran it here would run an app's delivery inside the app's lock).
    func dispatch(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        self.queue.withLock { $0.append(work) }
    }

    func execute(_ work: @escaping @Sendable () -> Void) {
        if isExecuting { work() } else { queue.withLock { $0.append(work) } }
    }

    var isExecuting: Bool { running.withLock { $0 } }

    /// Runs what waits, and what that hands over, until nothing does.
    func runAll() {
        running.withLock { $0 = true }
        while let next = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { next() }
        running.withLock { $0 = false }
    }

    private struct Nothing: ScheduledWork {
        func cancel() {}
    }
}

/// A manager as the system sees it, recording what it is told.
private final class RecordingSession: SystemSession {
    private let entries = Mutex<[String]>([])
    var log: [String] { entries.withLock { $0 } }
    private func note(_ line: String) { entries.withLock { $0.append(line) } }

    func apply(_ event: SessionEvent) {
        switch event {
        case .valueUpdated(_, _, let value, _): note("value \(value.first ?? 0)")
        case .linkAttached(let info): note("attached \(info.handle.rawValue)")
        case .linkFailed: note("failed")
        case .linkDown(let handle, _, _): note("down \(handle.rawValue)")
        case .connectionEvent(_, _, let up): note(up ? "peer connected" : "peer disconnected")
        case .appTerminated: note("terminated")
        case .powerChanged(let state): note("power \(state)")
        default: break
        }
    }
}
