import BLE
import Foundation
import Synchronization
import Testing

/// `canSendWriteWithoutResponse` with `peripheralIsReady(toSendWriteWithoutResponse:)`, and `updateValue`
/// with `peripheralManagerIsReady(toUpdateSubscribers:)`.
@Suite struct FlowControlTests {
    /// Named case: the central writes without response while `canSendWriteWithoutResponse` is true, waits for
    /// `peripheralIsReady` when it turns false, and the server receives every write, in order.
    @Test func writeWithoutResponseFlowControl() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let total = 300
        struct Writer {
            var next = 0
            var stalls = 0
            /// Writes after which `canSendWriteWithoutResponse` was false: each is owed one `peripheralIsReady`.
            var filled = 0
        }
        let writer = Mutex(Writer())
        let pump: @Sendable () -> Void = {
            writer.withLock { w in
                while w.next < total {
                    guard peripheral.canSendWriteWithoutResponse else {
                        w.stalls += 1
                        return
                    }
                    peripheral.writeValue(
                        Data([UInt8(w.next & 0xFF), UInt8(w.next >> 8), 0x55]), for: dynamic, type: .withoutResponse)
                    w.next += 1
                    if !peripheral.canSendWriteWithoutResponse { w.filled += 1 }
                }
            }
        }
        rig.phone.onEvent { _, event in
            if case .readyToSendWriteWithoutResponse = event { pump() }
        }
        rig.phoneSystem.schedule(after: .zero, on: rig.phone.queue) { pump() }
        try await rig.run(
            until: { rig.sensor.recorder.writeBatches.count >= total }, within: .seconds(60), "every write")
        try await rig.run(.seconds(1))

        let received = rig.sensor.recorder.writeBatches.compactMap { $0.first?.value }
        let expected: [Data] = (0..<total).map { (i: Int) -> Data in Data([UInt8(i & 0xFF), UInt8(i >> 8), 0x55]) }
        #expect(received == expected)
        let stats = writer.withLock { $0 }
        #expect(stats.next == total)
        #expect(stats.stalls > 0)
        let readies = rig.phone.events.filter { if case .readyToSendWriteWithoutResponse = $0 { true } else { false } }
        // One "ready" per time the queue filled, no more and no fewer; the writer stalled at each of those but
        // perhaps the last (when its last write is the one that filled the queue).
        #expect(readies.count == stats.filled)
        #expect(stats.stalls == stats.filled || stats.stalls == stats.filled - 1)
        // Writes without response never produce didWriteValueFor.
        #expect(rig.phone.writes.isEmpty)
    }

    @Test func canSendWriteWithoutResponseTurnsFalseWhenTheQueueIsFull() async throws {
        let (rig, peripheral) = try await Rig.connected(
            phone: .init(writeWithoutResponseQueueDepth: 4, aclBufferCount: 8))
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        // Without running the radio nothing drains: the controller's 8 buffers and the host's 4 fill, then the
        // queue is full.
        var accepted = 0
        while peripheral.canSendWriteWithoutResponse && accepted < 100 {
            peripheral.writeValue(Data([UInt8(accepted)]), for: dynamic, type: .withoutResponse)
            accepted += 1
        }
        #expect((4...12).contains(accepted))
        // A write while it is false is dropped, as CoreBluetooth drops it.
        peripheral.writeValue(Data([0xFF]), for: dynamic, type: .withoutResponse)
        try await rig.run(.seconds(1))
        #expect(peripheral.canSendWriteWithoutResponse)
        #expect(rig.phone.lines == ["peripheralIsReady \(peripheral.identifier)"])
        let expected: [Data] = (0..<accepted).map { Data([UInt8($0)]) }
        #expect(rig.sensor.recorder.writeBatches.compactMap { $0.first?.value } == expected)
    }

    /// Named case: `updateValue` returns false once the transmit queue is full, and
    /// `peripheralManagerIsReady(toUpdateSubscribers:)` follows when it drains.
    @Test func updateValueBackPressure() async throws {
        let (rig, peripheral) = try await Rig.connected(sensor: .init(notificationQueueDepth: 8))
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        rig.phone.clear()
        rig.sensor.recorder.clear()

        // Without running the radio nothing drains: the controller's buffers and the host's queue fill, then
        // `updateValue` refuses (and sends nothing).
        var accepted = 0
        while accepted < 100,
            rig.sensor.manager.updateValue(Data([UInt8(accepted)]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        {
            accepted += 1
        }
        #expect((8...16).contains(accepted))
        #expect(!rig.sensor.manager.updateValue(Data([0xFF]), for: rig.sensor.notifier, onSubscribedCentrals: nil))
        #expect(rig.sensor.recorder.events.isEmpty)
        try await rig.run(.seconds(1))
        #expect(rig.sensor.recorder.lines == ["peripheralManagerIsReady"])
        // Only what was accepted was sent.
        let expected: [Data?] = (0..<accepted).map { Data([UInt8($0)]) }
        #expect(rig.phone.valueUpdates.map(\.value) == expected)
        // There is room again.
        #expect(rig.sensor.manager.updateValue(Data([42]), for: rig.sensor.notifier, onSubscribedCentrals: nil))
        try await rig.run(.seconds(1))
        #expect(rig.phone.valueUpdates.last?.value == Data([42]))
        #expect(rig.sensor.recorder.lines == ["peripheralManagerIsReady"])  // no refusal, no second callback
    }
}
