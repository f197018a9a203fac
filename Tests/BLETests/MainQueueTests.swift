import BLE
import Foundation
import Synchronization
import Testing

private final class StateLog: CentralManagerDelegate, Sendable {
    let calls = Mutex<[(ManagerState, Bool)]>([])
    func centralManagerDidUpdateState(_ central: CentralManager) {
        calls.withLock { $0.append((central.state, Thread.isMainThread)) }
    }
}

/// `queue: nil` means the main queue, as in CoreBluetooth; the simulated radio waits for callbacks there too.
@Test func aNilQueueDeliversOnTheMainThread() async throws {
    let radio = SimulatedRadio(seed: 1)
    let phone = BluetoothSystem.simulated(on: radio, name: "phone")
    let log = StateLog()
    let central = CentralManager(delegate: log, queue: nil, options: nil, system: phone)
    try await radio.run(for: .seconds(1))
    #expect(central.state == .poweredOn)
    let calls = log.calls.withLock { $0 }
    #expect(calls.map(\.0) == [.poweredOn])
    #expect(calls.allSatisfy { $0.1 })
}
