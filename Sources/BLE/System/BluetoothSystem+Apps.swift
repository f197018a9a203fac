import BLESystem
import BLETransport
import Logging
import Synchronization

extension BluetoothSystem {
    /// An app on a system: every manager belongs to one. Apps share the system's controller and store, as apps
    /// share a phone's radio; each manager answers only for what its app asked for or published.
    ///
    /// An app declares background modes and has a lifecycle, which the system applies as iOS does (IOSRules.md
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
            let waiting = system.withRuntime(of: id) { r -> Bool in
                r.handler = handler
                return r.keptCentrals.values.contains { $0.hasRestorationEvents }
                    || r.keptPeripherals.values.contains { $0.hasRestorationEvents }
            }
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
        /// when it bears fruit (state restoration, IOSRules.md 5e and 6.3–6.5).
        public func terminate(_ cause: Termination) {
            var keep: [String: CentralManager] = [:]
            var keepPeripherals: [String: PeripheralManager] = [:]
            // The system holds the managers' sessions, and a session its manager weakly: the managers are held
            // here until the end.
            let managers = system.core.sessions(of: core).map { session in
                (central: (session as? CentralSession)?.manager, peripheral: (session as? PeripheralSession)?.manager)
            }
            if cause != .byUser {
                for (central, peripheral) in managers {
                    if let manager = central, core.backgroundModes.contains(.bluetoothCentral),
                        let restoreID = manager.restoreIdentifier, manager.hasRestorableWork
                    {
                        manager.preserve()
                        keep[restoreID] = manager
                    }
                    if let manager = peripheral, core.backgroundModes.contains(.bluetoothPeripheral),
                        let restoreID = manager.restoreIdentifier, manager.hasRestorableWork
                    {
                        manager.preserve()
                        keepPeripherals[restoreID] = manager
                    }
                }
            }
            let (kept, released) = system.withRuntime(of: id) { r -> ((any Sendable)?, KeptManagers) in
                // What an earlier termination kept and no launch took over: a force-quit ends it (IOSRules.md 5e);
                // a later system termination keeps only what this one keeps.
                let released = KeptManagers(
                    centrals: r.keptCentrals.values.filter { old in !keep.values.contains { $0 === old } },
                    peripherals: r.keptPeripherals.values.filter { old in
                        !keepPeripherals.values.contains { $0 === old }
                    })
                r.lastTermination = cause
                r.keptCentrals = keep
                r.keptPeripherals = keepPeripherals
                defer { r.launched = nil }
                return (r.launched, released)
            }
            system.release(released)
            let keeping =
                keep.values.map { ObjectIdentifier($0.session) }
                + keepPeripherals.values.map { ObjectIdentifier($0.session) }
            system.core.terminate(core, keeping: Set(keeping))
            // A force-quit ends state restoration for the app, also across a restart (IOSRules.md 5e): forgotten once
            // its managers are off the system, so no late event of theirs writes it again.
            if cause == .byUser { system.forgetPreserved(of: id) }
            // Tasks that awaited the app's managers end: nothing is delivered to them any more.
            for (central, peripheral) in managers {
                central?.abandonAsyncWork()
                peripheral?.abandonAsyncWork()
            }
            // The launch handler's object goes last, outside every lock: its managers' deinit takes them.
            withExtendedLifetime(kept) {}
        }

        /// The restore identifiers of the central managers the system keeps for this app while it is not running.
        public var keptCentralManagers: [String] { system.withRuntime(of: id) { $0.keptCentrals.keys.sorted() } }

        /// The restore identifiers of the peripheral managers the system keeps for this app while it is not
        /// running.
        public var keptPeripheralManagers: [String] {
            system.withRuntime(of: id) { $0.keptPeripherals.keys.sorted() }
        }

        /// How it last stopped, if it was terminated.
        public var lastTermination: Termination? { system.withRuntime(of: id) { $0.lastTermination } }

