import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import BLETransport
import Foundation
import Logging
import Synchronization

// Apps: termination, the managers kept for restoration and their transfer, the modes that follow each app's
// lifecycle.

extension SystemCore {
    // MARK: Apps

    /// A manager of an app being terminated, known by its session object's identity.
    package typealias RestorationCandidate = BLESystem.RestorationCandidate<ObjectIdentifier>

    /// Which of `app`'s managers a termination by `cause` would keep for its restoration
    /// (`RestorationTable.keeps`): asked before the termination, so that the managers are kept before anything
    /// can reach them as ended.
    package func restorationKeeps(_ app: SystemApp, cause: AppTermination, candidates: [RestorationCandidate])
        -> [RestorationCandidate]
    {
        let modes = app.backgroundModes
        return state.withLock { s in
            let kept = Set(
                RestorationTable.keeps(cause, modes: modes, candidates: s.bySession(candidates)).map(\.manager))
            return candidates.filter { s.ids[$0.manager].map(kept.contains) == true }
        }
    }

    /// Ends `app` (`cause`: who ended it), keeping `keeping` (`restorationKeeps`): nothing reaches its other
    /// managers any more, and each lets go of what it holds in the system (scans, links, services, advertising)
    /// and is unregistered; the system goes on with the kept ones' work on the app's behalf (what reaches a kept
    /// central manager is noted), until a restored manager takes it over (`replaceKept`, a peripheral manager's
    /// `transfer`). Returns the managers an earlier termination kept that this one lets go
    /// of (a force-quit ends them), still registered: the caller releases them. Its launch handler's object is
    /// the caller's to release.
    package func terminate(_ app: SystemApp, cause: AppTermination, keeping: [RestorationCandidate])
        -> [ObjectIdentifier]
    {
        let report = app.stop()
        let (services, released) = step { s -> (([AttributeHandle], [ObjectIdentifier]), [SystemAction]) in
            let candidates = s.bySession(keeping)
            let kept = Set(candidates.map(\.manager))
            // Their services are taken out here, on the caller's thread, as a manager released takes its own out:
            // before the app's next launch publishes anything, and before the managers hear of the end.
            var services: [AttributeHandle] = []
            for id in s.machine.sessions(of: app.id) where !kept.contains(id) {
                services += s.machine.servicesRemoved(of: id)
            }
            // The machine lets go of the terminated managers' links and subscriptions.
            let (actions, released) = s.machine.appTerminated(app.id, cause: cause, keeping: candidates)
            for case .deliver(let id, .appTerminated) in actions { s.detach(id, leaving: true) }
            // Then the app is not running: the managers kept for it scan and advertise in that app's modes.
            return (
                (services, released.compactMap { s.sinks[$0]?.object }), actions + s.machine.appChanged(app.id, report)
            )
        }
        for handle in services { host.removeService(at: handle) }
        return released
    }

    // MARK: Restoration

    /// A restarted system keeps `manager` (registered) for its app, not running, under `restoreIdentifier`, with
    /// the work its record names (a central's pending connects and scan, a peripheral manager's services and
    /// advertisement), started when the controller is on.
    package func keepForRestoration(
        _ manager: ObjectIdentifier, restoreIdentifier: String, work: RestorationTable.Resume? = nil
    ) {
        step { s in
            guard let id = s.ids[manager] else { return ((), []) }
            return ((), s.machine.keptForRestoration(id, restoreIdentifier: restoreIdentifier, work: work))
        }
    }

    /// The advertisement a restarted system keeps for a peripheral manager (`RestorationTable.Resume`), in the
    /// forms `content` takes (as asked, and its background form).
    package func resumedAdvertisement(_ content: AdvertisingContent) -> RestorationTable.Resume.Advertisement {
        .init(
            request: content.request,
            background: content.backgroundRequest(interval: appRules.backgroundAdvertisingInterval))
    }

    /// A kept manager taken over by a new one: the kept manager, what was noted for it so far, in order, and the
    /// state it was last told.
    package struct Taken: Sendable {
        package var manager: ObjectIdentifier
        package var notes: [SessionEvent]
        package var power: SystemPowerState
    }

    /// The manager kept for `app` in `role` under `restoreIdentifier`, taken over by a new one (nil: none). Its
    /// notes go on being noted until `replaceKept` (a central's) or `replace` (a peripheral's).
    package func takeKept(_ app: SystemApp, role: SessionRole, restoreIdentifier: String) -> Taken? {
        state.withLock { s in
            guard let (id, notes) = s.machine.takeKept(app.id, role: role, restoreIdentifier: restoreIdentifier),
                let object = s.sinks[id]?.object
            else { return nil }
            return Taken(manager: object, notes: notes, power: s.machine.told(id) ?? .unknown)
        }
    }

    /// Runs `work` in the controller's serial domain, where every delivery, timer and completion is performed (at
    /// once when the caller is in it: `HostScheduler.execute`).
    package func inDomain(_ work: @escaping @Sendable () -> Void) {
        scheduler.execute(work)
    }

    /// The state managers see now.
    package var visiblePower: SystemPowerState { state.withLock { $0.machine.visible } }

