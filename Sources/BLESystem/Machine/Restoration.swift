/// A manager of an app being terminated, as the restoration rules see it: known by its session in the machine,
/// by its object's identity at `SystemCore`'s calls.
package struct RestorationCandidate<Manager: Hashable & Sendable>: Sendable, Hashable {
    package var manager: Manager
    package var role: SessionRole
    package var restoreIdentifier: String?
    /// Whether it has work the system can carry on: for a central manager a scan for services, a link or a
    /// pending connection; for a peripheral manager services or an advertisement.
    package var restorable: Bool

    package init(manager: Manager, role: SessionRole, restoreIdentifier: String?, restorable: Bool) {
        self.manager = manager
        self.role = role
        self.restoreIdentifier = restoreIdentifier
        self.restorable = restorable
    }

    /// The same candidate, known as `other`.
    func known<Other>(as other: Other) -> RestorationCandidate<Other> {
        RestorationCandidate<Other>(
            manager: other, role: role, restoreIdentifier: restoreIdentifier, restorable: restorable)
    }
}

/// Which managers the system keeps for apps that are not running, for state restoration (IOSRules.md 5, 6.2–6.5),
/// by app, role and restore identifier, and the rules that decide it: which managers a termination keeps, what a
/// launch takes over and what it lets go of, what a force-quit or Bluetooth turned off ends, and what a relaunch
/// names in its launch options.
///
/// The kept managers themselves (their peripherals, notes and hand-over) are still the facades' objects
/// (`docs/SystemMachinePlan.md`, step 12); this table decides which they are, by `SessionID`.
package struct RestorationTable: Sendable, Hashable {
    /// A manager of an app being terminated, known by its session.
    package typealias Candidate = RestorationCandidate<SessionID>

    /// What is kept for one app, by role and restore identifier.
    package struct Kept: Sendable, Hashable {
        package var centrals: [String: SessionID] = [:]
        package var peripherals: [String: SessionID] = [:]

        subscript(role role: SessionRole) -> [String: SessionID] {
            get { role == .central ? centrals : peripherals }
            set {
                if role == .central { centrals = newValue } else { peripherals = newValue }
            }
        }

        var all: [SessionID] { (Array(centrals.values) + Array(peripherals.values)).sorted() }
        var isEmpty: Bool { centrals.isEmpty && peripherals.isEmpty }
    }

    package private(set) var kept: [String: Kept] = [:]
    /// How each app last stopped.
    package private(set) var lastTermination: [String: AppTermination] = [:]

    package init() {}

    /// The managers a termination by `cause` keeps, of an app declaring `modes`: none when the user ended it
    /// (5e); otherwise each with a restore identifier, in an app with its role's background mode (5.3: without
    /// it a manager is never restored), and with work the system can carry on (5.5, 6.3–6.5). Of two with one
    /// restore identifier and role, the later counts.
    package static func keeps(
        _ cause: AppTermination, modes: Set<AppBackgroundMode>, candidates: [Candidate]
    ) -> [Candidate] {
        guard cause != .byUser else { return [] }
        var chosen: [String: Candidate] = [:]
        for candidate in candidates {
            let mode: AppBackgroundMode = candidate.role == .central ? .bluetoothCentral : .bluetoothPeripheral
            guard modes.contains(mode), let id = candidate.restoreIdentifier, candidate.restorable else { continue }
            chosen["\(candidate.role)/\(id)"] = candidate
        }
        return chosen.values.sorted { $0.manager < $1.manager }
    }

    /// `app` was terminated by `cause`, the system keeping `keeping` (chosen by `keeps`). What an earlier
    /// termination kept and this one does not is let go of: a force-quit ends it (5e), a later termination by the
    /// system keeps only what it keeps. Returns the sessions let go of.
    package mutating func terminated(_ app: String, cause: AppTermination, keeping: [Candidate]) -> [SessionID] {
        lastTermination[app] = cause
        var now = Kept()
        for candidate in keeping {
            guard let id = candidate.restoreIdentifier else { continue }
            now[role: candidate.role][id] = candidate.manager
        }
        let kept = Set(now.all)
        let released = (self.kept[app]?.all ?? []).filter { !kept.contains($0) }
        self.kept[app] = now.isEmpty ? nil : now
        return released
    }

    /// A restarted system keeps `session` for `app`, which is not running (its preserved record). One record per
    /// app, role and identifier: a second under the same is refused (false).
    @discardableResult
    package mutating func keep(_ session: SessionID, of app: String, role: SessionRole, restoreIdentifier: String)
        -> Bool
    {
        guard kept[app]?[role: role][restoreIdentifier] == nil else { return false }
        kept[app, default: Kept()][role: role][restoreIdentifier] = session
        return true
    }

    /// `session` is gone (closed, or replaced by its restored successor): kept for nobody any more.
    package mutating func forget(_ session: SessionID) {
        for app in kept.keys.sorted() {
            for role in [SessionRole.central, .peripheral] {
                guard let id = kept[app]?[role: role].first(where: { $0.value == session })?.key else { continue }
                kept[app]?[role: role][id] = nil
            }
            if kept[app]?.isEmpty == true { kept[app] = nil }
        }
    }

    /// A manager made by `app` with `restoreIdentifier` takes over the one kept under it, if any.
    package mutating func take(_ app: String, role: SessionRole, restoreIdentifier: String) -> SessionID? {
        guard let session = kept[app]?[role: role].removeValue(forKey: restoreIdentifier) else { return nil }
        if kept[app]?.isEmpty == true { kept[app] = nil }
        return session
    }

    /// `app`'s launch handler ran: what it did not take over is let go of (the system stops the work it kept for
    /// nobody). Returns the sessions let go of.
    package mutating func launched(_ app: String) -> [SessionID] {
        kept.removeValue(forKey: app)?.all ?? []
    }

    /// Bluetooth was turned off in Settings: nothing is restored after it (5e). Returns every kept session, app
    /// by app.
    package mutating func switchedOff() -> [SessionID] {
        defer { kept.removeAll() }
        return kept.keys.sorted().flatMap { kept[$0]!.all }
    }

    /// The restore identifiers kept for `app` in `role`, sorted.
    package func restoreIdentifiers(of app: String, role: SessionRole) -> [String] {
        (kept[app]?[role: role].keys).map { $0.sorted() } ?? []
    }

    /// What a relaunch of `app` for restoration names in its launch options (5.13, 5.15): the restore
    /// identifiers kept for it, per role; nil when nothing is kept (nothing to relaunch it for).
    package func relaunchOptions(of app: String) -> (centrals: [String], peripherals: [String])? {
        guard let kept = kept[app], !kept.isEmpty else { return nil }
        return (kept.centrals.keys.sorted(), kept.peripherals.keys.sorted())
    }

    /// Whether `session` is kept for an app.
    package func isKept(_ session: SessionID) -> Bool {
        kept.values.contains { $0.centrals.values.contains(session) || $0.peripherals.values.contains(session) }
    }
}
