import BLE
import Foundation
import Testing

/// `scanForPeripherals`, `stopScan`, `isScanning` and `didDiscover`, as an app sees them.
@Suite struct ScanningTests {
    let other: BluetoothUUID = "0000FEED-0000-1000-8000-00805F9B34FB"

    @Test func scanWithoutFilterReportsEveryAdvertiserWithItsData() async throws {
        let rig = Rig()
        try await rig.startSensor()
        try await rig.addAdvertiser(
            name: "beacon", position: RadioPosition(x: 0, y: 3),
            advertisement: AdvertisementData(localName: "beacon", serviceUUIDs: [.battery]))
        #expect(!rig.central.isScanning)
        rig.central.scanForPeripherals(withServices: nil)
        #expect(rig.central.isScanning)
        try await rig.run(.seconds(2))

        let found = rig.phone.discoveries
        let names = Set(found.map { $0.advertisement.localName })
        #expect(names == ["sensor", "beacon"])
        let sensor = try #require(found.first { $0.advertisement.localName == "sensor" })
        #expect(sensor.advertisement.serviceUUIDs == [Profile.service])
        #expect(sensor.advertisement.isConnectable == true)
        #expect(sensor.peripheral.name == "sensor")
        #expect(sensor.peripheral.state == .disconnected)
        // 2 m away at 0 dBm: a plausible RSSI, not the "unavailable" 127.
        #expect((-90 ... -20).contains(sensor.rssi))
        #expect(
            sensor.peripheral.identifier
                != found.first { $0.advertisement.localName == "beacon" }?.peripheral.identifier)
    }

    /// The swift-ble extensions of a discovery: the PDU type, the raw advertisement and scan response, and which
    /// fields came in the scan response (here the complete name, too long for the advertising PDU).
    @Test func discoveryCarriesThePDUTypeAndTheRawBytes() async throws {
        let rig = Rig()
        let name = "a-sensor-with-a-name-too-long"
        try await rig.addAdvertiser(
            name: "long", position: RadioPosition(x: 0, y: 3),
            advertisement: AdvertisementData(localName: name, serviceUUIDs: [other]))
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(2))
        let found = try #require(rig.phone.discoveries.first { $0.advertisement.localName == name })
        let advertisement = found.advertisement
        #expect(advertisement.advertisingType == .advInd)
        #expect(advertisement.advertisingType?.description == "ADV_IND")
        #expect(advertisement.flags == .leOnlyGeneralDiscoverable)
        let adv = try #require(advertisement.advertisementStructures)
        let response = try #require(advertisement.scanResponseStructures)
        #expect(adv.serviceUUIDs == [other])
        #expect(adv.completeLocalName == nil)
        #expect(response.completeLocalName == name)
        #expect(advertisement.rawAdvertisement.map { Array($0) } == adv.bytes)
        #expect(advertisement.rawScanResponse.map { Array($0) } == response.bytes)
        #expect(advertisement.scanResponseTypes == [.completeLocalName])
    }

    @Test func stopScanEndsDiscovery() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        try await rig.run(.seconds(1))
        #expect(!rig.phone.discoveries.isEmpty)
        rig.central.stopScan()
        #expect(!rig.central.isScanning)
        let count = rig.phone.discoveries.count
        try await rig.run(.seconds(3))
        #expect(rig.phone.discoveries.count == count)
    }

    @Test func serviceFilterReportsOnlyMatchingPeripherals() async throws {
        let rig = Rig()
        try await rig.startSensor()
        try await rig.addAdvertiser(
            name: "beacon", position: RadioPosition(x: 0, y: 3),
            advertisement: AdvertisementData(localName: "beacon", serviceUUIDs: [.battery]))
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.map(\.advertisement.localName) == ["sensor"])

        rig.central.stopScan()
        rig.phone.clear()
        rig.central.scanForPeripherals(withServices: [.heartRate])
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.isEmpty)

        rig.central.stopScan()
        rig.central.scanForPeripherals(withServices: [.heartRate, .battery])
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.map(\.advertisement.localName) == ["beacon"])
    }

    @Test func duplicatesAreCoalescedByDefault() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(5))
        #expect(rig.phone.discoveries.count == 1)
    }

    @Test func allowDuplicatesReportsEveryAdvertisement() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: nil, options: .init(allowDuplicates: true))
        try await rig.run(.seconds(5))
        let reports = rig.phone.discoveries
        // The sensor advertises every 100 ms; the scanner listens half the time.
        #expect(reports.count >= 10)
        #expect(Set(reports.map(\.peripheral.identifier)).count == 1)
        #expect(reports.allSatisfy { $0.advertisement.localName == "sensor" })
    }

    @Test func changedAdvertisementIsReportedAgain() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: nil)
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.count == 1)

        rig.sensor.manager.stopAdvertising()
        let changed = AdvertisementData(
            localName: "sensor-2", manufacturerData: Data([0xFF, 0xFF, 0x01, 0x02]),
            serviceUUIDs: [Profile.service])
        rig.sensor.manager.startAdvertising(changed)
        try await rig.run(.seconds(3))

        let reports = rig.phone.discoveries
        #expect(reports.count >= 2)
        #expect(reports.first?.advertisement.localName == "sensor")
        let last = try #require(reports.last)
        #expect(last.advertisement.localName == "sensor-2")
        #expect(last.advertisement.manufacturerData == Data([0xFF, 0xFF, 0x01, 0x02]))
        #expect(last.peripheral === reports.first?.peripheral)
        #expect(last.peripheral.name == "sensor-2")
        // The same advertisement again is not a change: no more reports once it settled.
        let settled = rig.phone.discoveries.count
        try await rig.run(.seconds(3))
        #expect(rig.phone.discoveries.count == settled)
        // The name change reached the peripheral's delegate.
        #expect(rig.phone.events.contains { if case .didUpdateName(_, "sensor-2") = $0 { true } else { false } })
    }

    @Test func solicitedServicesOptionAlsoReportsSolicitors() async throws {
        let rig = Rig()
        try await rig.startSensor()
        try await rig.addAdvertiser(
            name: "solicitor", position: RadioPosition(x: 0, y: 3),
            advertisement: AdvertisementData(localName: "solicitor", solicitedServiceUUIDs: [other]))
        // Without the option, a service filter ignores what peripherals solicit.
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(.seconds(2))
        #expect(rig.phone.discoveries.map(\.advertisement.localName) == ["sensor"])
        rig.central.stopScan()
        rig.phone.clear()

        rig.central.scanForPeripherals(withServices: [Profile.service], options: .init(solicitedServiceUUIDs: [other]))
        try await rig.run(.seconds(2))
        let found = rig.phone.discoveries
        #expect(Set(found.map(\.advertisement.localName)) == ["sensor", "solicitor"])
        #expect(
            found.first { $0.advertisement.localName == "solicitor" }?.advertisement.solicitedServiceUUIDs == [other])
    }

    @Test func scanningAgainReplacesTheFilter() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.central.scanForPeripherals(withServices: [.heartRate])
        try await rig.run(.seconds(1))
        #expect(rig.phone.discoveries.isEmpty)
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(.seconds(1))
        #expect(rig.phone.discoveries.count == 1)
        #expect(rig.central.isScanning)
    }
}
