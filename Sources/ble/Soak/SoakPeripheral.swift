import BLE
import Dispatch
import Foundation
import Synchronization

/// A device of the soak: one service with a log it writes every acknowledged write into (so the run can check
/// that nothing acknowledged was lost), a counter it notifies to subscribers once a second, and a value to read.
///
/// Every write's value starts with the writing central's index (one octet) and its sequence number (four,
/// little-endian); the rest is the payload. A long write (prepared writes) arrives as several requests with
/// offsets, put together here.
final class SoakPeripheral: PeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: `manager` is set in `init` before any callback; the rest is behind `state`.
    static let service = BluetoothUUID(string: "50A40001-7C2E-4B1D-8E3F-9A0B1C2D3E4F")!
    static let log = BluetoothUUID(string: "50A40002-7C2E-4B1D-8E3F-9A0B1C2D3E4F")!
    static let counter = BluetoothUUID(string: "50A40003-7C2E-4B1D-8E3F-9A0B1C2D3E4F")!

    let index: Int
    let name: String
    let system: BluetoothSystem
    let queue: DispatchQueue
    var manager: PeripheralManager!
    let logCharacteristic = MutableCharacteristic(
        type: log, properties: [.write, .writeWithoutResponse], value: nil, permissions: [.writeable])
    let counterCharacteristic = MutableCharacteristic(
        type: counter, properties: [.read, .notify], value: nil, permissions: [.readable])

    struct Write: Hashable {
        var central: UInt8
        var sequence: UInt32
    }

    private struct State {
        /// Every write received, by who wrote it and its sequence number: the payload.
        var received: [Write: Data] = [:]
        var count: UInt32 = 0
        var subscribers = 0
        var writes = 0
    }
    private let state = Mutex(State())

    init(index: Int, system: BluetoothSystem) {
        self.index = index
        self.name = "Soak-\(index)"
        self.system = system
        self.queue = DispatchQueue(label: "soak.peripheral.\(index)")
        queue.sync {
            manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system)
        }
    }

    /// What the device received from central `central` with sequence number `sequence`, if anything; forgotten
    /// here once asked.
    func take(from central: UInt8, sequence: UInt32) -> Data? {
        state.withLock { $0.received.removeValue(forKey: Write(central: central, sequence: sequence)) }
    }

    var writesReceived: Int { state.withLock { $0.writes } }

    /// Once a second of the radio's time: the counter moves on and subscribers hear it. Through the radio's
    /// `dispatch`, so that the radio waits for it before it moves on: a plain `queue.async` ran while the radio
    /// went on, and the notification left at a virtual time the threads chose (the same seed once gave another
    /// run).
    func tick(on radio: SimulatedRadio) {
        radio.dispatch(on: queue) { [self] in
            let (value, notify) = state.withLock { s -> (Data, Bool) in
                s.count &+= 1
                return (withUnsafeBytes(of: s.count.littleEndian) { Data($0) }, s.subscribers > 0)
            }
            counterCharacteristic.value = value
            // A full queue drops this tick's value: the next tick sends a newer one.
            if notify { _ = manager.updateValue(value, for: counterCharacteristic, onSubscribedCentrals: nil) }
        }
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = MutableService(type: Self.service, primary: true)
        service.characteristics = [logCharacteristic, counterCharacteristic]
        peripheral.add(service)
        peripheral.startAdvertising(AdvertisementData(localName: name, serviceUUIDs: [Self.service]))
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        state.withLock { $0.subscribers += 1 }
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didUnsubscribeFrom characteristic: Characteristic
    ) {
        state.withLock { $0.subscribers = max(0, $0.subscribers - 1) }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveRead request: ATTRequest) {
        request.value = counterCharacteristic.value ?? Data()
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        // A long write comes as its parts, offsets in order; a Write Command or Request as one part at 0.
        var value = Data()
        for request in requests {
            guard let part = request.value, request.offset == value.count else { continue }
            value.append(part)
        }
        // Only writes with response are logged: they are the ones a central hears acknowledged (a transfer's
        // Write Commands carry no header).
        if value.count >= 5, requests.first?.isWriteCommand == false {
            let central = value[value.startIndex]
            let sequence = value.dropFirst().prefix(4).enumerated().reduce(UInt32(0)) {
                $0 | UInt32($1.element) << (8 * UInt32($1.offset))
            }
            state.withLock { s in
                s.received[Write(central: central, sequence: sequence)] = Data(value.dropFirst(5))
                s.writes += 1
            }
        }
        if let first = requests.first { peripheral.respond(to: first, withResult: .success) }
    }

    /// The app side ended: the manager's advertising stops with it.
    func stop() {
        queue.sync { manager.stopAdvertising() }
    }
}
