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
    mutating func open(app: String = "app", role: SessionRole = .central) -> SessionID {
        let id = draw()
        record(machine.opened(id, app: app, role: role))
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

/// Walks every sequence of `depth` inputs from `start`, as a tree: each prefix is stepped once, on a copy of
/// the state its parent left. `step` applies one input to the state and returns what it found wrong there,
/// or nil when the input does not apply in that state (that branch ends). Returns how many steps were taken
/// and every failure, each prefixed with the inputs that led to it (checked once by the caller: an
/// expectation per step would cost more than the walk).
func walkEverySequence<State, Input: CaseIterable>(
    from start: State, depth: Int, _ step: (inout State, Input) -> [String]?
) -> (visited: Int, failures: [String]) {
    var visited = 0
    var failures: [String] = []
    func walk(_ state: State, depth: Int, path: [Input]) {
        guard depth > 0 else { return }
        for input in Input.allCases {
            var next = state
            guard let found = step(&next, input) else { continue }
            visited += 1
            let path = path + [input]
            // Each input by its case name alone (an array's description names a local enum by its full path).
            if !found.isEmpty {
                let named = "[" + path.map { "\($0)" }.joined(separator: ", ") + "]"
                failures += found.map { "\(named): \($0)" }
            }
            walk(next, depth: depth - 1, path: path)
        }
    }
    walk(start, depth: depth, path: [])
    return (visited, failures)
}
