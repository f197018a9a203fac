import BLEATT
import BLECore
import BLEGATT
import BLEHost
import BLESystem
import Foundation
import Logging
import Synchronization

// The requests a central makes of a peripheral. Each public method (the CoreBluetooth-style one here, the
// async one in Async/Peripheral+Async.swift) makes one request of the host, which completes it once; the
// completion is reported on the manager's queue to the request's `Reply`: the delegate or the awaiting task.

extension Peripheral {
    /// The event that tells one kind of request's outcome, given the error (nil on success); nil when the
    /// delegate has no callback for it (the request's reply alone hears it).
    typealias EventReport = @Sendable (BluetoothError?) -> PeripheralEvent?

    // MARK: Discovery

    /// Discovers the peripheral's primary services: all of them when `serviceUUIDs` is nil or empty, else those
    /// of these types (one request: Discover Primary Service By Service UUID for one type, Discover All Primary
    /// Services filtered here for several). `didDiscoverServices` reports it.
    public func discoverServices(_ serviceUUIDs: [BluetoothUUID]?) {
        discoverServices(serviceUUIDs, reply: .delegate)
    }

    func discoverServices(_ serviceUUIDs: [BluetoothUUID]?, reply: Reply<[Service]>) {
        let tell: EventReport = { e in .discoveredServices(e) }
        guard let (system, handle) = discoveryLink(reply, tell) else { return }
        let wanted = serviceUUIDs?.isEmpty == false ? serviceUUIDs : nil
        let single = wanted?.count == 1 ? wanted?.first : nil
        // Through the system: what another app (or this one) discovered on the link is not asked again.
        system.discoverServices(on: handle, uuid: single) { [self] result in
            report(reply, result, delegate: tell) { p, found in
                p.mergeServices(found.filter { wanted?.contains($0.uuid) ?? true })
                return (p.services ?? []).filter { wanted?.contains($0.uuid) ?? true }
            }
        }
    }

    /// Discovers services included by `service`, filtered by `includedServiceUUIDs` when given;
    /// `didDiscoverIncludedServicesFor` reports it.
    public func discoverIncludedServices(_ includedServiceUUIDs: [BluetoothUUID]?, for service: Service) {
        discoverIncludedServices(includedServiceUUIDs, for: service, reply: .delegate)
    }

    func discoverIncludedServices(_ uuids: [BluetoothUUID]?, for service: Service, reply: Reply<[Service]>) {
        let tell: EventReport = { e in .discoveredIncludedServices(service, e) }
        guard let (system, handle) = discoveryLink(reply, tell), let remote = discovered(service, reply, tell) else {
            return
        }
        system.discoverIncludedServices(on: handle, in: remote) { [self] result in
            report(reply, result, delegate: tell) { p, found in
                let objects = found.filter { uuid in uuids.map { $0.isEmpty || $0.contains(uuid.uuid) } ?? true }
                    .map { p.serviceObject(for: $0) }
                service.state.withLock { $0.includedServices = objects }
                return objects
            }
        }
    }

    /// Discovers the characteristics of `service`, filtered by `characteristicUUIDs` when given;
    /// `didDiscoverCharacteristicsFor` reports it.
    public func discoverCharacteristics(_ characteristicUUIDs: [BluetoothUUID]?, for service: Service) {
        discoverCharacteristics(characteristicUUIDs, for: service, reply: .delegate)
    }

    func discoverCharacteristics(_ uuids: [BluetoothUUID]?, for service: Service, reply: Reply<[Characteristic]>) {
        let tell: EventReport = { e in .discoveredCharacteristics(service, e) }
        guard let (system, handle) = discoveryLink(reply, tell), let remote = discovered(service, reply, tell) else {
            return
        }
        let wanted = uuids?.isEmpty == false ? uuids : nil
        system.discoverCharacteristics(on: handle, in: remote, uuid: wanted?.count == 1 ? wanted?.first : nil) {
            [self] result in
            report(reply, result, delegate: tell) { p, found in
                p.mergeCharacteristics(found.filter { wanted?.contains($0.uuid) ?? true }, into: service)
                return (service.characteristics ?? []).filter { wanted?.contains($0.uuid) ?? true }
            }
        }
    }

    /// Discovers the descriptors of `characteristic`; `didDiscoverDescriptorsFor` reports it.
    public func discoverDescriptors(for characteristic: Characteristic) {
        discoverDescriptors(for: characteristic, reply: .delegate)
    }

