import BLE
import Dispatch
import Foundation
import Synchronization

/// One entry of a delegate-call log: when (virtual time of the system) and what.
struct Logged<Event: Sendable>: Sendable {
    var time: Duration
    var event: Event
}

/// Maps a delegate's `(any Error)?` to the public error type, so tests can compare codes. An error of any
/// other type is kept as `.unknown` with its text, which makes a code comparison fail visibly.
func bluetoothError(_ error: (any Error)?) -> BluetoothError? {
    guard let error else { return nil }
    if let e = error as? BluetoothError { return e }
    return BluetoothError(.unknown, "not a BluetoothError: \(error)")
}

/// Every callback a `CentralManagerDelegate` and `PeripheralDelegate` receive, with what the objects showed at
/// the time of the call.
enum CentralEvent: Sendable, CustomStringConvertible {
    case didUpdateState(ManagerState)
    case didDiscover(Peripheral, AdvertisementData, rssi: Int)
    case didConnect(Peripheral)
    case didFailToConnect(Peripheral, BluetoothError?)
    case didDisconnect(Peripheral, BluetoothError?)
    case didUpdateName(Peripheral, String?)
    case didModifyServices([Service])
    case didReadRSSI(Int, BluetoothError?)
    case didDiscoverServices(BluetoothError?)
    case didDiscoverIncludedServices(Service, BluetoothError?)
    case didDiscoverCharacteristics(Service, BluetoothError?)
    case didDiscoverDescriptors(Characteristic, BluetoothError?)
    case didUpdateCharacteristicValue(Characteristic, Data?, BluetoothError?)
    case didUpdateDescriptorValue(Descriptor, Data?, BluetoothError?)
    case didWriteCharacteristic(Characteristic, BluetoothError?)
    case didWriteDescriptor(Descriptor, BluetoothError?)
    case didUpdateNotificationState(Characteristic, isNotifying: Bool, BluetoothError?)
    case readyToSendWriteWithoutResponse(Peripheral)
    case willRestoreState(CentralManager.RestoredState)

    /// A stable one-line rendering (no object identities), for logs compared across runs.
    var description: String {
        func e(_ error: BluetoothError?) -> String { error.map { " error=\($0.code)" } ?? "" }
        switch self {
        case .didUpdateState(let s): return "didUpdateState \(s)"
        case .didDiscover(let p, let a, let rssi): return "didDiscover \(p.identifier) \(a) rssi=\(rssi)"
        case .didConnect(let p): return "didConnect \(p.identifier)"
        case .didFailToConnect(let p, let error): return "didFailToConnect \(p.identifier)\(e(error))"
        case .didDisconnect(let p, let error): return "didDisconnect \(p.identifier)\(e(error))"
        case .didUpdateName(let p, let name): return "didUpdateName \(p.identifier) \(name ?? "nil")"
        case .didModifyServices(let s): return "didModifyServices \(s.map(\.uuid.uuidString))"
        case .didReadRSSI(let rssi, let error): return "didReadRSSI \(rssi)\(e(error))"
        case .didDiscoverServices(let error): return "didDiscoverServices\(e(error))"
        case .didDiscoverIncludedServices(let s, let error):
            return "didDiscoverIncludedServices \(s.uuid.uuidString)\(e(error))"
        case .didDiscoverCharacteristics(let s, let error):
            return "didDiscoverCharacteristics \(s.uuid.uuidString)\(e(error))"
        case .didDiscoverDescriptors(let c, let error): return "didDiscoverDescriptors \(c.uuid.uuidString)\(e(error))"
        case .didUpdateCharacteristicValue(let c, let v, let error):
            return
                "didUpdateValue \(c.uuid.uuidString) \(v.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "nil")\(e(error))"
        case .didUpdateDescriptorValue(let d, let v, let error):
            return "didUpdateValue descriptor \(d.uuid.uuidString) \(v?.count ?? -1) bytes\(e(error))"
        case .didWriteCharacteristic(let c, let error): return "didWriteValue \(c.uuid.uuidString)\(e(error))"
        case .didWriteDescriptor(let d, let error): return "didWriteValue descriptor \(d.uuid.uuidString)\(e(error))"
        case .didUpdateNotificationState(let c, let on, let error):
            return "didUpdateNotificationState \(c.uuid.uuidString) \(on)\(e(error))"
        case .readyToSendWriteWithoutResponse(let p): return "peripheralIsReady \(p.identifier)"
        case .willRestoreState(let state):
            let peripherals = (state.peripherals ?? []).map { "\($0.identifier) \($0.state)" }
            return "willRestoreState peripherals=\(peripherals) scan=\((state.scanServices ?? []).map(\.uuidString))"
        }
    }
}

