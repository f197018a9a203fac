import BLE
import Dispatch
import Foundation
import Synchronization

/// Every callback a `PeripheralManagerDelegate` receives.
enum PeripheralManagerEvent: Sendable, CustomStringConvertible {
    case didUpdateState(ManagerState)
    case didStartAdvertising(BluetoothError?)
    case didAdd(Service, BluetoothError?)
    case didSubscribe(Central, Characteristic)
    case didUnsubscribe(Central, Characteristic)
    case didReceiveRead(ATTRequest)
    case didReceiveWrite([ATTRequest])
    case readyToUpdateSubscribers
    case willRestoreState(PeripheralManager.RestoredState)

    var description: String {
        func e(_ error: BluetoothError?) -> String { error.map { " error=\($0.code)" } ?? "" }
        switch self {
        case .didUpdateState(let s): return "didUpdateState \(s)"
        case .didStartAdvertising(let error): return "didStartAdvertising\(e(error))"
        case .didAdd(let s, let error): return "didAdd \(s.uuid.uuidString)\(e(error))"
        case .didSubscribe(let c, let ch): return "didSubscribe \(c.identifier) \(ch.uuid.uuidString)"
        case .didUnsubscribe(let c, let ch): return "didUnsubscribe \(c.identifier) \(ch.uuid.uuidString)"
        case .didReceiveRead(let r): return "didReceiveRead \(r.characteristic.uuid.uuidString) offset=\(r.offset)"
        case .didReceiveWrite(let rs):
            return "didReceiveWrite "
                + rs.map { "\($0.characteristic.uuid.uuidString)@\($0.offset)+\($0.value?.count ?? 0)" }.joined(
                    separator: ",")
        case .readyToUpdateSubscribers: return "peripheralManagerIsReady"
        case .willRestoreState(let state):
            return "willRestoreState services=\((state.services ?? []).map(\.uuid.uuidString))"
        }
    }
}

/// How the recording server answers requests to dynamic characteristics.
enum ServerAnswer: Sendable {
    /// Reads get the stored value from the request's offset; writes are stored (assembled by offset).
    case store
    /// Every request is answered with this ATT error.
    case fail(ATTErrorCode)
    /// Requests are never answered (to exercise the transaction timeout and pending-operation failures).
    case ignore
}

/// A peripheral app that records every callback and, by default, serves its dynamic characteristics from a
/// value store, as a simple device would.
///
/// `@unchecked Sendable`: the log, the store and the hook live in Mutexes; delegate methods run on `queue`.
final class PeripheralRecorder: PeripheralManagerDelegate, @unchecked Sendable {
    let queue: DispatchQueue
    let system: BluetoothSystem
    private(set) var manager: PeripheralManager!
    private let entries = Mutex<[Logged<PeripheralManagerEvent>]>([])
    private let hook = Mutex<(@Sendable (PeripheralRecorder, PeripheralManagerEvent) -> Void)?>(nil)
    private let store = Mutex<[BluetoothUUID: Data]>([:])
    private let answerMode = Mutex<ServerAnswer>(.store)

    init(
        system: BluetoothSystem, label: String = "sensor", app: BluetoothSystem.App? = nil,
        options: PeripheralManager.Options? = nil, values: [BluetoothUUID: Data] = [:]
    ) {
        self.system = system
        self.queue = DispatchQueue(label: "test.\(label)")
        // Before the manager exists: a restored manager hands it requests at once.
        store.withLock { $0 = values }
        manager = PeripheralManager(delegate: self, queue: queue, options: options, app: app ?? system.defaultApp)
    }

    var answer: ServerAnswer {
        get { answerMode.withLock { $0 } }
        set { answerMode.withLock { $0 = newValue } }
    }

    /// The value a dynamic characteristic's reads get, and the last value written to it.
    subscript(uuid: BluetoothUUID) -> Data? {
        get { store.withLock { $0[uuid] } }
        set { store.withLock { $0[uuid] = newValue } }
    }

    /// Called on the manager's queue after each callback has been logged (and answered, per `answer`).
    func onEvent(_ body: (@Sendable (PeripheralRecorder, PeripheralManagerEvent) -> Void)?) {
        hook.withLock { $0 = body }
    }

    var log: [Logged<PeripheralManagerEvent>] { entries.withLock { $0 } }
    var events: [PeripheralManagerEvent] { log.map(\.event) }
    var lines: [String] { events.map(\.description) }
    func clear() { entries.withLock { $0.removeAll() } }
    /// The centrals that subscribed, in order: how a test gets hold of the `Central` of its link.
    var subscribers: [Central] {
        events.compactMap { if case .didSubscribe(let central, _) = $0 { return central } else { return nil } }
    }

    var reads: [ATTRequest] {
        events.compactMap { if case .didReceiveRead(let r) = $0 { return r } else { return nil } }
    }
    var writeBatches: [[ATTRequest]] {
        events.compactMap { if case .didReceiveWrite(let r) = $0 { return r } else { return nil } }
    }

    private func record(_ event: PeripheralManagerEvent) {
        entries.withLock { $0.append(Logged(time: system.now, event: event)) }
        hook.withLock { $0 }?(self, event)
    }

    // MARK: PeripheralManagerDelegate

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) { record(.didUpdateState(peripheral.state)) }

    func peripheralManager(_ peripheral: PeripheralManager, willRestoreState state: PeripheralManager.RestoredState) {
        record(.willRestoreState(state))
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: PeripheralManager, error: (any Error)?) {
        record(.didStartAdvertising(bluetoothError(error)))
    }
    func peripheralManager(_ peripheral: PeripheralManager, didAdd service: Service, error: (any Error)?) {
        record(.didAdd(service, bluetoothError(error)))
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        record(.didSubscribe(central, characteristic))
    }
    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        record(.didUnsubscribe(central, characteristic))
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        switch answer {
        case .store:
            let value = self[request.characteristic.uuid] ?? Data()
            if request.offset > value.count {
                peripheral.respond(to: request, withResult: .invalidOffset)
            } else {
                request.value = value.dropFirst(request.offset)
                peripheral.respond(to: request, withResult: .success)
            }
        case .fail(let code): peripheral.respond(to: request, withResult: code)
        case .ignore: break
        }
        record(.didReceiveRead(request))
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        switch answer {
        case .store:
            for request in requests {
                var value = self[request.characteristic.uuid] ?? Data()
                if request.offset == 0 { value = Data() }
                if value.count < request.offset { value.append(Data(count: request.offset - value.count)) }
                value = value.prefix(request.offset) + (request.value ?? Data())
                self[request.characteristic.uuid] = value
            }
            if let first = requests.first { peripheral.respond(to: first, withResult: .success) }
        case .fail(let code):
            if let first = requests.first { peripheral.respond(to: first, withResult: code) }
        case .ignore: break
        }
        record(.didReceiveWrite(requests))
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        record(.readyToUpdateSubscribers)
    }
}
