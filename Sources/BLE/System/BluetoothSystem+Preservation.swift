import BLECore
import BLESystem
import Dispatch
import Foundation
import Logging
import Synchronization

// State preservation across a process: as from iOS 11, restoration survives a reboot.
//
// A manager with a restore identifier, in an app that declares the background mode of its role, writes what the
// system would carry on for it to the store each time that changes (committed at once, so a process killed
// right after finds it): for a central manager, the peers it wants a link to (connected or pending) with their
// connect options, and its scan for services; for a peripheral manager, its published services and its
// advertisement. A system made on that store after the process ended (a phone restarted) keeps that work for
// the app before it runs: it makes a kept manager for each record, which connects, scans, publishes and
// advertises once the controller is on, and relaunches the app in the background when something happens, as
// after a termination by the system. What was only true of the old process is not carried: links and
// subscriptions end with it, so a peer that was connected is pending again, and its services are discovered
// anew (the GATT cache answers when its database is unchanged).
//
// A record goes when its manager has nothing left to carry on, when the manager goes away while its app runs,
// when the user force-quits the app, and when Bluetooth is turned off in Settings, as on iOS. A power-off
// of the controller (the transport closing, the system shut down) leaves the records as they are: a phone
// switched off restores them when it starts again. Records follow the app's wishes (a connect, a cancel, a scan
// started or stopped, a connection over for good), not what the controller does by itself.

extension BluetoothSystem {
    /// The queue of the managers a restarted system keeps for apps that are not running: nothing is delivered
    /// on it (their apps are not running), it is only where a delivery would go.
    static let keeperQueue = DispatchQueue(label: "swift-ble.restoration")

    /// Writes the preserved state under `key`, `owner` writing it from now on; or, with nil, forgets it, unless
    /// another manager wrote it last (a kept manager whose work a restored one took over has nothing left, and
    /// must not forget what the restored one carries on).
    ///
    /// `record` is read inside the section that writes it, so that two threads' changes are written in the
    /// order they read them (the manager's lock is never held by a caller of this).
    func preserve(
        _ key: PreservedManager.Key, owner: AnyObject, modes: Set<App.BackgroundMode>, record: () -> [UInt8]?
    ) {
        guard !core.isShutDown else { return }
        let id = ObjectIdentifier(owner)
        preservationOwners.withLock { owners in
            if let record = record() {
                owners[key] = id
                core.store.setPreserved(
                    PreservedManager(key: key, backgroundModes: Set(modes.map(\.rawValue)), record: record))
            } else if owners[key] == nil || owners[key] == id {
                owners[key] = nil
                core.store.removePreserved(key)
            }
        }
    }

    /// Forgets the preserved state under `key` if `owner` wrote it last (a manager that goes away; not one whose
    /// work another manager took over).
    func forgetPreserved(_ key: PreservedManager.Key, owner: ObjectIdentifier) {
        guard !core.isShutDown else { return }
        preservationOwners.withLock { owners in
            guard owners[key] == owner else { return }
            owners[key] = nil
            core.store.removePreserved(key)
        }
    }

    /// Forgets every preserved state of `app` (a force-quit), or of every app (Bluetooth turned off).
    func forgetPreserved(of app: String?) {
        guard !core.isShutDown else { return }
        preservationOwners.withLock { owners in
            for preserved in core.store.preservedManagers where app == nil || preserved.key.app == app {
                owners[preserved.key] = nil
                core.store.removePreserved(preserved.key)
            }
        }
    }

