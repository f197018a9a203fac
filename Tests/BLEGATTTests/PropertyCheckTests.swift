import BLEATT
import BLECore
import BLEGATT
import Testing

/// The server honours a characteristic's properties whatever its permissions (Core Spec 5.4, Vol 3, Part G,
/// 3.3.1.1), as a client checks them before asking: a Write Request needs Write, a Write Command Write Without
/// Response, a read Read.
@Suite struct PropertyCheckTests {
    static let connection = ConnectionHandle(1)

    /// A server with three characteristics, all readable and writeable by permission: write-without-response
    /// only, write only, notify only. Returns their value handles in that order.
    static func server() throws -> (GATTServer, [AttributeHandle]) {
        var database = GATTDatabase()
        let layout = try database.add(
            GATTServiceDefinition(
                uuid: BluetoothUUID(UInt16(0xFFF0)),
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID(UInt16(0xFFF1)), properties: [.writeWithoutResponse],
                        permissions: [.readable, .writeable], value: [0]),
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID(UInt16(0xFFF2)), properties: [.write],
                        permissions: [.readable, .writeable], value: [0]),
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID(UInt16(0xFFF3)), properties: [.notify],
                        permissions: [.readable, .writeable], value: [0]),
                ]))
        var server = GATTServer(database: database)
        server.connected(connection)
        return (server, layout.characteristics.map(\.characteristic.valueHandle))
    }

    static func refused(_ opcode: ATTOpcode, _ handle: AttributeHandle, _ code: ATTErrorCode) -> [GATTServer.Action] {
        [.respond(connection, .errorResponse(.init(requestOpcode: opcode, handle: handle, errorCode: code)))]
    }

    @Test func aWriteRequestNeedsTheWriteProperty() throws {
        var (server, handles) = try Self.server()
        let withoutResponseOnly = handles[0]
        #expect(
            server.received(.writeRequest(.init(handle: withoutResponseOnly, value: [1])), from: Self.connection)
                == Self.refused(.writeRequest, withoutResponseOnly, .writeNotPermitted))
        #expect(
            server.received(
                .prepareWriteRequest(.init(handle: withoutResponseOnly, offset: 0, partAttributeValue: [1])),
                from: Self.connection)
                == Self.refused(.prepareWriteRequest, withoutResponseOnly, .writeNotPermitted))
        // The Write Command it does have is taken.
        #expect(
            !server.received(.writeCommand(.init(handle: withoutResponseOnly, value: [1])), from: Self.connection)
                .isEmpty)
    }

    @Test func aWriteCommandNeedsWriteWithoutResponse() throws {
        var (server, handles) = try Self.server()
        let writeOnly = handles[1]
        // Commands are never answered: refused, it changes nothing.
        #expect(
            server.received(.writeCommand(.init(handle: writeOnly, value: [9])), from: Self.connection) == [
                .writeCommandRefused(Self.connection, attribute: writeOnly, .writeNotPermitted)
            ])
        #expect(
            server.received(.readRequest(.init(handle: writeOnly)), from: Self.connection)
                == Self.refused(.readRequest, writeOnly, .readNotPermitted))
        #expect(server.received(.writeRequest(.init(handle: writeOnly, value: [2])), from: Self.connection).count == 2)
    }

    @Test func aReadNeedsTheReadProperty() throws {
        var (server, handles) = try Self.server()
        let notifyOnly = handles[2]
        #expect(
            server.received(.readRequest(.init(handle: notifyOnly)), from: Self.connection)
                == Self.refused(.readRequest, notifyOnly, .readNotPermitted))
        #expect(
            server.received(.readBlobRequest(.init(handle: notifyOnly, offset: 0)), from: Self.connection)
                == Self.refused(.readBlobRequest, notifyOnly, .readNotPermitted))
    }
}
