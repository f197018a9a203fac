import BLEHost
import BLESystem
import Logging
import Synchronization

// State preservation and restoration of a peripheral manager, in one process.
//
// When an app with `bluetooth-peripheral` is terminated by the system or crashes, each of its peripheral managers
// that has a restore identifier and published services or an advertisement is kept: its services stay in the
// database (answered by nobody until it is restored: requests wait), its advertisement stays on the air (in the
// background form) and its subscribed centrals stay subscribed. What reaches it then is noted by the system, which
// relaunches the app in the background for a central's read, write or subscription (a restarted system's
// publication of its services and its advertisement too: the system's work, `resumedServicesPublished`). The
// peripheral manager made there with the same restore identifier takes over: it applies the
// notes to the kept one (`absorb`), then tells `willRestoreState` first, with its services (with their subscribed
// centrals) and advertisement data, then `didUpdateState`, then the requests that came. In one process too the
// restored services and centrals are new objects made from the kept one's values (`renew`), as after a restart.

extension PeripheralManager {
    /// The restore identifier this manager was made with.
    var restoreIdentifier: String? { options?.restoreIdentifier }

    /// Whether the system keeps this manager for its terminated app.
    var isPreserved: Bool { locked.withLock { $0.preserved } }

    /// Whether the manager has work the system can carry on: published services or an advertisement.
    var hasRestorableWork: Bool { !locked.withLock { Self.restorableRecord(of: $0) }.isEmpty }

    /// Whether a central asked something of this kept manager that its app has not heard yet, and still waits
    /// (not a request the system refused as the app ended).
    var hasRestorationEvents: Bool { locked.withLock { $0.restorationEvents }.contains(where: isStillAsked) }

    /// The system keeps this manager after its app was terminated (and refuses the requests the ended app never
    /// answered: nobody will answer them).
    func preserve() {
        locked.withLock { $0.preserved = true }
    }

    /// Applies what the system noted for this kept manager (`takeKept`, `takeNotes`), in order, as it would have
    /// applied it: its centrals and their links follow, and the centrals' requests are kept for its restorer.
    func absorb(_ notes: [SessionEvent]) {
        for event in notes { apply(event) }
    }

    /// A central's request to a kept manager: kept for the manager that restores it. (The system relaunched the
    /// app when it noted it; one that reached the manager itself as its app ended relaunches it at the end.)
    func noteForRestoration(_ event: HostEvent) {
        // A request the system refused as the app ended needs nobody: not kept.
        guard isStillAsked(event) else { return }
        locked.withLock { s in
            // Bounded: past 64, the oldest Write Command goes (requests are few: one outstanding per bearer).
            if s.restorationEvents.count >= 64, let i = s.restorationEvents.firstIndex(where: Self.isWriteCommand) {
                s.restorationEvents.remove(at: i)
            }
            s.restorationEvents.append(event)
        }
    }

    /// Whether a central still waits for an answer to this event: a read or a write the system has not answered
    /// (or refused as the app ended), or anything else.
    func isStillAsked(_ event: HostEvent) -> Bool {
        switch event {
        case .serverRead(let request, _, _, _), .serverWrite(let request?, _, _):
            system.core.isUnanswered(request, by: session)
        default: true
        }
    }

    private static func isWriteCommand(_ event: HostEvent) -> Bool {
        if case .serverWrite(nil, _, _) = event { return true }
        return false
    }

    /// Takes the kept manager's place, in the controller's serial domain (so nothing the domain does for either
    /// runs meanwhile, and what the take-over steps is performed after it): the notes taken with it (`notes`) and
    /// since applied to the kept one; its restoration told first, then its state, then the requests that
    /// relaunched the app; then, in the kept one's place, what was still queued for it (a restarted system's
    /// work not started yet is the restorer's session's: the system starts it). When the app ended again before
    /// the domain got to it, the notes are the kept manager's, which stays kept with its requests.
    func takeOver(from kept: PeripheralManager, notes: [SessionEvent]) {
        guard launch == app.core.generation else {
            // What is noted from now on is the system's again.
            kept.absorb(notes)
            return system.keptAgain(
                app, role: .peripheral, restoreIdentifier: restoreIdentifier, wakes: kept.hasRestorationEvents)
        }
        kept.absorb(notes + system.core.takeNotes(of: kept.session))
        system.core.holdingDrains {
            let events = restore(from: kept)
            adoptLinkedCentrals()
            let power = system.core.visiblePower
            if power != .unknown { powerChanged(power) }
            // Not the requests the system refused as the app ended (their centrals have their answer).
            for event in events where isStillAsked(event) { apply(.server(event)) }
            system.core.replace(kept.session, with: session, app: app.core, role: .peripheral, told: power)
        }
    }