    func discoverDescriptors(for characteristic: Characteristic, reply: Reply<[Descriptor]>) {
        let tell: EventReport = { e in .discoveredDescriptors(characteristic, e) }
        guard let (system, handle) = discoveryLink(reply, tell), let remote = discovered(characteristic, reply, tell)
        else {
            return
        }
        system.discoverDescriptors(on: handle, of: remote) { [self] result in
            report(reply, result, delegate: tell) { p, found in
                p.mergeDescriptors(found, into: characteristic)
                return characteristic.descriptors ?? []
            }
        }
    }

    // MARK: Reading and writing

    /// Reads the characteristic's value (with Read Blob for values longer than one response);
    /// `didUpdateValueFor` reports it.
    public func readValue(for characteristic: Characteristic) {
        readValue(for: characteristic, reply: .delegate)
    }

    /// The delegate hears the new value whoever asked for it (a value change); a failure only when it asked.
    func readValue(for characteristic: Characteristic, reply: Reply<Data>) {
        let tell: EventReport = { e in .valueUpdated(characteristic, e, update: nil) }
        guard let (host, handle) = link(reply, tell), let remote = discovered(characteristic, reply, tell) else {
            return
        }
        // As a server refuses it (Core Spec 5.4, Vol 3, Part G, 3.3.1.1), and without asking it.
        guard characteristic.properties.contains(.read) else {
            return fail(reply, Self.notPermitted(.readNotPermitted, "read", characteristic), tell)
        }
        let attempt: Attempt<[UInt8]> = { host.read(on: handle, attribute: remote.valueHandle, completion: $0) }
        securing(handle, attempt) { [self] result in
            report(reply, result, valueChanged: true, delegate: tell) { _, bytes in
                let value = Data(bytes)
                characteristic.state.withLock { $0.value = value }
                return value
            }
        }
    }

    /// Reads a descriptor's value; `didUpdateValueFor descriptor` reports it.
    public func readValue(for descriptor: Descriptor) {
        readValue(for: descriptor, reply: .delegate)
    }

    func readValue(for descriptor: Descriptor, reply: Reply<Data>) {
        let tell: EventReport = { e in .descriptorValueUpdated(descriptor, e) }
        guard let (host, handle) = link(reply, tell), let remote = discovered(descriptor, reply, tell) else { return }
        let attempt: Attempt<[UInt8]> = { host.read(on: handle, attribute: remote.handle, completion: $0) }
        securing(handle, attempt) { [self] result in
            report(reply, result, valueChanged: true, delegate: tell) { _, bytes in
                let value = Data(bytes)
                descriptor.state.withLock { $0.value = value }
                return value
            }
        }
    }

    /// Writes a characteristic value. With `.withResponse`, values longer than ATT_MTU - 3 use the long-write
    /// procedure (up to 512 bytes) and `didWriteValueFor` reports the outcome. With `.withoutResponse` nothing
    /// is reported; a value longer than `maximumWriteValueLength(for: .withoutResponse)`, a characteristic
    /// without the write-without-response property, or a write while `canSendWriteWithoutResponse` is false, is
    /// dropped, as CoreBluetooth drops it; all but the last (which `peripheralIsReady` answers) are logged as
    /// the misuse they are.
    public func writeValue(_ data: Data, for characteristic: Characteristic, type: CharacteristicWriteType) {
        switch type {
        case .withResponse: writeValue(data, for: characteristic, reply: .delegate)
        case .withoutResponse: _ = writeWithoutResponse(data, for: characteristic)
        }
    }

    func writeValue(_ data: Data, for characteristic: Characteristic, reply: Reply<Void>) {
        let tell: EventReport = { e in .wroteValue(characteristic, e) }
        guard let (host, handle) = link(reply, tell), let remote = discovered(characteristic, reply, tell) else {
            return
        }
        guard characteristic.properties.contains(.write) else {
            return fail(reply, Self.notPermitted(.writeNotPermitted, "written with response", characteristic), tell)
        }
        guard data.count <= GATTDatabase.maximumValueLength else {
            let error = BluetoothError(
                .att(.invalidAttributeValueLength), "a value is at most 512 bytes; this one has \(data.count)")
            return fail(reply, error, tell)
        }
        let attempt: Attempt<Void> = {
            host.write(on: handle, attribute: remote.valueHandle, value: Array(data), completion: $0)
        }
        securing(handle, attempt) { [self] result in
            report(reply, result, delegate: tell) { _, _ in () }
        }
    }

