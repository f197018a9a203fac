import Testing

@testable import BLESystem

/// A `SystemMachine` on its own: no host, no store, no scheduler, no managers. The rig plays the driver's part
/// by hand: it draws session ids as `SystemCore` does (increasing, never reused), and records every action in
/// order, so a test reads what each manager was told.
struct SystemRig {
    var machine = SystemMachine()
    /// Every action, in the order the machine produced them.
    private(set) var actions: [SystemAction] = []
    private var nextSession: UInt64 = 1

    /// Attaches a manager of `app`.
    @discardableResult
    mutating func open(app: String = "app") -> SessionID {
        let id = draw()
        record(machine.opened(id, app: app))
        return id
    }

    /// A new id, as the driver draws one for a manager.
    mutating func draw() -> SessionID {
        defer { nextSession += 1 }
        return SessionID(rawValue: nextSession)
    }

    mutating func record(_ new: [SystemAction]) { actions += new }

    /// Runs `body` and returns only the actions it produced.
    mutating func step(_ body: (inout SystemMachine) -> [SystemAction]) -> [SystemAction] {
        let new = body(&machine)
        record(new)
        return new
    }

    /// What `session` was told, in order.
    func told(_ session: SessionID) -> [SessionEvent] {
        actions.compactMap { action in
            guard case .deliver(session, let event) = action else { return nil }
            return event
        }
    }

    /// The power states `session` was told, in order.
    func powerTold(_ session: SessionID) -> [SystemPowerState] {
        told(session).compactMap { event in
            guard case .powerChanged(let state) = event else { return nil }
            return state
        }
    }
}
