import BLE
import Foundation

/// A device with one notifying characteristic: it publishes its service, advertises its name, and notifies from
/// the moment a central subscribes, at the pace asked for.
final class NotifyingDevice: PeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: the fields below the lets are touched on `queue` only (every callback arrives there).
    enum Pace: Sendable {
        /// 244-byte values as fast as the transmit queue takes them; advertising stops at the subscription, so
        /// the link has the radio to itself.
        case stream
        /// A 4-byte counter every `interval`, advertising on.
        case every(Duration)
    }

    static let service = BluetoothUUID(string: "C0FFEE01-1234-4A5B-8C9D-0E1F2A3B4C5D")!
    let queue = DispatchQueue(label: "notifying device")
    let system: BluetoothSystem
    let name: String
    let pace: Pace
    let characteristic = MutableCharacteristic(
        type: BluetoothUUID(string: "C0FFEE02-1234-4A5B-8C9D-0E1F2A3B4C5D")!, properties: [.notify], value: nil,
        permissions: [.readable])
    /// Set inside `queue.sync` in `init`, before any callback.
    var manager: PeripheralManager!
    private var subscribed = false
    private var count: UInt32 = 0

    init(system: BluetoothSystem, name: String, pace: Pace) {
        self.system = system
        self.name = name
        self.pace = pace
        queue.sync { manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system) }
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = MutableService(type: Self.service, primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
        peripheral.startAdvertising(AdvertisementData(localName: name, serviceUUIDs: [Self.service]))
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        subscribed = true
        if case .stream = pace { peripheral.stopAdvertising() }
        notify()
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        if case .stream = pace { notify() }
    }

    private func notify() {
        guard subscribed else { return }
        switch pace {
        case .stream:
            while manager.updateValue(Data(repeating: 0x33, count: 244), for: characteristic, onSubscribedCentrals: nil)
            {
            }
        case .every(let interval):
            count &+= 1
            _ = manager.updateValue(
                withUnsafeBytes(of: count.littleEndian) { Data($0) }, for: characteristic, onSubscribedCentrals: nil)
            system.schedule(after: interval, on: queue) { [self] in notify() }
        }
    }
}