/// A central app that records every callback it gets, and lets a test react to them.
///
/// `@unchecked Sendable`: the log and the hook live in Mutexes; the delegate methods run on `queue` only.
final class CentralRecorder: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    let queue: DispatchQueue
    let system: BluetoothSystem
    private(set) var central: CentralManager!
    private let entries = Mutex<[Logged<CentralEvent>]>([])
    private let hook = Mutex<(@Sendable (CentralRecorder, CentralEvent) -> Void)?>(nil)
    /// When set, every discovered peripheral gets this recorder as its delegate.
    let adoptsPeripherals: Bool

    init(
        system: BluetoothSystem, label: String = "central", options: CentralManager.Options? = nil,
        adoptsPeripherals: Bool = true, app: BluetoothSystem.App? = nil
    ) {
        self.system = system
        self.queue = DispatchQueue(label: "test.\(label)")
        self.adoptsPeripherals = adoptsPeripherals
        central = CentralManager(
            delegate: self, queue: queue, options: options, app: app ?? system.defaultApp)
    }

    /// Called on the manager's queue after each callback has been logged.
    func onEvent(_ body: (@Sendable (CentralRecorder, CentralEvent) -> Void)?) {
        hook.withLock { $0 = body }
    }

    var log: [Logged<CentralEvent>] { entries.withLock { $0 } }
    var events: [CentralEvent] { log.map(\.event) }
    var lines: [String] { events.map(\.description) }
    func clear() { entries.withLock { $0.removeAll() } }

    private func record(_ event: CentralEvent) {
        entries.withLock { $0.append(Logged(time: system.now, event: event)) }
        hook.withLock { $0 }?(self, event)
    }

    // MARK: Queries

    var discoveries: [(peripheral: Peripheral, advertisement: AdvertisementData, rssi: Int)] {
        events.compactMap { if case .didDiscover(let p, let a, let r) = $0 { return (p, a, r) } else { return nil } }
    }
    var valueUpdates: [(characteristic: Characteristic, value: Data?, error: BluetoothError?)] {
        events.compactMap {
            if case .didUpdateCharacteristicValue(let c, let v, let e) = $0 { return (c, v, e) } else { return nil }
        }
    }
    var writes: [(characteristic: Characteristic, error: BluetoothError?)] {
        events.compactMap { if case .didWriteCharacteristic(let c, let e) = $0 { return (c, e) } else { return nil } }
    }
    var disconnections: [(peripheral: Peripheral, error: BluetoothError?, time: Duration)] {
        log.compactMap {
            if case .didDisconnect(let p, let e) = $0.event { return (p, e, $0.time) } else { return nil }
        }
    }

    // MARK: CentralManagerDelegate

    func centralManagerDidUpdateState(_ central: CentralManager) { record(.didUpdateState(central.state)) }

    func centralManager(_ central: CentralManager, willRestoreState state: CentralManager.RestoredState) {
        if adoptsPeripherals { for p in state.peripherals ?? [] { p.delegate = self } }
        record(.willRestoreState(state))
    }

    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData, rssi: Int
    ) {
        if adoptsPeripherals { peripheral.delegate = self }
        record(.didDiscover(peripheral, advertisementData, rssi: rssi))
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        if adoptsPeripherals { peripheral.delegate = self }
        record(.didConnect(peripheral))
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        record(.didFailToConnect(peripheral, bluetoothError(error)))
    }

    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        record(.didDisconnect(peripheral, bluetoothError(error)))
    }

    // MARK: PeripheralDelegate

    func peripheralDidUpdateName(_ peripheral: Peripheral) { record(.didUpdateName(peripheral, peripheral.name)) }
    func peripheral(_ peripheral: Peripheral, didModifyServices invalidatedServices: [Service]) {
        record(.didModifyServices(invalidatedServices))
    }
    // swift-format-ignore: AlwaysUseLowerCamelCase
    func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: Int, error: (any Error)?) {
        record(.didReadRSSI(RSSI, bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        record(.didDiscoverServices(bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverIncludedServicesFor service: Service, error: (any Error)?) {
        record(.didDiscoverIncludedServices(service, bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        record(.didDiscoverCharacteristics(service, bluetoothError(error)))
    }
    func peripheral(
        _ peripheral: Peripheral, didDiscoverDescriptorsFor characteristic: Characteristic, error: (any Error)?
    ) {
        record(.didDiscoverDescriptors(characteristic, bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        record(.didUpdateCharacteristicValue(characteristic, characteristic.value, bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor descriptor: Descriptor, error: (any Error)?) {
        record(.didUpdateDescriptorValue(descriptor, descriptor.value, bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?) {
        record(.didWriteCharacteristic(characteristic, bluetoothError(error)))
    }
    func peripheral(_ peripheral: Peripheral, didWriteValueFor descriptor: Descriptor, error: (any Error)?) {
        record(.didWriteDescriptor(descriptor, bluetoothError(error)))
    }
    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        record(
            .didUpdateNotificationState(characteristic, isNotifying: characteristic.isNotifying, bluetoothError(error)))
    }
    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        record(.readyToSendWriteWithoutResponse(peripheral))
    }
}
