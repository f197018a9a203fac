import BLE
import Foundation
import Testing

/// Public calls with values past what the air or the spec holds: refused or cut, never a trap.
@Suite struct OutOfRangeInputTests {
    /// A name longer than an AD structure holds (254 octets) is left out of the advertisement, the other fields
    /// still go out, and the device is found by its service.
    @Test func aNameTooLongForAnyPDUIsLeftOutOfTheAdvertisement() async throws {
        let rig = Rig()
        try await rig.startSensor(advertising: nil)
        try await rig.run(.milliseconds(100))
        let long = String(repeating: "n", count: 300)
        rig.sensor.manager.startAdvertising(
            AdvertisementData(
                localName: long, manufacturerData: Data(repeating: 0xAB, count: 300),
                serviceData: [Profile.service: Data(repeating: 1, count: 300)], serviceUUIDs: [Profile.service]))
        try await rig.run(.milliseconds(100))
        #expect(rig.sensor.recorder.lines.last == "didStartAdvertising")
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(.seconds(1))
        let found = try #require(rig.phone.discoveries.first)
        #expect(found.advertisement.serviceUUIDs == [Profile.service])
        #expect(found.advertisement.manufacturerData == nil)
        #expect((found.advertisement.localName ?? "").count < 31)
    }

    /// A peer moved to infinity reads as the weakest RSSI HCI reports, not a trap.
    @Test func aPeerAtInfinityReadsAsTheWeakestRSSI() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensorSystem.move(to: RadioPosition(x: .infinity, y: 0))
        peripheral.readRSSI()
        try await rig.run(.milliseconds(100))
        #expect(rig.phone.lines.last == "didReadRSSI -127")
    }
}
