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
                AttributeHandle(1)...AttributeHandle(5), AttributeHandle(6)...AttributeHandle(13),
                AttributeHandle(14)...AttributeHandle(21), AttributeHandle(22)...AttributeHandle(24),
                AttributeHandle(25)...AttributeHandle(34),
            ])
        #expect(database.deviceNameHandle == AttributeHandle(3))
        #expect(database.appearanceHandle == AttributeHandle(5))
        #expect(database.serviceChangedHandle == AttributeHandle(8))
        #expect(database.clientSupportedFeaturesHandle == AttributeHandle(11))
        #expect(database.databaseHashHandle == AttributeHandle(13))
        // Heart Rate Measurement: declaration 15 = notify, value handle 16, UUID 0x2A37; its CCCD at 17.
        #expect(database.attribute(at: AttributeHandle(15))?.value == [0x10, 0x10, 0x00, 0x37, 0x2A])
        #expect(database.attribute(at: AttributeHandle(17))?.type == .clientCharacteristicConfiguration)
        // The include declaration: 22...24, no UUID (128-bit).
        #expect(database.attribute(at: AttributeHandle(26))?.value == [22, 0, 24, 0])
        // The user description comes first, then the automatic CCCD.
        #expect(database.attribute(at: AttributeHandle(29))?.type == .characteristicUserDescription)
        #expect(database.attribute(at: AttributeHandle(30))?.type == .clientCharacteristicConfiguration)
        #expect(database.attribute(at: AttributeHandle(1))?.value == [0x00, 0x18])
        #expect(database.attribute(at: AttributeHandle(25))?.value == customServiceUUID.attWireBytes)
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
        #expect(database.attribute(at: AttributeHandle(16)) == nil)
        #expect(database.services.last?.handleRange == AttributeHandle(25)...AttributeHandle(34))
        // A new service goes after the highest handle.
        let layout = try database.add(
            GATTServiceDefinition(
                uuid: .battery,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: .batteryLevel, properties: [.read, .notify], permissions: [.readable], value: [50])
                ]))
        #expect(layout.service.handleRange == AttributeHandle(35)...AttributeHandle(38))
        #expect(layout.characteristics[0].clientConfigurationHandle == AttributeHandle(38))
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
        #expect(first.service.handleRange == AttributeHandle(14)...AttributeHandle(14))
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
        #expect(placed.service.handleRange.lowerBound == AttributeHandle(14))
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
