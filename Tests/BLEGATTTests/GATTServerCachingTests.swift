import BLEATT
import BLECore
import BLEGATT
import Testing

/// Robust caching on the server's side: the Database Hash and Client Supported Features characteristics, and
/// what a change-unaware client gets (Core Spec 5.4, Vol 3, Part G, 2.5.2.1, 7.2, 7.3).
@Suite struct GATTServerCachingTests {
    static let c1 = ConnectionHandle(1)
    static let c2 = ConnectionHandle(2)
    /// Body Sensor Location's value in the test database: readable, value 0x01.
    static let sensorLocation = AttributeHandle(19)

    func server() throws -> GATTServer {
        var server = GATTServer(database: try testDatabase())
        server.connected(Self.c1)
        server.connected(Self.c2)
        return server
    }

    func read(_ handle: AttributeHandle) -> ATTPDU { .readRequest(.init(handle: handle)) }
    func write(_ handle: AttributeHandle, _ value: [UInt8]) -> ATTPDU {
        .writeRequest(.init(handle: handle, value: value))
    }
    func readHash() -> ATTPDU {
        .readByTypeRequest(
            .init(startingHandle: AttributeHandle(1), endingHandle: .max, attributeType: .databaseHash))
    }
    func outOfSync(_ opcode: ATTOpcode, _ handle: AttributeHandle, on connection: ConnectionHandle = c1)
        -> [GATTServer.Action]
    {
        [
            .respond(
                connection, .errorResponse(.init(requestOpcode: opcode, handle: handle, errorCode: .databaseOutOfSync)))
        ]
    }
    func answered(_ actions: [GATTServer.Action]) -> Bool {
        guard case .respond(_, let pdu) = actions.first else { return false }
        if case .errorResponse = pdu { return false }
        return true
    }
    static let extra = GATTServiceDefinition(
        uuid: .battery,
        characteristics: [
            GATTCharacteristicDefinition(
                uuid: .batteryLevel, properties: [.read], permissions: [.readable], value: [50])
        ])

