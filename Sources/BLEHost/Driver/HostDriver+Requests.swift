import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLESMP
import Synchronization

/// The requests of the layer above, each one operation of the machine with one completion. Completions are
/// called once, in the order the machine completed them, never under the driver's lock.
extension HostDriver {
    // MARK: Controller

    /// Resets and initialises the controller (see `StartupSequence` for the steps).
    public func start(_ completion: @escaping @Sendable (Result<ControllerInfo, HostError>) -> Void) {
        request(.start) { result in
            completion(
                result.flatMap { output in
                    guard case .controller(let info) = output else { return .failure(Self.unexpected(output)) }
                    return .success(info)
                })
        }
    }

    /// Sends a command that completes with Command Complete; `completion` gets its return parameters, or the
    /// status the controller refused it with, or a timeout (after `configuration.commandTimeout` the credit is
    /// reclaimed, so a controller that drops a command does not stall the host).
    public func send<C: HCISyncCommand>(
        _ command: C, completion: @escaping @Sendable (Result<C.ReturnParameters, HostError>) -> Void
    ) {
        request(.command(command.packet)) { result in
            completion(HostMachine.decode(C.self, Self.answer(result)))
        }
    }

    /// Sends a command acknowledged by Command Status; `completion` reports that status (its outcome arrives later
    /// as an event).
    public func send<C: HCIAsyncCommand>(
        _ command: C, completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        request(.command(command.packet)) { result in
            completion(HostMachine.decodeStatus(C.self, Self.answer(result)))
        }
    }

    // MARK: GAP

    /// Scans with `parameters`; reports arrive as `.advertisingReport` events. `completion` hears when the
    /// controller scans, or why it does not (`.cancelled` when `stopScan` came first).
    public func startScan(
        _ parameters: ScanParameters, completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        request(.startScan(parameters)) { completion($0.map { _ in () }) }
    }

    /// Stops scanning; no report is passed up after this call. `completion` hears when the controller stopped.
    public func stopScan(completion: @escaping @Sendable (Result<Void, HostError>) -> Void) {
        request(.stopScan) { completion($0.map { _ in () }) }
    }

    /// Advertises `data` and `scanResponse` with `parameters`. `completion` hears when the controller advertises.
    public func startAdvertising(
        _ parameters: AdvertisingParameters, data: [UInt8], scanResponse: [UInt8],
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        request(.startAdvertising(parameters, data: data, scanResponse: scanResponse)) {
            completion($0.map { _ in () })
        }
    }

    /// Stops advertising. `completion` hears when the controller stopped.
    public func stopAdvertising(completion: @escaping @Sendable (Result<Void, HostError>) -> Void) {
        request(.stopAdvertising) { completion($0.map { _ in () }) }
    }

    /// The peers to connect to now, replacing the earlier list: the host initiates toward all of them at once
    /// (through the controller's accept list when there are several), and each ends as `.connected` or
    /// `.connectionFailed`. Nothing times out; a peer taken off the list is no longer initiated (an initiation
    /// under way for it is cancelled).
    public func setConnectTargets(_ peers: [BluetoothAddress], parameters: ConnectionParameters) {
        request(.setConnectTargets(peers, parameters)) { _ in }
    }

    /// The peers whose private addresses the host resolves (`HostRequest.setResolvingList`).
    public func setResolvingList(_ identities: [ResolvableIdentity]) {
        request(.setResolvingList(identities)) { _ in }
    }

    /// Disconnects a link; `.disconnected` follows.
    public func disconnect(_ handle: ConnectionHandle, reason: HCIStatus) {
        request(.disconnect(handle, reason: reason)) { _ in }
    }

    /// Reads the RSSI of a link, in dBm.
    public func readRSSI(on handle: ConnectionHandle, completion: @escaping @Sendable (Result<Int, HostError>) -> Void)
    {
        request(.readRSSI(handle)) { result in
            completion(
                result.flatMap { output in
                    guard case .rssi(let rssi) = output else { return .failure(Self.unexpected(output)) }
                    return .success(rssi)
                })
        }
    }

    // MARK: Security

    /// Central: pairs on the link; peripheral: asks the central to (Security Request). Completes once the keys
    /// are distributed (with the pairing's result), or with the failure. Needs `HostConfiguration.security`.
    public func pair(
        on handle: ConnectionHandle, completion: @escaping @Sendable (Result<SMPPairing.Result, HostError>) -> Void
    ) {
        request(.pair(handle)) { result in
            completion(
                result.flatMap { output in
                    guard case .paired(let paired) = output else { return .failure(Self.unexpected(output)) }
                    return .success(paired)
                })
        }
    }

