import BLESystem
import BLETransport
import Logging
import Synchronization

extension BluetoothSystem {
    /// An app on a system: every manager belongs to one. Apps share the system's controller and store, as apps
    /// share a phone's radio; each manager answers only for what its app asked for or published.
    ///
    /// An app declares background modes and has a lifecycle, which the system applies as iOS does (<doc:IOSRules>,
    /// sections 1–4): a test, a demo or the tool drives it with `launch`, `moveToBackground`, `moveToForeground`
    /// and `terminate`. An app is made running in the foreground (a process already started); one that is
    /// launched through `onLaunch` gets its managers from its launch handler, each launch anew.
    ///
    /// `system.app(id:)` with the same id gives the same app: the objects compare equal and stand for one app.
    public final class App: Sendable, Hashable, CustomStringConvertible {
        public typealias BackgroundMode = AppBackgroundMode
        public typealias State = AppLifecycleState
        public typealias Termination = AppTermination

        /// What a launch hands the launch handler.
        public struct Launch: Sendable {
            /// The app being launched.
            public let app: App
            public let options: LaunchOptions
        }

        /// The launch options of a Bluetooth relaunch (UIKit's `bluetoothCentrals` and `bluetoothPeripherals`
        /// keys): the restore identifiers of the managers the system was doing work for. Empty for a launch by
        /// the user.
        public struct LaunchOptions: Sendable, Hashable {
            public var bluetoothCentrals: [String]
            public var bluetoothPeripherals: [String]
            public init(bluetoothCentrals: [String] = [], bluetoothPeripherals: [String] = []) {
                self.bluetoothCentrals = bluetoothCentrals
                self.bluetoothPeripherals = bluetoothPeripherals
            }
        }

        public let system: BluetoothSystem
        let core: SystemApp

        init(system: BluetoothSystem, core: SystemApp) {
            self.system = system
            self.core = core
        }

        /// The app's identifier (a bundle identifier, on a phone).
        public var id: String { core.id }

        /// The background modes it declared.
        public var backgroundModes: Set<BackgroundMode> { core.backgroundModes }

        /// Where it is in its life.
        public var state: State { core.lifecycle }

        /// Events held for it while it is suspended, to be delivered when it wakes or comes to the foreground.
        public var heldEvents: Int { core.heldEvents }

        /// Sets what runs at each launch: the first, and every relaunch after a termination. The handler makes the
        /// app's managers and returns the object that keeps them (the app delegate, say); the system keeps that
        /// object until the app is terminated, then lets go of it.
        public func onLaunch(_ handler: @escaping @Sendable (Launch) -> any Sendable) {
            let waiting =
                system.withRuntime(of: id) { r -> Bool in
                    r.handler = handler
                    return r.kept.values.contains { $0.hasRestorationEvents }
                } || system.core.keptWoke(core)
            // Work kept for it bore fruit before it had a launch handler (a restarted system): relaunched now.
            if waiting { system.relaunchForRestoration(self) }
        }

        /// The user opens the app: a launch when it is not running (or was never launched: its launch handler
        /// runs), and in every case the foreground, where what was held for it is delivered in order.
        public func launch() {
            launch(options: LaunchOptions(), inBackground: false)
        }

        /// The app leaves the screen. It runs on for the system's `appRules.suspendAfter`, then it is suspended;
        /// with a background mode, the system wakes it for each event of that role, for `appRules.wakeBudget`.
        public func moveToBackground() {
            core.enterBackground()
        }

        /// The app comes back on screen (it must be running: `launch` starts one that is not); what was held for
        /// it is delivered first, in order.
        public func moveToForeground() {
            guard core.lifecycle != .notRunning else {
                BluetoothSystem.logger.warning(
                    "moveToForeground of an app that is not running does nothing: launch it", metadata: ["app": "\(id)"]
                )
                return
            }
            core.enterForeground(launching: false)
        }

        /// Ends the app: its managers, peripherals and delegates are let go of and nothing reaches them again,
        /// even those something else still holds; their scans, connections, services and advertising end.
        ///
        /// Terminated by the system or by a crash (not by the user), an app with `bluetooth-central` keeps its
        /// central managers that have a restore identifier and work the system can carry on (a scan for services,
        /// a link, a pending connection): the system goes on with it and relaunches the app in the background
        /// when it bears fruit (state restoration, <doc:IOSRules> 5e and 6.3–6.5).
        public func terminate(_ cause: Termination) {
            // The system holds the managers' sessions, and a session its manager weakly: the managers are held
            // here until the end.
            let managers = system.core.sessions(of: core).compactMap(KeptManager.init)
            var byObject: [ObjectIdentifier: KeptManager] = [:]
            for manager in managers { byObject[manager.object] = manager }
            let candidates = managers.map(\.candidate)
            // Which are kept is the system's rule; they are kept before the end, so nothing reaches them as ended.
            let keeping = system.core.restorationKeeps(core, cause: cause, candidates: candidates)
            for candidate in keeping { byObject[candidate.manager]?.preserve() }
            let launched = system.withRuntime(of: id) { r -> (any Sendable)? in
                for candidate in keeping { r.kept[candidate.manager] = byObject[candidate.manager] }
                defer { r.launched = nil }
                return r.launched
            }
            let released = system.core.terminate(core, cause: cause, keeping: keeping)
            system.release(released, of: id)
            // An event a kept manager took itself as the app ended (before the system noted what reaches it)
            // relaunches the app as a noted one would.
            if keeping.contains(where: { byObject[$0.manager]?.hasRestorationEvents == true }) {
                system.relaunchForRestoration(self)
            }
            // A force-quit ends state restoration for the app, also across a restart: forgotten once its managers
            // are off the system, so no late event of theirs writes it again.
            if cause == .byUser { system.forgetPreserved(of: id) }
            // Tasks that awaited the app's managers end: nothing is delivered to them any more.
            for manager in managers { manager.abandonAsyncWork() }
            // The launch handler's object goes last, outside every lock: its managers' deinit takes them.
            withExtendedLifetime(launched) {}
        }

