import BLECore
import BLEHost
import BLETransport
import Synchronization

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

/// A manager (central or peripheral role) attached to a system.
///
/// Sessions are told about host events synchronously, on the host's context, in the order the host produced
/// them; they must not block and must not call delegates from there (they dispatch to their own queue).
public protocol SystemSession: AnyObject, Sendable {
    func systemPowerStateChanged(_ state: SystemPowerState)
    func systemReceived(_ event: HostEvent)
}

/// The "bluetoothd" of one controller: it owns the host, the identifier store and the managers attached to
/// it, and routes host events to them.
public final class SystemCore: Sendable {
    public let name: String
    public let host: HostDriver
    public let scheduler: any HostScheduler
    public let identifiers: IdentifierStore

    private struct State {
        var power: SystemPowerState = .unknown
        var authorization = SystemAuthorization.allowedAlways
        var sessions: [WeakSession] = []

        /// What managers see: the controller's state when Bluetooth is allowed.
        var visible: SystemPowerState {
            switch authorization {
            case .allowedAlways: power
            case .notDetermined: .unknown
            case .restricted, .denied: .unauthorized
            }
        }
    }
    private let state = Mutex(State())

    private struct WeakSession {
        weak var session: (any SystemSession)?
    }

    /// Creates the host on `transport` and starts initialising the controller at once.
    public init(
        name: String, transport: any HCITransport, scheduler: any HostScheduler,
        configuration: HostConfiguration = HostConfiguration()
    ) {
        self.name = name
        self.scheduler = scheduler
        self.identifiers = IdentifierStore(salt: name)
        self.host = HostDriver(transport: transport, scheduler: scheduler, configuration: configuration)
        host.setEventHandler { [weak self] event in self?.route(event) }
        host.start { [weak self] result in
            switch result {
            case .success: self?.setPower(.poweredOn)
            case .failure(let error):
                if error.code == .transportClosed {
                    self?.setPower(.poweredOff(reason: error.message))
                } else {
                    self?.setPower(.unsupported(reason: error.message))
                }
            }
        }
    }

    /// The controller's state, whatever the authorization.
    public var powerState: SystemPowerState { state.withLock { $0.power } }

    /// Whether the user allowed Bluetooth. Real controllers start `.allowedAlways` (nothing here asks a user);
    /// a simulation sets it to test an app's permission flow.
    public var authorization: SystemAuthorization { state.withLock { $0.authorization } }

    /// Changes the authorization (the user answered the prompt, or changed the setting): every manager whose
    /// visible state changes is told.
    public func setAuthorization(_ authorization: SystemAuthorization) {
        update { $0.authorization = authorization }
    }

    /// Attaches a manager; it is told its state at once unless that is still `.unknown`.
    public func register(_ session: any SystemSession) {
        let power = state.withLock { s -> SystemPowerState in
            s.sessions.removeAll { $0.session == nil }
            s.sessions.append(WeakSession(session: session))
            return s.visible
        }
        if power != .unknown { session.systemPowerStateChanged(power) }
    }

    public func unregister(_ session: any SystemSession) {
        state.withLock { $0.sessions.removeAll { $0.session == nil || $0.session === session } }
    }

    private var liveSessions: [any SystemSession] {
        state.withLock { $0.sessions.compactMap(\.session) }
    }

    private func setPower(_ power: SystemPowerState) {
        update { $0.power = power }
    }

    /// Applies `change` and tells every manager the state it now sees, if that changed. Each manager is told
    /// the state as it is when it is told, so two changes racing on two threads (the host's power, a user's
    /// authorization) cannot leave a manager with the earlier one; a manager ignores a state it already has.
    private func update(_ change: (inout State) -> Void) {
        let changed = state.withLock { s -> Bool in
            let before = s.visible
            change(&s)
            return s.visible != before
        }
        guard changed else { return }
        for session in liveSessions { session.systemPowerStateChanged(state.withLock { $0.visible }) }
    }

    private func route(_ event: HostEvent) {
        if case .transportClosed(let reason) = event {
            setPower(.poweredOff(reason: reason ?? "the controller's transport closed"))
        }
        for session in liveSessions { session.systemReceived(event) }
    }
}