    /// Central: encrypts the link with a key kept from an earlier pairing; completes on Encryption Change.
    public func encrypt(
        on handle: ConnectionHandle, key: SMPPairing.LongTermKey,
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        request(.encrypt(handle, key: key)) { result in completion(result.map { _ in () }) }
    }

    /// The user's answer to a `.pairingPrompt`.
    public func answerPairing(on handle: ConnectionHandle, _ answer: PairingAnswer) {
        request(.answerPairing(handle, answer)) { _ in }
    }

    /// Peripheral: answers `.longTermKeyRequested` with a kept key, or nil for none (a negative reply).
    public func replyLongTermKey(on handle: ConnectionHandle, key: [UInt8]?) {
        request(.replyLongTermKey(handle, key: key)) { _ in }
    }

    // MARK: GATT client

    /// Discovers primary services: all of them, or those of one type.
    public func discoverServices(
        on handle: ConnectionHandle, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        let operation: GATTOperation = uuid.map { .discoverPrimaryServices(uuid: $0) } ?? .discoverAllPrimaryServices
        gatt(operation, on: handle, completion) { result in
            if case .services(let services) = result { return services }
            return nil
        }
    }

    /// Finds the services `service` includes.
    public func discoverIncludedServices(
        on handle: ConnectionHandle, in service: GATTService,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        gatt(.findIncludedServices(service), on: handle, completion) { result in
            switch result {
            case .includedServices(let services), .services(let services): return services
            default: return nil
            }
        }
    }

