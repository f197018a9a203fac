import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import BLETransport
import DequeModule
import NIOCore
import Synchronization

extension Host {
    /// Performs an ATT bearer's actions on one link. `kind` tags the PDUs sent (Write Commands and
    /// notifications count against their queue depths).
    func runBearer(
        _ actions: [ATTBearer.Action], kind: OutgoingPacket.Kind, _ link: inout Link,
        _ core: inout HostCore, _ effects: inout Effects
    ) {
        let handle = link.info.handle
        for action in actions {
            switch action {
            case .send(let pdu):
                queueL2CAP(pdu, channel: .att, kind: kind, &link, core)
            case .startTimer(let timer, _):
                // Both ATT timers are the transaction timeout (Vol 3, Part F, 3.3.3): the configured one.
                link.attTimers[timer]?.work.cancel()
                core.timerSerial += 1
                let serial = core.timerSerial
                let work = scheduler.schedule(after: configuration.attTransactionTimeout) { [weak self] in
                    self?.attTimerFired(timer, serial: serial, on: handle)
                }
                link.attTimers[timer] = TimerEntry(work: work, serial: serial)
            case .cancelTimer(let timer):
                link.attTimers.removeValue(forKey: timer)?.work.cancel()
            case .complete(let id, let result):
                let clientActions = link.client.requestCompleted(id, result)
                runClient(clientActions, &link, &core, &effects)
            case .indicationComplete:
                link.pendingIndications = max(0, link.pendingIndications - 1)
                core.links[handle] = link
                checkNotifyRoom(&core, &effects)
            case .request(let pdu), .command(let pdu):
                let serverActions = core.server.received(pdu, from: handle)
                runServer(serverActions, &link, &core, &effects)
            case .notification(let notification):
                effects.emit(
                    .valueUpdated(
                        handle, attribute: notification.handle, value: notification.value, isIndication: false))
            case .indication(let indication):
                effects.emit(
                    .valueUpdated(handle, attribute: indication.handle, value: indication.value, isIndication: true))
            case .mtuChanged(let mtu):
                link.client.mtuChanged(mtu)
                core.server.mtuChanged(handle, to: mtu)
                effects.emit(.mtuChanged(handle, mtu: Int(mtu)))
            case .closeBearer:
                // The bearer is unusable (transaction timeout or a protocol violation): no ATT PDU may be sent
                // on this link any more, so the link goes (Vol 3, Part F, 3.3.3).
                send(HCIDisconnect(handle: handle, reason: .remoteUserTerminatedConnection), &core, &effects) { _ in }
            }
        }
    }

    private func attTimerFired(_ timer: ATTTimer, serial: UInt64, on handle: ConnectionHandle) {
        withCore { core, effects in
            guard var link = core.links[handle], link.attTimers[timer]?.serial == serial else { return }
            link.attTimers[timer] = nil
            let actions = link.bearer.timerFired(timer)
            runBearer(actions, kind: .other, &link, &core, &effects)
            core.links[handle] = link
            pumpACL(&core, &effects)
        }
    }

    func runClient(_ actions: [GATTClient.Action], _ link: inout Link, _ core: inout HostCore, _ effects: inout Effects)
    {
        for action in actions {
            switch action {
            case .sendRequest(let pdu, let id):
                let bearerActions = link.bearer.sendRequest(pdu, id: id)
                runBearer(bearerActions, kind: .other, &link, &core, &effects)
            case .complete(let id, let result):
                if let completion = core.clientOperations.removeValue(forKey: id) {
                    effects.call { completion(result) }
                }
            }
        }
    }

    func runServer(_ actions: [GATTServer.Action], _ link: inout Link, _ core: inout HostCore, _ effects: inout Effects)
    {
        for action in actions {
            switch action {
            case .respond(let connection, let pdu):
                if connection == link.info.handle {
                    runBearer(link.bearer.sendResponse(pdu), kind: .other, &link, &core, &effects)
                } else if var other = core.links[connection] {
                    runBearer(other.bearer.sendResponse(pdu), kind: .other, &other, &core, &effects)
                    core.links[connection] = other
                }
            case .readRequest(let id, let connection, let attribute, let offset):
                effects.emit(.serverRead(id, connection, attribute: attribute, offset: offset))
            case .writeRequests(let id, let connection, let writes):
                effects.emit(.serverWrite(id, connection, writes))
            case .subscriptionChanged(let connection, let value, let configuration):
                effects.emit(
                    .subscriptionChanged(
                        connection, attribute: value,
                        notify: configuration.contains(.notification),
                        indicate: configuration.contains(.indication)))
            case .valueWritten:
                break
            }
        }
    }

    /// After notifications drained: tell the application it may update subscribers again, if it was refused.
    func checkNotifyRoom(_ core: inout HostCore, _ effects: inout Effects) {
        guard core.notifyRefused else { return }
        let depth = configuration.notificationQueueDepth
        let full = core.links.values.contains { $0.queuedNotifications + $0.pendingIndications >= depth }
        if !full {
            core.notifyRefused = false
            effects.emit(.readyToNotify)
        }
    }
}
