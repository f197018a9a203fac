import BLE
import Dispatch
import Foundation

/// What is left of the tool's delegate-style central, for `write --without-response` only (the other commands
/// use `CentralTool`, on the async API): a `CentralManager` and the delegate of every `Peripheral` it touches,
/// turned into operations that take a completion. It goes once the API has a pipelined send for bulk writes
/// without response (the async write waits for each write's delivery, which would serialize them). Completions run on `queue` (the manager's delegate queue) inside the
/// callback that finished the operation, so a flow that starts its next step from a completion never lets
/// the simulated clock move in between: the same world gives the same run.
final class ToolCentral: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    // @unchecked: every mutable field is touched only on `queue`.
    typealias Completion<T> = (Result<T, ToolError>) -> Void

    let system: BluetoothSystem
    let queue = DispatchQueue(label: "ble.central")
    private(set) var manager: CentralManager!

    private var whenPoweredOn: [() -> Void] = []
    private var discovered: ((Peripheral, AdvertisementData, Int) -> Void)?
    private var connecting: [ObjectIdentifier: Completion<Void>] = [:]
    private var disconnecting: [ObjectIdentifier: () -> Void] = [:]
    /// Called when a connected peripheral drops without being asked to.
    var linkLost: ((Peripheral, ToolError) -> Void)?
    private var servicesDiscovered: Completion<Void>?
    private var characteristicsDiscovered: [ObjectIdentifier: Completion<Void>] = [:]
    private var characteristicReads: [ObjectIdentifier: Completion<Data>] = [:]
    private var readyToWrite: [() -> Void] = []

    init(system: BluetoothSystem) {
        self.system = system
        queue.sync { manager = CentralManager(delegate: self, queue: queue, options: nil, system: system) }
    }

    /// Runs `body` on the queue (for starting a flow from outside a callback).
    func start(_ body: @escaping @Sendable () -> Void) { queue.async(execute: body) }

    /// Runs `work` on the queue after `delay` of the system's time (virtual time in the world).
    @discardableResult
    func after(_ delay: Duration, _ work: @escaping () -> Void) -> ScheduledTimer {
        let bound = QueueBound(work)
        return system.schedule(after: delay, on: queue) { bound.value() }
    }

    // MARK: Manager

    func whenReady(timeout: Duration = .seconds(5), _ completion: @escaping Completion<Void>) {
        if manager.state == .poweredOn { return completion(.success(())) }
        var done = false
        let timer = after(timeout) { [self] in
            guard !done else { return }
            done = true
            whenPoweredOn.removeAll()
            completion(.failure(ToolError(.transport, "the controller did not power on (state \(manager.state))")))
        }
        whenPoweredOn.append {
            guard !done else { return }
            done = true
            timer.cancel()
            completion(.success(()))
        }
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        guard central.state == .poweredOn else { return }
        let waiting = whenPoweredOn
        whenPoweredOn.removeAll()
        for resume in waiting { resume() }
    }

    func scan(
        services: [BluetoothUUID]?, duplicates: Bool, _ handler: @escaping (Peripheral, AdvertisementData, Int) -> Void
    ) {
        discovered = handler
        manager.scanForPeripherals(withServices: services, options: .init(allowDuplicates: duplicates))
    }

    func stopScan() {
        discovered = nil
        manager.stopScan()
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral,
        advertisementData: AdvertisementData, rssi: Int
    ) {
        discovered?(peripheral, advertisementData, rssi)
    }

    func connect(_ peripheral: Peripheral, timeout: Duration, _ completion: @escaping Completion<Void>) {
        let key = ObjectIdentifier(peripheral)
        peripheral.delegate = self
        connecting[key] = completion
        manager.connect(peripheral, options: nil)
        after(timeout) { [self] in
            guard let pending = connecting.removeValue(forKey: key) else { return }
            manager.cancelPeripheralConnection(peripheral)
            pending(
                .failure(
                    ToolError(
                        .timeout, "connecting to \(Self.describe(peripheral)) timed out after \(Self.seconds(timeout))")
                ))
        }
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        connecting.removeValue(forKey: ObjectIdentifier(peripheral))?(.success(()))
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        let reason = error.map { "\($0)" } ?? "no reason given"
        connecting.removeValue(forKey: ObjectIdentifier(peripheral))?(
            .failure(ToolError(.notConnectable, "could not connect to \(Self.describe(peripheral)): \(reason)")))
    }

    func disconnect(_ peripheral: Peripheral, _ completion: @escaping () -> Void) {
        guard peripheral.state != .disconnected else { return completion() }
        disconnecting[ObjectIdentifier(peripheral)] = completion
        manager.cancelPeripheralConnection(peripheral)
        // Do not wait forever for a peer that vanished.
        after(.seconds(2)) { [self] in disconnecting.removeValue(forKey: ObjectIdentifier(peripheral))?() }
    }

    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        let key = ObjectIdentifier(peripheral)
        if let done = disconnecting.removeValue(forKey: key) { return done() }
        if let pending = connecting.removeValue(forKey: key) {
            return pending(.failure(ToolError(.notConnectable, "could not connect to \(Self.describe(peripheral))")))
        }
        let waiting = readyToWrite
        readyToWrite.removeAll()
        for resume in waiting { resume() }
        let reason = error.map { "\($0)" } ?? "the connection ended"
        linkLost?(peripheral, ToolError(.disconnected, "\(Self.describe(peripheral)) disconnected: \(reason)"))
    }

    // MARK: Discovery

    func discoverServices(_ peripheral: Peripheral, _ completion: @escaping Completion<Void>) {
        servicesDiscovered = completion
        peripheral.discoverServices(nil)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        let completion = servicesDiscovered
        servicesDiscovered = nil
        completion?(error.map { .failure(ToolError($0, doing: "discovering services")) } ?? .success(()))
    }

    func discoverCharacteristics(
        _ peripheral: Peripheral, for service: Service, _ completion: @escaping Completion<Void>
    ) {
        characteristicsDiscovered[ObjectIdentifier(service)] = completion
        peripheral.discoverCharacteristics(nil, for: service)
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        characteristicsDiscovered.removeValue(forKey: ObjectIdentifier(service))?(
            error.map { .failure(ToolError($0, doing: "discovering characteristics of \(service.uuid.uuidString)")) }
                ?? .success(()))
    }

    /// Discovers every service and every characteristic of each (not included services or descriptors).
    func discoverCharacteristicsOfAllServices(_ peripheral: Peripheral, _ completion: @escaping Completion<Void>) {
        discoverServices(peripheral) { [self] result in
            if case .failure = result { return completion(result) }
            sequentially(
                peripheral.services ?? [],
                { [self] service, next in
                    discoverCharacteristics(peripheral, for: service, next)
                }, completion)
        }
    }

    // MARK: Values

    func read(_ peripheral: Peripheral, _ characteristic: Characteristic, _ completion: @escaping Completion<Data>) {
        characteristicReads[ObjectIdentifier(characteristic)] = completion
        peripheral.readValue(for: characteristic)
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        if let pending = characteristicReads.removeValue(forKey: ObjectIdentifier(characteristic)) {
            if let error {
                return pending(.failure(ToolError(error, doing: "reading \(characteristic.uuid.uuidString)")))
            }
            return pending(.success(characteristic.value ?? Data()))
        }
    }

    /// Sends `chunks` as writes without response, each when `canSendWriteWithoutResponse` allows; waits for
    /// room as a well-behaved app does (seed 004) instead of letting the stack drop writes.
    /// Completes with how many times it had to wait for room.
    func writeWithoutResponse(
        _ peripheral: Peripheral, _ characteristic: Characteristic, _ chunks: [Data],
        _ completion: @escaping Completion<Int>
    ) {
        var index = 0
        var waits = 0
        func pump() {
            while index < chunks.count {
                guard peripheral.state == .connected else {
                    return completion(
                        .failure(ToolError(.disconnected, "the link dropped after \(index) of \(chunks.count) writes")))
                }
                guard peripheral.canSendWriteWithoutResponse else {
                    waits += 1
                    waitForRoom(peripheral, pump)
                    return
                }
                peripheral.writeValue(chunks[index], for: characteristic, type: .withoutResponse)
                index += 1
            }
            barrier(peripheral, preferring: characteristic) { completion($0.map { waits }) }
        }
        pump()
    }

    /// Completes once every Write Command queued before it has reached the peer: ATT keeps order on the
    /// bearer, so the answer to a read sent after them comes after they were delivered. Reads the
    /// characteristic itself when it is readable, otherwise any readable characteristic (the GAP Device Name).
    private func barrier(
        _ peripheral: Peripheral, preferring characteristic: Characteristic,
        _ completion: @escaping Completion<Void>
    ) {
        let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
        let siblings = characteristic.service?.characteristics ?? []
        guard let readable = ([characteristic] + siblings + all).first(where: { $0.properties.contains(.read) }) else {
            after(.seconds(1)) { completion(.success(())) }
            return
        }
        read(peripheral, readable) { result in
            if case .failure(let error) = result, error.kind != .attError { return completion(.failure(error)) }
            completion(.success(()))
        }
    }

    /// Calls `body` once `canSendWriteWithoutResponse` is true again (`peripheralIsReady`), or when the link
    /// drops (the pump then sees the peripheral disconnected and reports it).
    private func waitForRoom(_ peripheral: Peripheral, _ body: @escaping () -> Void) {
        readyToWrite.append(body)
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        let waiting = readyToWrite
        readyToWrite.removeAll()
        for resume in waiting { resume() }
    }

    // MARK: Helpers

    /// Runs `step` for each item in turn, stopping at the first failure.
    func sequentially<T>(
        _ items: [T], _ step: @escaping (T, @escaping Completion<Void>) -> Void,
        _ completion: @escaping Completion<Void>
    ) {
        guard let first = items.first else { return completion(.success(())) }
        step(first) { [self] result in
            if case .failure = result { return completion(result) }
            sequentially(Array(items.dropFirst()), step, completion)
        }
    }

    static func describe(_ peripheral: Peripheral) -> String {
        peripheral.name.map { "\($0) (\(peripheral.address.string))" } ?? peripheral.address.string
    }

    static func seconds(_ d: Duration) -> String {
        let s = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        return s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
}

/// A value made on a serial queue and used only on that same queue, handed through an API that asks for
/// `Sendable` (the system's timers): `@unchecked` because the queue, not the type, keeps it single-threaded.
struct QueueBound<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