    /// Queues a Write Command; whether it was queued. Refused (sending nothing) when not connected, when the
    /// value is longer than ATT_MTU - 3 or when the link's queue is full. A refusal, or a write that fills the
    /// queue, makes `canSendWriteWithoutResponse` false until `peripheralIsReady(toSendWriteWithoutResponse:)`.
    /// When queued, `delivered` (a task's) hears once the peer's link layer acknowledged the command, or why not.
    func writeWithoutResponse(
        _ data: Data, for characteristic: Characteristic, delivered: Reply<Void>? = nil
    ) -> Bool {
        guard let handle = locked.withLock({ $0.state == .connected ? $0.handle : nil }), let host else {
            Self.logger.warning(
                "a write without response to \(characteristic.uuid.uuidString) was dropped: \(self) is not connected")
            return false
        }
        guard let remote = characteristic.state.withLock({ $0.remote }) else {
            Self.logger.warning(
                "a write without response to \(characteristic.uuid.uuidString) was dropped: it is not a discovered characteristic of \(self)"
            )
            return false
        }
        guard characteristic.properties.contains(.writeWithoutResponse) else {
            Self.logger.warning(
                "a write without response to \(characteristic.uuid.uuidString) was dropped: the characteristic does not allow writes without response"
            )
            return false
        }
        let limit = min(host.mtu(on: handle) - 3, GATTDatabase.maximumValueLength)
        guard data.count <= limit else {
            Self.logger.warning(
                "a write without response of \(data.count) bytes to \(characteristic.uuid.uuidString) was dropped: longer than maximumWriteValueLength(for: .withoutResponse), \(limit)"
            )
            return false
        }
        var onDelivered: (@Sendable (Result<Void, HostError>) -> Void)?
        if let delivered {
            let silent: EventReport = { _ in nil }
            onDelivered = { [self] result in
                report(delivered, result, delegate: silent) { (_: Peripheral, _: Void) in () }
            }
        }
        // Marked under the host's lock, before the "ready" that clears it can be produced.
        return host.writeWithoutResponse(
            on: handle, attribute: remote.valueHandle, value: Array(data), delivered: onDelivered,
            whenFull: { [self] in locked.withLock { $0.writeWithoutResponseRefused = true } })
    }

    /// Writes a descriptor value (with response). The Client Characteristic Configuration descriptor is written
    /// through `setNotifyValue(_:for:)`, as CoreBluetooth requires.
    public func writeValue(_ data: Data, for descriptor: Descriptor) {
        writeValue(data, for: descriptor, reply: .delegate)
    }

    func writeValue(_ data: Data, for descriptor: Descriptor, reply: Reply<Void>) {
        let tell: EventReport = { e in .wroteDescriptor(descriptor, e) }
        guard let (host, handle) = link(reply, tell), let remote = discovered(descriptor, reply, tell) else { return }
        guard descriptor.uuid != .clientCharacteristicConfiguration else {
            let error = BluetoothError(
                .operationNotSupported, "the Client Characteristic Configuration is written with setNotifyValue(_:for:)"
            )
            return fail(reply, error, tell)
        }
        let attempt: Attempt<Void> = {
            host.write(on: handle, attribute: remote.handle, value: Array(data), completion: $0)
        }
        securing(handle, attempt) { [self] result in
            report(reply, result, delegate: tell) { _, _ in descriptor.state.withLock { $0.value = data } }
        }
    }

    /// Enables or disables notifications (or indications, when the characteristic only indicates) by writing its
    /// Client Characteristic Configuration descriptor, discovering it first if needed;
    /// `didUpdateNotificationStateFor` reports the outcome.
    public func setNotifyValue(_ enabled: Bool, for characteristic: Characteristic) {
        setNotifyValue(enabled, for: characteristic, reply: .delegate)
    }

