import BLEATT
import BLECore
import BLEGATT
import Testing

private let c1 = ConnectionHandle(1)
private let c2 = ConnectionHandle(2)

@Suite struct GATTClientServerTests {
    func world(clientRxMTU: UInt16 = 517, serverRxMTU: UInt16 = 517) throws -> World {
        var world = World(database: try testDatabase())
        world.connect(c1, clientRxMTU: clientRxMTU, serverRxMTU: serverRxMTU)
        world.connect(c2)
        return world
    }

    @Test func discoversEverything() throws {
        var world = try world()
        let services = try #require(world.run(.discoverAllPrimaryServices).services)
        #expect(services.map(\.uuid) == [.genericAccess, .genericAttribute, heartRateUUID, customServiceUUID])
        #expect(services[2].handleRange == AttributeHandle(14)...AttributeHandle(21))
        #expect(services.last?.handleRange == AttributeHandle(25)...AttributeHandle(34))

        let heartRate = services[2]
        let characteristics = try #require(world.run(.discoverCharacteristics(heartRate, uuid: nil)).characteristics)
        #expect(
            characteristics == [
                GATTCharacteristic(
                    uuid: .heartRateMeasurement, properties: [.notify], declarationHandle: AttributeHandle(15),
                    valueHandle: AttributeHandle(16), endHandle: AttributeHandle(17)),
                GATTCharacteristic(
                    uuid: .bodySensorLocation, properties: [.read], declarationHandle: AttributeHandle(18),
                    valueHandle: AttributeHandle(19), endHandle: AttributeHandle(19)),
                GATTCharacteristic(
                    uuid: .heartRateControlPoint, properties: [.write], declarationHandle: AttributeHandle(20),
                    valueHandle: AttributeHandle(21), endHandle: AttributeHandle(21)),
            ])
        #expect(
            world.run(.discoverDescriptors(characteristics[0])).descriptors
                == [GATTDescriptor(uuid: .clientCharacteristicConfiguration, handle: AttributeHandle(17))])
        #expect(world.run(.discoverDescriptors(characteristics[1])).descriptors == [])

        let custom = services[3]
        let customCharacteristics = try #require(world.run(.discoverCharacteristics(custom, uuid: nil)).characteristics)
        #expect(customCharacteristics.map(\.uuid) == [longValueUUID, dynamicUUID, secretUUID])
        #expect(customCharacteristics[0].endHandle == AttributeHandle(30))
        #expect(
            world.run(.discoverDescriptors(customCharacteristics[0])).descriptors == [
                GATTDescriptor(uuid: .characteristicUserDescription, handle: AttributeHandle(29)),
                GATTDescriptor(uuid: .clientCharacteristicConfiguration, handle: AttributeHandle(30)),
            ])
        // By UUID: only the matching one, with the right end handle.
        #expect(
            world.run(.discoverCharacteristics(custom, uuid: longValueUUID)).characteristics == [
                customCharacteristics[0]
            ])

        // Included services: the 128-bit UUID is read with a Read Request.
        #expect(
            world.run(.findIncludedServices(custom)).included
                == [
                    GATTService(
                        uuid: secondaryUUID, isPrimary: false, handleRange: AttributeHandle(22)...AttributeHandle(24))
                ])
        #expect(world.clientPDUs.contains(.readRequest(.init(handle: AttributeHandle(22)))))
        #expect(world.run(.findIncludedServices(heartRate)).included == [])

        // By service UUID.
        #expect(world.run(.discoverPrimaryServices(uuid: heartRateUUID)).services == [heartRate])
        #expect(world.run(.discoverPrimaryServices(uuid: customServiceUUID)).services == [custom])
        #expect(world.run(.discoverPrimaryServices(uuid: .battery)).services == [])
        #expect(world.run(.discoverPrimaryServices(uuid: secondaryUUID)).services == [])  // secondary, not primary
    }

    @Test func longReadAtMTU23() throws {
        var world = try world()
        let value = try #require(world.run(.read(AttributeHandle(28))).value)
        #expect(value == longValue)
        // A Read Request for 22 octets, then Read Blobs of 22 until the short 6-octet part: 1 + 23 requests.
        #expect(world.clientPDUs.count == 24)
        #expect(world.clientPDUs[0] == .readRequest(.init(handle: AttributeHandle(28))))
        #expect(world.clientPDUs[1] == .readBlobRequest(.init(handle: AttributeHandle(28), offset: 22)))
        #expect(world.clientPDUs[23] == .readBlobRequest(.init(handle: AttributeHandle(28), offset: 506)))
    }

    @Test func longWriteAtMTU23() throws {
        var world = try world()
        let value: [UInt8] = (0..<300).map { UInt8($0 % 251) }
        #expect(world.run(.write(AttributeHandle(28), value: value)) == .success(.written))
        // Parts of MTU-5 = 18 octets: 17 Prepare Writes, then Execute Write.
        #expect(world.clientPDUs.count == 18)
        #expect(
            world.clientPDUs[1]
                == .prepareWriteRequest(
                    .init(
                        handle: AttributeHandle(28), offset: 18,
                        partAttributeValue: Array(value[18..<36]))))
        #expect(world.clientPDUs.last == .executeWriteRequest(.init(flags: .write)))
        #expect(world.server.database.attribute(at: AttributeHandle(28))?.value == value)
        #expect(world.appEvents == [.valueWritten(c1, attribute: AttributeHandle(28), value: value)])
        #expect(world.run(.read(AttributeHandle(28))).value == value)
    }

    @Test func tooLongAWriteFailsAtExecute() throws {
        var world = try world()
        let result = world.run(.write(AttributeHandle(28), value: [UInt8](repeating: 1, count: 513)))
        #expect(result.error == GATTError(.errorResponse, attErrorCode: .invalidAttributeValueLength))
        #expect(world.server.database.attribute(at: AttributeHandle(28))?.value == longValue)
    }

    @Test func mtuExchangeTo517() throws {
        var world = try world()
        #expect(world.run(.exchangeMTU(clientRxMTU: 517)) == .success(.mtu(517)))
        #expect(world.links[c1]?.client.mtu == 517)
        #expect(world.links[c1]?.clientBearer.mtu == 517)
        #expect(world.server.mtu(of: c1) == 517)
        #expect(world.server.mtu(of: c2) == 23)
        world.clientPDUs = []
        #expect(world.run(.read(AttributeHandle(28))).value == longValue)
        #expect(world.clientPDUs.count == 1)  // 512 octets fit one Read Response
        // A 300-octet write is a single Write Request now.
        world.clientPDUs = []
        #expect(world.run(.write(AttributeHandle(28), value: [UInt8](repeating: 9, count: 300))) == .success(.written))
        #expect(world.clientPDUs.count == 1)
        // The MTU is exchanged once.
        #expect(world.run(.exchangeMTU(clientRxMTU: 517)).error == GATTError(.rejected))
    }

    @Test func mtuExchangeTakesTheSmallerSide() throws {
        var world = try world(clientRxMTU: 185, serverRxMTU: 247)
        #expect(world.run(.exchangeMTU(clientRxMTU: 185)) == .success(.mtu(185)))
        #expect(world.server.mtu(of: c1) == 185)
    }

    @Test func permissionErrors() throws {
        var world = try world()
        #expect(
            world.run(.read(AttributeHandle(16))).error == GATTError(.errorResponse, attErrorCode: .readNotPermitted))
        #expect(
            world.run(.write(AttributeHandle(19), value: [2])).error
                == GATTError(.errorResponse, attErrorCode: .writeNotPermitted))
        #expect(
            world.run(.read(AttributeHandle(0x104))).error == GATTError(.errorResponse, attErrorCode: .invalidHandle))
        #expect(
            world.run(.write(AttributeHandle(15), value: [0])).error
                == GATTError(.errorResponse, attErrorCode: .writeNotPermitted))  // a declaration
        // A client without a bond must pair first (Insufficient Authentication); a bonded one only encrypt
        // (Vol 3, Part C, 10.3.1, Table 10.2).
        #expect(
            world.run(.read(AttributeHandle(34))).error
                == GATTError(.errorResponse, attErrorCode: .insufficientAuthentication))
        #expect(
            world.run(.write(AttributeHandle(34), value: [1])).error
                == GATTError(.errorResponse, attErrorCode: .insufficientAuthentication))
        world.server.bondChanged(c1, isBonded: true)
        #expect(
            world.run(.read(AttributeHandle(34))).error
                == GATTError(.errorResponse, attErrorCode: .insufficientEncryption))
        #expect(
            world.run(.write(AttributeHandle(34), value: [1])).error
                == GATTError(.errorResponse, attErrorCode: .insufficientEncryption))
        world.server.encryptionChanged(c1, isEncrypted: true)
        #expect(world.run(.read(AttributeHandle(34))).value == [0x5E])
        #expect(world.run(.write(AttributeHandle(34), value: [1])) == .success(.written))
        // The bearer survives every one of these.
        #expect(world.links[c1]?.clientBearer.isOpen == true)
    }

    /// A CCCD is read freely; writing it (subscribing) needs encryption when the value does to be read, or
    /// when the definition says so (CoreBluetooth's `notifyEncryptionRequired`), and is refused as a protected
    /// value is until the link is encrypted.
    @Test(arguments: [false, true])
    func aCCCDNeedsEncryptionWhenItsValueOrItsDefinitionDoes(byDefinition: Bool) throws {
        var database = GATTDatabase(deviceName: "lock", appearance: 0)
        let layout = try database.add(
            GATTServiceDefinition(
                uuid: secondaryUUID,
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: secretUUID, properties: [.notify],
                        permissions: byDefinition ? [.readable] : [.readEncryptionRequired],
                        subscribingRequiresEncryption: byDefinition),
                    GATTCharacteristicDefinition(uuid: dynamicUUID, properties: [.notify], permissions: [.readable]),
                ]))
        let protected = try #require(layout.characteristics[0].clientConfigurationHandle)
        let open = try #require(layout.characteristics[1].clientConfigurationHandle)
        var world = World(database: database)
        world.connect(c1)
        #expect(world.run(.read(protected)).value == [0x00, 0x00])
        #expect(
            world.run(.setClientConfiguration(descriptor: protected, .notification)).error
                == GATTError(.errorResponse, attErrorCode: .insufficientAuthentication))
        #expect(world.run(.setClientConfiguration(descriptor: open, .notification)) == .success(.written))
        world.server.encryptionChanged(c1, isEncrypted: true)
        #expect(world.run(.setClientConfiguration(descriptor: protected, .notification)) == .success(.written))
    }

    @Test func cccdSubscriptionsArePerClient() throws {
        var world = try world()
        let cccd = AttributeHandle(17)
        let measurement = AttributeHandle(16)
        #expect(world.run(.setClientConfiguration(descriptor: cccd, .notification), on: c1) == .success(.written))
        #expect(world.appEvents == [.subscriptionChanged(c1, characteristicValue: measurement, .notification)])
        #expect(world.run(.read(cccd), on: c1).value == [0x01, 0x00])
        #expect(world.run(.read(cccd), on: c2).value == [0x00, 0x00])
        // Heart Rate Measurement cannot indicate.
        #expect(
            world.run(.setClientConfiguration(descriptor: cccd, .indication), on: c2).error
                == GATTError(.errorResponse, attErrorCode: .cccdImproperlyConfigured))
        #expect(
            world.run(.write(cccd, value: [1]), on: c2).error
                == GATTError(.errorResponse, attErrorCode: .invalidAttributeValueLength))

        #expect(world.server.subscribers(of: measurement).map(\.0) == [c1])
        let notification = try #require(
            world.server.notification(
                characteristicValue: measurement,
                value: [UInt8](repeating: 7, count: 40), to: c1))
        #expect(notification.value.count == 20)  // cut to MTU-3
        #expect(world.server.notification(characteristicValue: measurement, value: [1], to: c2) == nil)
        try world.notify(notification, on: c1)
        #expect(world.notifications.map(\.1) == [notification])

        // Unsubscribing.
        world.appEvents = []
        #expect(world.run(.setClientConfiguration(descriptor: cccd, []), on: c1) == .success(.written))
        #expect(world.appEvents == [.subscriptionChanged(c1, characteristicValue: measurement, [])])
        #expect(world.server.notification(characteristicValue: measurement, value: [1], to: c1) == nil)
    }

    @Test func indicationsTravelAndAreConfirmed() throws {
        var world = try world()
        #expect(world.run(.setClientConfiguration(descriptor: AttributeHandle(30), .indication)) == .success(.written))
        let indication = try #require(
            world.server.indication(characteristicValue: AttributeHandle(28), value: [1, 2], to: c1))
        world.indicate(indication, id: ATTRequestID(100), on: c1)
        #expect(world.indications.map(\.1) == [indication])
        #expect(world.indicationResults[ATTRequestID(100)] == .some(nil))
        // Service Changed needs its own subscription.
        #expect(world.server.serviceChangedIndication(range: AttributeHandle(25)...AttributeHandle(34), to: c1) == nil)
        #expect(world.run(.setClientConfiguration(descriptor: AttributeHandle(9), .indication)) == .success(.written))
        #expect(
            world.server.serviceChangedIndication(range: AttributeHandle(25)...AttributeHandle(34), to: c1)
                == .init(handle: AttributeHandle(8), value: [25, 0, 34, 0]))
    }

    @Test func dynamicValuesAreAnsweredByTheApp() throws {
        var world = try world()
        let dynamic = AttributeHandle(32)
        world.appValues[dynamic] = Array(0..<100)
        #expect(world.run(.read(dynamic)).value == Array(0..<100))  // long read, offsets through the app
        #expect(world.run(.write(dynamic, value: [9, 9])) == .success(.written))
        #expect(world.appValues[dynamic] == [9, 9])
        #expect(
            world.appEvents == [
                .writeRequests(
                    id: GATTServerRequestID(rawValue: 6), connection: c1,
                    [GATTWriteRequest(attribute: dynamic, offset: 0, value: [9, 9])])
            ])
        // A long write to a dynamic value reaches the app as one list of parts, answered once.
        world.appEvents = []
        let long: [UInt8] = Array(repeating: 4, count: 40)
        #expect(world.run(.write(dynamic, value: long)) == .success(.written))
        guard case .writeRequests(_, _, let parts) = world.appEvents.first else {
            Issue.record("no write requests")
            return
        }
        #expect(parts.map(\.offset) == [0, 18, 36])
        #expect(world.appValues[dynamic] == long)
        // Write Without Response.
        let command = try world.links[c1]!.client.writeWithoutResponse(dynamic, value: [5])
        #expect(command == .writeCommand(.init(handle: dynamic, value: [5])))
        #expect(throws: GATTError(.rejected)) {
            try world.links[c1]!.client.writeWithoutResponse(dynamic, value: [UInt8](repeating: 0, count: 21))
        }
    }

    @Test func disconnectFailsRunningAndQueuedOperations() {
        var client = GATTClient()
        let first = client.start(.read(AttributeHandle(3)), id: GATTOperationID(1))
        #expect(first == [.sendRequest(.readRequest(.init(handle: AttributeHandle(3))), ATTRequestID(1))])
        #expect(client.start(.discoverAllPrimaryServices, id: GATTOperationID(2)) == [])
        #expect(
            client.linkDisconnected() == [
                .complete(GATTOperationID(1), .failure(GATTError(.disconnected))),
                .complete(GATTOperationID(2), .failure(GATTError(.disconnected))),
            ])
        #expect(
            client.start(.read(AttributeHandle(3)), id: GATTOperationID(3))
                == [.complete(GATTOperationID(3), .failure(GATTError(.disconnected)))])
    }

    @Test func aClosedBearerFailsTheProcedure() {
        var client = GATTClient()
        _ = client.start(.read(AttributeHandle(3)), id: GATTOperationID(1))
        _ = client.start(.read(AttributeHandle(5)), id: GATTOperationID(2))
        let actions = client.requestCompleted(ATTRequestID(1), .failure(.bearerClosed(ATTError(.protocolViolation))))
        #expect(
            actions == [
                .complete(GATTOperationID(1), .failure(GATTError(.bearerClosed))),
                .sendRequest(.readRequest(.init(handle: AttributeHandle(5))), ATTRequestID(2)),
            ])
    }

    @Test func aTransactionTimeoutIsReportedAsSuch() {
        var client = GATTClient()
        _ = client.start(.read(AttributeHandle(3)), id: GATTOperationID(1))
        let actions = client.requestCompleted(ATTRequestID(1), .failure(.bearerClosed(ATTError(.transactionTimeout))))
        #expect(actions == [.complete(GATTOperationID(1), .failure(GATTError(.transactionTimeout)))])
    }

    @Test func aBadEchoCancelsTheLongWrite() {
        var procedure = GATTWriteValue(handle: AttributeHandle(28), value: [UInt8](repeating: 1, count: 30))
        #expect(
            procedure.start(mtu: 23)
                == .send(
                    .prepareWriteRequest(
                        .init(
                            handle: AttributeHandle(28), offset: 0,
                            partAttributeValue: [UInt8](repeating: 1, count: 18)))))
        let badEcho = ATTPDU.prepareWriteResponse(
            .init(handle: AttributeHandle(28), offset: 0, partAttributeValue: [2]))
        #expect(procedure.received(.success(badEcho), mtu: 23) == .send(.executeWriteRequest(.init(flags: .cancel))))
        #expect(
            procedure.received(.success(.executeWriteResponse(.init())), mtu: 23)
                == .finished(.failure(GATTError(.writeVerificationFailed))))
    }
}
