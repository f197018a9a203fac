import BLEATT
import BLECore
import BLEGATT

/// Where a published service landed in the database.
public struct PublishedService: Sendable, Hashable {
    public var serviceHandle: AttributeHandle
    /// The value handle of each characteristic, in definition order.
    public var characteristicValueHandles: [AttributeHandle]

    public init(serviceHandle: AttributeHandle, characteristicValueHandles: [AttributeHandle]) {
        self.serviceHandle = serviceHandle
        self.characteristicValueHandles = characteristicValueHandles
    }
}

extension HostMachine {
    /// Adds a service to the GATT server. Connected clients become change-unaware, and those that enabled
    /// Service Changed indications are told about the new handle range (Core Spec 5.4, Vol 3, Part G, 7.1).
    public mutating func addService(_ definition: GATTServiceDefinition) -> (
        Result<PublishedService, HostError>, actions: [HostAction]
    ) {
        do throws(GATTError) {
            let layout = try server.addService(definition)
            indicateServiceChanged(layout.service.handleRange)
            let published = PublishedService(
                serviceHandle: layout.service.handleRange.lowerBound,
                characteristicValueHandles: layout.characteristics.map(\.characteristic.valueHandle))
            return (.success(published), takeActions())
        } catch {
            return (.failure(HostError(.invalidParameters, "the service cannot be published: \(error)")), [])
        }
    }

    /// Removes the service declared at `handle`; connected clients become change-unaware, and those that enabled
    /// Service Changed indications are told about the handle range it occupied.
    public mutating func removeService(at handle: AttributeHandle) -> [HostAction] {
        guard let removed = server.removeService(at: handle) else { return [] }
        indicateServiceChanged(removed.handleRange)
        return takeActions()
    }

    /// Sets the GAP Device Name the server shows.
    public mutating func setDeviceName(_ name: String) {
        server.database.deviceName = name
    }

    /// Tells the GATT server whether this device holds a bond with the peer of a link: a value that needs
    /// encryption is then refused with Insufficient Encryption instead of Insufficient Authentication.
    public mutating func setPeerBonded(_ handle: ConnectionHandle, _ isBonded: Bool) {
        guard links.contains(handle) else { return }
        server.bondChanged(handle, isBonded: isBonded)
    }

    /// Answers a `.serverRead` or `.serverWrite` request (`attribute`: for a refused queued write, the attribute
    /// that refused, which the Error Response names).
    ///
    /// With `id`, that operation completes once the response is handed to the bearer, or fails when there is
    /// nothing to answer (the request is unknown or already answered, or its link is gone).
    public mutating func respond(
        to request: GATTServerRequestID, result: ATTErrorCode, value: [UInt8]?, attribute: AttributeHandle? = nil,
        id: HostOperationID? = nil
    ) -> [HostAction] {
        let actions = server.respond(to: request, result: result, value: value, attribute: attribute)
        let handedOver = actions.contains { action in
            if case .respond(let connection, _) = action { return links.contains(connection) }
            return false
        }
        runServer(actions)
        pumpACL()
        if let id {
            complete(
                id,
                handedOver
                    ? .success(.done)
                    : .failure(
                        HostError(.invalidState, "nothing to answer: the request is unknown or its link is gone")))
        }
        return takeActions()
    }

    /// Sends `value` to the clients subscribed to the characteristic whose value handle is `attribute` (all of
    /// them, or those in `connections`): a notification or an indication, as each client configured. Returns
    /// false, sending nothing, when any target's queue is full; `.readyToNotify` follows. When sent and `delivery`
    /// is given, that operation completes once the controller reports every target's packet completed (the peers'
    /// link layers acknowledged them; at once when there is no target), or fails when a target's link goes down
    /// first.
    public mutating func notify(
        attribute: AttributeHandle, value: [UInt8], to connections: [ConnectionHandle]?,
        delivery: HostOperationID? = nil
    ) -> (sent: Bool, actions: [HostAction]) {
        let depth = configuration.notificationQueueDepth
        var targets = server.subscribers(of: attribute)
        if let connections { targets.removeAll { !connections.contains($0.0) } }
        for (handle, _) in targets {
            // Read in place: `let link = links[handle]` copied the whole link (its bearer, recombiner and queues)
            // for every notification.
            guard let queued = links[handle]?.queuedNotifications, let pending = links[handle]?.pendingIndications
            else { continue }
            if queued + pending >= depth {
                notifyRefused = true
                return (false, takeActions())
            }
        }
        if let delivery { beginDelivery(delivery) }
        for (handle, configuration) in targets where links.contains(handle) {
            if configuration.contains(.notification),
                let notification = server.notification(characteristicValue: attribute, value: value, to: handle),
                let encoded = try? links[handle]?.bearer.sendUnacknowledged(.handleValueNotification(notification))
            {
                queueL2CAP(encoded, channel: .att, kind: .notification, on: handle, delivery: delivery)
            } else if configuration.contains(.indication),
                let indication = server.indication(characteristicValue: attribute, value: value, to: handle)
            {
                sendIndication(indication, on: handle, delivery: delivery)
            }
        }
        if let delivery { endDelivery(delivery) }
        pumpACL()
        return (true, takeActions())
    }

    /// Sends a Service Changed indication for `range` on every link whose client enabled it.
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 7.1 (Service Changed).
    private mutating func indicateServiceChanged(_ range: ClosedRange<AttributeHandle>) {
        for handle in links.keys.sorted() {
            guard let indication = server.serviceChangedIndication(range: range, to: handle) else { continue }
            sendIndication(indication, on: handle)
        }
        pumpACL()
    }

    /// Hands an indication to the link's bearer (one outstanding at a time; it counts against the queue depth
    /// until confirmed).
    private mutating func sendIndication(
        _ indication: ATTPDU.HandleValueIndication, on handle: ConnectionHandle, delivery: HostOperationID? = nil
    ) {
        nextIndication += 1
        let request = ATTRequestID(nextIndication)
        links[handle]?.pendingIndications += 1
        // A confirmed Service Changed makes its client change-aware (Vol 3, Part G, 2.5.2.1).
        if indication.handle == server.database.serviceChangedHandle {
            serviceChangedIndications[request] = (handle, server.databaseVersion)
        }
        if let delivery {
            // An indication is delivered when the client confirms it (Vol 3, Part F, 3.4.7.3).
            addDelivery(delivery)
            indicationDeliveries[request] = (handle, delivery)
        }
        let actions = links[handle]?.bearer.sendIndication(indication, id: request) ?? []
        runBearer(actions, on: handle, kind: .other)
    }
}