    func setNotifyValue(_ enabled: Bool, for characteristic: Characteristic, reply: Reply<Void>) {
        let tell: EventReport = { e in .notificationStateUpdated(characteristic, e) }
        guard let (system, handle) = discoveryLink(reply, tell), let remote = discovered(characteristic, reply, tell)
        else {
            return
        }
        let properties = characteristic.properties
        guard properties.contains(.notify) || properties.contains(.indicate) else {
            let error = BluetoothError(
                .operationNotSupported, "\(characteristic.uuid.uuidString) neither notifies nor indicates")
            return fail(reply, error, tell)
        }
        let indicate =
            properties.contains(.indicate)
            && (!properties.contains(.notify) || characteristic.state.withLock { $0.prefersIndications })
        let value: UInt16 = !enabled ? 0 : (indicate ? 0x0002 : 0x0001)
        let write: @Sendable (AttributeHandle) -> Void = { [self] cccd in
            let done: @Sendable (Result<Void, HostError>) -> Void = { [self] result in
                report(reply, result, delegate: tell) { _, _ in
                    characteristic.state.withLock { $0.isNotifying = enabled }
                }
            }
            // One descriptor for every app on the link: written when what they want together is not what the
            // peer holds. A write refused for want of security is retried once the link is secured, as a read is
            // (the refusal took the app's wish back, so the retry asks again).
            let attempt: Attempt<Void> = { [weak self] done in
                guard let manager = self?.manager else {
                    return done(.failure(HostError(.invalidState, "the manager went away")))
                }
                manager.system.core.setSubscription(
                    value, by: ObjectIdentifier(manager.session), descriptor: cccd, characteristic: remote.valueHandle,
                    on: handle, done: done)
            }
            securing(handle, attempt, completion: done)
        }
        if let cccd = characteristic.descriptors?.first(where: { $0.uuid == .clientCharacteristicConfiguration }),
            let cccdHandle = cccd.state.withLock({ $0.remote?.handle })
        {
            return write(cccdHandle)
        }
        system.discoverDescriptors(on: handle, of: remote) { [self] result in
            switch result {
            case .success(let found):
                guard let cccd = found.first(where: { $0.uuid == .clientCharacteristicConfiguration }) else {
                    let error = BluetoothError(
                        .att(.attributeNotFound),
                        "\(characteristic.uuid.uuidString) has no Client Characteristic Configuration descriptor")
                    return fail(reply, error, tell)
                }
                write(cccd.handle)
            case .failure(let error):
                report(reply, Result<Void, HostError>.failure(error), delegate: tell) { _, _ in () }
            }
        }
    }

    /// Reads the link's RSSI; `didReadRSSI` reports it.
    public func readRSSI() {
        readRSSI(reply: .delegate)
    }

    func readRSSI(reply: Reply<Int>) {
        guard let (host, handle) = link(reply, { e in .readRSSI(127, e) }) else { return }
        host.readRSSI(on: handle) { [self] result in
            let rssi = (try? result.get()) ?? 127
            report(reply, result, delegate: { e in .readRSSI(rssi, e) }) { _, rssi in rssi }
        }
    }

    // MARK: Reporting

    /// The live link, or the request reported at once with `.notConnected`.
    /// Runs a GATT request; when the peer refuses it for want of security (Insufficient Authentication,
    /// Encryption or Encryption Key Size), secures the link as iOS does (encrypts with the bond's key, or pairs)
    /// and runs it once more, so the application sees the retried result. When the link cannot be secured, the
    /// peer's refusal is what the application sees, except for a peer that no longer has the bond's key (PIN or
    /// Key Missing): the application sees `peerRemovedPairingInformation`, as on iOS, and the system ends the link.
    typealias Attempt<T: Sendable> = @Sendable (@escaping @Sendable (Result<T, HostError>) -> Void) -> Void

    func securing<T: Sendable>(
        _ handle: ConnectionHandle, _ attempt: @escaping Attempt<T>,
        completion: @escaping @Sendable (Result<T, HostError>) -> Void
    ) {
        attempt { [weak self] result in
            guard case .failure(let error) = result, let code = error.code.attErrorCode,
                code == .insufficientAuthentication || code == .insufficientEncryption
                    || code == .insufficientEncryptionKeySize,
                let security = self?.manager?.system.core.security, security.isEnabled, !security.isEncrypted(handle)
            else { return completion(result) }
            security.secure(handle) { secured in
                switch secured {
                case .success: attempt(completion)
                case .failure(.peerRemovedPairingInformation):
                    completion(
                        .failure(
                            HostError(.hci(.pinOrKeyMissing), "\(SystemSecurity.Failure.peerRemovedPairingInformation)")
                        ))
                case .failure: completion(result)
                }
            }
        }
    }

    func link<T: Sendable>(_ reply: Reply<T>, _ tell: @escaping EventReport) -> (HostDriver, ConnectionHandle)? {
        if manager?.isDefunct == true {
            // A terminated app's peripheral: nothing of it reaches the link the system may still keep.
            reply.finish(.failure(CentralManager.appTerminated))
            return nil
        }
        if let handle = locked.withLock({ $0.state == .connected ? $0.handle : nil }), let host {
            return (host, handle)
        }
        fail(reply, BluetoothError(.notConnected, "the peripheral is not connected"), tell)
        return nil
    }

    /// The live link and the system that discovers on it (sharing results between the apps on the link), or the
    /// request reported at once.
    func discoveryLink<T: Sendable>(_ reply: Reply<T>, _ tell: @escaping EventReport)
        -> (SystemCore, ConnectionHandle)?
    {
        guard let (_, handle) = link(reply, tell) else { return nil }
        guard let system = manager?.system.core else {
            fail(reply, Self.managerGone, tell)
            return nil
        }
        return (system, handle)
    }

