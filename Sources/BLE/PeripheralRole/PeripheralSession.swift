import BLEATT
import BLESystem

/// A peripheral manager as the system sees it: the session registered for it, the owner of its services and
/// advertisement. Internal, so that what only the system calls (`apply`) is not public API of
/// `PeripheralManager`: each event is handed to the manager while it lives.
///
/// The system knows the manager by this object alone: its registration, services, advertisement and preserved
/// state are keyed on this object's identity, so the manager names itself with `session` (or
/// `ObjectIdentifier(session)`) in every call to the system, never with `self`. A manager owns its session;
/// the session holds it weakly.
///
/// `@unchecked Sendable`: `manager` is written once, by the manager's initialiser before the session is handed to
/// the system (its registration, or a restoration's transfer), and only read after that; loading a weak
/// reference is safe on any thread. `core` is a constant.
final class PeripheralSession: SystemSession, @unchecked Sendable {
    /// The manager this session stands for; nil once it has gone away (the system may still hold the session
    /// for an instant).
    private(set) weak var manager: PeripheralManager?
    /// Where a central's request that finds no manager here is refused.
    private let core: SystemCore

    /// Made in the manager's initialiser; `attach(_:)` follows once the manager is whole.
    init(core: SystemCore) {
        self.core = core
    }

    /// Points the session at its manager: in the manager's initialiser, before the session reaches the system.
    func attach(_ manager: PeripheralManager) {
        self.manager = manager
    }

    // MARK: SystemSession

    func apply(_ event: SessionEvent) {
        guard let manager else {
            // A central's request the system routed here as the manager went away: refused, as the system
            // refuses one for a service nobody answers for and those of a manager that goes, so that the central
            // does not wait for the ATT transaction timeout (unless the system refused it already).
            if case .server(let request) = event { core.refuseUndelivered(request) }
            return
        }
        manager.apply(event)
    }
}
