import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import BLETransport
import Foundation
import Logging
import Synchronization

// The peripheral role of the system: advertising and the GATT server's services.

/// How quickly a peripheral app wants its central to talk to it (`CBPeripheralManagerConnectionLatency`).
public enum ConnectionLatencyWish: Sendable, Hashable {
    /// Connection interval 15 to 30 ms.
    case low
    /// Connection interval 30 to 45 ms.
    case medium
    /// Connection interval 90 to 120 ms.
    case high

    /// The parameters asked for. CoreBluetooth does not publish its own; these are ours, chosen to meet Apple's
    /// accessory rules for requested parameters (IOSRules.md 9.4: a minimum that is a multiple of 15 ms, a maximum
    /// at least 15 ms above it, no peripheral latency, a 6 s supervision timeout), in the units of LE Connection
    /// Update (1.25 ms, 10 ms).
    var parameters: (intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16) {
        switch self {
        case .low: (12, 24, 0, 600)
        case .medium: (24, 36, 0, 600)
        case .high: (72, 96, 0, 600)
        }
    }
}

extension SystemCore {
    /// Asks the central on `link` for the connection interval of `wish`: the host sends LE Connection Update
    /// (Core Spec 5.4, Vol 4, Part E, 7.8.18), which the controller carries to the central as a Connection
    /// Parameters Request; `completion` hears whether our controller took the command (the central may still
    /// refuse or pick other values, and says nothing).
    public func requestConnectionLatency(
        _ wish: ConnectionLatencyWish, on link: ConnectionHandle,
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        let p = wish.parameters
        let update = HCILEConnectionUpdate(
            handle: link, connectionIntervalMin: p.intervalMin, connectionIntervalMax: p.intervalMax,
            maxLatency: p.latency, supervisionTimeout: p.timeout)
        host.send(update) { completion($0.map { _ in () }) }
    }

    // MARK: Advertising

    /// `client` advertises `content` (replacing what it advertised before), in the form its app's place in its
    /// lifecycle calls for: as asked, or the background form (`AdvertisingContent.backgroundRequest`, every
    /// `appRules.backgroundAdvertisingInterval`); as `startAdvertising(_:_:background:started:ended:)` says.
    package func startAdvertising(
        _ client: ObjectIdentifier, _ content: AdvertisingContent,
        started: @escaping @Sendable (Result<Void, HostError>) -> Void,
        ended: @escaping @Sendable (HostError) -> Void
    ) {
        startAdvertising(
            client, content.request,
            background: content.backgroundRequest(interval: appRules.backgroundAdvertisingInterval),
            started: started, ended: ended)
    }

    /// `client` advertises `request` (replacing what it advertised before). With other apps advertising, the
    /// system gives each app's advertisement the air in turn (`AdvertisingTable`). `started` hears once the
    /// controller advertises for the client, or why not (`.cancelled` when a stop or a later start overtook it);
    /// `ended`, when the controller refuses the advertisement later (put on the air again after a connection):
    /// the client no longer advertises.
    ///
    /// `background` is the form the advertisement takes while the client's app is out of the foreground with
    /// `bluetooth-peripheral`; a foreground-only app's advertisement leaves the air then, and comes back with it.
    public func startAdvertising(
        _ client: ObjectIdentifier, _ request: AdvertisingRequest, background: AdvertisingRequest? = nil,
        started: @escaping @Sendable (Result<Void, HostError>) -> Void,
        ended: @escaping @Sendable (HostError) -> Void
    ) {
        guard let app = appOf(client) else {
            refuseDefunct("advertising")
            return started(.failure(Self.defunct))
        }
        let live = step { s -> (Bool, [SystemAction]) in
            guard let session = s.ids[client] else { return (false, []) }
            let mode = s.machine.apps.advertisingMode(of: app.id)
            let (id, actions) = s.machine.startAdvertising(session, request, background: background, mode: mode)
            // Known before the start can be answered: its answer is performed after this step. The end of an
            // advertisement this start replaces is no longer told.
            s.advertisingStarts[id] = Caller(session: session, tell: started)
            s.advertisingEnds = s.advertisingEnds.filter { $0.value.session != session }
            s.resumedAdvertising = s.resumedAdvertising.filter { $0.value != session }
            s.advertisingEnds[id] = Caller(session: session, tell: ended)
            return (true, actions)
        }
        if !live {
            refuseDefunct("advertising")
            started(.failure(Self.defunct))
        }
    }

