import BLECore

/// What an alert the system shows on the phone's screen is about.
package enum AlertKind: String, Sendable, Hashable {
    /// A peripheral connected (the connect's `notifyOnConnection`).
    case connection
    /// A peripheral disconnected (`notifyOnDisconnection`).
    case disconnection
    /// A notification or indication arrived (`notifyOnNotification`).
    case notification
    /// "Turn on Bluetooth": a central manager made while Bluetooth is off.
    case powerOff
}

/// The alerts a connect asked the system to show about its peer while the app is away (CoreBluetooth's
/// `notifyOnConnection`, `notifyOnDisconnection` and `notifyOnNotification`), kept with the connect
/// (`LinkTable`) until the app lets go of the peer.
package struct ConnectionAlertWishes: Sendable, Hashable {
    package var connection: Bool
    package var disconnection: Bool
    package var notification: Bool

    package init(connection: Bool = false, disconnection: Bool = false, notification: Bool = false) {
        self.connection = connection
        self.disconnection = disconnection
        self.notification = notification
    }

    /// Whether it asks for none.
    package var isEmpty: Bool { !connection && !disconnection && !notification }
}

/// An alert the system showed for an app.
package struct AlertRecord: Sendable, Hashable {
    package var kind: AlertKind
    /// The app it is for.
    package var app: String
    /// The peer it is about, and its name when it has one.
    package var peer: BluetoothAddress?
    package var name: String?
    /// When it was shown, in the system's time.
    package var time: Duration
    /// When its app was last in the foreground (then).
    var foreground: Duration
}

/// The alerts the system showed, oldest first, and the rules for showing one (IOSRules.md 3.5, 3.6, 3.8). The
/// log keeps the latest `limit` (an app out of the foreground asking an alert for each notification would grow it
/// without end); one event's alerts are found among the last ones, which share its time.
package struct AlertLog: Sendable, Hashable {
    package private(set) var shown: [AlertRecord] = []
    package static let limit = 1_024

    package init() {}

    /// Shows `alert`, unless one for the same event (the same kind, peer and time) was shown for an app that was
    /// in the foreground more recently (IOSRules.md 3.6: the app most recently in the foreground gets it; a more
    /// recent one takes the alert's place).
    mutating func show(_ alert: AlertRecord) {
        // Only the alerts of this instant can be the same event's (time never goes back).
        for i in shown.indices.reversed() {
            guard shown[i].time == alert.time else { break }
            guard shown[i].kind == alert.kind, shown[i].peer == alert.peer else { continue }
            if alert.foreground > shown[i].foreground { shown[i] = alert }
            return
        }
        shown.append(alert)
        if shown.count > Self.limit { shown.removeFirst(shown.count - Self.limit) }
    }
}

extension SystemMachine {
    /// The alerts `session`'s connect to the peer of `link` asked for a notification or indication of
    /// `attribute`, when it subscribed to it.
    /// Only those the rules would show now (`mayAlert`): an app in the foreground that asked for them all the
    /// time costs its notifications nothing.
    package func notificationAlerts(_ link: ConnectionHandle, _ attribute: AttributeHandle) -> [SystemAction] {
        links.alerting(on: link).compactMap { session, peer in
            mayAlert(session) && subscriptions.subscribes(session, to: attribute, on: link)
                ? .alert(.notification, session, peer: peer) : nil
        }
    }

    /// Whether a connect's alert for `session`'s app would be shown now: the app is out of the foreground and not
    /// woken for the event (no `bluetooth-central`: IOSRules.md 3.5 says the options are for such apps).
    package func mayAlert(_ session: SessionID) -> Bool {
        guard let app = sessions[session]?.app else { return false }
        let state = apps[app]
        return (state.lifecycle == .background || state.lifecycle == .suspended)
            && !state.modes.contains(.bluetoothCentral)
    }

    /// Whether `session`'s connect to `peer` still asks for an alert of `kind` (a connection's or a
    /// notification's, queued before the session let go of the peer, is not shown after).
    package func stillAsks(_ kind: AlertKind, _ session: SessionID, about peer: BluetoothAddress) -> Bool {
        guard let wishes = links.peers[peer]?.alerts[session] else { return kind == .disconnection }
        switch kind {
        case .connection: return wishes.connection
        case .notification: return wishes.notification
        case .disconnection, .powerOff: return true
        }
    }

    /// A connect's option asks an alert of `kind` for `session`'s app about `peer` (named `name`), at `time`: shown
    /// when the app is out of the foreground and not woken for it (no `bluetooth-central`: IOSRules.md 3.5 says
    /// the options are for such apps). Returns whether the rule let it be shown (for one event asked by several
    /// apps, 3.6 may give it to another).
    @discardableResult
    package mutating func connectionAlert(
        _ kind: AlertKind, for session: SessionID, peer: BluetoothAddress, name: String?, at time: Duration
    ) -> Bool {
        guard mayAlert(session), let app = sessions[session]?.app else { return false }
        let state = apps[app]
        alerts.show(
            AlertRecord(kind: kind, app: app, peer: peer, name: name, time: time, foreground: state.lastForeground))
        return true
    }

    /// A central manager of `session`'s app was made, asking for the power alert: "turn on Bluetooth" is shown
    /// when the user's Bluetooth switch is off (IOSRules.md 3.8). Returns whether the rule let it be shown.
    @discardableResult
    package mutating func powerAlert(for session: SessionID, at time: Duration) -> Bool {
        guard let app = sessions[session]?.app, !power.bluetoothEnabled else { return false }
        let foreground = apps[app].lifecycle == .foreground ? time : apps[app].lastForeground
        alerts.show(AlertRecord(kind: .powerOff, app: app, peer: nil, name: nil, time: time, foreground: foreground))
        return true
    }
}
