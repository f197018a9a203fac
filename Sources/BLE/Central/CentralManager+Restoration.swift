import BLECore
import BLESystem
import Synchronization

// State preservation and restoration of a central manager, in one process.
//
// When an app with `bluetooth-central` is terminated by the system or crashes, each of its central managers that
// has a restore identifier and pending work (a scan for services, a connection up or pending) is kept by the
// system instead of released: its scan, links, pending connections and subscriptions go on on the app's behalf.
// Nothing reaches the kept manager: the system notes what would have (`SystemMachine.note`), and relaunches the
// app in the background for the first event of that work that wakes it (a pending connection completing, a
// device the scan was for, a notification of a subscribed characteristic), with the restore identifiers in the
// launch options. A central manager made there with the same restore identifier takes the kept one's place: it
// applies the notes to the kept manager (`absorb`, as they would have been told to it), takes its state, and
// tells `willRestoreState` first, with its peripherals (connected, or connecting; services, characteristics and
// descriptors rebuilt, `isNotifying` set) and its scan; then `didUpdateState`; then the events that caused the
// relaunch, as CoreBluetooth tells them; then, once in the kept one's place, what came since.

extension CentralManager {
    /// What happened to a kept manager while its app was not running: told to the manager that restores it.
    enum RestorationEvent: Sendable {
        case connected(Peripheral)
        /// A link lost, or a connection attempt failed, while kept (the system relaunched the app for it).
        case disconnected(Peripheral, BluetoothError?)
        case failedToConnect(Peripheral, BluetoothError)
        case notification(Peripheral, attribute: AttributeHandle, value: [UInt8], isIndication: Bool)
        case discovered(SystemDiscovery)

        /// Events with one key replace each other: a characteristic's latest value, a device's latest discovery.
        var key: String? {
            switch self {
            case .notification(let p, let attribute, _, _): "\(ObjectIdentifier(p).hashValue)/\(attribute.rawValue)"
            case .discovered(let discovery): "\(discovery.address)"
            case .connected, .disconnected, .failedToConnect: nil
            }
        }
    }

    /// The error of everything a task awaited of a terminated app's manager.
    static let appTerminated = BluetoothError(.operationCancelled, "the application was terminated")

    /// The manager's app was terminated: every task waiting on it, or on its peripherals, ends with
    /// `appTerminated`, since nothing is delivered to it any more (whether the system keeps its work or not).
    func abandonAsyncWork() {
        let (waits, peripherals) = locked.withLock { s in
            s.abandoned = Self.appTerminated
            let peripherals = s.peripherals.values.compactMap(\.peripheral)
            // Under the manager's lock, as a new wait is registered: one either is among these or sees the end.
            return (s.poweredOnWaits.take() + peripherals.flatMap { $0.takeWaits() }, peripherals)
        }
        for w in waits { w.fail(Self.appTerminated) }
        // Attached if it was not: a stream asked of the ended manager later must end at once too.
        asyncObserver.terminate(Self.appTerminated)
        for p in peripherals { p.existingAsyncObserver?.linkLost(Self.appTerminated) }
    }

    /// The restore identifier this manager was made with.
    var restoreIdentifier: String? { options?.restoreIdentifier }

    /// Whether the system keeps this manager for its terminated app.
    var isPreserved: Bool { locked.withLock { $0.preserved } }

    /// Whether the manager has work the system can carry on: a scan for services, a link, a pending connection.
    var hasRestorableWork: Bool {
        !locked.withLock { Self.restorableRecord(of: $0) }.isEmpty
    }

    /// Whether something happened to this kept manager that its app has not heard yet (an event applied to it as
    /// its app was being terminated, before the system noted what reaches it).
    var hasRestorationEvents: Bool { locked.withLock { !$0.restorationEvents.isEmpty } }

    /// The system keeps this manager after its app was terminated. What it carries on is the system's rule: a scan
    /// for every device ends (the system stops it, and this manager hears the end among its notes); it is over for
    /// this manager at once, so that nothing that comes before the system's step counts for it.
    func preserve() {
        locked.withLock { s in
            s.preserved = true
            if (s.scan?.services ?? []).isEmpty { s.scan = nil }
        }
    }

