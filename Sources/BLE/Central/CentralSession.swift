import BLECore
import BLESystem

/// A central manager as the system sees it: the session registered for it, the client of its scan and of its
/// links. Internal, so that what only the system calls (`apply`) is not public API of `CentralManager`: each event is
/// handed to the manager while it lives.
///
/// The system knows the manager by this object alone: its registration, scan, links, subscriptions and preserved
/// state are keyed on this object's identity, so the manager names itself with `session` (or
/// `ObjectIdentifier(session)`) in every call to the system, never with `self`. A manager owns its session;
/// the session holds it weakly.
///
/// `@unchecked Sendable`: `manager` is written once, by the manager's initialiser before the session is handed to
/// the system (its registration, or a restoration's transfer), and only read after that; loading a weak
/// reference is safe on any thread.
final class CentralSession: SystemSession, @unchecked Sendable {
    /// The manager this session stands for; nil once it has gone away (the system may still hold the session
    /// for an instant, and what reaches it then is dropped, as for a manager released).
    private(set) weak var manager: CentralManager?

    /// Made among the manager's stored properties; `attach(_:)` follows in its initialiser.
    init() {}

    /// Points the session at its manager: in the manager's initialiser, before the session reaches the system.
    func attach(_ manager: CentralManager) {
        self.manager = manager
    }

    // MARK: SystemSession

    func apply(_ event: SessionEvent) {
        manager?.apply(event)
    }
}