    /// Whether something that would wake `app` reached a manager kept for it.
    package func keptWoke(_ app: SystemApp) -> Bool {
        state.withLock { $0.machine.restoration.woke(app.id) }
    }

    /// What relaunches an app for restoration, by id (`SystemAction.relaunch`).
    package func onRelaunch(_ handler: @escaping @Sendable (String) -> Void) {
        relaunchHandler.withLock { $0 = handler }
    }

    /// `app`'s launch handler ran: the managers kept for it that the launch did not take over, to be released.
    package func launched(_ app: SystemApp) -> [ObjectIdentifier] {
        state.withLock { s in s.machine.launched(app.id).compactMap { s.sinks[$0]?.object } }
    }

    /// Bluetooth was turned off in Settings: every kept manager, to be released.
    package func restorationSwitchedOff() -> [ObjectIdentifier] {
        state.withLock { s in s.machine.restorationSwitchedOff().compactMap { s.sinks[$0]?.object } }
    }

    /// The restore identifiers kept for `app` in `role`, sorted.
    package func keptRestoreIdentifiers(of app: SystemApp, role: SessionRole) -> [String] {
        state.withLock { $0.machine.restoration.restoreIdentifiers(of: app.id, role: role) }
    }

    /// What a relaunch of `app` for restoration names (nil: nothing is kept for it).
    package func relaunchOptions(of app: SystemApp) -> (centrals: [String], peripherals: [String])? {
        state.withLock { $0.machine.restoration.relaunchOptions(of: app.id) }
    }

    /// How `app` last stopped, if it was terminated.
    package func lastTermination(of app: SystemApp) -> AppTermination? {
        state.withLock { $0.machine.restoration.lastTermination[app.id] }
    }

    // MARK: Alerts

    /// A central manager asking for the power alert was made (`SystemMachine.powerAlert`).
    package func powerAlert(for client: ObjectIdentifier) {
        let now = scheduler.now
        state.withLock { s in
            guard let id = s.ids[client] else { return }
            s.machine.powerAlert(for: id, at: now)
        }
    }

    /// The alerts shown so far, oldest first.
    package var alerts: [AlertRecord] { state.withLock { $0.machine.alerts.shown } }

    /// The managers registered for `app`.
    package func sessions(of app: SystemApp) -> [any SystemSession] {
        state.withLock { s in s.machine.sessions(of: app.id).compactMap { s.sinks[$0]?.session } }
    }

    /// A restored peripheral manager takes over what `old` (kept for its terminated app) holds: its services and
    /// its advertisement. `old` stays registered until `replace(_:with:app:)` puts `new` in its place.
    /// `advertisingStarted` and `advertisingEnded` replace the kept manager's callbacks for its advertisement.
    package func transfer(
        fromPeripheral old: any SystemSession, to new: any SystemSession,
        advertisingStarted: @escaping @Sendable (Result<Void, HostError>) -> Void,
        advertisingEnded: @escaping @Sendable (HostError) -> Void
    ) {
        state.withLock { s in
            guard let oldSession = s.ids[ObjectIdentifier(old)] else { return }
            // Known by its id from now on: the requests for its services reach it before `replace`.
            let newSession = s.reserve(new, app: s.sinks[oldSession]?.app ?? defaultApp)
            s.machine.servicesTransferred(from: oldSession, to: newSession)
            // Its advertisement is the new one's, and so are the answers still to come for it, those already on
            // their way included.
            _ = s.machine.advertisingTransferred(from: oldSession, to: newSession)
            for (id, caller) in s.advertisingStarts where caller.session == oldSession {
                s.advertisingStarts[id] = Caller(session: newSession, tell: advertisingStarted)
            }
            for (id, caller) in s.advertisingEnds where caller.session == oldSession {
                s.advertisingEnds[id] = Caller(session: newSession, tell: advertisingEnded)
            }
            // The system's own (a restarted system's kept advertisement): told to `new` as events.
            s.resumedAdvertising = s.resumedAdvertising.mapValues { $0 == oldSession ? newSession : $0 }
        }
    }

    /// Whether a manager is registered (not unregistered, nor of a terminated app).
    func isLive(_ id: ObjectIdentifier) -> Bool {
        appOf(id) != nil
    }

    /// The app of a registered manager.
    func appOf(_ id: ObjectIdentifier) -> SystemApp? {
        state.withLock { s in s.ids[id].flatMap { s.sinks[$0]?.app } }
    }

    /// An app reported a change of its lifecycle or background modes: the machine takes it at once (a call made
    /// after it on this thread sees it), and what follows (its scans' and advertisement's new modes) is performed
    /// from the scheduler, never inside the delivery or the call that caused the change (their locks may be held
    /// there).
    func appChanged(_ app: String, _ report: AppTable.App) {
        let inDomain = scheduler.isExecuting
        let drain = state.withLock { s in
            s.outbox.append(contentsOf: s.machine.appChanged(app, report), inDomain: false)
        }
        // From outside the domain, a drain is had there as for any call (`start`); in it (a wake, a suspension),
        // one is scheduled, so that it runs after what caused the change.
        if drain == .scheduled, inDomain {
            scheduler.schedule(after: .zero) { [weak self] in self?.scheduledDrain() }
        } else {
            start(drain)
        }
    }
}
