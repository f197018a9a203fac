import BLEATT
import BLECore
import BLEGATT
import BLEHost
import Synchronization

/// Which manager published each attribute of the system's GATT server (Arbitration/GATTOwnership.swift): a
/// request from a client reaches only the owner of the attribute it names, so two apps' services live side by
/// side, each answering for its own. A manager that goes away takes its services with it (the host indicates
/// Service Changed to subscribed clients; the other services keep their handles).
final class GATTOwnership: Sendable {
    private struct Owned {
        weak var owner: (any SystemSession)?
        var ownerID: ObjectIdentifier
        var serviceHandle: AttributeHandle
    }

    private struct State {
        /// Characteristic value handle -> its service's owner.
        var byValueHandle: [AttributeHandle: Owned] = [:]
        /// Service declaration handle -> its characteristics' value handles.
        var services: [AttributeHandle: (ownerID: ObjectIdentifier, values: [AttributeHandle])] = [:]
    }
    private let state = Mutex(State())
    private let host: HostDriver

    init(host: HostDriver) { self.host = host }

    func add(_ definition: GATTServiceDefinition, owner: any SystemSession) -> Result<PublishedService, HostError> {
        let result = host.addService(definition)
        if case .success(let published) = result {
            let id = ObjectIdentifier(owner)
            state.withLock { s in
                for value in published.characteristicValueHandles {
                    s.byValueHandle[value] = Owned(owner: owner, ownerID: id, serviceHandle: published.serviceHandle)
                }
                s.services[published.serviceHandle] = (id, published.characteristicValueHandles)
            }
        }
        return result
    }

    /// Removes the service declared at `serviceHandle` if `owner` published it.
    func remove(at serviceHandle: AttributeHandle, owner: any SystemSession) {
        let removed = state.withLock { s -> Bool in
            guard let service = s.services[serviceHandle], service.ownerID == ObjectIdentifier(owner) else {
                return false
            }
            s.services[serviceHandle] = nil
            for value in service.values { s.byValueHandle[value] = nil }
            return true
        }
        if removed { host.removeService(at: serviceHandle) }
    }

    /// Every service `old` published is `new`'s (a restored manager taking over).
    func transfer(from old: ObjectIdentifier, to new: any SystemSession) {
        let id = ObjectIdentifier(new)
        state.withLock { s in
            for (handle, owned) in s.byValueHandle where owned.ownerID == old {
                s.byValueHandle[handle] = Owned(owner: new, ownerID: id, serviceHandle: owned.serviceHandle)
            }
            for (handle, service) in s.services where service.ownerID == old {
                s.services[handle] = (id, service.values)
            }
        }
    }

    /// Removes every service `ownerID` published (a manager that went away).
    func removeAll(of ownerID: ObjectIdentifier) {
        let handles = state.withLock { s -> [AttributeHandle] in
            let mine = s.services.filter { $0.value.ownerID == ownerID }
            for (handle, service) in mine {
                s.services[handle] = nil
                for value in service.values { s.byValueHandle[value] = nil }
            }
            return mine.keys.sorted()
        }
        for handle in handles { host.removeService(at: handle) }
    }

    /// The manager that answers for the attribute at `handle`, if it is still there.
    func owner(of handle: AttributeHandle) -> (any SystemSession)? {
        state.withLock { $0.byValueHandle[handle]?.owner }
    }

    /// The owners a server event goes to, each with its part (nil when the event names no attribute: it goes to
    /// every manager). A request for an attribute nobody answers for any more is refused here, once, so the
    /// client is never left waiting for the ATT transaction timeout, and goes to nobody.
    func route(_ event: HostEvent) -> [(any SystemSession, HostEvent)]? {
        switch event {
        case .serverRead(let request, _, let attribute, _):
            guard let owner = owner(of: attribute) else {
                host.respond(to: request, result: .unlikelyError, value: nil)
                return []
            }
            return [(owner, event)]
        case .serverWrite(let request, let handle, let writes):
            // Grouped by owner, in the order of the writes. The first owner's request carries the id and
            // answers for the whole request (a queued write that spans two apps' services is rare; the spec
            // allows one answer).
            var groups: [(any SystemSession, [GATTWriteRequest])] = []
            for write in writes {
                guard let owner = owner(of: write.attribute) else { continue }
                if let i = groups.firstIndex(where: { $0.0 === owner }) {
                    groups[i].1.append(write)
                } else {
                    groups.append((owner, [write]))
                }
            }
            guard !groups.isEmpty else {
                if let request { host.respond(to: request, result: .invalidHandle, value: nil) }
                return []
            }
            return groups.enumerated().map { i, group in
                (group.0, .serverWrite(i == 0 ? request : nil, handle, group.1))
            }
        case .subscriptionChanged(_, let attribute, _, _):
            return owner(of: attribute).map { [($0, event)] } ?? []
        default:
            return nil
        }
    }
}
