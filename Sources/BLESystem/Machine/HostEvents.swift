import BLECore
import BLEHost

/// The host's events the managers hear of, routed to the sessions they concern, after the system's own part of
/// each (`SystemCore.handle` steps both in one step, so a manager hears of an event after what the system did
/// about it: a link's end after its `.linkDown`).
///
/// - A notification, indication, or readiness to write without response: the sessions on the link
///   (`LinkTable.users`).
/// - A peer's changed database (`DiscoveryTable`'s `.peerDatabaseChanged`): the sessions on the link.
/// - An advertisement's services, and a central-role link's start and end: the sessions registered for
///   connection events (`connectionWatchers`), whichever manager made the link; the ends of the links up when
///   the controller went away or was reset are told too, since the host reports none.
/// - A peripheral-role link's start, end, MTU, pairing and encryption, and the controller's readiness to
///   notify: every peripheral manager, as `.server`.
extension SessionEvent {
    /// Whether it is one of the host's events routed to the managers (`SystemMachine.route`), rather than what the
    /// machine did for the manager.
    package var isHostEvent: Bool {
        switch self {
        case .server, .valueUpdated, .readyToWrite, .peerDatabaseChanged, .advertised, .connectionEvent: true
        case .powerChanged, .appTerminated, .discovered, .scanEnded, .linkAttached, .linkFailed, .linkDown,
            .resumedServicesPublished, .resumedAdvertising, .resumedAdvertisingEnded:
            false
        }
    }
}

extension SystemMachine {
    /// `session` wants the connection events (`registerForConnectionEvents`; there is no way back).
    package mutating func watchConnections(_ session: SessionID) {
        guard sessions[session] != nil, !connectionWatchers.contains(session) else { return }
        connectionWatchers.append(session)
        connectionWatchers.sort()
    }

    /// The sessions a notification, indication or readiness to write on `link` is for: those on the link.
    package func sessionsOn(_ link: ConnectionHandle) -> [SessionID] {
        links.users(of: link)
    }

    /// The managers' part of a host event, appended to `actions`.
    package mutating func route(_ event: HostEvent, into actions: inout [SystemAction]) {
        switch event {
        case .valueUpdated(let link, let attribute, let value, let isIndication):
            for session in sessionsOn(link) {
                actions.append(.deliver(session, .valueUpdated(link, attribute, value, isIndication: isIndication)))
            }
        case .readyToWriteWithoutResponse(let link):
            for session in sessionsOn(link) { actions.append(.deliver(session, .readyToWrite(link))) }
        case .advertisingReport(let report):
            guard !connectionWatchers.isEmpty else { return }
            let services = AdvertisingData(leniently: report.data).serviceUUIDs
            guard !services.isEmpty else { return }
            for session in connectionWatchers {
                actions.append(.deliver(session, .advertised(report.address, services)))
            }
        case .connected(let info) where info.role == .central:
            centralRoleLinks[info.handle] = info.peer
            for session in connectionWatchers {
                actions.append(.deliver(session, .connectionEvent(info.handle, peer: info.peer, up: true)))
            }
        case .connected(let info):
            peripheralRoleLinks.insert(info.handle)
            toPeripheralManagers(event, &actions)
        case .disconnected(let handle, _):
            if let peer = centralRoleLinks.removeValue(forKey: handle) {
                for session in connectionWatchers {
                    actions.append(.deliver(session, .connectionEvent(handle, peer: peer, up: false)))
                }
            }
            if peripheralRoleLinks.remove(handle) != nil { toPeripheralManagers(event, &actions) }
        case .mtuChanged(let handle, _), .pairingStarted(let handle, _), .pairingCompleted(let handle, _),
            .pairingFailed(let handle, _), .encryptionChanged(let handle, _, _):
            if peripheralRoleLinks.contains(handle) { toPeripheralManagers(event, &actions) }
        case .readyToNotify:
            toPeripheralManagers(event, &actions)
        case .transportClosed, .controllerResetting:
            // Every link ended with the controller, though the host reports no end for each.
            for (handle, peer) in centralRoleLinks.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                for session in connectionWatchers {
                    actions.append(.deliver(session, .connectionEvent(handle, peer: peer, up: false)))
                }
            }
            centralRoleLinks = [:]
            peripheralRoleLinks = []
        case .serverRead, .serverWrite, .subscriptionChanged:
            _ = serverEvent(event, into: &actions)
        case .connectionFailed, .advertisingEnded, .controllerRestarted, .pairingPrompt, .securityRequested,
            .longTermKeyRequested:
            // The system's alone (links, advertising, power, security): no manager hears of them as such.
            break
        }
    }

    /// `link`'s peer has another database than its cache's: the sessions on it are told.
    mutating func tellDatabaseChanged(_ link: ConnectionHandle, _ actions: inout [SystemAction]) {
        for session in sessionsOn(link) { actions.append(.deliver(session, .peerDatabaseChanged(link))) }
    }

    private func toPeripheralManagers(_ event: HostEvent, _ actions: inout [SystemAction]) {
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.role == .peripheral {
            actions.append(.deliver(id, .server(event)))
        }
    }
}
