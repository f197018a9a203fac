import BLESystem
import Synchronization

extension BluetoothSystem {
    /// An alert the system showed on the phone's screen for an app (IOSRules.md 3.5, 3.6, 3.8).
    public struct Alert: Sendable, Hashable, CustomStringConvertible {
        public enum Kind: String, Sendable, Hashable {
            /// A peripheral connected (`ConnectOptions.notifyOnConnection`).
            case connection
            /// A peripheral disconnected (`ConnectOptions.notifyOnDisconnection`).
            case disconnection
            /// A notification or indication arrived (`ConnectOptions.notifyOnNotification`).
            case notification
            /// "Turn on Bluetooth": a central manager made while Bluetooth is off (`Options.showPowerAlert`,
            /// true unless set false).
            case powerOff
        }
        public var kind: Kind
        /// The app the alert is for.
        public var appID: String
        /// The peripheral's name, when the alert is about one that has a name.
        public var peripheralName: String?
        /// When it was shown, in the system's time.
        public var time: Duration

        public var description: String {
            "\(kind) for \(appID)\(peripheralName.map { " (\($0))" } ?? "") at \(time)"
        }
    }

    /// The alerts shown so far, oldest first.
    public var alerts: [Alert] { alertLog.withLock { $0.map(\.alert) } }

    /// Whether the user's Bluetooth switch (Settings) is on.
    public var isBluetoothEnabled: Bool { core.isBluetoothEnabled }

    /// The user turns Bluetooth off (or on again) in Settings, not in Control Center. Off: every manager sees
    /// `.poweredOff`, its scan stops and its peripherals are disconnected without a `didDisconnectPeripheral`
    /// each (IOSRules.md 6.7); the radio goes quiet (links dropped, scans, connects and advertising ended). On:
    /// managers see `.poweredOn` again; an app scans, connects and advertises anew. What the system kept for
    /// terminated apps (state restoration) is let go of: nothing relaunches them after it.
    public func setBluetoothEnabled(_ enabled: Bool) {
        if !enabled { releaseAllKept() }
        core.setBluetoothEnabled(enabled)
        // Nothing is restored after it, also across a restart: forgotten once the radio is quiet, so no late
        // event of a manager writes it again.
        if !enabled { forgetPreserved(of: nil) }
    }

    /// An alert kept with what tells one event's alerts apart.
    struct LoggedAlert: Sendable {
        var alert: Alert
        var peer: BluetoothAddress?
        /// When its app was last in the foreground.
        var foreground: Duration
    }

    /// Shows an alert for `app`, about `peripheral` when given. When several apps asked for an alert for one
    /// event (the same kind, peripheral and time), the app most recently in the foreground gets it (IOSRules.md
    /// 3.6).
    func showAlert(_ kind: Alert.Kind, for app: App, about peripheral: Peripheral? = nil) {
        let time = now
        let entry = LoggedAlert(
            alert: Alert(kind: kind, appID: app.id, peripheralName: peripheral?.name, time: time),
            peer: peripheral?.address, foreground: app.core.lastForeground)
        alertLog.withLock { log in
            if let i = log.lastIndex(where: { $0.alert.kind == kind && $0.peer == entry.peer && $0.alert.time == time })
            {
                if entry.foreground > log[i].foreground { log[i] = entry }
                return
            }
            log.append(entry)
        }
    }
}

extension BluetoothSystem.App {
    /// Whether an event a connection option asks an alert for shows one now: the app is out of the foreground
    /// and not woken for it (no `bluetooth-central`; IOSRules.md 3.5 says the options are for such apps).
    var showsConnectionAlerts: Bool {
        let state = core.lifecycle
        return (state == .background || state == .suspended) && !core.backgroundModes.contains(.bluetoothCentral)
    }
}