    /// The remote attribute behind a discovered object, or the request reported at once with `.invalidParameters`.
    func discovered<T: Sendable, Remote>(
        _ attribute: some RemoteBacked<Remote>, _ reply: Reply<T>, _ tell: @escaping EventReport
    ) -> Remote? {
        if let remote = attribute.remoteAttribute, attribute.owner === self { return remote }
        fail(reply, BluetoothError(.invalidParameters, "\(attribute) is not a discovered attribute of \(self)"), tell)
        return nil
    }

    /// Reports a request that failed before it reached the host, on the manager's queue.
    func fail<T: Sendable>(_ reply: Reply<T>, _ error: BluetoothError, _ tell: @escaping EventReport) {
        guard manager != nil else { return reply.finish(.failure(Self.managerGone)) }
        let delivered = deliver { p in
            if reply.isDelegate, let event = tell(error) { p.tell(event) }
            reply.finish(.failure(error))
        }
        // Dropped: the app was terminated. A task awaiting it still hears, at once.
        if !delivered { reply.finish(.failure(CentralManager.appTerminated)) }
    }

    /// Reports a request's outcome on the manager's queue. On success `apply` changes the objects and gives the
    /// reply's value; then the delegate hears the outcome if the request was the delegate's (or, with
    /// `valueChanged`, a success whoever asked: the delegate is told of every new value); then the task does.
    func report<Outcome: Sendable, Failure: Error, T: Sendable>(
        _ reply: Reply<T>, _ result: Result<Outcome, Failure>, valueChanged: Bool = false,
        delegate tell: @escaping EventReport, apply: @escaping @Sendable (Peripheral, Outcome) -> T
    ) {
        let result = result.mapError { [self] error -> BluetoothError in
            if let host = error as? HostError {
                // The link went down because the application cancelled the connection.
                if host.code == .disconnected, isCancelled {
                    return BluetoothError(.operationCancelled, "the connection was cancelled: \(host.message)")
                }
                return BluetoothError(host)
            }
            return error as? BluetoothError ?? BluetoothError(.unknown, "\(error)")
        }.flatMap { [self] outcome -> Result<Outcome, BluetoothError> in
            // The application left a link other apps still use (it cancelled the connection): what was under way
            // is over for it, as if the link had gone down, even though the peer answered.
            if isCancelled && handle == nil {
                return .failure(BluetoothError(.operationCancelled, "the connection was cancelled"))
            }
            return .success(outcome)
        }
        guard manager != nil else {
            // Nobody is left to deliver on the manager's queue: a waiting task still hears, at once.
            return reply.finish(result.flatMap { _ in .failure(Self.managerGone) })
        }
        let delivered = deliver { p in
            switch result {
            case .success(let outcome):
                let value = apply(p, outcome)
                if reply.isDelegate || valueChanged, let event = tell(nil) { p.tell(event) }
                reply.finish(.success(value))
            case .failure(let error):
                if reply.isDelegate, let event = tell(error) { p.tell(event) }
                reply.finish(.failure(error))
            }
        }
        // Dropped: the app was terminated. A task awaiting it still hears, at once.
        if !delivered { reply.finish(.failure(CentralManager.appTerminated)) }
    }
}

extension Peripheral {
    /// A request the characteristic's properties do not allow, refused locally with the ATT code its server
    /// would answer.
    static func notPermitted(_ code: ATTErrorCode, _ what: String, _ characteristic: Characteristic) -> BluetoothError {
        BluetoothError(
            .att(code),
            "\(characteristic.uuid.uuidString) cannot be \(what): its properties are \(characteristic.properties)")
    }

    static let managerGone = BluetoothError(.invalidParameters, "the peripheral's central manager no longer exists")
}

/// A public attribute object and the remote attribute discovery gave it.
protocol RemoteBacked<Remote>: CustomStringConvertible {
    associatedtype Remote
    var remoteAttribute: Remote? { get }
    /// The peripheral the attribute was discovered on.
    var owner: Peripheral? { get }
}

extension Service: RemoteBacked {
    var remoteAttribute: GATTService? { state.withLock { $0.remote } }
    var owner: Peripheral? { peripheral }
}

extension Characteristic: RemoteBacked {
    var remoteAttribute: GATTCharacteristic? { state.withLock { $0.remote } }
    var owner: Peripheral? { service?.peripheral }
}

extension Descriptor: RemoteBacked {
    var remoteAttribute: GATTDescriptor? { state.withLock { $0.remote } }
    var owner: Peripheral? { characteristic?.service?.peripheral }
}
