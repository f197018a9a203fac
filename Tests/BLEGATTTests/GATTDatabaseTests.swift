import BLEATT
import BLECore
import BLEGATT
import Testing

@Suite struct GATTDatabaseTests {
    @Test func handlesAreAssignedInOrder() throws {
        let database = try testDatabase()
        #expect(
            database.services.map(\.uuid) == [
                .genericAccess, .genericAttribute, heartRateUUID, secondaryUUID, customServiceUUID,
            ])
        #expect(
            database.services.map(\.handleRange) == [
                AttributeHandle(1)...AttributeHandle(5), AttributeHandle(6)...AttributeHandle(9),
                AttributeHandle(10)...AttributeHandle(17), AttributeHandle(18)...AttributeHandle(20),
                AttributeHandle(21)...AttributeHandle(30),
            ])
        #expect(database.deviceNameHandle == AttributeHandle(3))
        #expect(database.appearanceHandle == AttributeHandle(5))
        #expect(database.serviceChangedHandle == AttributeHandle(8))
        // Heart Rate Measurement: declaration 11 = notify, value handle 12, UUID 0x2A37; its CCCD at 13.
        #expect(database.attribute(at: AttributeHandle(11))?.value == [0x10, 0x0C, 0x00, 0x37, 0x2A])
        #expect(database.attribute(at: AttributeHandle(13))?.type == .clientCharacteristicConfiguration)
        // The include declaration: 18...20, no UUID (128-bit).
        #expect(database.attribute(at: AttributeHandle(22))?.value == [18, 0, 20, 0])
        // The user description comes first, then the automatic CCCD.
        #expect(database.attribute(at: AttributeHandle(25))?.type == .characteristicUserDescription)
        #expect(database.attribute(at: AttributeHandle(26))?.type == .clientCharacteristicConfiguration)
        #expect(database.attribute(at: AttributeHandle(1))?.value == [0x00, 0x18])
        #expect(database.attribute(at: AttributeHandle(21))?.value == customServiceUUID.attWireBytes)
    }

    @Test func hostSetsGAPValues() throws {
        var database = try testDatabase()
        #expect(database.deviceName == "swift-ble")
        #expect(database.appearance == 0x0340)
        database.deviceName = "sensor"
        database.appearance = 0x0341
        #expect(database.attribute(at: database.deviceNameHandle)?.value == Array("sensor".utf8))
        #expect(database.attribute(at: database.appearanceHandle)?.value == [0x41, 0x03])
    }

    @Test func addingAndRemovingKeepsOtherHandles() throws {
        var database = try testDatabase()
        let heartRate = try #require(database.services.first { $0.uuid == heartRateUUID })
        #expect(database.removeService(at: heartRate.handleRange.lowerBound) == heartRate)
        #expect(database.attribute(at: AttributeHandle(12)) == nil)
        #expect(database.services.last?.handleRange == AttributeHandle(21)...AttributeHandle(30))
        // A new service goes after the highest handle.
        let layout = try database.add(
            GATTServiceDefinition(
                uuid: .battery,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: .batteryLevel, properties: [.read, .notify], permissions: [.readable], value: [50])
                ]))
        #expect(layout.service.handleRange == AttributeHandle(31)...AttributeHandle(34))
        #expect(layout.characteristics[0].clientConfigurationHandle == AttributeHandle(34))
        // The GAP and GATT services stay.
        #expect(database.removeService(at: AttributeHandle(1)) == nil)
        #expect(database.removeService(at: AttributeHandle(6)) == nil)
    }

    @Test func aServiceGoesIntoAGapWhenNothingIsLeftAtTheEnd() throws {
        var database = GATTDatabase()
        // Fill the handle space up to 0xFFFF with one service of 0xFFF6 handles... build it from many
        // characteristics: 1 + 2 * n handles.
        let filler = GATTServiceDefinition(
            uuid: .battery,
            characteristics: Array(
                repeating: GATTCharacteristicDefinition(
                    uuid: .batteryLevel, properties: [.read], permissions: [.readable], value: [1]),
                count: (0xFFFF - 9 - 1) / 2 - 10))
        let small = GATTServiceDefinition(uuid: .txPowerService)
        let first = try database.add(small)  // 10
        let big = try database.add(filler)
        #expect(first.service.handleRange == AttributeHandle(10)...AttributeHandle(10))
        #expect(database.removeService(at: first.service.handleRange.lowerBound) != nil)
        let room = 0xFFFF - Int(big.service.handleRange.upperBound.rawValue)
        let needsGap = GATTServiceDefinition(
            uuid: .immediateAlert,
            characteristics: Array(
                repeating: GATTCharacteristicDefinition(
                    uuid: .batteryLevel, properties: [.read], permissions: [.readable], value: [1]),
                count: 0))
        #expect(room < 30)
        // Fill what is left at the end, then a new one-handle service must use the gap at 10.
        for _ in 0..<room { try database.add(GATTServiceDefinition(uuid: .linkLoss)) }
        let placed = try database.add(needsGap)
        #expect(placed.service.handleRange.lowerBound == AttributeHandle(10))
        #expect(throws: GATTError(.invalidDefinition)) { try database.add(GATTServiceDefinition(uuid: .linkLoss)) }
    }

    @Test func rejectsBadDefinitions() {
        var database = GATTDatabase()
        #expect(throws: GATTError(.invalidDefinition)) {
            try database.add(GATTServiceDefinition(uuid: .battery, includedServices: [.heartRate]))
        }
        #expect(throws: GATTError(.invalidDefinition)) {
            try database.add(
                GATTServiceDefinition(
                    uuid: .battery,
                    characteristics: [
                        GATTCharacteristicDefinition(
                            uuid: .batteryLevel, properties: [.read], permissions: [.readable],
                            value: [UInt8](repeating: 0, count: 513))
                    ]))
        }
    }
}
