import BLESystem

extension BluetoothSystem {
    /// An app on a system: every manager belongs to one. Apps share the system's controller and store, as apps
    /// share a phone's radio; each manager answers only for what its app asked for or published. The rules iOS
    /// applies to an app in the background hang off this object (a later step).
    ///
    /// `system.app(id:)` with the same id gives the same app: the objects compare equal and stand for one app.
    public final class App: Sendable, Hashable, CustomStringConvertible {
        public let system: BluetoothSystem
        let core: SystemApp

        init(system: BluetoothSystem, core: SystemApp) {
            self.system = system
            self.core = core
        }

        /// The app's identifier (a bundle identifier, on a phone).
        public var id: String { core.id }

        /// Notifications and repeated discoveries dropped because the app was more than 4,096 events behind
        /// (its queue stuck or slower than the radio); logged as a warning when dropping starts and when the
        /// app catches up. Other events are never dropped.
        public var droppedEvents: Int { core.droppedEvents }

        public static func == (a: App, b: App) -> Bool { a.core === b.core }
        public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(core)) }
        public var description: String { "<App \(id) on \(system.name)>" }
    }

    /// The app with this identifier on this system, made on first use.
    public func app(id: String) -> App { App(system: self, core: core.app(id: id)) }

    /// The app of managers made without one (`CentralManager(delegate:queue:options:system:)`): on a real
    /// controller, this process. Its id is "default".
    public var defaultApp: App { App(system: self, core: core.defaultApp) }

    /// Shuts the system down, as a phone that is switched off: the controller leaves the radio (a simulated one
    /// ends its links in good order, so peers hear Remote Device Terminated due to Power Off at once), every
    /// pending operation fails with `.systemShutDown`, managers report `.poweredOff`, and the store writes what
    /// it batched and closes. A system made again with the same name and store on the same radio is the same
    /// phone after a restart. Calling it again does nothing.
    public func shutDown() async {
        core.shutDown { [virtualController] in
            virtualController?.powerOff(reason: "the system was shut down")
        }
    }
}
