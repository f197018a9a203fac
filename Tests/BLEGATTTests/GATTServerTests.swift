import BLEATT
import BLECore
import BLEGATT
import Testing

private let c1 = ConnectionHandle(1)
private func h(_ value: UInt16) -> AttributeHandle { AttributeHandle(value) }
private func error(_ opcode: ATTOpcode, _ handle: UInt16, _ code: ATTErrorCode) -> [GATTServer.Action] {
    [.respond(c1, .errorResponse(.init(requestOpcode: opcode, handle: h(handle), errorCode: code)))]
}

@Suite struct GATTServerTests {
    func server() throws -> GATTServer {
        var server = GATTServer(database: try testDatabase(), maximumPrepareQueueLength: 2)
        server.connected(c1)
        return server
    }

    @Test func readByGroupType() throws {
        var server = try server()
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: h(1), endingHandle: .max,
                        attributeGroupType: .primaryService)), from: c1) == [
                    .respond(
                        c1,
                        .readByGroupTypeResponse(
                            .init(attributeData: [
                                .init(handle: h(1), endGroupHandle: h(5), value: [0x00, 0x18]),
                                .init(handle: h(6), endGroupHandle: h(13), value: [0x01, 0x18]),
                                .init(handle: h(14), endGroupHandle: h(21), value: [0x0D, 0x18]),
                            ])))
                ])
        // The 128-bit service comes alone (values of one length per response).
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: h(22), endingHandle: .max,
                        attributeGroupType: .primaryService)), from: c1) == [
                    .respond(
                        c1,
                        .readByGroupTypeResponse(
                            .init(attributeData: [
                                .init(handle: h(25), endGroupHandle: h(34), value: customServiceUUID.attWireBytes)
                            ])))
                ])
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: h(35), endingHandle: .max,
                        attributeGroupType: .primaryService)), from: c1)
                == error(.readByGroupTypeRequest, 35, .attributeNotFound))
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: h(1), endingHandle: .max,
                        attributeGroupType: .characteristicDeclaration)), from: c1)
                == error(.readByGroupTypeRequest, 1, .unsupportedGroupType))
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: h(0), endingHandle: .max,
                        attributeGroupType: .primaryService)), from: c1)
                == error(.readByGroupTypeRequest, 0, .invalidHandle))
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: h(9), endingHandle: h(8),
                        attributeGroupType: .primaryService)), from: c1)
                == error(.readByGroupTypeRequest, 9, .invalidHandle))
    }

    @Test func readByTypeReadsValuesByUUID() throws {
        var server = try server()
        #expect(
            server.received(
                .readByTypeRequest(
                    .init(
                        startingHandle: h(1), endingHandle: .max,
                        attributeType: .bodySensorLocation)), from: c1) == [
                    .respond(c1, .readByTypeResponse(.init(attributeData: [.init(handle: h(19), value: [0x01])])))
                ])
        #expect(
            server.received(
                .readByTypeRequest(
                    .init(
                        startingHandle: h(1), endingHandle: .max,
                        attributeType: .heartRateMeasurement)), from: c1)
                == error(.readByTypeRequest, 16, .readNotPermitted))
        #expect(
            server.received(
                .readByTypeRequest(
                    .init(
                        startingHandle: h(20), endingHandle: .max,
                        attributeType: .bodySensorLocation)), from: c1)
                == error(.readByTypeRequest, 20, .attributeNotFound))
        // The 512-octet value is cut to MTU-4.
        let long = server.received(
            .readByTypeRequest(
                .init(
                    startingHandle: h(1), endingHandle: .max,
                    attributeType: longValueUUID)), from: c1)
        #expect(
            long == [
                .respond(
                    c1,
                    .readByTypeResponse(
                        .init(attributeData: [
                            .init(handle: h(28), value: Array(longValue.prefix(19)))
                        ])))
            ])
    }

    @Test func findInformationSwitchesFormats() throws {
        var server = try server()
        let response = server.received(
            .findInformationRequest(.init(startingHandle: h(24), endingHandle: h(30))), from: c1)
        // 0x0014 Battery Level, 0x0015 «Primary Service», 0x0016 «Include», 0x0017 «Characteristic», then
        // the 128-bit value type stops the list.
        #expect(
            response == [
                .respond(
                    c1,
                    .findInformationResponse(
                        .init(
                            format: .uuid16,
                            information: [
                                .init(handle: h(24), type: .batteryLevel), .init(handle: h(25), type: .primaryService),
                                .init(handle: h(26), type: .include),
                                .init(handle: h(27), type: .characteristicDeclaration),
                            ])))
            ])
        #expect(
            server.received(.findInformationRequest(.init(startingHandle: h(28), endingHandle: h(28))), from: c1) == [
                .respond(
                    c1,
                    .findInformationResponse(
                        .init(format: .uuid128, information: [.init(handle: h(28), type: longValueUUID)])))
            ])
        #expect(
            server.received(.findInformationRequest(.init(startingHandle: h(35), endingHandle: .max)), from: c1)
                == error(.findInformationRequest, 35, .attributeNotFound))
    }

    @Test func readBlobOffsets() throws {
        var server = try server()
        #expect(
            server.received(.readBlobRequest(.init(handle: h(28), offset: 510)), from: c1) == [
                .respond(c1, .readBlobResponse(.init(partAttributeValue: Array(longValue[510...]))))
            ])
        #expect(
            server.received(.readBlobRequest(.init(handle: h(28), offset: 512)), from: c1) == [
                .respond(c1, .readBlobResponse(.init(partAttributeValue: [])))
            ])
        #expect(
            server.received(.readBlobRequest(.init(handle: h(28), offset: 513)), from: c1)
                == error(.readBlobRequest, 28, .invalidOffset))
    }

    @Test func readMultiple() throws {
        var server = try server()
        #expect(
            server.received(.readMultipleRequest(.init(setOfHandles: [h(19), h(24)])), from: c1) == [
                .respond(c1, .readMultipleResponse(.init(setOfValues: [0x01, 99])))
            ])
        #expect(
            server.received(.readMultipleRequest(.init(setOfHandles: [h(19), h(16)])), from: c1)
                == error(.readMultipleRequest, 16, .readNotPermitted))
        #expect(
            server.received(.readMultipleRequest(.init(setOfHandles: [h(19), h(103)])), from: c1)
                == error(.readMultipleRequest, 103, .invalidHandle))
        #expect(
            server.received(.readMultipleVariableRequest(.init(setOfHandles: [h(19), h(28)])), from: c1) == [
                .respond(
                    c1,
                    .readMultipleVariableResponse(
                        .init(lengthValueTupleList: [
                            .init(value: [0x01]), .init(valueLength: 512, value: Array(longValue.prefix(22 - 3 - 2))),
                        ])))
            ])
        // A dynamic value in the middle is asked of the app, then the response completes.
        let asked = server.received(.readMultipleRequest(.init(setOfHandles: [h(19), h(32), h(24)])), from: c1)
        guard case .readRequest(let id, c1, h(32), 0) = asked.first else {
            Issue.record("expected a read request, got \(asked)")
            return
        }
        #expect(
            server.respond(to: id, result: .success, value: [7, 7]) == [
                .respond(c1, .readMultipleResponse(.init(setOfValues: [0x01, 7, 7, 99])))
            ])
        #expect(server.respond(to: id, result: .success, value: [7, 7]) == [])  // answered already
    }

    @Test func findByTypeValue() throws {
        var server = try server()
        #expect(
            server.received(
                .findByTypeValueRequest(
                    .init(
                        startingHandle: h(1), endingHandle: .max, attributeType: 0x2800,
                        attributeValue: [0x0D, 0x18])), from: c1) == [
                    .respond(
                        c1,
                        .findByTypeValueResponse(
                            .init(handlesInformation: [.init(foundAttributeHandle: h(14), groupEndHandle: h(21))])))
                ])
        // The 16-bit service given in its 128-bit form matches too.
        #expect(
            server.received(
                .findByTypeValueRequest(
                    .init(
                        startingHandle: h(1), endingHandle: .max, attributeType: 0x2800,
                        attributeValue: Array(heartRateUUID.bytes128.reversed()))), from: c1) == [
                    .respond(
                        c1,
                        .findByTypeValueResponse(
                            .init(handlesInformation: [.init(foundAttributeHandle: h(14), groupEndHandle: h(21))])))
                ])
        #expect(
            server.received(
                .findByTypeValueRequest(
                    .init(
                        startingHandle: h(15), endingHandle: .max, attributeType: 0x2800,
                        attributeValue: [0x0D, 0x18])), from: c1)
                == error(.findByTypeValueRequest, 15, .attributeNotFound))
    }

    @Test func writesAndCommands() throws {
        var server = try server()
        // Write Command to a value that cannot be written: nothing at all.
        #expect(
            server.received(.writeCommand(.init(handle: h(19), value: [2])), from: c1) == [
                .writeCommandRefused(c1, attribute: h(19), .writeNotPermitted)
            ])
        #expect(
            server.received(.writeCommand(.init(handle: h(103), value: [2])), from: c1) == [
                .writeCommandRefused(c1, attribute: h(103), .invalidHandle)
            ])
        // Write Command to a dynamic value: the app gets it, with no id to answer.
        #expect(
            server.received(.writeCommand(.init(handle: h(32), value: [2])), from: c1) == [
                .writeRequests(id: nil, connection: c1, [GATTWriteRequest(attribute: h(32), offset: 0, value: [2])])
            ])
        // Write Request to a stored value.
        #expect(
            server.received(.writeRequest(.init(handle: h(28), value: [1, 2, 3])), from: c1) == [
                .valueWritten(c1, attribute: h(28), value: [1, 2, 3]), .respond(c1, .writeResponse(.init())),
            ])
        // A dynamic write the app refuses.
        let asked = server.received(.writeRequest(.init(handle: h(21), value: [1])), from: c1)
        guard case .writeRequests(let id?, c1, _) = asked.first else {
            Issue.record("expected write requests, got \(asked)")
            return
        }
        #expect(server.respond(to: id, result: ATTErrorCode(0x80)) == error(.writeRequest, 21, ATTErrorCode(0x80)))
        // Signed writes are not verified, so they are refused (never answered, but reported to the host to log);
        // other requests are not supported.
        #expect(
            server.received(
                .signedWriteCommand(
                    .init(handle: h(28), value: [1], authenticationSignature: Array(repeating: 0, count: 12))), from: c1
            ) == [.writeCommandRefused(c1, attribute: h(28), .requestNotSupported)])
        #expect(server.received(.handleValueConfirmation(.init()), from: c1) == [])
    }

    @Test func prepareQueueIsBounded() throws {
        var server = try server()
        for offset: UInt16 in [0, 1] {
            #expect(
                server.received(
                    .prepareWriteRequest(.init(handle: h(28), offset: offset, partAttributeValue: [9])), from: c1) == [
                        .respond(
                            c1, .prepareWriteResponse(.init(handle: h(28), offset: offset, partAttributeValue: [9])))
                    ])
        }
        #expect(
            server.received(.prepareWriteRequest(.init(handle: h(28), offset: 2, partAttributeValue: [9])), from: c1)
                == error(.prepareWriteRequest, 28, .prepareQueueFull))
        #expect(
            server.received(.prepareWriteRequest(.init(handle: h(19), offset: 0, partAttributeValue: [9])), from: c1)
                == error(.prepareWriteRequest, 19, .writeNotPermitted))
        // Cancel empties the queue and writes nothing.
        #expect(
            server.received(.executeWriteRequest(.init(flags: .cancel)), from: c1) == [
                .respond(c1, .executeWriteResponse(.init()))
            ])
        #expect(server.database.attribute(at: h(28))?.value == longValue)
        // A part past the end of the value: Invalid Offset at execution.
        _ = server.received(.prepareWriteRequest(.init(handle: h(28), offset: 600, partAttributeValue: [9])), from: c1)
        #expect(
            server.received(.executeWriteRequest(.init(flags: .write)), from: c1)
                == error(.executeWriteRequest, 28, .invalidOffset))
        #expect(
            server.received(.executeWriteRequest(.init(flags: ExecuteFlags(rawValue: 7))), from: c1)
                == error(.executeWriteRequest, 0, .invalidPDU))
    }

    @Test func disconnectForgetsTheClient() throws {
        var server = try server()
        _ = server.received(.writeRequest(.init(handle: h(17), value: [1, 0])), from: c1)
        #expect(server.subscribers(of: h(16)).count == 1)
        server.disconnected(c1)
        #expect(server.subscribers(of: h(16)).isEmpty)
        #expect(server.configuration(of: c1, characteristicValue: h(16)) == [])
    }
}

private typealias ExecuteFlags = ATTPDU.ExecuteWriteRequest.Flags
