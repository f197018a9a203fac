import BLE
import BLEProfiles
import Dispatch
import Foundation

/// A `Profile` published through the public `PeripheralManager`: adds the services in order, advertises,
/// answers reads and writes through the profile's behaviour, and sends notifications and indications,
/// retrying when the transmit queue is full.
final class ServedDevice: PeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: every mutable field is touched only on `queue`, the manager's delegate queue.
    let system: BluetoothSystem
    let profile: Profile
    let queue: DispatchQueue
    let behaviour: ProfileBehaviour
    /// Called with one line per event (`ble serve` prints them; the world's devices stay quiet).
    let log: (@Sendable (String) -> Void)?
    /// Called once advertising started (nil) or failed (the error), and with an error if the controller goes
    /// after that.
    let onStarted: (@Sendable ((any Error)?) -> Void)?
    /// Set inside `queue.sync` in `init`, before any delegate callback (all of which arrive on `queue`).
    var manager: PeripheralManager!
    var characteristics: [BluetoothUUID: MutableCharacteristic] = [:]
    private var services: [MutableService] = []
    private var nextService = 0
    private var pendingUpdates: [(MutableCharacteristic, Data)] = []
    /// The centrals connected now, in the order they came.
    private var connected: [Central] = []
    /// Updates a write caused, held while the write is handled so that its line is logged before theirs.
    private var updatesCausedByWrite: [(BluetoothUUID, Data)]?

    init(
        system: BluetoothSystem, profile: Profile, log: (@Sendable (String) -> Void)? = nil,
        onStarted: (@Sendable ((any Error)?) -> Void)? = nil
    ) {
        self.system = system
        self.profile = profile
        self.queue = DispatchQueue(label: "ble.device.\(profile.deviceName)")
        self.behaviour = profile.behaviour()
        self.log = log
        self.onStarted = onStarted
        queue.sync {
            behaviour.device = self
            manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system)
        }
    }

    // MARK: Publishing

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        if peripheral.state != .poweredOn, !services.isEmpty {
            // Published, then the controller went (the room stopped, a dongle pulled out): nothing is served now.
            onStarted?(BluetoothError(.transportClosed, "the controller is gone (\(peripheral.state))"))
            return
        }
        guard peripheral.state == .poweredOn, services.isEmpty else { return }
        var byUUID: [BluetoothUUID: MutableService] = [:]
        for definition in profile.services {
            let service = MutableService(type: definition.uuid, primary: definition.primary)
            service.includedServices = definition.includes.compactMap { byUUID[$0] }
            service.characteristics = definition.characteristics.map { c in
                // A logged device answers its fixed values itself, so that their reads are logged too (the stack
                // would answer them out of its sight); the values are the same either way.
                let answeredHere = log != nil && c.value != nil
                if answeredHere { behaviour.values[c.uuid] = c.value }
                let characteristic = MutableCharacteristic(
                    type: c.uuid, properties: c.properties, value: answeredHere ? nil : c.value,
                    permissions: c.permissions)
                characteristic.descriptors = c.descriptors.map { MutableDescriptor(type: $0.uuid, value: $0.value) }
                if characteristics[c.uuid] == nil { characteristics[c.uuid] = characteristic }
                if c.value == nil, let initial = c.initial, behaviour.values[c.uuid] == nil {
                    behaviour.values[c.uuid] = initial
                }
                return characteristic
            }
            byUUID[definition.uuid] = service
            services.append(service)
        }
        addNext()
    }

    private func addNext() {
        guard nextService < services.count else {
            manager.startAdvertising(
                AdvertisementData(
                    localName: profile.name.isEmpty ? nil : profile.name, manufacturerData: profile.manufacturerData,
                    serviceData: profile.serviceData,
                    serviceUUIDs: profile.servicesToAdvertise.isEmpty ? nil : profile.servicesToAdvertise,
                    txPowerLevel: profile.txPowerLevel, isConnectable: profile.connectable ? nil : false))
            return
        }
        manager.add(services[nextService])
        nextService += 1
    }

    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
        if let error {
            onStarted?(error)
            return
        }
        addNext()
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        onStarted?(error)
        if error == nil { behaviour.started() }
    }

    // MARK: Requests

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        let uuid = request.characteristic.uuid
        switch behaviour.read(uuid) {
        case .success(let value):
            guard request.offset <= value.count else {
                log?("\(request.central.identifier) read \(uuid.uuidString) -> \(ToolError.describe(.invalidOffset))")
                peripheral.respond(to: request, withResult: .invalidOffset)
                return
            }
            if request.offset == 0 { log?("\(request.central.identifier) read \(uuid.uuidString) \(value.hex)") }
            request.value = value.subdata(in: (value.startIndex + request.offset)..<value.endIndex)
            peripheral.respond(to: request, withResult: .success)
        case .failure(let refusal):
            let code = refusal.code
            log?("\(request.central.identifier) read \(uuid.uuidString) -> \(ToolError.describe(code))")
            peripheral.respond(to: request, withResult: code)
        }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        guard let first = requests.first else { return }
        // One write, or a queued one (a long write, a reliable write) that may reach several characteristics:
        // each one's parts apply, in the order they were queued, over its current value. All are checked before
        // any is written, so a refused part leaves every value as it was.
        var order: [Characteristic] = []
        for request in requests where !order.contains(where: { $0 === request.characteristic }) {
            order.append(request.characteristic)
        }
        var writes: [(Characteristic, Data)] = []
        for characteristic in order {
            let uuid = characteristic.uuid
            let parts = requests.filter { $0.characteristic === characteristic }
            // A single part at offset 0 is the whole value; anything else starts from what the device holds.
            var value = Data()
            if parts.count > 1 || parts[0].offset != 0, case .success(let current) = behaviour.read(uuid) {
                value = current
            }
            let result = ATTRequest.apply(requests, for: characteristic, to: &value)
            guard result == .success else {
                let offsets = parts.map { "\($0.offset)" }.joined(separator: ",")
                log?(
                    "\(first.central.identifier) write \(uuid.uuidString) at offset \(offsets) -> "
                        + ToolError.describe(result))
                // Through this characteristic's part, so the central hears which attribute refused.
                peripheral.respond(to: parts[0], withResult: result)
                return
            }
            writes.append((characteristic, value))
        }
        let partFor = { (refused: Characteristic) in requests.first { $0.characteristic === refused } ?? first }
        // The behaviour may notify a change the write makes (a lock's state): hold that until the write itself is
        // logged and answered, so the log shows the cause before its effect.
        updatesCausedByWrite = []
        var answeredAtOnce = true
        write(writes[...], command: first.isWriteCommand, from: first.central) { [self] result, refusedBy in
            peripheral.respond(to: refusedBy.map(partFor) ?? first, withResult: result)
            guard answeredAtOnce else { return }
            let caused = updatesCausedByWrite ?? []
            updatesCausedByWrite = nil
            for (updated, data) in caused { update(updated, data) }
        }
        // Answered later (a device that takes the value when it has room): what it notifies goes out as it comes.
        answeredAtOnce = false
        if let caused = updatesCausedByWrite {
            updatesCausedByWrite = nil
            for (updated, data) in caused { update(updated, data) }
        }
    }

    /// Hands each value to the behaviour in turn, logging each, and answers once: with the first refusal and the
    /// characteristic that refused (the values before it are written, and the log says so), or success.
    private func write(
        _ writes: ArraySlice<(Characteristic, Data)>, command: Bool, from central: Central,
        answer: @escaping (ATTErrorCode, Characteristic?) -> Void
    ) {
        guard let (characteristic, value) = writes.first else { return answer(.success, nil) }
        let uuid = characteristic.uuid
        behaviour.write(uuid, value: value, command: command) { [self] result in
            let outcome = result == .success ? "" : " -> \(ToolError.describe(result))"
            log?("\(central.identifier) write \(uuid.uuidString) \(value.hex)\(outcome)")
            guard result == .success else { return answer(result, characteristic) }
            write(writes.dropFirst(), command: command, from: central, answer: answer)
        }
    }

    // MARK: Centrals (swift-ble's extensions of the delegate)

    func peripheralManager(_ peripheral: PeripheralManager, didConnect central: Central) {
        connected.append(central)
        log?("\(central.identifier) connected from \(central.address)")
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUpdateSecurity event: CentralSecurityEvent
    ) {
        log?("\(central.identifier) \(event)")
        if case .paired(let result) = event, result.bonded { log?("\(central.identifier) bonded") }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didDisconnect central: Central, error: (any Error)?) {
        // After `stop`, the links' ends were logged already.
        guard connected.contains(where: { $0 === central }) else { return }
        connected.removeAll { $0 === central }
        let reason = (error as? BluetoothError)?.hciStatus.map { " (\($0))" } ?? ""
        log?("\(central.identifier) disconnected\(reason)")
    }

    func peripheralManager(_ peripheral: PeripheralManager, central: Central, didUpdateMTU mtu: Int) {
        log?("\(central.identifier) mtu \(mtu) (updates carry up to \(central.maximumUpdateValueLength) bytes)")
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        let kind = characteristic.properties.contains(.notify) ? "notifications" : "indications"
        log?("\(central.identifier) subscribe \(characteristic.uuid.uuidString) \(kind)")
        behaviour.subscribed(characteristic.uuid)
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        log?("\(central.identifier) unsubscribe \(characteristic.uuid.uuidString)")
        behaviour.unsubscribed(characteristic.uuid)
    }

    // MARK: Updates

    /// Whether any central is subscribed to `uuid`.
    func isSubscribed(_ uuid: BluetoothUUID) -> Bool {
        !(characteristics[uuid]?.subscribedCentrals ?? []).isEmpty
    }

    /// Notifies or indicates `value` to the centrals subscribed to `uuid` (nothing when there are none);
    /// queues it when the transmit queue is full.
    func update(_ uuid: BluetoothUUID, _ value: Data) {
        if updatesCausedByWrite != nil {
            updatesCausedByWrite?.append((uuid, value))
            return
        }
        guard let characteristic = characteristics[uuid], isSubscribed(uuid) else { return }
        let kind = characteristic.properties.contains(.notify) ? "notify" : "indicate"
        log?("* \(kind) \(uuid.uuidString) \(value.hex)")
        // A value longer than a central's ATT_MTU - 3 reaches it cut short (ATT allows no more): say so.
        for central in characteristic.subscribedCentrals ?? [] where value.count > central.maximumUpdateValueLength {
            log?(
                "* \(uuid.uuidString) reaches \(central.identifier) cut to \(central.maximumUpdateValueLength) of \(value.count) bytes (its ATT_MTU - 3)"
            )
        }
        if !pendingUpdates.isEmpty || !manager.updateValue(value, for: characteristic, onSubscribedCentrals: nil) {
            pendingUpdates.append((characteristic, value))
            // Nothing is dropped: it goes out on peripheralManagerIsReady(toUpdateSubscribers:), in order.
            if pendingUpdates.count == 1 { log?("* transmit queue full: waiting for room to send") }
        }
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        let waiting = pendingUpdates.count
        while let (characteristic, value) = pendingUpdates.first {
            guard peripheral.updateValue(value, for: characteristic, onSubscribedCentrals: nil) else { return }
            pendingUpdates.removeFirst()
        }
        if waiting > 0 { log?("* room again: sent \(waiting) waiting update\(waiting == 1 ? "" : "s")") }
    }

    /// An `--updates` instruction from the device's own side: sets the characteristic's value (what reads
    /// answer from now on) and notifies or indicates it to the subscribed centrals. Returns why it cannot, for
    /// the caller to report; never traps on what the line named.
    func push(_ uuid: BluetoothUUID, _ value: Data) -> ServeUpdateError? {
        guard let characteristic = characteristics[uuid],
            let definition = profile.services.lazy.flatMap(\.characteristics).first(where: { $0.uuid == uuid })
        else {
            let known = characteristics.keys.map(\.uuidString).sorted().joined(separator: ", ")
            return ServeUpdateError("the profile has no characteristic \(uuid.uuidString) (it has \(known))")
        }
        guard definition.value == nil else {
            return ServeUpdateError(
                "\(uuid.uuidString) has a fixed value (the stack answers its reads); it cannot change")
        }
        behaviour.values[uuid] = value
        let properties = characteristic.properties
        guard properties.contains(.notify) || properties.contains(.indicate) else {
            log?("* set \(uuid.uuidString) \(value.hex) (it neither notifies nor indicates: reads see it)")
            return nil
        }
        guard isSubscribed(uuid) else {
            log?("* set \(uuid.uuidString) \(value.hex) (no central is subscribed: reads see it)")
            return nil
        }
        update(uuid, value)
        return nil
    }

    /// Runs `work` on the device's queue after `delay` of the system's time.
    @discardableResult
    func after(_ delay: Duration, _ work: @escaping () -> Void) -> ScheduledTimer {
        let bound = QueueBound(work)
        return system.schedule(after: delay, on: queue) { bound.value() }
    }

    /// Stops advertising and serving. The centrals still connected are logged as disconnected: the tool is about
    /// to go, and their links with it (the controller ends them when the transport closes).
    func stop() {
        queue.sync {
            manager.stopAdvertising()
            manager.removeAllServices()
            for central in connected { log?("\(central.identifier) disconnected (this device stopped)") }
            connected = []
        }
    }
}

/// A value made on a serial queue and used only on that same queue, handed through an API that asks for
/// `Sendable` (the system's timers): `@unchecked` because the queue, not the type, keeps it single-threaded.
struct QueueBound<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
