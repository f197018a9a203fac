import BLE
import Foundation
import Synchronization
import Testing

private let mainQueueKey = DispatchSpecificKey<String>()

private final class StateLog: CentralManagerDelegate, Sendable {
    let calls = Mutex<[(ManagerState, String?)]>([])
    func centralManagerDidUpdateState(_ central: CentralManager) {
        calls.withLock { $0.append((central.state, DispatchQueue.getSpecific(key: mainQueueKey))) }
    }
}

/// `queue: nil` means the main queue, as in CoreBluetooth; the simulated radio waits for callbacks there too.
@Test func aNilQueueDeliversOnTheMainQueue() async throws {
    DispatchQueue.main.setSpecific(key: mainQueueKey, value: "main")
    let radio = SimulatedRadio(seed: 1)
    let phone = BluetoothSystem.simulated(on: radio, name: "phone")
    let log = StateLog()
    let central = CentralManager(delegate: log, queue: nil, options: nil, system: phone)
    try await radio.run(for: .seconds(1))
    #expect(central.state == .poweredOn)
    let calls = log.calls.withLock { $0 }
    #expect(calls.map(\.0) == [.poweredOn])
    #expect(calls.allSatisfy { $0.1 == "main" })
}
