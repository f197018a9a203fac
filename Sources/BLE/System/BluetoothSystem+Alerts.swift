import BLESystem

extension BluetoothSystem {
    /// An alert the system showed on the phone's screen for an app (<doc:IOSRules>, sections 3.5, 3.6 and 3.8).
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

    /// The alerts shown so far, oldest first (the system shows one by its rules: for a connect's options, only to
    /// an app out of the foreground and not woken for the event; for one event, to the app most recently in the
    /// foreground; "turn on Bluetooth" for a central manager made while the switch is off).
    public var alerts: [Alert] {
        core.alerts.map { record in
            Alert(kind: Alert.Kind(record.kind), appID: record.app, peripheralName: record.name, time: record.time)
        }
    }

    /// Whether the user's Bluetooth switch (Settings) is on.
    public var isBluetoothEnabled: Bool { core.isBluetoothEnabled }

    /// The user turns Bluetooth off (or on again) in Settings, not in Control Center. Off: every manager sees
    /// `.poweredOff`, its scan stops and its peripherals are disconnected without a `didDisconnectPeripheral`
    /// each (<doc:IOSRules>); the radio goes quiet (links dropped, scans, connects and advertising ended). On:
    /// managers see `.poweredOn` again; an app scans, connects and advertises anew. What the system kept for
    /// terminated apps (state restoration) is let go of: nothing relaunches them after it.
    public func setBluetoothEnabled(_ enabled: Bool) {
        if !enabled { releaseAllKept() }
        core.setBluetoothEnabled(enabled)
        // Nothing is restored after it, also across a restart: forgotten once the radio is quiet, so no late
        // event of a manager writes it again.
        if !enabled { forgetPreserved(of: nil) }
    }

}

extension BluetoothSystem.Alert.Kind {
    init(_ kind: AlertKind) {
        switch kind {
        case .connection: self = .connection
        case .disconnection: self = .disconnection
        case .notification: self = .notification
        case .powerOff: self = .powerOff
        }
    }
}
