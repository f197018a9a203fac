/// What the system machine knows of each app: where it is in its lifecycle and the background modes it declared,
/// as its `SystemApp` reports them (`SystemMachine.appChanged`), and the rules for apps out of the foreground that
/// follow from them (IOSRules.md sections 1 to 3).
///
/// An app the table has no report of is in the foreground with no background mode, as a `SystemApp` starts.
/// Reports carry the revision they were taken at; one older than what the table holds is ignored, so two
/// changes reported from two threads leave the later one.
package struct AppTable: Sendable, Hashable {
    /// One app as it last reported.
    package struct App: Sendable, Hashable {
        package var lifecycle: AppLifecycleState = .foreground
        package var modes: Set<AppBackgroundMode> = []
        /// When the app last left the foreground (for the alerts, IOSRules.md 3.6).
        package var lastForeground: Duration = .zero
        /// The report's revision (`SystemApp`'s count of its reports).
        package var revision: UInt64 = 0

        package init(
            lifecycle: AppLifecycleState = .foreground, modes: Set<AppBackgroundMode> = [],
            lastForeground: Duration = .zero, revision: UInt64 = 0
        ) {
            self.lifecycle = lifecycle
            self.modes = modes
            self.lastForeground = lastForeground
            self.revision = revision
        }
    }

    package private(set) var apps: [String: App] = [:]

    package init() {}

    /// The app as last reported.
    package subscript(_ id: String) -> App { apps[id] ?? App() }

    /// Records a report; false when it is not newer than the one held (nothing changes).
    mutating func report(_ id: String, _ app: App) -> Bool {
        guard app.revision > self[id].revision else { return false }
        apps[id] = app
        return true
    }

    /// How the app's scans run (IOSRules.md 1.2, 1.3): as asked in the foreground; out of it, in the background
    /// form with `bluetooth-central`, and not at all without.
    package func scanMode(of id: String) -> ScanMode {
        let app = self[id]
        switch app.lifecycle {
        case .foreground: return .foreground
        case .background, .suspended, .notRunning: return app.modes.contains(.bluetoothCentral) ? .background : .off
        }
    }

    /// How the app's advertisement goes on the air (IOSRules.md 2.3-2.5, 2.7): as asked in the foreground; out of
    /// it, in the background form with `bluetooth-peripheral`, and off the air without.
    package func advertisingMode(of id: String) -> AdvertisingMode {
        let app = self[id]
        switch app.lifecycle {
        case .foreground: return .foreground
        case .background, .suspended, .notRunning:
            return app.modes.contains(.bluetoothPeripheral) ? .background : .off
        }
    }

    /// Whether the app may start advertising (IOSRules.md 2.11: from iOS 14 on, only in the foreground; the
    /// advertisement then goes on out of it, in the background form).
    package func mayStartAdvertising(_ id: String) -> Bool {
        self[id].lifecycle == .foreground
    }

    /// Whether the app can answer a central's read or write now (IOSRules.md 3.2): it runs, or the request wakes
    /// it (`bluetooth-peripheral`). A suspended foreground-only app's requests are refused (an error iOS does not
    /// name: ours is Unlikely Error).
    package func answersCentrals(_ id: String) -> Bool {
        let app = self[id]
        return app.lifecycle != .suspended || app.modes.contains(.bluetoothPeripheral)
    }
}
