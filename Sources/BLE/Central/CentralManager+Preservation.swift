import BLECore
import BLESystem
import Foundation
import Logging
import Synchronization

// A central manager's preserved state in the store, and the work a restarted system carries on from it
// (`BluetoothSystem+Preservation.swift` says when records are written and forgotten).

extension CentralManager {
    /// Where this manager's state is preserved: it has a restore identifier and its app `bluetooth-central`.
    var preservationKey: PreservedManager.Key? {
        guard let id = restoreIdentifier, app.backgroundModes.contains(.bluetoothCentral) else { return nil }
        return PreservedManager.Key(app: app.id, role: .central, restoreIdentifier: id)
    }

    /// What the system would carry on for this manager: the peers it wants a link to (connected or pending, not
    /// cancelled) and its scan for services.
    static func restorableRecord(of s: State) -> PreservedCentralRecord {
        let wanted = (Array(s.byHandle.values) + Array(s.pending.values)).filter { !$0.isCancelled }
        var seen: Set<UUID> = []
        let peers = wanted.sorted { $0.identifier.uuidString < $1.identifier.uuidString }.compactMap {
            p -> PreservedCentralRecord.Peer? in
            guard seen.insert(p.identifier).inserted else { return nil }
            let alerts = p.alerts
            return PreservedCentralRecord.Peer(
                identifier: p.identifier, autoReconnect: p.wantsAutoReconnect,
                notifyOnConnection: alerts.onConnection, notifyOnDisconnection: alerts.onDisconnection,
                notifyOnNotification: alerts.onNotification)
        }
        let services = (s.scan?.services ?? []).map(\.uuidString)
        let options = s.scan?.options
        return PreservedCentralRecord(
            peers: peers, scanServices: services.isEmpty ? nil : services,
            allowDuplicates: services.isEmpty ? nil : options?.allowDuplicates,
            solicitedServices: services.isEmpty ? nil : options?.solicitedServiceUUIDs?.map(\.uuidString))
    }

    /// Writes what the system would carry on for this manager to the store, when it changed (or forgets it when
    /// nothing is left): after a connect, a cancel, a connection that failed or ended for good, a scan started
    /// or stopped.
    func persistRestorableState() {
        // A manager of an ended app writes nothing (what the system keeps for it, a kept manager writes).
        guard let key = preservationKey, !isDefunct || isPreserved else { return }
        system.preserve(key, owner: session, modes: app.backgroundModes) {
            let record = self.locked.withLock { Self.restorableRecord(of: $0) }
            return record.isEmpty ? nil : record.encoded
        }
    }

    /// A kept manager of a restarted system takes `record`'s work: its peers are pending and its scan is on (the
    /// system connects and scans once the controller is on). Kept for its app, which is not running. Returns the
    /// work for the system to carry on.
    func resume(_ record: PreservedCentralRecord) -> RestorationTable.Resume {
        var peripherals: [Peripheral] = []
        for peer in record.peers {
            guard let known = system.core.store.knownPeer(peer.identifier) else {
                Self.apiLogger.warning(
                    "a preserved connection names a peer the store no longer knows; it is not carried on",
                    metadata: ["identifier": "\(peer.identifier)", "app": "\(app.id)"])
                continue
            }
            let p = peripheral(for: known.address, identifier: peer.identifier)
            if let name = known.name { p.updateName(name) }
            let ask = p.connectRequested(
                autoReconnect: peer.autoReconnect,
                alerts: .init(
                    onConnection: peer.notifyOnConnection, onDisconnection: peer.notifyOnDisconnection,
                    onNotification: peer.notifyOnNotification))
            // One attempt per peer: a record that names one twice keeps the first.
            guard ask == .started else { continue }
            peripherals.append(p)
        }
        let services = record.scanServices?.compactMap(BluetoothUUID.init(string:))
        let scan = locked.withLock { s -> ScanSession? in
            s.preserved = true
            for p in peripherals { s.pending[p.address] = p }
            guard let services else { return nil }
            s.scan = ScanSession(
                id: s.nextScanID, services: services,
                options: ScanOptions(
                    allowDuplicates: record.allowDuplicates,
                    solicitedServiceUUIDs: record.solicitedServices?.compactMap(BluetoothUUID.init(string:))))
            s.nextScanID += 1
            return s.scan
        }
        persistRestorableState()
        return RestorationTable.Resume(
            peers: peripherals.sorted { $0.identifier.uuidString < $1.identifier.uuidString }.map {
                let alerts = $0.alerts
                return .init(
                    address: $0.address, autoReconnect: $0.wantsAutoReconnect,
                    alerts: ConnectionAlertWishes(
                        connection: alerts.onConnection, disconnection: alerts.onDisconnection,
                        notification: alerts.onNotification))
            },
            scan: scan.map { scan in
                .init(
                    request: ScanRequest(
                        services: scan.services, solicitedServices: scan.options?.solicitedServiceUUIDs ?? [],
                        allowDuplicates: scan.options?.allowDuplicates == true), id: scan.id)
            })
    }
}
