import BLE
import Foundation
import Testing

/// `PeripheralManager`: services, advertising, requests and subscriptions, as the peripheral app sees them.
@Suite struct PeripheralManagerTests {
    @Test func addReportsDidAdd() async throws {
        let rig = Rig()
        try await rig.startSensor(advertising: nil)
        try await rig.run(.milliseconds(100))
        #expect(
            rig.sensor.recorder.lines == [
                "didUpdateState poweredOn",
                "didAdd \(Profile.includedService.uuidString)",
                "didAdd \(Profile.service.uuidString)",
                "didAdd 180F",
            ])
        #expect(rig.sensor.fixed.service === rig.sensor.primary)
    }

    @Test func addRefusesInvalidServices() async throws {
        let rig = Rig()
        try await rig.startSensor(advertising: nil)
        rig.sensor.recorder.clear()
        // A cached value on a writable characteristic.
        let cached = MutableService(type: .heartRate, primary: true)
        cached.characteristics = [
            MutableCharacteristic(
                type: .heartRateControlPoint, properties: [.write], value: Data([1]),
                permissions: [.writeable])
        ]
        rig.sensor.manager.add(cached)
        // A hand-made Client Characteristic Configuration descriptor.
        let cccd = MutableService(type: .healthThermometer, primary: true)
        let measurement = MutableCharacteristic(
            type: .temperatureMeasurement, properties: [.indicate], value: nil, permissions: [])
        measurement.descriptors = [MutableDescriptor(type: .clientCharacteristicConfiguration, value: Data([0, 0]))]
        cccd.characteristics = [measurement]
        rig.sensor.manager.add(cccd)
        // A cached value longer than 512 bytes.
        let huge = MutableService(type: .deviceInformation, primary: true)
        huge.characteristics = [
            MutableCharacteristic(
                type: .modelNumberString, properties: [.read], value: Data(count: 513),
                permissions: [.readable])
        ]
        rig.sensor.manager.add(huge)
        try await rig.run(.milliseconds(100))
        let errors = rig.sensor.recorder.events.compactMap { event -> BluetoothError.Code? in
            if case .didAdd(_, let error) = event { return error?.code }
            return nil
        }
        #expect(errors == [.invalidParameters, .uuidNotAllowed, .invalidParameters])
    }

    @Test func removeAndRemoveAllServices() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.manager.remove(rig.sensor.battery)
        let other = try await freshDiscovery(rig)
        #expect(other == [.genericAccess, .genericAttribute, Profile.service])

        rig.sensor.manager.removeAllServices()
        #expect(try await freshDiscovery(rig) == [.genericAccess, .genericAttribute])

        // Published again, it is found again.
        rig.sensor.publish()
        #expect(try await freshDiscovery(rig) == [.genericAccess, .genericAttribute, Profile.service, .battery])
        withExtendedLifetime(peripheral) {}
    }

    /// A second phone connects and discovers the sensor's primary services from scratch.
    func freshDiscovery(_ rig: Rig) async throws -> [BluetoothUUID] {
        let system = BluetoothSystem.simulated(
            on: rig.radio, name: "checker-\(rig.radio.now)", position: RadioPosition(x: 1, y: 1))
        let checker = CentralRecorder(system: system, label: "checker")
        try await rig.run(until: { checker.central.state == .poweredOn }, "power on")
        checker.central.scanForPeripherals(withServices: nil)
        try await rig.run(until: { !checker.discoveries.isEmpty }, "discovery")
        checker.central.stopScan()
        let p = try #require(checker.discoveries.first?.peripheral)
        checker.central.connect(p)
        try await rig.run(until: { p.state == .connected }, "connection")
        p.discoverServices(nil)
        try await rig.run(until: { p.services != nil }, "services")
        let found = p.services?.map(\.uuid) ?? []
        checker.central.cancelPeripheralConnection(p)
        try await rig.run(until: { p.state == .disconnected }, "disconnection")
        return found
    }

    /// Removing or adding a service while a central is connected reaches it as `didModifyServices` (through
    /// the Service Changed indication the stack subscribes to on connection).
    @Test func serviceChangesReachTheConnectedCentral() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let battery = try rig.service(.battery, on: peripheral)
        rig.sensor.manager.remove(rig.sensor.battery)
        try await rig.run(.seconds(1))
        guard case .didModifyServices(let invalidated) = rig.phone.events.first else {
            Issue.record("expected didModifyServices, got \(rig.phone.lines)")
            return
        }
        #expect(rig.phone.events.count == 1)
        #expect(invalidated.count == 1)
        #expect(invalidated.first === battery)
        #expect(peripheral.services?.map(\.uuid) == [.genericAccess, .genericAttribute, Profile.service])

        // Added back: the app hears of it and finds it by discovering again.
        rig.phone.clear()
        rig.sensor.manager.add(rig.sensor.battery)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didModifyServices []"])
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        #expect(peripheral.services?.map(\.uuid) == [.genericAccess, .genericAttribute, Profile.service, .battery])
    }

    @Test func advertisingLifecycle() async throws {
        let rig = Rig()
        try await rig.startSensor(advertising: nil)
        try await rig.run(.milliseconds(100))
        let manager = rig.sensor.manager
        rig.sensor.recorder.clear()
        #expect(!manager.isAdvertising)
        manager.startAdvertising(Sensor.advertisement)
        try await rig.run(.milliseconds(100))
        #expect(manager.isAdvertising)
        #expect(rig.sensor.recorder.lines == ["didStartAdvertising"])

        manager.startAdvertising(Sensor.advertisement)
        try await rig.run(.milliseconds(100))
        #expect(rig.sensor.recorder.lines.last == "didStartAdvertising error=alreadyAdvertising")
        #expect(manager.isAdvertising)

        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(1))
        #expect(rig.phone.discoveries.count == 1)

        manager.stopAdvertising()
        #expect(!manager.isAdvertising)
        rig.central.stopScan()
        rig.phone.clear()
        try await rig.run(.milliseconds(100))
        rig.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.isEmpty)
    }

    @Test func advertisingWithEveryField() async throws {
        let rig = Rig()
        try await rig.startSensor(advertising: nil)
        // 31 bytes of advertising PDU and 31 of scan response hold all of this.
        let data = AdvertisementData(
            localName: "sensor", manufacturerData: Data([0x4C, 0x00, 0x02, 0x15]),
            serviceData: [.battery: Data([77])], serviceUUIDs: [Profile.service, .battery],
            txPowerLevel: -4)
        rig.sensor.manager.startAdvertising(data)
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(2))
        let seen = try #require(rig.phone.discoveries.last?.advertisement)
        #expect(seen.localName == "sensor")
        #expect(seen.manufacturerData == Data([0x4C, 0x00, 0x02, 0x15]))
        #expect(seen.serviceData == [.battery: Data([77])])
        #expect(Set(seen.serviceUUIDs ?? []) == [Profile.service, .battery])
        #expect(seen.txPowerLevel == -4)
    }

    @Test func advertisingContinuesWhileConnected() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        #expect(rig.sensor.manager.isAdvertising)
        let system = BluetoothSystem.simulated(on: rig.radio, name: "phone-2", position: RadioPosition(x: 0, y: 2))
        let other = CentralRecorder(system: system, label: "phone-2")
        try await rig.run(until: { other.central.state == .poweredOn }, "power on")
        other.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !other.discoveries.isEmpty }, "discovery while connected")
        #expect(peripheral.state == .connected)
    }

    @Test func startAdvertisingBeforePowerOnFails() async throws {
        let rig = Rig()
        // Not yet powered on: no virtual time has passed.
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(.milliseconds(100))
        let outcome = rig.sensor.recorder.events.compactMap { event -> BluetoothError?? in
            if case .didStartAdvertising(let error) = event { return .some(error) }
            return nil
        }
        #expect(outcome.count == 1)
        #expect(outcome.first??.code != nil)
        #expect(!rig.sensor.manager.isAdvertising)
    }

    @Test func requestsCarryTheCentralAndTheCharacteristic() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        rig.sensor.recorder[Profile.notifier] = Data([3])
        peripheral.readValue(for: dynamic)
        peripheral.writeValue(Data([1]), for: dynamic, type: .withResponse)
        peripheral.readValue(for: notifier)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        let recorder = rig.sensor.recorder
        let read = try #require(recorder.reads.first)
        let write = try #require(recorder.writeBatches.first?.first)
        guard case .didSubscribe(let subscriber, _) = recorder.events.last else {
            Issue.record("expected didSubscribe last, got \(recorder.lines)")
            return
        }
        // One central, the same identity everywhere.
        #expect(read.central == write.central)
        #expect(read.central == subscriber)
        #expect(read.central.identifier == subscriber.identifier)
        #expect(recorder.reads.map(\.characteristic.uuid) == [Profile.dynamic, Profile.notifier])
        #expect(notifier.value == Data([3]))
        #expect(write.characteristic === rig.sensor.dynamic)
    }

    @Test func respondingTwiceIsHarmless() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder[Profile.dynamic] = Data([1])
        rig.sensor.recorder.onEvent { recorder, event in
            if case .didReceiveRead(let request) = event {
                request.value = Data([2])
                recorder.manager.respond(to: request, withResult: .success)  // already answered: ignored
            }
        }
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        #expect(rig.phone.valueUpdates.map(\.value) == [Data([1]), Data([1])])
        #expect(peripheral.state == .connected)
    }

    @Test func disconnectionUnsubscribesTheCentral() async throws {
        let (rig, peripheral) = try await Rig.connected()
        peripheral.setNotifyValue(true, for: try rig.characteristic(Profile.notifier, on: peripheral))
        peripheral.setNotifyValue(true, for: try rig.characteristic(Profile.indicator, on: peripheral))
        try await rig.run(.seconds(1))
        #expect(rig.sensor.notifier.subscribedCentrals?.count == 1)
        rig.sensor.recorder.clear()
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        let unsubscribed = rig.sensor.recorder.events.compactMap { event -> BluetoothUUID? in
            if case .didUnsubscribe(_, let c) = event { return c.uuid }
            return nil
        }
        #expect(Set(unsubscribed) == [Profile.notifier, Profile.indicator])
        #expect(unsubscribed.count == 2)
        #expect(rig.sensor.notifier.subscribedCentrals?.isEmpty == true)
        #expect(rig.sensor.indicator.subscribedCentrals?.isEmpty == true)
    }
}