        func launch(options: LaunchOptions, inBackground: Bool) {
            let needed = core.needsLaunch
            if inBackground {
                core.launchInBackground()
            } else {
                core.enterForeground(launching: true)
            }
            guard needed, let handler = system.withRuntime(of: id, { $0.handler }) else { return }
            let object = handler(Launch(app: self, options: options))
            let (replaced, untaken) = system.withRuntime(of: id) { r -> ((any Sendable)?, KeptManagers) in
                // What the launch did not take over (no manager made with its restore identifier) is let go of:
                // the system stops the work it kept (and refuses the requests it held) for nobody.
                let untaken = KeptManagers(
                    centrals: Array(r.keptCentrals.values), peripherals: Array(r.keptPeripherals.values))
                r.keptCentrals = [:]
                r.keptPeripherals = [:]
                defer { r.launched = object }
                return (r.launched, untaken)
            }
            system.release(untaken)
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

    /// What the system keeps of an app beyond its `SystemApp`: its launch handler and the object its last launch
    /// returned.
    struct AppRuntime: Sendable {
        var handler: (@Sendable (App.Launch) -> any Sendable)?
        var launched: (any Sendable)?
        var lastTermination: App.Termination?
        /// Central managers kept for state restoration while the app is not running, by restore identifier.
        var keptCentrals: [String: CentralManager] = [:]
        /// Peripheral managers kept likewise.
        var keptPeripherals: [String: PeripheralManager] = [:]
    }

    /// Managers kept for state restoration, of both roles.
    struct KeptManagers {
        var centrals: [CentralManager] = []
        var peripherals: [PeripheralManager] = []
    }

    /// Lets go of managers kept for state restoration that nothing will restore: each gives up its work in the
    /// system, as a terminated app's managers do; the central managers first.
    func release(_ kept: KeptManagers) {
        for manager in kept.centrals { release(manager.session, preservedAs: manager.preservationKey) }
        for manager in kept.peripherals { release(manager.session, preservedAs: manager.preservationKey) }
    }

    /// A kept manager, known to the system as `session`, gives up its work (its manager is held by the caller).
    private func release(_ session: any SystemSession, preservedAs key: PreservedManager.Key?) {
        if let key { forgetPreserved(key, owner: ObjectIdentifier(session)) }
        session.apply(.appTerminated)
        core.unregister(session)
    }

    /// Every app's kept managers are let go of (Bluetooth turned off in Settings: nothing is restored after it,
    /// IOSRules.md 5e).
    func releaseAllKept() {
        let kept = runtimes.withLock { all -> [KeptManagers] in
            var kept: [KeptManagers] = []
            for id in all.keys {
                kept.append(
                    KeptManagers(
                        centrals: Array(all[id]!.keptCentrals.values),
                        peripherals: Array(all[id]!.keptPeripherals.values)))
                all[id]!.keptCentrals = [:]
                all[id]!.keptPeripherals = [:]
            }
            return kept
        }
        for managers in kept { release(managers) }
    }

    /// Takes the peripheral manager kept for `app` under `restoreIdentifier`, for a new one to restore from.
    func takeKeptPeripheral(of app: App, restoreIdentifier: String) -> PeripheralManager? {
        withRuntime(of: app.id) { $0.keptPeripherals.removeValue(forKey: restoreIdentifier) }
    }

    /// Takes the central manager kept for `app` under `restoreIdentifier`, for a new one to restore from.
    func takeKeptCentral(of app: App, restoreIdentifier: String) -> CentralManager? {
        withRuntime(of: app.id) { $0.keptCentrals.removeValue(forKey: restoreIdentifier) }
    }

    /// A kept manager's work bore fruit: the app is relaunched in the background (once, while it is not
    /// running), its launch options naming the kept managers of both roles (IOSRules.md 5.13, 5.15). From the
    /// scheduler, never inside the event that caused it.
    func relaunchForRestoration(_ app: App) {
        core.scheduler.schedule(after: .zero) { [self] in
            // Without a launch handler (a restarted system whose app has not set one yet), `onLaunch` relaunches.
            guard app.state == .notRunning, withRuntime(of: app.id, { $0.handler != nil }) else { return }
            let options = withRuntime(of: app.id) { r in
                App.LaunchOptions(
                    bluetoothCentrals: r.keptCentrals.keys.sorted(),
                    bluetoothPeripherals: r.keptPeripherals.keys.sorted())
            }
            guard !options.bluetoothCentrals.isEmpty || !options.bluetoothPeripherals.isEmpty else { return }
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