    /// Takes over from `kept`, the manager the system kept for this app under the same restore identifier: its
    /// services, advertisement and centrals, before the manager takes the kept one's place among the registered,
    /// so that `willRestoreState` is the first callback. Returns the requests to hand on after `didUpdateState`.
    func restore(from kept: PeripheralManager) -> [HostEvent] {
        let taken = kept.locked.withLock { s -> State in
            defer {
                s.published = []
                s.advertising = nil
                s.isAdvertising = false
                s.centrals = [:]
                s.restorationEvents = []
                s.resumeAtPowerOn = nil
            }
            return s
        }
        let linked = Set(system.core.host.links.filter { $0.role == .peripheral }.map(\.handle))
        // The kept one's centrals are its ended app's: none follows its link any more (those still linked are
        // this manager's as new objects).
        for central in taken.centrals.values { central.isLinked.withLock { $0 = false } }
        let (published, resumed, centrals) = renew(taken, linked: linked)
        locked.withLock { s in
            s.published = published
            s.advertising = taken.advertising
            s.isAdvertising = taken.isAdvertising
            // The kept one's centrals still linked (a controller's reset ends every link without an end for
            // each), and any other linked meanwhile.
            s.centrals.merge(centrals) { _, renewed in renewed }
            // Preserved by an earlier process and not started yet (the controller is not on): the system
            // publishes and advertises for this manager once it is.
            s.resumeAtPowerOn = resumed
        }
        system.core.transfer(
            fromPeripheral: kept.session, to: session,
            advertisingStarted: { [weak self] result in
                // A start still waiting when the app ended: this manager advertises once the controller does.
                if case .success = result { self?.locked.withLock { $0.isAdvertising = $0.advertising != nil } }
            },
            advertisingEnded: { [weak self] error in self?.advertisingEnded(error) })
        let services = published.map(\.service) + (resumed?.kept ?? [])
        let state = RestoredState(
            services: services.isEmpty ? nil : services,
            advertisementData: taken.isAdvertising ? taken.advertising : taken.resumeAtPowerOn?.advertisement)
        // This manager writes the preserved state from now on.
        persistRestorableState()
        deliver { m in m.tell(.willRestore(state)) }
        return taken.restorationEvents
    }