    /// A system made on a store with preserved state (a phone restarted): for each record, the app (known by
    /// its id, with the background modes it declared, not running) gets a kept manager that carries the work on
    /// once the controller is on, and its relaunch when something happens. A record that cannot be read, or of
    /// an app without the role's background mode, is logged and forgotten; one another version of swift-ble
    /// wrote is logged and left as it is. The default app is the process itself: it is not made "not running",
    /// and its kept work waits for the process to make a manager with the restore identifier.
    func resumePreservedWork() {
        for preserved in core.store.preservedManagers {
            let key = preserved.key
            let app = app(id: key.app)
            if app.backgroundModes.isEmpty {
                app.core.setBackgroundModes(Set(preserved.backgroundModes.compactMap(App.BackgroundMode.init)))
            }
            let version = PreservedRecordVersion.of(preserved.record)
            let current =
                key.role == .central ? PreservedCentralRecord.currentVersion : PreservedPeripheralRecord.currentVersion
            guard version == nil || version == current else {
                Self.logger.warning(
                    "a preserved manager's state was written by another version of swift-ble; it is left as it is",
                    metadata: ["manager": "\(key)", "version": "\(version ?? 0)"])
                continue
            }
            let kept: Bool
            switch key.role {
            case .central:
                kept = keep(preserved, for: app, mode: .bluetoothCentral, as: PreservedCentralRecord.self) { record in
                    let keeper = CentralManager(
                        delegate: nil, queue: Self.keeperQueue,
                        options: .init(showPowerAlert: false, restoreIdentifier: key.restoreIdentifier), app: app)
                    withRuntime(of: app.id) { $0.kept[ObjectIdentifier(keeper.session)] = .central(keeper) }
                    let work = keeper.resume(record)
                    core.keepForRestoration(
                        ObjectIdentifier(keeper.session), restoreIdentifier: key.restoreIdentifier, work: work)
                }
            case .peripheral:
                kept = keep(preserved, for: app, mode: .bluetoothPeripheral, as: PreservedPeripheralRecord.self) {
                    record in
                    let keeper = PeripheralManager(
                        delegate: nil, queue: Self.keeperQueue,
                        options: .init(showPowerAlert: false, restoreIdentifier: key.restoreIdentifier), app: app)
                    withRuntime(of: app.id) { $0.kept[ObjectIdentifier(keeper.session)] = .peripheral(keeper) }
                    let work = keeper.resume(record)
                    core.keepForRestoration(
                        ObjectIdentifier(keeper.session), restoreIdentifier: key.restoreIdentifier, work: work)
                }
            }
            guard kept else { continue }
            Self.logger.info(
                "carrying on a preserved manager's work for an app that is not running",
                metadata: ["manager": "\(key)"])
        }
    }

    /// An app with preserved work has not run since the restart (the default app, the process itself, runs).
    private func markNotRunning(_ app: App) {
        guard app.id != SystemCore.defaultAppID else { return }
        app.core.startNotRunning()
    }

    /// Starts `preserved`'s work for `app` (`start`, with its record) when the app declares `mode` and the
    /// record can be read, the app then not running; otherwise forgets the record. Returns whether it started.
    private func keep<Record: PreservedRecord>(
        _ preserved: PreservedManager, for app: App, mode: App.BackgroundMode, as: Record.Type,
        start: (Record) -> Void
    ) -> Bool {
        guard app.backgroundModes.contains(mode), let record = Record(decoding: preserved.record) else {
            forgetUnusable(preserved)
            return false
        }
        markNotRunning(app)
        start(record)
        return true
    }

    private func forgetUnusable(_ preserved: PreservedManager) {
        Self.logger.warning(
            "a preserved manager's state cannot be used and is forgotten",
            metadata: ["manager": "\(preserved.key)", "bytes": "\(preserved.record.count)"])
        core.store.removePreserved(preserved.key)
    }
}

/// The version a preserved record says it has (both roles' records are JSON objects with a `version`).
private struct PreservedRecordVersion: Decodable {
    var version: Int

    /// The version in `bytes`, or nil when they are not a JSON object with one.
    static func of(_ bytes: [UInt8]) -> Int? {
        (try? JSONDecoder().decode(Self.self, from: Data(bytes)))?.version
    }
}

/// A manager's record in the store, read back.
protocol PreservedRecord {
    /// The record in `bytes`, or nil when they are not one this version wrote.
    init?(decoding bytes: [UInt8])
}

/// What the store keeps of a central manager (JSON, with a version a later form can tell apart).
struct PreservedCentralRecord: Codable, Hashable, PreservedRecord {
    static let currentVersion = 1

    /// A peer the manager wants a link to, with what its `connect` asked for.
    struct Peer: Codable, Hashable {
        var identifier: UUID
        var autoReconnect: Bool
        var notifyOnConnection: Bool
        var notifyOnDisconnection: Bool
        var notifyOnNotification: Bool
    }

    var version = Self.currentVersion
    var peers: [Peer]
    /// The services of the scan, when it scans for some (a scan for everything is not carried on).
    var scanServices: [String]?
    var allowDuplicates: Bool?
    var solicitedServices: [String]?

    var isEmpty: Bool { peers.isEmpty && scanServices == nil }

    var encoded: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // `try!` cannot trap: every field is a string, a UUID, a Bool or an array of them.
        return Array(try! encoder.encode(self))
    }

    init(peers: [Peer], scanServices: [String]?, allowDuplicates: Bool?, solicitedServices: [String]?) {
        self.peers = peers
        self.scanServices = scanServices
        self.allowDuplicates = allowDuplicates
        self.solicitedServices = solicitedServices
    }

    /// The record in `bytes`, or nil when they are not one this version wrote.
    init?(decoding bytes: [UInt8]) {
        guard let record = try? JSONDecoder().decode(Self.self, from: Data(bytes)),
            record.version == Self.currentVersion,
            (record.scanServices ?? []).allSatisfy({ BluetoothUUID(string: $0) != nil }),
            (record.solicitedServices ?? []).allSatisfy({ BluetoothUUID(string: $0) != nil })
        else { return nil }
        self = record
    }
}