        /// The restore identifiers of the central managers the system keeps for this app while it is not running.
        public var keptCentralManagers: [String] { system.core.keptRestoreIdentifiers(of: core, role: .central) }

        /// The restore identifiers of the peripheral managers the system keeps for this app while it is not
        /// running.
        public var keptPeripheralManagers: [String] {
            system.core.keptRestoreIdentifiers(of: core, role: .peripheral)
        }

        /// How it last stopped, if it was terminated.
        public var lastTermination: Termination? { system.core.lastTermination(of: core) }

        func launch(options: LaunchOptions, inBackground: Bool) {
            let needed = core.needsLaunch
            if inBackground {
                core.launchInBackground()
            } else {
                core.enterForeground(launching: true)
            }
            guard needed, let handler = system.withRuntime(of: id, { $0.handler }) else { return }
            let object = handler(Launch(app: self, options: options))
            let replaced = system.withRuntime(of: id) { r -> (any Sendable)? in
                defer { r.launched = object }
                return r.launched
            }
            // What the launch did not take over (no manager made with its restore identifier) is let go of: the
            // system stops the work it kept (and refuses the requests it held) for nobody.
            system.release(system.core.launched(core), of: id)
            withExtendedLifetime(replaced) {}
        }

        /// Notifications and repeated discoveries dropped because the app was more than 4,096 events behind
        /// (its queue stuck or slower than the radio); logged as a warning when dropping starts and when the
        /// app catches up. Other events are never dropped.
        public var droppedEvents: Int { core.droppedEvents }

