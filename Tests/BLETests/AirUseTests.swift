import BLE
import Foundation
import Synchronization
import Testing

/// How much of the air a busy link uses, in virtual time, against the air-time model of AirTimeModel.md:
/// `N · P · 8 / CI` with `N = floor(CI / T_pair)`. Deterministic (virtual time), so an assertion, not a
/// benchmark.
@Suite struct AirUseTests {
    /// Notifications of 244 bytes (ATT_MTU 247, 251-byte LL payloads, LE 1M) from a sensor whose app refills on
    /// every `peripheralManagerIsReady`: the model gives 781 kbit/s at a 30 ms interval.
    @Test func notificationsFillTheConnectionEvents() async throws {
        let kbits = try await Self.notificationThroughput(sensor: .init())
        // T_pair = (8·(1+4+2+251+3) + 150 + 80 + 150) µs = 2468 µs; N = floor(30 ms / 2468 µs) = 12 per event.
        let model = Double(12 * 244 * 8) / 30.0
        #expect(kbits >= 0.98 * model, "\(kbits) kbit/s of a \(model) kbit/s model")
        #expect(kbits <= model * 1.0001, "\(kbits) kbit/s is more than the air carries (\(model))")
    }

    /// The same on LE 2M: T_pair = (4·(2+4+2+251+3) + 150 + 44 + 150) µs = 1392 µs, N = 21 per 30 ms event,
    /// 1366 kbit/s.
    @Test func notificationsOnTwoMegabitFillTheEventsToo() async throws {
        let kbits = try await Self.notificationThroughput(
            phone: .init(preferredMTU: 247, preferredPHY: .le2M), sensor: .init())
        let model = Double(21 * 244 * 8) / 30.0
        #expect(kbits >= 0.98 * model && kbits <= model * 1.0001, "\(kbits) kbit/s of a \(model) kbit/s model")
    }

    /// Over a 1 Mbaud UART between the sensor's host and controller, each notification's ACL packet (256 bytes
    /// with its headers and H4 indicator) takes 2.56 ms to cross, longer than its exchange on the air: the UART
    /// sets the pace, 244 · 8 bits every 2.56 ms.
    @Test func aSlowHostLinkSetsThePace() async throws {
        let kbits = try await Self.notificationThroughput(sensor: .init(hostLink: .uart(baud: 1_000_000)))
        let uart = Double(244 * 8) / 2.56
        #expect(kbits >= 0.98 * uart && kbits <= uart * 1.0001, "\(kbits) kbit/s against \(uart) on the UART")
    }

    /// Payload kbit/s of 244-byte notifications over 10 s of virtual time, the sensor's app refilling on every
    /// `peripheralManagerIsReady`.
    static func notificationThroughput(
        phone: BluetoothSystem.Configuration = .init(preferredMTU: 247), sensor: BluetoothSystem.Configuration
    ) async throws -> Double {
        let (rig, peripheral) = try await Rig.connected(phone: phone, sensor: sensor)
        // The model is one link alone on its radios: advertising takes its share (SharedAirTests).
        rig.sensor.manager.stopAdvertising()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        let chunk = Data(repeating: 0xA5, count: 244)
        let pump: @Sendable () -> Void = {
            while rig.sensor.manager.updateValue(chunk, for: rig.sensor.notifier, onSubscribedCentrals: nil) {}
        }
        rig.sensor.recorder.onEvent { _, event in
            if case .readyToUpdateSubscribers = event { pump() }
        }
        let count = Mutex(0)
        rig.phone.onEvent { _, event in
            if case .didUpdateCharacteristicValue = event { count.withLock { $0 += 1 } }
        }
        rig.sensorSystem.schedule(after: .zero, on: rig.sensor.recorder.queue) { pump() }
        try await rig.run(.seconds(1))  // the pipeline fills
        let before = count.withLock { $0 }
        try await rig.run(.seconds(10))
        let received = count.withLock { $0 } - before
        return Double(received * 244 * 8) / 10 / 1000
    }
}
