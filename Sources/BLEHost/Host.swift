import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEL2CAP
import BLETransport
import DequeModule
import NIOCore
import Synchronization

/// The host stack for one controller: it composes the pure machines (ATT bearers, GATT client and server,
/// L2CAP recombiners and signalling channels), owns the HCI command credits, the LE ACL buffer credits, the
/// connection table and the timers, and reports to the layer above through `HostEvent`s.
///
/// ### Function
/// Every input (a packet from the transport, a timer, an API call) takes the lock, feeds the machines, and
/// collects effects; the lock is released before the effects run, in order: packets go to the transport,
/// completions and events go up. Nothing above is ever called under the lock, so a completion may call
/// straight back into the host.
///
/// ### Implementation
/// Time comes only from the `HostScheduler`, so the same host runs on wall-clock time over a real controller
/// and on virtual time over the simulated radio.
public final class Host: Sendable {
    let transport: any HCITransport
    let scheduler: any HostScheduler
    public let configuration: HostConfiguration
    let core: Mutex<HostCore>
    /// The event receiver, boxed: a bare closure kept in a `Mutex` is re-abstracted on every access, and the
    /// thunks pile up (measured: a third of a notification stream's time went to nested thunks).
    private final class EventHandler: Sendable {
        let call: @Sendable (HostEvent) -> Void
        init(_ call: @escaping @Sendable (HostEvent) -> Void) { self.call = call }
    }
    private let handler = Mutex<EventHandler?>(nil)

    public init(
        transport: any HCITransport, scheduler: any HostScheduler,
        configuration: HostConfiguration = HostConfiguration()
    ) {
        self.transport = transport
        self.scheduler = scheduler
        self.configuration = configuration
        self.core = Mutex(HostCore(configuration: configuration))
        transport.setReceiver { [weak self] event in self?.received(event) }
    }

    /// Installs the receiver of host events (the system). Events are delivered on the host's context, in
    /// order, never under the host's lock.
    public func setEventHandler(_ handler: @escaping @Sendable (HostEvent) -> Void) {
        let box = EventHandler(handler)
        self.handler.withLock { $0 = box }
    }

    /// What the controller reported during initialisation (nil until `start` succeeds).
    public var controllerInfo: ControllerInfo? { core.withLock { $0.info } }

    /// Whether the transport is still open.
    public var isOpen: Bool { core.withLock { !$0.closed } }

    // MARK: Effects

    /// Runs `body` under the lock and hands the packets it produced to the transport before releasing it, so
    /// packets leave in the order the machines produced them whichever thread called (the radio's, a delegate
    /// queue, an application task). Completions and events run after the lock is released, in order.
    ///
    /// `HCITransport.send` never calls back into the host synchronously (the protocol requires it), so
    /// sending under the lock cannot deadlock.
    func withCore<T>(_ body: (inout HostCore, inout Effects) -> T) -> T {
        var effects = Effects()
        let result = core.withLock { core in
            let result = body(&core, &effects)
            for packet in effects.packets { transport.send(packet) }
            return result
        }
        perform(effects)
        return result
    }

    func perform(_ effects: Effects) {
        guard !effects.items.isEmpty else { return }
        let handler = self.handler.withLock { $0 }
        for item in effects.items {
            switch item {
            case .call(let body): body()
            case .emit(let event): handler?.call(event)
            }
        }
    }

    // MARK: Transport input

    private func received(_ event: HCITransportEvent) {
        switch event {
        case .packet(.event(let packet)):
            let decoded: HCIEvent
            do {
                decoded = try HCIEvent(packet)
            } catch {
                // A malformed event from the controller: nothing sensible can be done with it. Commands it
                // might have completed time out and reclaim their credit.
                return
            }
            withCore { core, effects in handle(decoded, &core, &effects) }
        case .packet(.acl(let packet)):
            withCore { core, effects in receivedACL(packet, &core, &effects) }
        case .packet:
            break
        case .closed(let reason):
            withCore { core, effects in transportClosed(reason, &core, &effects) }
        }
    }

    private func transportClosed(_ reason: String?, _ core: inout HostCore, _ effects: inout Effects) {
        guard !core.closed else { return }
        core.closed = true
        let error = HostError(.transportClosed, "the controller's transport closed" + (reason.map { ": \($0)" } ?? ""))
        for command in core.inFlight {
            command.timer?.cancel()
            effects.call { command.complete(.failed(error)) }
        }
        core.inFlight.removeAll()
        while let command = core.commandQueue.popFirst() { effects.call { command.complete(.failed(error)) } }
        for handle in core.links.keys.sorted() {
            linkDown(handle, reason: .connectionTerminatedByLocalHost, error: error, emit: false, &core, &effects)
        }
        effects.emit(.transportClosed(reason))
    }

    // MARK: Event dispatch

