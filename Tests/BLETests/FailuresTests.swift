import Foundation
import Testing

@testable import BLE

/// What an app sees when things go wrong: operations on a disconnected peripheral, links lost under pending
/// operations, supervision and ATT transaction timeouts, values out of bounds.
@Suite struct FailuresTests {
    /// After a fault: the phone connects to the sensor again and reads the characteristic `uuid`, which succeeds.
    static func reconnectsAndReads(
        _ rig: Rig, _ peripheral: Peripheral, _ uuid: BluetoothUUID, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        rig.phone.clear()
        rig.central.connect(peripheral)
        try await rig.run(
            until: { peripheral.state == .connected }, within: .seconds(30), "the reconnection",
            sourceLocation: sourceLocation)
        peripheral.readValue(for: try rig.characteristic(uuid, on: peripheral, sourceLocation: sourceLocation))
        try await rig.run(until: { !rig.phone.valueUpdates.isEmpty }, "the read", sourceLocation: sourceLocation)
        #expect(rig.phone.valueUpdates.first?.error == nil, sourceLocation: sourceLocation)
    }

    /// Every operation on a peripheral that is not connected reports `.notConnected` through its callback.
    @Test func operationsOnADisconnectedPeripheralReportNotConnected() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let service = try rig.service(Profile.service, on: peripheral)
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        let descriptor = try #require(rig.characteristic(Profile.described, on: peripheral).descriptors?.first)
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { peripheral.state == .disconnected }, "disconnection")
        rig.phone.clear()

        #expect(!peripheral.canSendWriteWithoutResponse)
        peripheral.discoverServices(nil)
        peripheral.discoverIncludedServices(nil, for: service)
        peripheral.discoverCharacteristics(nil, for: service)
        peripheral.discoverDescriptors(for: dynamic)
        peripheral.readValue(for: dynamic)
        peripheral.readValue(for: descriptor)
        peripheral.writeValue(Data([1]), for: dynamic, type: .withResponse)
        peripheral.writeValue(Data([1]), for: dynamic, type: .withoutResponse)  // no callback for this one
        peripheral.writeValue(Data([1]), for: descriptor)
        peripheral.setNotifyValue(true, for: notifier)
        peripheral.readRSSI()
        try await rig.run(.seconds(1))

        #expect(
            rig.phone.lines
                == [
                    "didDiscoverServices",
                    "didDiscoverIncludedServices \(Profile.service.uuidString)",
                    "didDiscoverCharacteristics \(Profile.service.uuidString)",
                    "didDiscoverDescriptors \(Profile.dynamic.uuidString)",
                    "didUpdateValue \(Profile.dynamic.uuidString) nil",
                    "didUpdateValue descriptor 2901 -1 bytes",  // never read: no value
                    "didWriteValue \(Profile.dynamic.uuidString)",
                    "didWriteValue descriptor 2901",
                    "didUpdateNotificationState \(Profile.notifier.uuidString) false",
                    "didReadRSSI 127",
                ].map { $0 + " error=notConnected" })
        #expect(rig.sensor.recorder.events.isEmpty)
    }

    @Test func operationsBeforeConnectingReportNotConnected() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(until: { !rig.phone.discoveries.isEmpty }, "discovery")
        let peripheral = try #require(rig.phone.discoveries.first?.peripheral)
        rig.phone.clear()
        peripheral.discoverServices(nil)
        peripheral.readRSSI()
        try await rig.run(.milliseconds(100))
        #expect(rig.phone.lines == ["didDiscoverServices error=notConnected", "didReadRSSI 127 error=notConnected"])
        #expect(peripheral.maximumWriteValueLength(for: .withResponse) == 512)
    }

    /// Named case: the app cancels the connection while a read waits for the server app's answer. The read
    /// completes with an error before `didDisconnectPeripheral`.
    @Test func cancellingDuringAPendingRead() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        #expect(rig.sensor.recorder.reads.count == 1)
        #expect(rig.phone.events.isEmpty)
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(rig.phone.events.count == 2)
        guard case .didUpdateCharacteristicValue(let c, _, let error) = rig.phone.events.first else {
            Issue.record("expected the read to fail first, got \(rig.phone.lines)")
            return
        }
        #expect(c === dynamic)
        #expect(error != nil)
        #expect(rig.phone.lines.last == "didDisconnect \(peripheral.identifier)")
    }

    /// Named case: the sensor vanishes while a read waits for its answer. The read fails before
    /// `didDisconnectPeripheral`, which reports the supervision timeout.
    @Test func peripheralVanishingDuringAPendingRead() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        rig.sensorSystem.vanish()
        try await rig.run(.seconds(10))
        #expect(rig.phone.events.count == 2)
        #expect(
            happensBefore(
                rig.phone.events,
                {
                    if case .didUpdateCharacteristicValue(_, _, let e) = $0 { e != nil } else { false }
                }, { $0.isDisconnect }))
        #expect(rig.phone.disconnections.first?.error?.code == .connectionTimeout)
        #expect(peripheral.state == .disconnected)
    }

    /// Named case: the sensor moves out of range. The link's supervision timeout (5 s) expires; the app sees
    /// `didDisconnectPeripheral` with `.connectionTimeout` that long after the last packet got through.
    @Test func movingOutOfRangeTimesTheLinkOut() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        rig.phone.clear()
        let departure = rig.radio.now
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(.seconds(4.9))
        #expect(rig.phone.events.isEmpty)
        #expect(peripheral.state == .connected)
        try await rig.run(.seconds(2))
        let disconnection = try #require(rig.phone.disconnections.first)
        #expect(rig.phone.events.count == 1)
        #expect(disconnection.error?.code == .connectionTimeout)
        #expect(disconnection.error?.hciStatus == .connectionTimeout)
        #expect(
            disconnection.error?.description
                == "the connection timed out (supervision timeout) (HCI status \(HCIStatus.connectionTimeout))")
        // 5 s supervision timeout, counted from the last packet received (at most one 50 ms connection
        // interval before the move), detected at a connection event (at most one interval after).
        let elapsed = disconnection.time - departure
        #expect(elapsed >= .milliseconds(4950) && elapsed <= .milliseconds(5100), "disconnected after \(elapsed)")
        #expect(peripheral.state == .disconnected)
        #expect(!notifier.isNotifying)
        // The sensor's side timed out too: its central unsubscribed.
        #expect(rig.sensor.recorder.lines.contains { $0.hasPrefix("didUnsubscribe") })
        #expect(rig.sensor.notifier.subscribedCentrals?.isEmpty == true)
    }

    /// Named case: a server app that never answers a read. After the ATT transaction timeout (30 s) the read
    /// fails with `.transactionTimeout`, and the link is dropped (no more ATT is allowed on that bearer).
    @Test func attTransactionTimeout() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let start = rig.radio.now
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(29.5))
        #expect(rig.phone.events.isEmpty)
        #expect(rig.sensor.recorder.reads.count == 1)
        try await rig.run(.seconds(2))
        let failure = try #require(rig.phone.log.first)
        guard case .didUpdateCharacteristicValue(let c, _, let error) = failure.event else {
            Issue.record("expected the read to fail, got \(rig.phone.lines)")
            return
        }
        #expect(c === dynamic)
        #expect(error?.code == .transactionTimeout)
        let elapsed = failure.time - start
        #expect(elapsed >= .seconds(30) && elapsed <= .seconds(30.1), "failed after \(elapsed)")
        try await rig.run(.seconds(1))
        #expect(rig.phone.events.count == 2)
        #expect(rig.phone.events.last?.isDisconnect == true)
        #expect(peripheral.state == .disconnected)
    }

    @Test func writeLongerThan512IsRefused() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.writeValue(Data(count: 513), for: dynamic, type: .withResponse)
        try await rig.run(.seconds(1))
        #expect(rig.phone.writes.count == 1)
        #expect(rig.phone.writes.first?.error?.code == .att(.invalidAttributeValueLength))
        #expect(rig.sensor.recorder.events.isEmpty)
        // Exactly 512 is fine.
        peripheral.writeValue(Data(count: 512), for: dynamic, type: .withResponse)
        try await rig.run(.seconds(2))
        #expect(rig.phone.writes.count == 2)
        #expect(rig.phone.writes.last?.error == nil)
        #expect(rig.sensor.recorder[Profile.dynamic]?.count == 512)
    }

    @Test func writeWithoutResponseLongerThanMTUMinus3IsDropped() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 23))
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.writeValue(Data(count: 21), for: dynamic, type: .withoutResponse)
        try await rig.run(.seconds(1))
        #expect(rig.sensor.recorder.events.isEmpty)
        #expect(rig.phone.events.isEmpty)
        // The link is unharmed: a write that fits arrives.
        peripheral.writeValue(Data(count: 20), for: dynamic, type: .withoutResponse)
        try await rig.run(.seconds(1))
        #expect(rig.sensor.recorder.writeBatches.map { $0.first?.value?.count } == [20])
    }

    @Test func readingBeyondTheValueIsAnInvalidOffset() async throws {
        // The server app answers a blob read past the end with Invalid Offset: the whole read fails with it.
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 23))
        rig.sensor.recorder[Profile.dynamic] = Data(count: 40)
        rig.sensor.recorder.onEvent { recorder, event in
            // The value shrinks between the first read and the blob read that follows.
            if case .didReceiveRead(let r) = event, r.offset == 0 { recorder[Profile.dynamic] = Data(count: 5) }
        }
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        #expect(rig.phone.valueUpdates.count == 1)
        #expect(rig.phone.valueUpdates.first?.error?.code == .att(.invalidOffset))
    }

    /// The phone's controller reports a hardware error mid-connection (its firmware restarted): the host resets
    /// it; the app sees `.resetting` (the pending read failing first, no `didDisconnectPeripheral`, IOSRules.md 6.7)
    /// and then `.poweredOn`, and connects and reads again; nothing of the old link is left in the host.
    @Test func thePhonesControllerResetsAfterAHardwareError() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        rig.phoneSystem.failHardware(code: 0x42)
        try await rig.run(until: { rig.central.state == .poweredOn && rig.phone.lines.count >= 3 }, "the reset")
        try await rig.run(.milliseconds(100))
        #expect(
            rig.phone.lines == [
                "didUpdateValue \(Profile.dynamic.uuidString) nil error=peripheralDisconnected",
                "didUpdateState resetting", "didUpdateState poweredOn",
            ])
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.disconnections.isEmpty)
        #expect(rig.phoneSystem.core.host.links.isEmpty, "the host keeps no link of the reset controller")
        #expect(rig.phoneSystem.core.host.counters.controllerResets == 1)
        #expect(rig.phoneSystem.core.host.runningTimerCount == 0, "no timer of the old link left")
        // The sensor's side of the link times out; then the phone connects again and reads.
        rig.sensor.recorder.answer = .store
        try await Self.reconnectsAndReads(rig, peripheral, Profile.dynamic)
    }

    /// The sensor's controller fails mid-connection: its app sees `.resetting` then `.poweredOn` (its services
    /// still published: the GATT database is the host's), the phone loses the link by supervision timeout, and
    /// once the sensor advertises again the phone connects and reads.
    @Test func theSensorsControllerResetsAfterAHardwareError() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.clear()
        rig.sensorSystem.failHardware()
        try await rig.run(until: { rig.phone.disconnections.count == 1 }, "the phone's link loss")
        #expect(rig.phone.disconnections.first?.error?.code == .connectionTimeout)
        #expect(rig.sensor.recorder.lines.prefix(2) == ["didUpdateState resetting", "didUpdateState poweredOn"])
        #expect(rig.sensorSystem.core.host.links.isEmpty)
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        try await Self.reconnectsAndReads(rig, peripheral, Profile.fixed)
    }

    /// The phone's controller hangs for 3 s mid-connection. A request that needs a command (Read RSSI) fails with
    /// `.controllerTimeout` after the command timeout (2 s); the host's probe goes unanswered too, so 2 s later it
    /// resets the controller, which has restarted meanwhile: `.resetting`, then `.poweredOn`, the link gone
    /// without a callback, nothing of it left in the host; then the phone connects and reads again.
    @Test func aControllerThatStopsAnsweringIsResetAndComesBack() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.phone.clear()
        let start = rig.phoneSystem.now
        rig.phoneSystem.hangController(for: .seconds(3))
        peripheral.readRSSI()
        try await rig.run(
            until: { rig.central.state == .poweredOn && rig.phone.lines.count >= 3 }, within: .seconds(10), "the reset")
        let recovered = rig.phoneSystem.now - start
        #expect(recovered >= .seconds(4) && recovered < .seconds(5), "two command timeouts, then the restart")
        #expect(rig.phone.lines.count == 3)
        #expect(rig.phone.lines.first?.hasPrefix("didReadRSSI") == true)
        #expect(rig.phone.lines.first?.hasSuffix("error=controllerTimeout") == true)
        #expect(rig.phone.lines.dropFirst() == ["didUpdateState resetting", "didUpdateState poweredOn"])
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.disconnections.isEmpty)
        #expect(rig.phoneSystem.core.host.links.isEmpty, "the host keeps no link of the reset controller")
        #expect(rig.phoneSystem.core.host.counters.controllerResets == 1)
        #expect(rig.phoneSystem.core.host.counters.commandTimeouts == 2)
        #expect(rig.phoneSystem.core.host.runningTimerCount == 0, "no timer of the old link or the probe left")
        try await Self.reconnectsAndReads(rig, peripheral, Profile.fixed)
    }

    /// The phone's controller hangs for a minute: after the reset it does not answer HCI_Reset either, so the app
    /// sees `.poweredOff` (6 s after the hang began: three command timeouts); the host tries again after 1, 2, 4, …
    /// s and the app hears nothing more until the controller answers, then `.poweredOn`. Requests made while it is
    /// off fail with an error that says so.
    @Test func aControllerThatHangsLongIsShownOffAndComesBackWhenItAnswers() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.phone.clear()
        let start = rig.phoneSystem.now
        rig.phoneSystem.hangController(for: .seconds(60))
        peripheral.readRSSI()
        try await rig.run(until: { rig.central.state == .poweredOff }, within: .seconds(10), "the controller shown off")
        let off = rig.phoneSystem.now - start
        #expect(off >= .seconds(6) && off < .seconds(7))
        #expect(rig.phone.lines.dropFirst() == ["didUpdateState resetting", "didUpdateState poweredOff"])
        rig.phone.clear()
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverServices error=notConnected"])
        rig.phone.clear()
        try await rig.run(until: { rig.central.state == .poweredOn }, within: .seconds(120), "the controller back")
        let on = rig.phoneSystem.now - start
        // Tries at 7, 11, 17, 27, 45 and 79 s (each waiting 2 s for HCI_Reset, then 1, 2, 4, 8, 16, 32 s): the one
        // at 79 s is answered.
        #expect(on >= .seconds(79) && on < .seconds(80), "back at \(on)")
        #expect(rig.phone.lines == ["didUpdateState poweredOn"])
        #expect(rig.phoneSystem.core.host.counters.controllerResets == 1)
        #expect(rig.phoneSystem.core.host.links.isEmpty)
        #expect(rig.phoneSystem.core.host.runningTimerCount == 0, "the retries' timers are over")
        rig.central.connect(peripheral)
        try await rig.run(until: { peripheral.state == .connected }, within: .seconds(30), "the reconnection")
    }

    @Test func thePhonesControllerGoingAway() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .ignore
        peripheral.readValue(for: try rig.characteristic(Profile.dynamic, on: peripheral))
        try await rig.run(.seconds(1))
        rig.phoneSystem.vanish()
        try await rig.run(.seconds(1))
        #expect(rig.central.state == .poweredOff)
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.lines.contains("didUpdateState poweredOff"))
        // The pending read fails first; then the state says the rest: no `didDisconnectPeripheral` for the
        // peripheral (IOSRules.md 6.7).
        #expect(rig.phone.lines.first == "didUpdateValue \(Profile.dynamic.uuidString) nil error=transportClosed")
        #expect(rig.phone.lines.last == "didUpdateState poweredOff")
        #expect(rig.phone.disconnections.isEmpty)
        #expect(rig.phoneSystem.core.host.links.isEmpty)
        #expect(rig.phoneSystem.core.host.runningTimerCount == 0, "the transport's end leaves no timer running")
        // Nothing works any more, and says so.
        rig.phone.clear()
        peripheral.discoverServices(nil)
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverServices error=notConnected"])
        #expect(!rig.central.isScanning)
    }
}