    @Test func theGATTServiceOffersTheHashAndTheClientFeatures() throws {
        var server = try server()
        let database = server.database
        #expect(database.clientSupportedFeaturesHandle == AttributeHandle(11))
        #expect(database.databaseHashHandle == AttributeHandle(13))
        let hash = database.databaseHash
        #expect(hash.count == 16)
        #expect(hash == GATTDatabase.databaseHash(of: database.attributes))
        // Read directly, and as a client reads it: by type over the whole range.
        #expect(
            server.received(read(database.databaseHashHandle), from: Self.c1)
                == [.respond(Self.c1, .readResponse(.init(value: hash)))])
        #expect(
            server.received(readHash(), from: Self.c1) == [
                .respond(
                    Self.c1,
                    .readByTypeResponse(.init(attributeData: [.init(handle: database.databaseHashHandle, value: hash)]))
                )
            ])
        // The hash follows the database; a value change does not move it.
        server.database.setValue([99], at: Self.sensorLocation)
        #expect(server.database.databaseHash == hash)
        try server.addService(Self.extra)
        #expect(server.database.databaseHash != hash)
        #expect(
            server.received(read(database.databaseHashHandle), from: Self.c1)
                == [.respond(Self.c1, .readResponse(.init(value: server.database.databaseHash)))])
    }

    @Test func clientSupportedFeaturesArePerClientAndBitsCannotBeCleared() throws {
        var server = try server()
        let csf = server.database.clientSupportedFeaturesHandle
        #expect(server.received(read(csf), from: Self.c1) == [.respond(Self.c1, .readResponse(.init(value: [0x00])))])
        #expect(server.received(write(csf, [0x01]), from: Self.c1) == [.respond(Self.c1, .writeResponse(.init()))])
        #expect(server.hasRobustCaching(Self.c1))
        #expect(!server.hasRobustCaching(Self.c2))
        #expect(server.received(read(csf), from: Self.c1) == [.respond(Self.c1, .readResponse(.init(value: [0x01])))])
        #expect(server.received(read(csf), from: Self.c2) == [.respond(Self.c2, .readResponse(.init(value: [0x00])))])
        // Clearing a bit is refused with Value Not Allowed; adding one keeps the old; unknown bits are not kept.
        #expect(
            server.received(write(csf, [0x00]), from: Self.c1)
                == [
                    .respond(
                        Self.c1,
                        .errorResponse(.init(requestOpcode: .writeRequest, handle: csf, errorCode: .valueNotAllowed)))
                ])
        #expect(server.received(write(csf, [0xFF]), from: Self.c1) == [.respond(Self.c1, .writeResponse(.init()))])
        #expect(server.clientSupportedFeatures(of: Self.c1) == [0x07])
        #expect(
            server.received(write(csf, []), from: Self.c2)
                == [
                    .respond(
                        Self.c2,
                        .errorResponse(
                            .init(requestOpcode: .writeRequest, handle: csf, errorCode: .invalidAttributeValueLength)))
                ])
        // A new link starts afresh.
        server.disconnected(Self.c1)
        server.connected(Self.c1)
        #expect(server.clientSupportedFeatures(of: Self.c1) == [0x00])
    }

    @Test func aChangeUnawareClientWithRobustCachingGetsOutOfSyncOnce() throws {
        var server = try server()
        let csf = server.database.clientSupportedFeaturesHandle
        _ = server.received(write(csf, [0x01]), from: Self.c1)
        #expect(server.isChangeAware(Self.c1))
        try server.addService(Self.extra)
        #expect(!server.isChangeAware(Self.c1))
        #expect(!server.isChangeAware(Self.c2))

        // Commands are ignored (and said so, for the log).
        #expect(
            server.received(.writeCommand(.init(handle: Self.sensorLocation, value: [1])), from: Self.c1)
                == [.writeCommandRefused(Self.c1, attribute: Self.sensorLocation, .databaseOutOfSync)])
        // Requests that name no handle of the old database are answered, and leave it unaware.
        let discovery = server.received(
            .readByGroupTypeRequest(
                .init(startingHandle: AttributeHandle(1), endingHandle: .max, attributeGroupType: .primaryService)),
            from: Self.c1)
        #expect(answered(discovery))
        #expect(!server.isChangeAware(Self.c1))
        // The first request that names a handle gets Database Out Of Sync; the next is answered and makes it aware.
        #expect(
            server.received(read(Self.sensorLocation), from: Self.c1) == outOfSync(.readRequest, Self.sensorLocation))
        #expect(!server.isChangeAware(Self.c1))
        #expect(
            server.received(read(Self.sensorLocation), from: Self.c1)
                == [.respond(Self.c1, .readResponse(.init(value: [0x01])))])
        #expect(server.isChangeAware(Self.c1))

        // A client without robust caching is never refused (Service Changed is how it learns).
        #expect(
            server.received(read(Self.sensorLocation), from: Self.c2)
                == [.respond(Self.c2, .readResponse(.init(value: [0x01])))])
    }

    @Test func everyRequestNamingHandlesIsRefusedWhileUnaware() throws {
        let requests: [ATTPDU] = [
            .readRequest(.init(handle: Self.sensorLocation)),
            .readBlobRequest(.init(handle: Self.sensorLocation, offset: 0)),
            .readMultipleRequest(.init(setOfHandles: [Self.sensorLocation, AttributeHandle(3)])),
            .readMultipleVariableRequest(.init(setOfHandles: [Self.sensorLocation, AttributeHandle(3)])),
            .readByTypeRequest(
                .init(
                    startingHandle: AttributeHandle(14), endingHandle: AttributeHandle(21),
                    attributeType: .characteristicDeclaration)),
            // Over the whole range too: only the hash's read is free.
            .readByTypeRequest(
                .init(startingHandle: AttributeHandle(1), endingHandle: .max, attributeType: .bodySensorLocation)),
            .writeRequest(.init(handle: Self.sensorLocation, value: [2])),
            .prepareWriteRequest(.init(handle: Self.sensorLocation, offset: 0, partAttributeValue: [2])),
            .executeWriteRequest(.init(flags: .cancel)),
        ]
        let named: [AttributeHandle] = [
            Self.sensorLocation, Self.sensorLocation, Self.sensorLocation, Self.sensorLocation, AttributeHandle(14),
            AttributeHandle(1), Self.sensorLocation, Self.sensorLocation, AttributeHandle(0),
        ]
        for (request, handle) in zip(requests, named) {
            var server = try server()
            _ = server.received(write(server.database.clientSupportedFeaturesHandle, [0x01]), from: Self.c1)
            server.databaseChanged()
            #expect(server.received(request, from: Self.c1) == outOfSync(request.opcode, handle), "\(request)")
        }
        // Discovery by type value and by information are answered (the MTU exchange never reaches the server: the
        // bearer answers it).
        let free: [ATTPDU] = [
            .findInformationRequest(.init(startingHandle: AttributeHandle(1), endingHandle: .max)),
            .findByTypeValueRequest(
                .init(
                    startingHandle: AttributeHandle(1), endingHandle: .max, attributeType: 0x2800,
                    attributeValue: [0x0D, 0x18])),
        ]
        for request in free {
            var server = try server()
            _ = server.received(write(server.database.clientSupportedFeaturesHandle, [0x01]), from: Self.c1)
            server.databaseChanged()
            #expect(answered(server.received(request, from: Self.c1)), "\(request)")
            #expect(!server.isChangeAware(Self.c1))
        }
    }

    @Test func readingTheHashOrConfirmingServiceChangedMakesItAware() throws {
        var server = try server()
        _ = server.received(write(server.database.clientSupportedFeaturesHandle, [0x01]), from: Self.c1)
        server.databaseChanged()
        // The hash, read by type over the whole range, is answered; the next request is too, and it is aware.
        #expect(answered(server.received(readHash(), from: Self.c1)))
        #expect(!server.isChangeAware(Self.c1))
        #expect(answered(server.received(read(Self.sensorLocation), from: Self.c1)))
        #expect(server.isChangeAware(Self.c1))

        server.databaseChanged()
        #expect(!server.isChangeAware(Self.c1))
        // A confirmation of an indication sent before a later change does not make it aware.
        let stale = server.databaseVersion
        server.databaseChanged()
        server.serviceChangedConfirmed(by: Self.c1, version: stale)
        #expect(!server.isChangeAware(Self.c1))
        server.serviceChangedConfirmed(by: Self.c1, version: server.databaseVersion)
        #expect(server.isChangeAware(Self.c1))
        // The hash is free over any range.
        server.databaseChanged()
        #expect(
            answered(
                server.received(
                    .readByTypeRequest(
                        .init(
                            startingHandle: AttributeHandle(6), endingHandle: AttributeHandle(13),
                            attributeType: .databaseHash)), from: Self.c1)))
        #expect(answered(server.received(read(Self.sensorLocation), from: Self.c1)))
        #expect(server.isChangeAware(Self.c1))
        #expect(answered(server.received(read(Self.sensorLocation), from: Self.c1)))

        // A client that connects after a change starts aware (no bond: nothing to remember it by).
        server.databaseChanged()
        server.disconnected(Self.c1)
        server.connected(Self.c1)
        #expect(server.isChangeAware(Self.c1))
    }
}
