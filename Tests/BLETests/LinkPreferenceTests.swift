import BLE
import Foundation
import Testing

/// Link preferences of a system (our own, not CoreBluetooth API) reach the link through the LL procedures, and
/// both ends can read what the link became.
@Suite struct LinkPreferenceTests {
    @Test func theDefaultsAreWhatAPhoneAsksFor() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let link = try #require(peripheral.link)
        #expect(link.interval == .milliseconds(30))
        #expect(link.peripheralLatency == 0)
        #expect(link.supervisionTimeout == .seconds(5))
        #expect(link.txPHY == .le1M && link.rxPHY == .le1M)
        #expect(link.maxTxOctets == 251 && link.maxRxOctets == 251)
        #expect(link.attMTU == 517)
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(peripheral.link == nil)
    }

    @Test func preferencesAreAppliedAndSeenFromBothEnds() async throws {
        let phone = BluetoothSystem.Configuration(
            preferredMTU: 185, preferredDataLength: 27, preferredPHY: .le2M,
            connectionInterval: .milliseconds(15) ... .milliseconds(15), peripheralLatency: 4,
            supervisionTimeout: .seconds(2))
        let (rig, peripheral) = try await Rig.connected(phone: phone)
        let link = try #require(peripheral.link)
        #expect(link.interval == .milliseconds(15))
        #expect(link.peripheralLatency == 4)
        #expect(link.supervisionTimeout == .seconds(2))
        #expect(link.txPHY == .le2M && link.rxPHY == .le2M)
        #expect(link.maxTxOctets == 27)
        #expect(link.attMTU == 185)
        // The sensor's end of the same link.
        peripheral.setNotifyValue(true, for: try rig.characteristic(Profile.notifier, on: peripheral))
        try await rig.run(.milliseconds(500))
        let central = try #require(
            rig.sensor.recorder.subscribers.first)
        let seen = try #require(central.link)
        #expect(seen.interval == .milliseconds(15) && seen.peripheralLatency == 4)
        #expect(seen.txPHY == .le2M && seen.rxPHY == .le2M)
        #expect(seen.attMTU == 185)
    }

    /// A peripheral that prefers LE Coded, asked by a central that prefers it too, moves the link to Coded; a
    /// central that prefers Coded meeting a peripheral that allows only 2M keeps LE 1M (no PHY in common).
    @Test func thePHYIsWhatBothEndsAllow() async throws {
        let coded = BluetoothSystem.Configuration(preferredPHY: .leCoded)
        let (rig, both) = try await Rig.connected(phone: coded, sensor: coded)
        #expect(both.link?.txPHY == .leCoded && both.link?.rxPHY == .leCoded)
        let (otherRig, mismatch) = try await Rig.connected(phone: coded, sensor: .init(preferredPHY: .le2M))
        #expect(mismatch.link?.txPHY == .le1M && mismatch.link?.rxPHY == .le1M)
        withExtendedLifetime((rig, otherRig)) {}
    }
}
