import BLECore
import BLEGATT
import BLEHCI
import DequeModule

extension HostMachine {
    // MARK: Scanning and advertising

    var ownAddressType: BluetoothAddress.AddressType {
        (info?.address.type ?? .publicDevice).isRandom ? .randomDevice : .publicDevice
    }

    /// Performs the scan machine's outputs: its one command, and the requests it completed.
    mutating func runScan(_ outputs: [ScanMachine.Output]) {
        for output in outputs {
            switch output {
            case .send(.setParameters(let parameters)):
                let command = HCILESetScanParameters(
                    scanType: parameters.active ? .active : .passive, scanInterval: parameters.interval,
                    scanWindow: parameters.window, ownAddressType: ownAddressType)
                enqueue(command.packet, for: .scan)
            case .send(.enable(let filterDuplicates)):
                enqueue(HCILESetScanEnable(enable: true, filterDuplicates: filterDuplicates).packet, for: .scan)
            case .send(.disable):
                enqueue(HCILESetScanEnable(enable: false).packet, for: .scan)
            case .complete(let id, let result):
                complete(id, result.map { .done })
            }
        }
        rotateAddressIfQuiet()
    }

    /// Performs the advertising machine's outputs.
    mutating func runAdvertising(_ outputs: [AdvertisingMachine.Output]) {
        for output in outputs {
            switch output {
            case .send(.setParameters(let parameters)):
                let type: HCIAdvertisingType =
                    switch parameters.kind {
                    case .connectable: .advInd
                    case .scannable: .advScanInd
                    case .nonConnectable: .advNonconnInd
                    }
                let command = HCILESetAdvertisingParameters(
                    advertisingIntervalMin: parameters.intervalMin, advertisingIntervalMax: parameters.intervalMax,
                    advertisingType: type, ownAddressType: ownAddressType)
                enqueue(command.packet, for: .advertising)
            case .send(.setData(let data)):
                enqueue(HCILESetAdvertisingData(advertisingData: data).packet, for: .advertising)
            case .send(.setScanResponse(let data)):
                enqueue(HCILESetScanResponseData(scanResponseData: data).packet, for: .advertising)
            case .send(.enable):
                enqueue(HCILESetAdvertisingEnable(enable: true).packet, for: .advertising)
            case .send(.disable):
                enqueue(HCILESetAdvertisingEnable(enable: false).packet, for: .advertising)
            case .complete(let id, let result):
                complete(id, result.map { .done })
            }
        }
        rotateAddressIfQuiet()
    }

    // MARK: Connections

    /// Performs the connect machine's outputs: its commands, its failures as `.connectionFailed`, its timer.
    mutating func runConnect(_ outputs: [ConnectMachine.Output]) {
        for output in outputs {
            switch output {
            case .send(.clearAcceptList):
                enqueue(HCILEClearFilterAcceptList().packet, for: .connecting)
            case .send(.addToAcceptList(let peer)):
                enqueue(HCILEAddDeviceToFilterAcceptList(address: peer).packet, for: .connecting)
            case .send(.create(let peer)):
                let parameters = connectParameters
                let command = HCILECreateConnection(
                    scanInterval: 0x0060, scanWindow: 0x0030,
                    initiatorFilterPolicy: peer == nil ? .useFilterAcceptList : .usePeerAddress,
                    peerAddress: peer ?? BluetoothAddress(bytes: [0, 0, 0, 0, 0, 0]),
                    ownAddressType: ownAddressType, connectionIntervalMin: parameters.intervalMin,
                    connectionIntervalMax: parameters.intervalMax, maxLatency: parameters.latency,
                    supervisionTimeout: parameters.supervisionTimeout, minCELength: 0, maxCELength: 0)
                enqueue(command.packet, for: .connecting)
            case .send(.cancel):
                enqueue(HCILECreateConnectionCancel().packet, for: .connecting)
            case .failed(let peer, let error):
                emit(.connectionFailed(peer: connectTargetEnded(onAir: peer), error: error))
            case .startCancelTimer:
                if let timer = connectCancelTimer { cancelTimer(timer) }
                connectCancelTimer = startTimer(.connectCancel, after: Self.connectCancelTimeout)
            case .stopCancelTimer:
                if let timer = connectCancelTimer { cancelTimer(timer) }
                connectCancelTimer = nil
            case .startTurnTimer:
                if let timer = connectTurnTimer { cancelTimer(timer) }
                connectTurnTimer = startTimer(.connectTurn, after: ConnectMachine.turn)
            case .stopTurnTimer:
                if let timer = connectTurnTimer { cancelTimer(timer) }
                connectTurnTimer = nil
            }
        }
        rotateAddressIfQuiet()
    }

    /// How long the host waits for the Connection Complete that confirms LE Create Connection Cancel.
    static let connectCancelTimeout = Duration.seconds(2)

    /// An operation starts waiting for deliveries. It holds one count of its own until `endDelivery`, so that a
    /// packet delivered (or failed) while it is still being queued cannot complete it early, and a failure,
    /// which removes the entry, stops every later packet from bringing it back.
    mutating func beginDelivery(_ id: HostOperationID) {
        pendingDeliveries[id] = 1
    }

    /// One more packet (or indication) `id` waits for, unless it already failed.
    mutating func addDelivery(_ id: HostOperationID) {
        if let count = pendingDeliveries[id] { pendingDeliveries[id] = count + 1 }
    }