    func handle(_ event: HCIEvent, _ core: inout HostCore, _ effects: inout Effects) {
        switch event {
        case .commandComplete(let complete):
            commandAnswered(
                opcode: complete.opcode, credits: complete.numHCICommandPackets, outcome: .complete(complete), &core,
                &effects)
        case .commandStatus(let status):
            commandAnswered(
                opcode: status.opcode, credits: status.numHCICommandPackets, outcome: .status(status), &core, &effects)
        case .disconnectionComplete(let event):
            guard event.status == .success else { return }
            linkDown(
                event.handle, reason: event.reason,
                error: HostError(.disconnected, "the link went down: \(event.reason)"),
                emit: true, &core, &effects)
        case .numberOfCompletedPackets(let event):
            for entry in event.entries {
                guard var link = core.links[entry.handle] else { continue }
                let done = min(Int(entry.numCompletedPackets), link.inFlight)
                link.inFlight -= done
                core.links[entry.handle] = link
                core.aclCredits = min(core.aclCredits + done, core.aclTotal)
            }
            pumpACL(&core, &effects)
        case .leMeta(let meta):
            handleLEMeta(meta, &core, &effects)
        case .encryptionChange(let event):
            core.server.encryptionChanged(event.handle, isEncrypted: event.isEncrypted && event.status == .success)
        case .hardwareError, .dataBufferOverflow, .encryptionKeyRefreshComplete, .readRemoteVersionInformationComplete,
            .unknown:
            break
        }
    }

    private func handleLEMeta(_ meta: HCILEMetaEvent, _ core: inout HostCore, _ effects: inout Effects) {
        switch meta {
        case .advertisingReport(let event):
            guard core.scanning else { return }
            for report in event.reports {
                guard let kind = AdvertisingReport.Kind(rawValue: report.eventType.rawValue) else { continue }
                effects.emit(
                    .advertisingReport(
                        AdvertisingReport(
                            kind: kind, address: report.address, rssi: report.rssi == 127 ? nil : Int(report.rssi),
                            data: report.data)))
            }
        case .extendedAdvertisingReport(let event):
            guard core.scanning else { return }
            for report in event.reports where report.eventType.dataStatus == 0 {
                guard let kind = Self.kind(of: report.eventType) else { continue }
                effects.emit(
                    .advertisingReport(
                        AdvertisingReport(
                            kind: kind, address: report.address, rssi: report.rssi == 127 ? nil : Int(report.rssi),
                            data: report.data)))
            }
        case .connectionComplete(let event):
            connectionComplete(
                status: event.status, handle: event.handle, role: event.role, peer: event.peerAddress,
                interval: event.connectionInterval, latency: event.peripheralLatency,
                timeout: event.supervisionTimeout, &core, &effects)
        case .enhancedConnectionComplete(let event):
            connectionComplete(
                status: event.status, handle: event.handle, role: event.role, peer: event.peerAddress,
                interval: event.connectionInterval, latency: event.peripheralLatency,
                timeout: event.supervisionTimeout, &core, &effects)
        case .connectionUpdateComplete(let event):
            guard event.status == .success, var link = core.links[event.handle] else { return }
            link.info.interval = event.connectionInterval
            link.info.latency = event.peripheralLatency
            link.info.supervisionTimeout = event.supervisionTimeout
            core.links[event.handle] = link
        case .remoteConnectionParameterRequest(let request):
            // Accept what the peer asks for when it is valid: the controller checked the ranges.
            let reply = HCILERemoteConnectionParameterRequestReply(
                handle: request.handle, intervalMin: request.intervalMin, intervalMax: request.intervalMax,
                maxLatency: request.maxLatency, timeout: request.timeout, minCELength: 0, maxCELength: 0)
            enqueue(reply.packet, isAsync: false, &core, &effects) { _ in }
        case .dataLengthChange(let event):
            guard var link = core.links[event.handle] else { return }
            link.maxTxOctets = Int(event.maxTxOctets)
            core.links[event.handle] = link
        case .longTermKeyRequest(let request):
            // No bonding yet (security is a later layer): refuse, so the peer learns the key is missing.
            enqueue(
                HCILELongTermKeyRequestNegativeReply(handle: request.handle).packet, isAsync: false, &core, &effects
            ) { _ in }
        case .readRemoteFeaturesComplete, .phyUpdateComplete, .unknown:
            break
        }
    }
}

extension Host {
    /// The legacy report kind of an extended report's event type (Vol 4, Part E, 7.7.65.13: legacy PDUs have
    /// fixed bit patterns; extended ones are classified by their connectable and scannable bits).
    static func kind(of type: HCILEMetaEvent.ExtendedAdvertisingReport.EventType) -> AdvertisingReport.Kind? {
        if type.contains(.scanResponse) { return .scanResponse }
        if type.contains(.directed) {
            return type.contains(.connectable) ? .connectableDirected : .nonConnectableUndirected
        }
        if type.contains(.connectable) { return .connectableUndirected }
        if type.contains(.scannable) { return .scannableUndirected }
        return .nonConnectableUndirected
    }
}

/// What the host does: packets for the controller (sent before the lock is released, in order), then
/// completions and events for the layer above (after it is released, in order).
struct Effects {
    enum Item {
        case call(@Sendable () -> Void)
        case emit(HostEvent)
    }
    var packets: [HCIPacket] = []
    var items: [Item] = []
    mutating func send(_ packet: HCIPacket) { packets.append(packet) }
    mutating func call(_ body: @escaping @Sendable () -> Void) { items.append(.call(body)) }
    mutating func emit(_ event: HostEvent) { items.append(.emit(event)) }
}