    /// What the kept manager (its state `taken`) held, as objects of this manager's own, as a restart makes
    /// them (the kept ones are its ended app's): each service copied with the characteristics it was published
    /// with, each answering for the handle its original did, with the centrals subscribed to it among those still
    /// `linked`; the work a restarted system has yet to start; its centrals still linked.
    private func renew(_ taken: State, linked: Set<ConnectionHandle>) -> (
        published: [Published], resumed: ResumedWork?, centrals: [ConnectionHandle: Central]
    ) {
        var centrals: [ConnectionHandle: Central] = [:]
        var renewedCentrals: [ObjectIdentifier: Central] = [:]
        for (handle, old) in taken.centrals where linked.contains(handle) {
            let central = Central(
                identifier: old.identifier, address: old.address, handle: handle.rawValue,
                mtu: old.mtu.withLock { $0 }, host: system.core.host)
            centrals[handle] = central
            renewedCentrals[ObjectIdentifier(old)] = central
        }
        var renewed: [ObjectIdentifier: MutableService] = [:]
        let published = taken.published.map { entry -> Published in
            // The characteristics as published (by handle), whatever the app did to the service's list since.
            let handles = entry.characteristics.keys.sorted { $0.rawValue < $1.rawValue }
            let service = MutableService(type: entry.service.uuid, primary: entry.service.isPrimary)
            var map: [AttributeHandle: MutableCharacteristic] = [:]
            for handle in handles {
                let old = entry.characteristics[handle]!
                let new = Self.copy(old)
                new.state.withLock { $0.service = service }
                let subscribed = (old.subscribedCentrals ?? []).compactMap { renewedCentrals[ObjectIdentifier($0)] }
                new.mutableState.withLock { $0.subscribedCentrals = subscribed }
                map[handle] = new
            }
            service.characteristics = handles.map { map[$0]! }
            renewed[ObjectIdentifier(entry.service)] = service
            return Published(service: service, serviceHandle: entry.serviceHandle, characteristics: map)
        }
        // Those a restarted system has yet to publish: the keeper's own, made from the record.
        for old in taken.resumeAtPowerOn?.services ?? [] where renewed[ObjectIdentifier(old)] == nil {
            let service = MutableService(type: old.uuid, primary: old.isPrimary)
            service.characteristics = (old.characteristics ?? []).compactMap { $0 as? MutableCharacteristic }.map {
                let new = Self.copy($0)
                new.state.withLock { $0.service = service }
                return new
            }
            renewed[ObjectIdentifier(old)] = service
        }
        // Included services: the copies of those copied (another is not this manager's to restore).
        for old in taken.published.map(\.service) + (taken.resumeAtPowerOn?.services ?? []) {
            guard let new = renewed[ObjectIdentifier(old)] else { continue }
            let included = (old.includedServices ?? []).compactMap { renewed[ObjectIdentifier($0)] }
            if !included.isEmpty { new.includedServices = included }
        }
        return (published, taken.resumeAtPowerOn?.renewed(renewed), centrals)
    }

    /// A new characteristic with `old`'s values: its type, properties, permissions, value and descriptors.
    private static func copy(_ old: MutableCharacteristic) -> MutableCharacteristic {
        let new = MutableCharacteristic(
            type: old.uuid, properties: old.properties, value: old.value, permissions: old.permissions)
        if let descriptors = old.descriptors, !descriptors.isEmpty {
            new.descriptors = descriptors.map { MutableDescriptor(type: $0.uuid, value: $0.value) }
        }
        return new
    }
}

extension PeripheralManager {
    /// The system published again the services this manager (or the kept one it restores) was preserved with,
    /// `results` being their handles in order (nil: refused, logged by the system): they are this manager's now,
    /// with no `didAdd` (the system published them, not the app), and its preserved advertisement is asked.
    func resumedServicesPublished(_ results: [PublishedService?]) {
        guard let services = locked.withLock({ $0.resumeAtPowerOn?.services }) else { return }
        let entries = zip(services, results).map { service, published in
            published.map { entry(for: service, as: $0) }
        }
        // In one step with the app's `remove` and `removeAllServices`: a service it took out before this step is
        // taken out again, one it takes out after is among those published.
        let withdrawn = locked.withLock { s -> [AttributeHandle] in
            guard let work = s.resumeAtPowerOn else { return [] }
            s.resumeAtPowerOn = nil
            var withdrawn: [AttributeHandle] = []
            for (service, entry) in zip(work.services, entries) {
                guard let entry else { continue }
                if work.isWithdrawn(service) {
                    withdrawn.append(entry.serviceHandle)
                } else {
                    s.published.append(entry)
                }
            }
            if let advertisement = work.advertisement, s.advertising == nil { s.advertising = advertisement }
            return withdrawn
        }
        for handle in withdrawn { system.core.removeService(at: handle, owner: session) }
        persistRestorableState()
    }

    /// The controller advertises the preserved advertisement, or why not.
    func resumedAdvertising(_ error: HostError?) {
        guard let error else {
            let withdrawn = locked.withLock { s in
                s.isAdvertising = s.advertising != nil
                return s.advertising == nil
            }
            // The app stopped it while the system was starting it (as its restorer took over, say): off the air.
            if withdrawn { system.core.stopAdvertising(ObjectIdentifier(session)) }
            return
        }
        // Cancelled: the app stopped or replaced it, and the state is what that call made it.
        guard error.code != .cancelled else { return }
        locked.withLock { $0.advertising = nil }
        Self.latencyLogger.warning("a preserved advertisement could not start again: \(error)")
        if error.code != .transportClosed { persistRestorableState() }
    }
}