    /// What the system noted for this kept manager, applied to it in their order as they would have been told
    /// (by the manager that restores it, before it takes its state): its state follows them, and what its app is
    /// to hear is noted as `RestorationEvent`s.
    func absorb(_ notes: [SessionEvent]) {
        for event in notes { apply(event) }
    }

    /// An event of a kept manager (`absorb`): noted for the manager that restores it, which tells it after
    /// `didUpdateState`. (The system relaunched the app when it noted it.)
    func noteForRestoration(_ event: RestorationEvent) {
        locked.withLock { s in
            // A stream of notifications or discoveries keeps its latest value per characteristic or device; the
            // connections and their losses are all kept.
            if let key = event.key { s.restorationEvents.removeAll { $0.key == key } }
            if s.restorationEvents.count >= 64, let i = s.restorationEvents.firstIndex(where: { $0.key != nil }) {
                s.restorationEvents.remove(at: i)
            }
            s.restorationEvents.append(event)
        }
    }

    /// Takes over from `kept`, the manager the system kept for this app under the same restore identifier, once
    /// it has absorbed the system's notes: its peripherals, links, subscriptions and scan. Called in the take-over
    /// (`takeOver`, in the serial domain), before the manager takes the kept one's place (nothing reaches either
    /// meanwhile: the system notes it), so that `willRestoreState` is the first callback. Returns the events to tell
    /// after `didUpdateState`, and the id of the kept scan this manager carries on (the kept one's, so what the
    /// system sent for it is this one's).
    func restore(from kept: CentralManager) -> (events: [RestorationEvent], scan: UInt64?) {
        let (connected, pending, events, takenScan, nextScanID) = kept.locked.withLock { s in
            defer {
                s.byHandle = [:]
                s.pending = [:]
                s.scan = nil
                s.restorationEvents = []
            }
            return (s.byHandle, s.pending, s.restorationEvents, s.scan, s.nextScanID)
        }
        // Past every id the kept manager used: news of a scan of its that ended is nobody's here.
        locked.withLock { $0.nextScanID = max($0.nextScanID, nextScanID) }
        var map: [ObjectIdentifier: Peripheral] = [:]
        var restored: [Peripheral] = []
        // Connected ones (on their links) first, then pending ones.
        let links =
            connected.sorted { $0.key.rawValue < $1.key.rawValue }.map { (old: $0.value, handle: Optional($0.key)) }
            + pending.values.sorted { $0.identifier.uuidString < $1.identifier.uuidString }.map {
                (old: $0, handle: ConnectionHandle?.none)
            }
        for (old, handle) in links {
            let p = peripheral(for: old.address, identifier: old.identifier)
            p.restore(from: old, handle: handle)
            locked.withLock { s in
                if let handle { s.byHandle[handle] = p } else { s.pending[old.address] = p }
            }
            map[ObjectIdentifier(old)] = p
            restored.append(p)
        }
        // The kept scan goes on under its id (the system starts one a restarted system kept once powered on); only
        // a scan for services is ever carried on.
        let keptScan = takenScan.flatMap { ($0.services ?? []).isEmpty ? nil : $0 }
        let scanning = keptScan != nil
        if let keptScan { locked.withLock { $0.scan = keptScan } }
        // This manager writes the preserved state from now on.
        persistRestorableState()
        // As in CoreBluetooth's dictionary, keys that would be empty are left out; the scan options hold only what
        // was set.
        let scanOptions = keptScan?.options.flatMap { o -> ScanOptions? in
            let solicited = o.solicitedServiceUUIDs ?? []
            guard o.allowDuplicates == true || !solicited.isEmpty else { return nil }
            return ScanOptions(
                allowDuplicates: o.allowDuplicates == true ? true : nil,
                solicitedServiceUUIDs: solicited.isEmpty ? nil : solicited)
        }
        let state = RestoredState(
            peripherals: restored.isEmpty ? nil : restored,
            scanServices: scanning ? keptScan?.services.flatMap { $0.isEmpty ? nil : $0 } : nil,
            scanOptions: scanning ? scanOptions : nil)
        deliver { manager in manager.tell(.willRestore(state)) }
        // A peripheral the events name that is neither connected nor pending now (its link went) is this
        // manager's too, disconnected.
        func counterpart(_ old: Peripheral) -> Peripheral {
            if let p = map[ObjectIdentifier(old)] { return p }
            let p = peripheral(for: old.address, identifier: old.identifier)
            p.restore(from: old, handle: nil)
            p.setState(.disconnected)
            map[ObjectIdentifier(old)] = p
            return p
        }
        let told = events.compactMap { event -> RestorationEvent? in
            switch event {
            case .connected(let old): .connected(counterpart(old))
            case .disconnected(let old, let error): .disconnected(counterpart(old), error)
            case .failedToConnect(let old, let error): .failedToConnect(counterpart(old), error)
            case .notification(let old, let attribute, let value, let isIndication):
                map[ObjectIdentifier(old)].map {
                    .notification($0, attribute: attribute, value: value, isIndication: isIndication)
                }
            case .discovered(let discovery): .discovered(discovery)
            }
        }
        return (told, keptScan?.id)
    }

