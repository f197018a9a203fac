import BLECore
import BLEHCI
import BLETransport
import DequeModule
import Synchronization

extension Host {
    // MARK: Scanning

    /// Sets the scan parameters and starts scanning; reports arrive as `.advertisingReport` events.
    public func startScan(
        _ parameters: ScanParameters, completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        let ownType = controllerInfo?.address.type ?? .publicDevice
        let set = HCILESetScanParameters(
            scanType: parameters.active ? .active : .passive,
            scanInterval: parameters.interval, scanWindow: parameters.window,
            ownAddressType: ownType.isRandom ? .randomDevice : .publicDevice)
        let enable: @Sendable () -> Void = { [self] in
            send(HCILESetScanEnable(enable: true, filterDuplicates: parameters.filterDuplicates)) { [self] result in
                if case .success = result { withCore { core, _ in core.scanning = true } }
                completion(result.map { _ in () })
            }
        }
        send(set) { [self] result in
            switch result {
            case .success:
                enable()
            case .failure(let error) where error.code == .hci(.commandDisallowed):
                // The controller is still scanning (another host left it so, and its Reset kept it: Bumble's
                // does): parameters may not change while scanning, so stop, then try once more.
                send(HCILESetScanEnable(enable: false)) { [self] _ in
                    send(set) { result in
                        if case .failure(let error) = result { return completion(.failure(error)) }
                        enable()
                    }
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Stops scanning.
    public func stopScan(completion: @escaping @Sendable (Result<Void, HostError>) -> Void) {
        withCore { core, _ in core.scanning = false }
        send(HCILESetScanEnable(enable: false)) { result in completion(result.map { _ in () }) }
    }

    // MARK: Advertising

    /// Sets the advertising parameters, data and scan response, then enables advertising.
    public func startAdvertising(
        _ parameters: AdvertisingParameters, data: [UInt8], scanResponse: [UInt8],
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        let ownType = controllerInfo?.address.type ?? .publicDevice
        let type: HCIAdvertisingType =
            switch parameters.kind {
            case .connectable: .advInd
            case .scannable: .advScanInd
            case .nonConnectable: .advNonconnInd
            }
        let set = HCILESetAdvertisingParameters(
            advertisingIntervalMin: parameters.intervalMin,
            advertisingIntervalMax: parameters.intervalMax,
            advertisingType: type,
            ownAddressType: ownType.isRandom ? .randomDevice : .publicDevice)
        // Parameters may not change while advertising: disable first (harmless when already off).
        send(HCILESetAdvertisingEnable(enable: false)) { [self] _ in
            send(set) { [self] result in
                if case .failure(let error) = result { return completion(.failure(error)) }
                send(HCILESetAdvertisingData(advertisingData: data)) { [self] result in
                    if case .failure(let error) = result { return completion(.failure(error)) }
                    send(HCILESetScanResponseData(scanResponseData: scanResponse)) { [self] result in
                        if case .failure(let error) = result { return completion(.failure(error)) }
                        send(HCILESetAdvertisingEnable(enable: true)) { [self] result in
                            if case .success = result { withCore { core, _ in core.advertising = true } }
                            completion(result.map { _ in () })
                        }
                    }
                }
            }
        }
    }

    /// Disables advertising.
    public func stopAdvertising(completion: @escaping @Sendable (Result<Void, HostError>) -> Void) {
        withCore { core, _ in core.advertising = false }
        send(HCILESetAdvertisingEnable(enable: false)) { result in completion(result.map { _ in () }) }
    }

    // MARK: Connections

    /// Starts connecting to `peer` (LE Create Connection). `completion` reports whether the controller
    /// accepted the request; the outcome arrives as `.connected` or `.connectionFailed`. The request does not
    /// time out: `cancelConnect` ends it.
    public func connect(
        to peer: BluetoothAddress, parameters: ConnectionParameters,
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        let ownType = controllerInfo?.address.type ?? .publicDevice
        let command = HCILECreateConnection(
            scanInterval: 0x0060, scanWindow: 0x0030, initiatorFilterPolicy: .usePeerAddress, peerAddress: peer,
            ownAddressType: ownType.isRandom ? .randomDevice : .publicDevice,
            connectionIntervalMin: parameters.intervalMin, connectionIntervalMax: parameters.intervalMax,
            maxLatency: parameters.latency, supervisionTimeout: parameters.supervisionTimeout,
            minCELength: 0, maxCELength: 0)
        let accepted = withCore { core, _ -> Bool in
            guard core.initiating == nil else { return false }
            core.initiating = peer
            return true
        }
        guard accepted else {
            return completion(.failure(HostError(.invalidState, "a connection is already being initiated")))
        }
        send(command) { [self] result in
            if case .failure = result { withCore { core, _ in core.initiating = nil } }
            completion(result)
        }
    }

    /// Cancels the pending connection; `.connectionFailed` follows when the controller confirms.
    public func cancelConnect() {
        send(HCILECreateConnectionCancel()) { _ in }
    }

    /// Disconnects a link; `.disconnected` follows.
    public func disconnect(_ handle: ConnectionHandle, reason: HCIStatus) {
        send(HCIDisconnect(handle: handle, reason: reason)) { _ in }
    }

    /// Reads the RSSI of a link, in dBm.
    public func readRSSI(on handle: ConnectionHandle, completion: @escaping @Sendable (Result<Int, HostError>) -> Void)
    {
        send(HCIReadRSSI(handle: handle)) { result in completion(result.map { Int($0.rssi) }) }
    }

    /// The links up now.
    public var links: [LinkInfo] { core.withLock { $0.links.values.map(\.info).sorted { $0.handle < $1.handle } } }
}