    /// Discovers the characteristics of `service`: all, or those of one type.
    public func discoverCharacteristics(
        on handle: ConnectionHandle, in service: GATTService, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTCharacteristic], HostError>) -> Void
    ) {
        gatt(.discoverCharacteristics(service, uuid: uuid), on: handle, completion) { result in
            if case .characteristics(let characteristics) = result { return characteristics }
            return nil
        }
    }

    /// Discovers the descriptors of `characteristic`.
    public func discoverDescriptors(
        on handle: ConnectionHandle, of characteristic: GATTCharacteristic,
        completion: @escaping @Sendable (Result<[GATTDescriptor], HostError>) -> Void
    ) {
        gatt(.discoverDescriptors(characteristic), on: handle, completion) { result in
            if case .descriptors(let descriptors) = result { return descriptors }
            return nil
        }
    }

    /// Reads an attribute's value, continuing with Read Blob for long values.
    public func read(
        on handle: ConnectionHandle, attribute: AttributeHandle,
        completion: @escaping @Sendable (Result<[UInt8], HostError>) -> Void
    ) {
        gatt(.read(attribute), on: handle, completion) { result in
            if case .value(let value) = result { return value }
            return nil
        }
    }

    /// Reads the values of the characteristics of type `uuid` in `range` (Read Using Characteristic UUID: one
    /// request; an empty list when the peer has none).
    public func readUsingCharacteristicUUID(
        on handle: ConnectionHandle, uuid: BluetoothUUID, range: ClosedRange<AttributeHandle>,
        completion: @escaping @Sendable (Result<[GATTHandleValue], HostError>) -> Void
    ) {
        gatt(.readUsingCharacteristicUUID(uuid, range: range), on: handle, completion) { result in
            if case .handleValues(let values) = result { return values }
            return nil
        }
    }

    /// Writes an attribute's value with a response, with the long-write procedure when it does not fit
    /// ATT_MTU-3.
    public func write(
        on handle: ConnectionHandle, attribute: AttributeHandle, value: [UInt8],
        completion: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        gatt(.write(attribute, value: value), on: handle, completion) { _ in () }
    }

    /// Queues a Write Command. Returns false, sending nothing, when the link's queue is full or the value does not
    /// fit ATT_MTU-3; `.readyToWriteWithoutResponse` follows once there is room, after a refusal or after a write
    /// that filled the queue.
    ///
    /// `delivered`, when given, hears once whether an accepted command was delivered: the controller reported its
    /// last packet completed (the peer's link layer acknowledged it), or the link went down first. A refused
    /// command does not call it: the `false` says so.
    ///
    /// `whenFull` runs, under the driver's lock, when the command was refused or left the link's queue full:
    /// before `.readyToWriteWithoutResponse` can possibly be emitted, so a caller that records "refused" there
    /// cannot miss the event that clears it.
    public func writeWithoutResponse(
        on handle: ConnectionHandle, attribute: AttributeHandle, value: [UInt8],
        delivered: (@Sendable (Result<Void, HostError>) -> Void)? = nil, whenFull: (() -> Void)? = nil
    ) -> Bool {
        step { state in
            let id = delivered.map { _ in state.reserveOperation() }
            let (accepted, actions) = state.machine.writeWithoutResponse(
                on: handle, attribute: attribute, value: value, delivery: id)
            if accepted, let id, let delivered { state.completions[id] = { delivered($0.map { _ in () }) } }
            if !accepted || !state.machine.canWriteWithoutResponse(on: handle) { whenFull?() }
            return (accepted, actions)
        }
    }

    /// The ATT_MTU of a link (23 until an exchange raised it).
    public func mtu(on handle: ConnectionHandle) -> Int {
        state.withLock { $0.machine.mtu(on: handle) }
    }

    /// A link's parameters as the LL procedures left them (interval, latency, timeout, PHYs, data length).
    public func linkInfo(on handle: ConnectionHandle) -> LinkInfo? {
        state.withLock { $0.machine.linkInfo(on: handle) }
    }

    // MARK: GATT server

    /// Adds a service to this host's GATT server. Connected clients that enabled Service Changed indications are
    /// told about the new handle range (Core Spec 5.4, Vol 3, Part G, 7.1).
    public func addService(_ definition: GATTServiceDefinition) -> Result<PublishedService, HostError> {
        step { $0.machine.addService(definition) }
    }

    /// Removes the service declared at `handle`; connected clients that enabled Service Changed indications are
    /// told about the handle range it occupied.
    public func removeService(at handle: AttributeHandle) {
        step { ((), $0.machine.removeService(at: handle)) }
    }

    /// Sets the GAP Device Name this server shows.
    public func setDeviceName(_ name: String) {
        state.withLock { $0.machine.setDeviceName(name) }
    }

    /// Whether this device holds a bond with the peer of a link (the GATT server's refusals depend on it).
    public func setPeerBonded(on handle: ConnectionHandle, _ isBonded: Bool) {
        state.withLock { $0.machine.setPeerBonded(handle, isBonded) }
    }

    /// Answers a `.serverRead` or `.serverWrite` request (`attribute`: for a refused queued write, the attribute
    /// that refused). `completion`, when given, hears once whether the response was handed to the bearer, or why
    /// not (the request is unknown or already answered, or its link is gone).
    public func respond(
        to request: GATTServerRequestID, result: ATTErrorCode, value: [UInt8]?, attribute: AttributeHandle? = nil,
        completion: (@Sendable (Result<Void, HostError>) -> Void)? = nil
    ) {
        step { state in
            let id = completion.map { completion in state.register { completion($0.map { _ in () }) } }
            return (
                (), state.machine.respond(to: request, result: result, value: value, attribute: attribute, id: id)
            )
        }
    }

    /// Sends `value` to the clients subscribed to the characteristic whose value handle is `attribute` (all of
    /// them, or those in `connections`): a notification or an indication, as each client configured. Returns
    /// false, sending nothing, when any target's queue is full; `.readyToNotify` follows.
    ///
    /// `delivered`, when given and the value was sent, hears once whether every target received it: the controller
    /// reported each notification's packet completed (the peer's link layer acknowledged it) and each client
    /// confirmed its indication, or a target's link went down first.
    ///
    /// `whenRefused` runs, under the driver's lock, when the value was refused: before `.readyToNotify` can
    /// possibly be emitted.
    public func notify(
        attribute: AttributeHandle, value: [UInt8], to connections: [ConnectionHandle]?,
        delivered: (@Sendable (Result<Void, HostError>) -> Void)? = nil, whenRefused: (() -> Void)? = nil
    ) -> Bool {
        step { state in
            let id = delivered.map { _ in state.reserveOperation() }
            let (sent, actions) = state.machine.notify(
                attribute: attribute, value: value, to: connections, delivery: id)
            if sent, let id, let delivered { state.completions[id] = { delivered($0.map { _ in () }) } }
            if !sent { whenRefused?() }
            return (sent, actions)
        }
    }

    // MARK: Helpers

    private func gatt<T: Sendable>(
        _ operation: GATTOperation, on handle: ConnectionHandle,
        _ completion: @escaping @Sendable (Result<T, HostError>) -> Void,
        extract: @escaping @Sendable (GATTResult) -> T?
    ) {
        request(.gatt(operation, on: handle)) { result in
            completion(
                result.flatMap { output in
                    guard case .gatt(let gattResult) = output, let value = extract(gattResult) else {
                        return .failure(Self.unexpected(output))
                    }
                    return .success(value)
                })
        }
    }

    private static func answer(_ result: Result<HostOutput, HostError>) -> Result<HCICommandAnswer, HostError> {
        result.flatMap { output in
            guard case .command(let answer) = output else { return .failure(unexpected(output)) }
            return .success(answer)
        }
    }

    private static func unexpected(_ output: HostOutput) -> HostError {
        HostError(.protocolError, "unexpected result \(output)")
    }
}
