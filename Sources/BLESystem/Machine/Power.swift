/// Whether the system's controller is usable, as the managers above see it.
public enum SystemPowerState: Sendable, Hashable {
    /// The host is still initialising the controller.
    case unknown
    /// Initialised and ready.
    case poweredOn
    /// The controller refused initialisation (no LE support, say); `reason` says what happened.
    case unsupported(reason: String)
    /// The transport closed or the controller failed; `reason` says what happened.
    case poweredOff(reason: String)
    /// The controller reported a hardware error and is being reset; `.poweredOn` follows when it is back.
    case resetting(reason: String)
    /// The controller may be fine, but the user has not allowed Bluetooth (``SystemAuthorization``).
    case unauthorized
}

/// Whether the user allowed Bluetooth, as iOS asks on first use (`CBManagerAuthorization`).
public enum SystemAuthorization: Sendable, Hashable {
    /// Not asked yet: managers stay `.unknown` until it is answered.
    case notDetermined
    /// Not allowed, and the user cannot change it (a device policy).
    case restricted
    /// The user said no: managers are `.unauthorized`.
    case denied
    /// Allowed: managers follow the controller.
    case allowedAlways
}

/// What decides the state every manager sees: the controller's own state, the user's authorization and the
/// user's Bluetooth switch (Settings), and whether the system was shut down.
package struct Power: Sendable, Hashable {
    /// The controller's state, whatever the user allowed.
    package var controller: SystemPowerState = .unknown
    /// Real controllers start allowed (nothing here asks a user); a simulation changes it to test an app's
    /// permission flow.
    package var authorization: SystemAuthorization = .allowedAlways
    /// The user's Bluetooth switch.
    package var bluetoothEnabled = true
    package var isShutDown = false

    package init() {}

    /// Why managers are powered off while the user's Bluetooth switch is off.
    package static let switchedOff = "Bluetooth is turned off"

    /// What managers see: the controller's state when Bluetooth is allowed and switched on. An authorization
    /// not yet given hides everything (`.unknown`), one refused shows `.unauthorized`, and the switch off shows
    /// `.poweredOff` whatever the controller does.
    package var visible: SystemPowerState {
        switch authorization {
        case .allowedAlways:
            guard bluetoothEnabled else { return .poweredOff(reason: Self.switchedOff) }
            return controller
        case .notDetermined: return .unknown
        case .restricted, .denied: return .unauthorized
        }
    }
}
