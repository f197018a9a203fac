import Foundation
import GRDB
import Logging
import Synchronization

/// What the system keeps of a manager with a restore identifier, so that its work outlives the process
/// (IOSRules.md 5e: from iOS 11, state restoration survives a reboot). The record is the manager's own encoding;
/// the store keeps it with the app's id, the role, the restore identifier and the background modes the app
/// declared, which the system needs before the app runs again.
public struct PreservedManager: Sendable, Hashable {
    /// The two kinds of manager.
    public enum Role: String, Sendable, Hashable {
        case central
        case peripheral
    }

    /// What identifies a preserved manager: one per app, role and restore identifier.
    public struct Key: Sendable, Hashable, CustomStringConvertible {
        public var app: String
        public var role: Role
        public var restoreIdentifier: String
        public init(app: String, role: Role, restoreIdentifier: String) {
            self.app = app
            self.role = role
            self.restoreIdentifier = restoreIdentifier
        }
        public var description: String { "\(app)/\(role.rawValue)/\(restoreIdentifier)" }
    }

    public var key: Key
    /// The app's background modes, by their Info.plist names.
    public var backgroundModes: Set<String>
    public var record: [UInt8]

    public init(key: Key, backgroundModes: Set<String>, record: [UInt8]) {
        self.key = key
        self.backgroundModes = backgroundModes
        self.record = record
    }
}

extension SystemStore {
    /// Every preserved manager, in key order.
    public var preservedManagers: [PreservedManager] {
        state.withLock { s in
            s.preserved.values.sorted { "\($0.key)" < "\($1.key)" }
        }
    }

    /// Keeps `manager`'s state, replacing what was kept under its key, and commits it at once: the state a
    /// process killed right after a change finds on restart is the changed one. The names, last-seen times and
    /// GATT caches batched so far are written first, so the peers a record names come back with them. A write
    /// that fails (a full disk, a closed store, another process holding the file too long) is logged, and the
    /// store goes on answering what it last wrote: the next change (or the same one again) writes anew.
    public func setPreserved(_ manager: PreservedManager) {
        guard state.withLock({ $0.preserved[manager.key] != manager }) else { return }
        flush()
        write(manager.key, manager)
    }

    /// Forgets the state kept under `key`, at once.
    public func removePreserved(_ key: PreservedManager.Key) {
        write(key, nil)
    }

    private func write(_ key: PreservedManager.Key, _ manager: PreservedManager?) {
        state.withLock { s in
            guard s.preserved[key] != manager else { return }
            do {
                guard !s.closed else { throw StoreError(path: path ?? ":memory:", reason: "the store is closed") }
                try writeNow { db in
                    if let manager {
                        try db.execute(
                            sql: """
                                INSERT OR REPLACE INTO preservedManager
                                    (app, role, restoreIdentifier, backgroundModes, record)
                                VALUES (?, ?, ?, ?, ?)
                                """,
                            arguments: [
                                key.app, key.role.rawValue, key.restoreIdentifier,
                                manager.backgroundModes.sorted().joined(separator: " "), Data(manager.record),
                            ])
                    } else {
                        try db.execute(
                            sql: "DELETE FROM preservedManager WHERE app = ? AND role = ? AND restoreIdentifier = ?",
                            arguments: [key.app, key.role.rawValue, key.restoreIdentifier])
                    }
                }
                s.preserved[key] = manager
            } catch {
                logger.error(
                    "a manager's preserved state could not be written: it will not survive the process",
                    metadata: ["error": "\(Self.words(error))", "manager": "\(key)"])
            }
        }
    }

    /// A row as a preserved manager; a row of another shape is left out.
    static func preservedManager(_ row: Row) -> PreservedManager? {
        guard let app: String = column(row, "app"), let roleName: String = column(row, "role"),
            let role = PreservedManager.Role(rawValue: roleName),
            let restoreIdentifier: String = column(row, "restoreIdentifier"),
            let modes: String = column(row, "backgroundModes"), let record: Data = column(row, "record")
        else { return nil }
        return PreservedManager(
            key: PreservedManager.Key(app: app, role: role, restoreIdentifier: restoreIdentifier),
            backgroundModes: Set(modes.split(separator: " ").map(String.init)), record: Array(record))
    }
}
