import BLEATT
import BLECore
import BLEGATT
import BLETransport
import DequeModule
import NIOCore
import Synchronization

/// Where a published service landed in the database.
public struct PublishedService: Sendable, Hashable {
    public var serviceHandle: AttributeHandle
    /// The value handle of each characteristic, in definition order.
    public var characteristicValueHandles: [AttributeHandle]
}

extension Host {
    /// Adds a service to this host's GATT server. Connected clients that enabled Service Changed indications
    /// are told about the new handle range (Core Spec 5.4, Vol 3, Part G, 7.1).
    public func addService(_ definition: GATTServiceDefinition) -> Result<PublishedService, HostError> {
        withCore { core, effects in
            do throws(GATTError) {
                let layout = try core.server.database.add(definition)
                indicateServiceChanged(layout.service.handleRange, &core, &effects)
                return .success(
                    PublishedService(
                        serviceHandle: layout.service.handleRange.lowerBound,
                        characteristicValueHandles: layout.characteristics.map(\.characteristic.valueHandle)))
            } catch {
                return .failure(HostError(.invalidParameters, "the service cannot be published: \(error)"))
            }
        }
    }

    /// Removes the service declared at `handle`; connected clients that enabled Service Changed indications
    /// are told about the handle range it occupied.
    public func removeService(at handle: AttributeHandle) {
        withCore { core, effects in
            guard let removed = core.server.database.removeService(at: handle) else { return }
            indicateServiceChanged(removed.handleRange, &core, &effects)
        }
    }

    /// Sends a Service Changed indication for `range` on every link whose client enabled it.
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 7.1 (Service Changed).
    private func indicateServiceChanged(
        _ range: ClosedRange<AttributeHandle>, _ core: inout HostCore, _ effects: inout Effects
    ) {
        for handle in core.links.keys.sorted() {
            guard var link = core.links[handle],
                let indication = core.server.serviceChangedIndication(range: range, to: handle)
            else { continue }
            sendIndication(indication, &link, &core, &effects)
            core.links[handle] = link
        }
        pumpACL(&core, &effects)
    }

    /// Sets the GAP Device Name this server shows.
    public func setDeviceName(_ name: String) {
        core.withLock { $0.server.database.deviceName = name }
    }

    /// Answers a `.serverRead` or `.serverWrite` request.
    public func respond(to request: GATTServerRequestID, result: ATTErrorCode, value: [UInt8]?) {
        withCore { core, effects in
            let actions = core.server.respond(to: request, result: result, value: value)
            for action in actions {
                guard case .respond(let connection, _) = action, var link = core.links[connection] else {
                    // Not a response: nothing else comes from `respond`, but keep the actions flowing.
                    continue
                }
                runServer([action], &link, &core, &effects)
                core.links[connection] = link
            }
            pumpACL(&core, &effects)
        }
    }

    /// Sends `value` to the clients subscribed to the characteristic whose value handle is `attribute` (all
    /// of them, or those in `connections`): a notification or an indication, as each client configured.
    /// Returns false, sending nothing, when any target's queue is full; `.readyToNotify` follows.
    public func notify(attribute: AttributeHandle, value: [UInt8], to connections: [ConnectionHandle]?) -> Bool {
        withCore { core, effects -> Bool in
            let depth = configuration.notificationQueueDepth
            let targets = core.server.subscribers(of: attribute).filter { connections?.contains($0.0) ?? true }
            for (handle, _) in targets {
                guard let link = core.links[handle] else { continue }
                if link.queuedNotifications + link.pendingIndications >= depth {
                    core.notifyRefused = true
                    return false
                }
            }
            for (handle, configuration) in targets {
                guard var link = core.links[handle] else { continue }
                if configuration.contains(.notification),
                    let n = core.server.notification(characteristicValue: attribute, value: value, to: handle),
                    let actions = try? link.bearer.sendUnacknowledged(.handleValueNotification(n))
                {
                    runBearer(actions, kind: .notification, &link, &core, &effects)
                } else if configuration.contains(.indication),
                    let i = core.server.indication(characteristicValue: attribute, value: value, to: handle)
                {
                    sendIndication(i, &link, &core, &effects)
                }
                core.links[handle] = link
            }
            pumpACL(&core, &effects)
            return true
        }
    }

    /// Hands an indication to the link's bearer (one outstanding at a time; it counts against the queue depth
    /// until confirmed).
    private func sendIndication(
        _ indication: ATTPDU.HandleValueIndication, _ link: inout Link, _ core: inout HostCore,
        _ effects: inout Effects
    ) {
        core.nextIndicationID += 1
        link.pendingIndications += 1
        let actions = link.bearer.sendIndication(indication, id: ATTRequestID(core.nextIndicationID))
        runBearer(actions, kind: .other, &link, &core, &effects)
    }
}