    /// Everything `id` waits for is queued: it completes when the rest is delivered (at once if nothing is).
    mutating func endDelivery(_ id: HostOperationID) {
        packetDelivered(for: id)
    }

    /// One packet `id` waits for was delivered; the operation completes with its last.
    mutating func packetDelivered(for id: HostOperationID) {
        guard let remaining = pendingDeliveries[id] else { return }
        if remaining > 1 {
            pendingDeliveries[id] = remaining - 1
        } else {
            pendingDeliveries[id] = nil
            complete(id, .success(.done))
        }
    }

    // MARK: HCI events

    mutating func handle(_ event: HCIEvent) {
        switch event {
        case .commandComplete(let complete):
            commandAnswered(opcode: complete.opcode, credits: complete.numHCICommandPackets, .complete(complete))
        case .commandStatus(let status):
            commandAnswered(opcode: status.opcode, credits: status.numHCICommandPackets, .status(status))
        case .disconnectionComplete(let event):
            guard event.status == .success else { return }
            linkDown(
                event.handle, reason: event.reason,
                error: HostError(.disconnected, "the link went down: \(event.reason)"),
                emit: true)
        case .numberOfCompletedPackets(let event):
            for entry in event.entries {
                guard let inFlight = links[entry.handle]?.inFlight.count else { continue }
                let done = min(Int(entry.numCompletedPackets), inFlight)
                for _ in 0..<done {
                    // A controller completes a link's packets in the order it took them.
                    if let delivered = links[entry.handle]?.inFlight.popFirst(), let id = delivered {
                        packetDelivered(for: id)
                    }
                }
                acl.credits = min(acl.credits + done, acl.total)
            }
            pumpACL()
        case .leMeta(let meta):
            handleLEMeta(meta)
        case .encryptionChange(let event):
            encryptionChanged(event.handle, status: event.status, encrypted: event.isEncrypted)
        case .encryptionKeyRefreshComplete(let event):
            encryptionChanged(event.handle, status: event.status, encrypted: true)
        case .hardwareError(let event):
            controllerFailed(code: event.hardwareCode)
        case .dataBufferOverflow, .readRemoteVersionInformationComplete, .unknown:
            break
        }
    }

    private mutating func handleLEMeta(_ meta: HCILEMetaEvent) {
        switch meta {
        case .advertisingReport(let event):
            for report in event.reports {
                // Heard even when only the host listens (for a resolvable peer it connects to).
                let address = heard(from: report.address)
                guard scan.isScanning, let kind = AdvertisingReport.Kind(rawValue: report.eventType.rawValue) else {
                    continue
                }
                emitReport(kind, address, report.rssi, report.data)
            }
        case .extendedAdvertisingReport(let event):
            for report in event.reports where report.eventType.dataStatus == 0 {
                let address = heard(from: report.address)
                guard scan.isScanning, let kind = Self.kind(of: report.eventType) else { continue }
                emitReport(kind, address, report.rssi, report.data)
            }
        case .connectionComplete(let event):
            connectionComplete(
                status: event.status, handle: event.handle, role: event.role, peer: event.peerAddress,
                interval: event.connectionInterval, latency: event.peripheralLatency, timeout: event.supervisionTimeout)
        case .enhancedConnectionComplete(let event):
            connectionComplete(
                status: event.status, handle: event.handle, role: event.role, peer: event.peerAddress,
                interval: event.connectionInterval, latency: event.peripheralLatency, timeout: event.supervisionTimeout)
        case .connectionUpdateComplete(let event):
            guard event.status == .success, links.contains(event.handle) else { return }
            links[event.handle]?.info.interval = event.connectionInterval
            links[event.handle]?.info.latency = event.peripheralLatency
            links[event.handle]?.info.supervisionTimeout = event.supervisionTimeout
        case .remoteConnectionParameterRequest(let request):
            // Accept what the peer asks for when it is valid: the controller checked the ranges.
            let reply = HCILERemoteConnectionParameterRequestReply(
                handle: request.handle, intervalMin: request.intervalMin, intervalMax: request.intervalMax,
                maxLatency: request.maxLatency, timeout: request.timeout, minCELength: 0, maxCELength: 0)
            enqueue(reply.packet, for: .none)
        case .dataLengthChange(let event):
            links[event.handle]?.maxTxOctets = Int(event.maxTxOctets)
            links[event.handle]?.info.maxTxOctets = Int(event.maxTxOctets)
            links[event.handle]?.info.maxRxOctets = Int(event.maxRxOctets)
        case .phyUpdateComplete(let event):
            guard event.status == .success else { return }
            if let tx = LinkPHY(event.txPHY) { links[event.handle]?.info.txPHY = tx }
            if let rx = LinkPHY(event.rxPHY) { links[event.handle]?.info.rxPHY = rx }
        case .longTermKeyRequest(let request):
            longTermKeyRequested(request.handle, ediv: request.encryptedDiversifier, rand: request.randomNumber)
        case .readRemoteFeaturesComplete, .unknown:
            break
        }
    }

    /// Passes one advertising report up; an RSSI of 127 means "not available" (Vol 4, Part E, 7.7.65.2).
    private mutating func emitReport(
        _ kind: AdvertisingReport.Kind, _ address: BluetoothAddress, _ rssi: Int8, _ data: [UInt8]
    ) {
        emit(
            .advertisingReport(
                AdvertisingReport(kind: kind, address: address, rssi: rssi == 127 ? nil : Int(rssi), data: data)))
    }

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