    /// Tells the restored manager the events that caused the relaunch, after `didUpdateState`.
    func replay(_ events: [RestorationEvent]) {
        for event in events {
            switch event {
            case .connected(let p):
                deliver { manager in manager.tell(.connected(p)) }
            // Told as they happened; a peripheral the app connected again meanwhile (from `willRestoreState` or
            // `didUpdateState`) keeps its new attempt.
            case .disconnected(let p, let error):
                deliver { manager in
                    let ended =
                        p.currentState == .disconnected ? p.announceDisconnected(failing: .linkLost(error)) : nil
                    manager.tell(.disconnected(p, error))
                    ended?.finish()
                }
            case .failedToConnect(let p, let error):
                deliver { manager in
                    let ended = p.currentState == .disconnected ? p.announceDisconnected(failing: error) : nil
                    manager.tell(.failedToConnect(p, error))
                    ended?.finish()
                }
            case .notification(let p, let attribute, let value, let isIndication):
                p.handleValueUpdate(attribute: attribute, value: value, isIndication: isIndication)
            case .discovered(let discovery):
                if let scan = locked.withLock({ $0.scan }) { scanDiscovered(discovery, scan: scan.id) }
            }
        }
    }
}

extension Peripheral {
    /// Takes `old`'s place (a kept manager's peripheral): its name, its link (or pending connection) with its
    /// auto-reconnect and cancelled flags, and its discovered services, characteristics and descriptors, with the
    /// subscriptions' `isNotifying`.
    func restore(from old: Peripheral, handle: ConnectionHandle?) {
        let kept = old.locked.withLock { $0 }
        locked.withLock { s in
            s.name = kept.name
            s.handle = handle
            s.state = handle == nil ? .connecting : .connected
            s.alerts = kept.alerts
            // The connection's own promises go on: auto-reconnect, and whether the app had cancelled it.
            s.autoReconnect = kept.autoReconnect
            s.reconnecting = kept.reconnecting
            s.cancelled = kept.cancelled
        }
        for oldService in old.services ?? [] {
            guard let remote = oldService.state.withLock({ $0.remote }) else { continue }
            mergeServices([remote])
            guard let service = services?.first(where: { $0.state.withLock { $0.remote } == remote }) else { continue }
            let characteristics = (oldService.characteristics ?? []).compactMap { c in
                c.state.withLock { $0.remote }.map { (c, $0) }
            }
            mergeCharacteristics(characteristics.map(\.1), into: service)
            for (oldCharacteristic, remoteCharacteristic) in characteristics {
                guard
                    let c = service.characteristics?.first(where: {
                        $0.state.withLock { $0.remote } == remoteCharacteristic
                    })
                else { continue }
                let descriptors = (oldCharacteristic.descriptors ?? []).compactMap { $0.state.withLock { $0.remote } }
                if oldCharacteristic.descriptors != nil { mergeDescriptors(descriptors, into: c) }
                let notifying = oldCharacteristic.isNotifying
                c.state.withLock { $0.isNotifying = notifying }
            }
        }
    }
}