    /// Whether `app` may start advertising now (`AppTable.mayStartAdvertising`: in the foreground).
    package func mayStartAdvertising(app: SystemApp) -> Bool {
        state.withLock { $0.machine.apps.mayStartAdvertising(app.id) }
    }

    /// `client` stops advertising (the controller stops with the last app).
    public func stopAdvertising(_ client: ObjectIdentifier) {
        step { s in
            guard let session = s.session(of: client) else { return ((), []) }
            s.advertisingEnds = s.advertisingEnds.filter { $0.value.session != session }
            s.resumedAdvertising = s.resumedAdvertising.filter { $0.value != session }
            return ((), s.machine.stopAdvertising(session))
        }
    }

    // MARK: The GATT server

    /// Whether the client's `request` was routed to `owner` and is not answered yet (a request noted for a kept
    /// manager may have been refused as its app ended).
    package func isUnanswered(_ request: GATTServerRequestID, by owner: any SystemSession) -> Bool {
        state.withLock { s in
            s.session(of: ObjectIdentifier(owner)).map { s.machine.services.isUnanswered(request, by: $0) } ?? false
        }
    }

    /// `owner` answers the client's `request` (a read's `value`, or the code to refuse it with): false, and
    /// nothing sent, when the request was answered already, refused (its app ended), or is not `owner`'s.
    /// `completion` hears whether the answer was handed to the client's bearer.
    package func respond(
        to request: GATTServerRequestID, by owner: any SystemSession, result: ATTErrorCode, value: [UInt8]?,
        attribute: AttributeHandle? = nil, completion: (@Sendable (Result<Void, HostError>) -> Void)? = nil
    ) -> Bool {
        let mine = state.withLock { s in
            s.session(of: ObjectIdentifier(owner)).map { s.machine.serverRequestAnswered(request, by: $0) } ?? false
        }
        guard mine else { return false }
        host.respond(to: request, result: result, value: value, attribute: attribute, completion: completion)
        return true
    }

    /// Publishes a service that `owner` answers for: requests for its attributes reach `owner` only.
    package func addService(_ definition: GATTServiceDefinition, owner: any SystemSession)
        -> Result<PublishedService, HostError>
    {
        guard let session = state.withLock({ $0.session(of: ObjectIdentifier(owner)) }) else {
            refuseDefunct("a service")
            return .failure(Self.defunct)
        }
        let result = host.addService(definition)
        guard case .success(let published) = result else { return result }
        let recorded = state.withLock { s in
            // Its app may have been terminated meanwhile: nobody would take the service out then.
            guard s.session(of: ObjectIdentifier(owner)) == session else { return false }
            s.machine.servicePublished(published, by: session)
            return true
        }
        guard recorded else {
            host.removeService(at: published.serviceHandle)
            refuseDefunct("a service")
            return .failure(Self.defunct)
        }
        return result
    }

    /// Unpublishes the service declared at `serviceHandle`, if `owner` published it.
    package func removeService(at serviceHandle: AttributeHandle, owner: any SystemSession) {
        let removed = state.withLock { s in
            s.session(of: ObjectIdentifier(owner)).map { s.machine.serviceRemoved(at: serviceHandle, by: $0) } ?? false
        }
        if removed { host.removeService(at: serviceHandle) }
    }

    /// Unpublishes every service of a manager that went away (`ObjectIdentifier` of the manager: it may be
    /// mid-deinit). Nothing happens for a manager detached already (its app's termination took them out).
    public func removeServices(of owner: ObjectIdentifier) {
        let handles = state.withLock { s in s.session(of: owner).map { s.machine.servicesRemoved(of: $0) } ?? [] }
        for handle in handles { host.removeService(at: handle) }
    }
}