        public static func == (a: App, b: App) -> Bool { a.core === b.core }
        public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(core)) }
        public var description: String { "<App \(id) on \(system.name)>" }
    }

    /// What the system keeps of an app beyond its `SystemApp`: its launch handler, the object its last launch
    /// returned, and the managers kept for its restoration (which they are is the system machine's:
    /// `RestorationTable`; they are held here, since the system holds its managers weakly).
    struct AppRuntime: Sendable {
        var handler: (@Sendable (App.Launch) -> any Sendable)?
        var launched: (any Sendable)?
        var kept: [ObjectIdentifier: KeptManager] = [:]
    }

    /// A manager of either role, as an app's end and its restoration see it (one kept is held in `AppRuntime`).
    enum KeptManager: Sendable {
        case central(CentralManager)
        case peripheral(PeripheralManager)

        /// The manager behind a session the system holds (nil for a session of neither role).
        init?(_ session: any SystemSession) {
            if let manager = (session as? CentralSession)?.manager {
                self = .central(manager)
            } else if let manager = (session as? PeripheralSession)?.manager {
                self = .peripheral(manager)
            } else {
                return nil
            }
        }

        /// What the system knows the manager by.
        var session: any SystemSession {
            switch self {
            case .central(let manager): manager.session
            case .peripheral(let manager): manager.session
            }
        }

        var object: ObjectIdentifier { ObjectIdentifier(session) }

        /// The manager as the restoration rules see it.
        var candidate: SystemCore.RestorationCandidate {
            switch self {
            case .central(let m):
                .init(
                    manager: object, role: .central, restoreIdentifier: m.restoreIdentifier,
                    restorable: m.hasRestorableWork)
            case .peripheral(let m):
                .init(
                    manager: object, role: .peripheral, restoreIdentifier: m.restoreIdentifier,
                    restorable: m.hasRestorableWork)
            }
        }

        var preservationKey: PreservedManager.Key? {
            switch self {
            case .central(let manager): manager.preservationKey
            case .peripheral(let manager): manager.preservationKey
            }
        }

        /// Whether something that would wake the app reached the kept manager itself (only as its app was being
        /// terminated, or among notes it absorbed when a take-over found the app ended again: what comes later
        /// the system notes, `SystemCore.keptWoke`).
        var hasRestorationEvents: Bool {
            switch self {
            case .central(let manager): manager.hasRestorationEvents
            case .peripheral(let manager): manager.hasRestorationEvents
            }
        }

        func preserve() {
            switch self {
            case .central(let manager): manager.preserve()
            case .peripheral(let manager): manager.preserve()
            }
        }

        func abandonAsyncWork() {
            switch self {
            case .central(let manager): manager.abandonAsyncWork()
            case .peripheral(let manager): manager.abandonAsyncWork()
            }
        }
    }

    /// Lets go of kept managers of `app` that nothing will restore (the system's answer: `managers`): each gives
    /// up its work in the system, as a terminated app's managers do, in the order given.
    func release(_ managers: [ObjectIdentifier], of app: String) {
        guard !managers.isEmpty else { return }
        let kept = withRuntime(of: app) { r in managers.compactMap { r.kept.removeValue(forKey: $0) } }
        for manager in kept {
            if let key = manager.preservationKey { forgetPreserved(key, owner: manager.object) }
            manager.session.apply(.appTerminated)
            core.unregister(manager.session)
        }
    }

    /// Every app's kept managers are let go of (Bluetooth turned off in Settings: nothing is restored after it).
    func releaseAllKept() {
        let released = core.restorationSwitchedOff()
        let apps = runtimes.withLock { Array($0.keys) }
        for app in apps.sorted() { release(released, of: app) }
    }

    /// Takes the peripheral manager kept for `app` under `restoreIdentifier`, for a new one to restore from.
    func takeKeptPeripheral(of app: App, restoreIdentifier: String)
        -> (kept: PeripheralManager, notes: [SessionEvent])?
    {
        guard let (kept, taken) = takeKept(of: app, role: .peripheral, restoreIdentifier),
            case .peripheral(let manager) = kept
        else { return nil }
        return (manager, taken.notes)
    }

    /// Takes the central manager kept for `app` under `restoreIdentifier`, for a new one to restore from: the kept
    /// manager, what the system noted for it so far, and the state it was last told.
    func takeKeptCentral(of app: App, restoreIdentifier: String)
        -> (kept: CentralManager, notes: [SessionEvent], power: SystemPowerState)?
    {
        guard let (kept, taken) = takeKept(of: app, role: .central, restoreIdentifier),
            case .central(let manager) = kept
        else { return nil }
        return (manager, taken.notes, taken.power)
    }

    /// The manager the system kept for `app` in `role` under `restoreIdentifier`, out of the app's runtime.
    private func takeKept(of app: App, role: SessionRole, _ restoreIdentifier: String)
        -> (KeptManager, SystemCore.Taken)?
    {
        guard let taken = core.takeKept(app.core, role: role, restoreIdentifier: restoreIdentifier),
            let kept = withRuntime(of: app.id, { $0.kept.removeValue(forKey: taken.manager) })
        else { return nil }
        return (kept, taken)
    }

    /// A take-over found `app` ended again, its kept manager (`role`, `restoreIdentifier`) having absorbed the notes
    /// it had taken: an event among them that would wake the app (`wakes`) relaunches it, as one the kept manager
    /// took as its app ended does, when the manager was kept again.
    func keptAgain(_ app: App, role: SessionRole, restoreIdentifier: String?, wakes: Bool) {
        guard wakes, let id = restoreIdentifier,
            core.keptRestoreIdentifiers(of: app.core, role: role).contains(id)
        else { return }
        relaunchForRestoration(app)
    }

    /// A kept manager's work bore fruit: the app is relaunched in the background (once, while it is not
    /// running), its launch options naming the kept managers of both roles (the system's: `relaunchOptions`).
    /// From the scheduler, never inside the event that caused it.
    func relaunchForRestoration(_ app: App) {
        core.scheduler.schedule(after: .zero) { [self] in
            // Without a launch handler (a restarted system whose app has not set one yet), `onLaunch` relaunches.
            guard app.state == .notRunning, withRuntime(of: app.id, { $0.handler != nil }),
                let kept = core.relaunchOptions(of: app.core)
            else { return }
            let options = App.LaunchOptions(bluetoothCentrals: kept.centrals, bluetoothPeripherals: kept.peripherals)
            app.launch(options: options, inBackground: true)
        }
    }

    /// The app with this identifier on this system, made on first use.
    public func app(id: String) -> App { App(system: self, core: core.app(id: id)) }

    /// The app with this identifier, declaring `backgroundModes` (its Info.plist: they replace what it declared
    /// before).
    public func app(id: String, backgroundModes: Set<App.BackgroundMode>) -> App {
        let app = app(id: id)
        app.core.setBackgroundModes(backgroundModes)
        return app
    }

    /// The app of managers made without one (`CentralManager(delegate:queue:options:system:)`): on a real
    /// controller, this process. Its id is "default".
    public var defaultApp: App { App(system: self, core: core.defaultApp) }

    /// Shuts the system down, as a phone that is switched off: the controller leaves the radio (a simulated one
    /// ends its links in good order, so peers hear Remote Device Terminated due to Power Off at once), every
    /// pending operation fails with `.systemShutDown`, managers report `.poweredOff`, and the store writes what
    /// it batched and closes. A system made again with the same name and store on the same radio is the same
    /// phone after a restart. Calling it again does nothing.
    public func shutDown() async {
        await core.shutDown { [virtualController] in
            virtualController?.powerOff(reason: "the system was shut down")
        }
    }
}
