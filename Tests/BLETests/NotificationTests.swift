import BLE
import Foundation
import Synchronization
import Testing

/// `setNotifyValue`, notifications and indications, `updateValue`, subscriptions as the server sees them.
@Suite struct NotificationTests {
    @Test func subscribeReceiveAndUnsubscribeWithNotifications() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        #expect(!notifier.isNotifying)
        #expect(rig.sensor.notifier.subscribedCentrals?.isEmpty == true)

        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didUpdateNotificationState \(Profile.notifier.uuidString) true"])
        #expect(notifier.isNotifying)
        guard case .didSubscribe(let central, let characteristic) = rig.sensor.recorder.events.first else {
            Issue.record("expected didSubscribe, got \(rig.sensor.recorder.lines)")
            return
        }
        #expect(characteristic === rig.sensor.notifier)
        #expect(rig.sensor.notifier.subscribedCentrals == [central])

        rig.phone.clear()
        for i in 0..<3 {
            #expect(
                rig.sensor.manager.updateValue(
                    Data([UInt8(i), 0xEE]), for: rig.sensor.notifier, onSubscribedCentrals: nil))
        }
        try await rig.run(.seconds(1))
        #expect(rig.phone.valueUpdates.map(\.value) == [Data([0, 0xEE]), Data([1, 0xEE]), Data([2, 0xEE])])
        #expect(rig.phone.valueUpdates.allSatisfy { $0.characteristic === notifier && $0.error == nil })
        #expect(notifier.value == Data([2, 0xEE]))

        rig.phone.clear()
        peripheral.setNotifyValue(false, for: notifier)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didUpdateNotificationState \(Profile.notifier.uuidString) false"])
        #expect(!notifier.isNotifying)
        #expect(rig.sensor.recorder.lines.last == "didUnsubscribe \(central.identifier) \(Profile.notifier.uuidString)")
        #expect(rig.sensor.notifier.subscribedCentrals?.isEmpty == true)

        // Nothing reaches a central that unsubscribed.
        rig.phone.clear()
        _ = rig.sensor.manager.updateValue(Data([9]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
        try await rig.run(.seconds(1))
        #expect(rig.phone.events.isEmpty)
    }

    @Test func subscribeWithIndications() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let indicator = try rig.characteristic(Profile.indicator, on: peripheral)
        peripheral.setNotifyValue(true, for: indicator)
        try await rig.run(.seconds(1))
        #expect(indicator.isNotifying)
        #expect(rig.sensor.recorder.lines.count == 1)
        #expect(rig.sensor.recorder.lines.first?.hasPrefix("didSubscribe") == true)
        rig.phone.clear()
        // Indications are confirmed one at a time; several queued still all arrive, in order.
        for i in 0..<5 {
            #expect(
                rig.sensor.manager.updateValue(Data([UInt8(i)]), for: rig.sensor.indicator, onSubscribedCentrals: nil))
        }
        try await rig.run(.seconds(2))
        #expect(rig.phone.valueUpdates.map(\.value) == (0..<5).map { Data([UInt8($0)]) })
        peripheral.setNotifyValue(false, for: indicator)
        try await rig.run(.seconds(1))
        #expect(!indicator.isNotifying)
        #expect(rig.sensor.recorder.lines.last?.hasPrefix("didUnsubscribe") == true)
    }

    @Test func setNotifyValueOnACharacteristicThatCannotNotify() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let fixed = try rig.characteristic(Profile.fixed, on: peripheral)
        peripheral.setNotifyValue(true, for: fixed)
        try await rig.run(.seconds(1))
        guard case .didUpdateNotificationState(let c, let on, let error) = rig.phone.events.first else {
            Issue.record("expected didUpdateNotificationState, got \(rig.phone.lines)")
            return
        }
        #expect(c === fixed)
        #expect(!on)
        #expect(error?.code == .operationNotSupported)
        #expect(rig.sensor.recorder.events.isEmpty)
    }

    @Test func setNotifyValueDiscoversTheConfigurationDescriptorItself() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices([Profile.service])
        try await rig.run(.seconds(1))
        peripheral.discoverCharacteristics([Profile.notifier], for: try rig.service(Profile.service, on: peripheral))
        try await rig.run(.seconds(1))
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        #expect(notifier.descriptors == nil)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        #expect(notifier.isNotifying)
        #expect(rig.sensor.notifier.subscribedCentrals?.count == 1)
    }

    @Test func updateValueLongerThanTheMTUIsTruncated() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 23))
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        let central = try #require(rig.sensor.notifier.subscribedCentrals?.first)
        #expect(central.maximumUpdateValueLength == 20)
        let long = Data((0..<50).map { UInt8($0) })
        #expect(rig.sensor.manager.updateValue(long, for: rig.sensor.notifier, onSubscribedCentrals: nil))
        try await rig.run(.seconds(1))
        #expect(rig.phone.valueUpdates.last?.value == long.prefix(20))
    }

    @Test func updateValueForChosenCentrals() async throws {
        let (rig, peripheral) = try await Rig.connected()
        // A second phone connects to the same sensor (it keeps advertising while connected).
        let otherSystem = BluetoothSystem.simulated(on: rig.radio, name: "phone-2", position: RadioPosition(x: 0, y: 4))
        let other = CentralRecorder(system: otherSystem, label: "phone-2")
        try await rig.run(until: { other.central.state == .poweredOn }, "power on")
        other.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !other.discoveries.isEmpty }, "discovery by the second phone")
        other.central.stopScan()
        let otherPeripheral = try #require(other.discoveries.first?.peripheral)
        other.central.connect(otherPeripheral)
        try await rig.run(until: { otherPeripheral.state == .connected }, "second connection")
        otherPeripheral.discoverServices([Profile.service])
        try await rig.run(.seconds(1))
        let otherService = try #require(otherPeripheral.services?.first)
        otherPeripheral.discoverCharacteristics([Profile.notifier], for: otherService)
        try await rig.run(.seconds(1))
        let otherNotifier = try #require(otherService.characteristics?.first)

        peripheral.setNotifyValue(true, for: try rig.characteristic(Profile.notifier, on: peripheral))
        otherPeripheral.setNotifyValue(true, for: otherNotifier)
        try await rig.run(.seconds(1))
        let subscribed = try #require(rig.sensor.notifier.subscribedCentrals)
        #expect(subscribed.count == 2)
        #expect(Set(subscribed.map(\.identifier)).count == 2)
        rig.phone.clear()
        other.clear()

        // To everyone, then to the first subscriber only.
        #expect(rig.sensor.manager.updateValue(Data([1]), for: rig.sensor.notifier, onSubscribedCentrals: nil))
        #expect(
            rig.sensor.manager.updateValue(Data([2]), for: rig.sensor.notifier, onSubscribedCentrals: [subscribed[0]]))
        try await rig.run(.seconds(1))
        let firstGot = rig.phone.valueUpdates.map(\.value)
        let secondGot = other.valueUpdates.map(\.value)
        #expect(Set([firstGot, secondGot]) == Set([[Data([1]), Data([2])], [Data([1])]]))
    }

    /// Named case: 1,000 notifications at ATT_MTU 247 and LL data length 251, sent as fast as the stack takes
    /// them (the sender loops until `updateValue` returns false and resumes in `peripheralManagerIsReady`);
    /// every value distinct, all received, in order.
    @Test func thousandNotificationsInOrder() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 247, preferredDataLength: 251))
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == 244)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        rig.phone.clear()

        let total = 1000
        @Sendable func value(_ i: Int) -> Data {
            var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 244)
            bytes[0] = UInt8(i & 0xFF)
            bytes[1] = UInt8(i >> 8)
            return Data(bytes)
        }
        struct Sender {
            var next = 0
            var refusals = 0
        }
        let sender = Mutex(Sender())
        let sensor = rig.sensor
        let pump: @Sendable () -> Void = {
            sender.withLock { s in
                while s.next < total {
                    guard sensor.manager.updateValue(value(s.next), for: sensor.notifier, onSubscribedCentrals: nil)
                    else {
                        s.refusals += 1
                        return
                    }
                    s.next += 1
                }
            }
        }
        sensor.recorder.onEvent { _, event in
            if case .readyToUpdateSubscribers = event { pump() }
        }
        rig.sensorSystem.schedule(after: .zero, on: sensor.recorder.queue) { pump() }
        try await rig.run(until: { rig.phone.valueUpdates.count >= total }, within: .seconds(60), "1000 notifications")
        try await rig.run(.seconds(1))

        let received = rig.phone.valueUpdates.map(\.value)
        #expect(received.count == total)
        #expect(received == (0..<total).map { value($0) })
        let stats = sender.withLock { $0 }
        #expect(stats.next == total)
        #expect(stats.refusals > 0)  // the queue did fill up: flow control was exercised
        let readies = rig.sensor.recorder.events.filter {
            if case .readyToUpdateSubscribers = $0 { true } else { false }
        }
        #expect(readies.count == stats.refusals)
    }
}
