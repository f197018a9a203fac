import BLEATT
import BLECore
import BLEGATT
import BLEHost

/// Which session published each service of the system's GATT server, as a value of `SystemMachine`.
///
/// ### Function
/// A request from a client reaches only the session that published the attribute it names, so two apps'
/// services live side by side, each answering for its own. A request for an attribute nobody answers for any
/// more is refused at once (so the client never waits for the ATT transaction timeout). A session that goes
/// away, or whose app is terminated, takes its services with it (the host indicates Service Changed to the
/// clients that asked; the other services keep their handles).
///
/// ### Implementation
/// The owner of each characteristic value handle, and each service's declaration handle with its owner and
/// value handles.
package struct ServiceTable: Sendable, Hashable {
    struct Service: Sendable, Hashable {
        var owner: SessionID
        var values: [AttributeHandle]
    }

    private var owners: [AttributeHandle: SessionID] = [:]
    private var services: [AttributeHandle: Service] = [:]
    /// A request routed to a session and not answered yet, and the link it came on.
    package struct Unanswered: Sendable, Hashable {
        package var session: SessionID
        package var link: ConnectionHandle
    }

    /// Requests routed to a session and not answered yet: each is answered once, by its session, or refused
    /// when the session goes (or its app ends) first, or forgotten when its link goes (the host forgets it).
    package private(set) var unanswered: [GATTServerRequestID: Unanswered] = [:]

    package init() {}

    /// The session that answers for the characteristic value at `handle`.
    package func owner(of handle: AttributeHandle) -> SessionID? { owners[handle] }

    /// `session` published `service`.
    mutating func published(_ service: PublishedService, by session: SessionID) {
        for value in service.characteristicValueHandles { owners[value] = session }
        services[service.serviceHandle] = Service(owner: session, values: service.characteristicValueHandles)
    }

    /// Forgets the service declared at `handle` if `session` published it; whether it did.
    mutating func remove(at handle: AttributeHandle, by session: SessionID) -> Bool {
        guard let service = services[handle], service.owner == session else { return false }
        services[handle] = nil
        for value in service.values { owners[value] = nil }
        return true
    }

    /// Forgets every service `session` published; their declaration handles, in order.
    mutating func removeAll(of session: SessionID) -> [AttributeHandle] {
        let mine = services.filter { $0.value.owner == session }.keys.sorted()
        for handle in mine { _ = remove(at: handle, by: session) }
        return mine
    }

    /// Every service `old` published is `new`'s (a restored session taking over), and so are the requests it
    /// has not answered.
    mutating func transfer(from old: SessionID, to new: SessionID) {
        for (handle, owner) in owners where owner == old { owners[handle] = new }
        for (handle, service) in services where service.owner == old { services[handle]?.owner = new }
        for (request, pending) in unanswered where pending.session == old { unanswered[request]?.session = new }
    }

    /// `session` answers `request`: true when the request was routed to it and not answered yet (it is answered
    /// now, by the caller).
    mutating func answer(_ request: GATTServerRequestID, by session: SessionID) -> Bool {
        guard unanswered[request]?.session == session else { return false }
        unanswered[request] = nil
        return true
    }

    /// Whether `request` was routed to `session` and is not answered yet.
    package func isUnanswered(_ request: GATTServerRequestID, by session: SessionID) -> Bool {
        unanswered[request]?.session == session
    }

    /// The link went down (or the controller did, nil: every link): the host forgot its requests.
    mutating func linkDown(_ link: ConnectionHandle?) {
        unanswered = link.map { link in unanswered.filter { $0.value.link != link } } ?? [:]
    }

    /// Takes `request` out of the unanswered, whoever it was routed to: true when it was there (the caller
    /// refuses it: its session went before it was told).
    mutating func drop(_ request: GATTServerRequestID) -> Bool {
        unanswered.removeValue(forKey: request) != nil
    }

    /// Refuses every request routed to `session` and not answered (it went, or its app ended): nobody will
    /// answer them, and the client should not wait for the ATT transaction timeout.
    mutating func refuseUnanswered(of session: SessionID, _ actions: inout [SystemAction]) {
        let mine = unanswered.filter { $0.value.session == session }.keys.sorted { $0.rawValue < $1.rawValue }
        for request in mine {
            unanswered[request] = nil
            actions.append(.refuse(request, .unlikelyError))
        }
    }

    /// A server event for the owners of the attributes it names, or refused; false when it names no attribute
    /// (it goes to every session). A read or write for an owner that cannot answer now (`answering`: its app is
    /// suspended without `bluetooth-peripheral`, IOSRules.md 3.2) is refused, or, without a response, dropped.
    mutating func route(
        _ event: HostEvent, answering: (SessionID) -> Bool = { _ in true }, _ actions: inout [SystemAction]
    ) -> Bool {
        switch event {
        case .serverRead(let request, let link, let attribute, _):
            if let owner = owners[attribute], answering(owner) {
                unanswered[request] = Unanswered(session: owner, link: link)
                actions.append(.deliver(owner, .server(event)))
            } else {
                actions.append(.refuse(request, .unlikelyError))
            }
        case .serverWrite(let request, let link, let writes):
            // Grouped by owner, in the order of the writes. The first owner's part carries the request's id and
            // answers for the whole request (a queued write that spans two apps' services is rare; the spec
            // allows one answer).
            var groups: [(SessionID, [GATTWriteRequest])] = []
            for write in writes {
                guard let owner = owners[write.attribute] else { continue }
                if let i = groups.firstIndex(where: { $0.0 == owner }) {
                    groups[i].1.append(write)
                } else {
                    groups.append((owner, [write]))
                }
            }
            guard !groups.isEmpty else {
                if let request { actions.append(.refuse(request, .invalidHandle)) }
                return true
            }
            // The first owner answers for the request: it refuses it when it cannot answer now.
            if let request {
                if answering(groups[0].0) {
                    unanswered[request] = Unanswered(session: groups[0].0, link: link)
                } else {
                    actions.append(.refuse(request, .unlikelyError))
                }
            }
            for (i, (owner, mine)) in groups.enumerated() where answering(owner) {
                actions.append(.deliver(owner, .server(.serverWrite(i == 0 ? request : nil, link, mine))))
            }
        case .subscriptionChanged(_, let attribute, _, _):
            if let owner = owners[attribute] { actions.append(.deliver(owner, .server(event))) }
        default:
            return false
        }
        return true
    }
}
