import BLEATT
import BLECore
import BLEGATT
import Testing

/// Values longer than an attribute holds (512 octets, Core Spec 5.4, Vol 3, Part F, 3.2.9), from a peer or from
/// the app, end in an error or are cut at 512; nothing traps.
@Suite struct OversizeValueTests {
    let c1 = ConnectionHandle(1)

    func server() throws -> GATTServer {
        var server = GATTServer(database: try testDatabase())
        server.connected(c1)
        return server
    }

    @Test func aPreparedWritePastTheAttributesEndFailsTheQueue() throws {
        var server = try server()
        let dynamic = AttributeHandle(32)
        for (offset, value) in [(UInt16(0), [UInt8](repeating: 1, count: 18)), (UInt16(0xFFF0), [2, 2, 2])] {
            #expect(
                server.received(
                    .prepareWriteRequest(.init(handle: dynamic, offset: offset, partAttributeValue: value)), from: c1)
                    == [
                        .respond(
                            c1, .prepareWriteResponse(.init(handle: dynamic, offset: offset, partAttributeValue: value))
                        )
                    ])
        }
        // Vol 3, Part F, 3.4.6.3: the queue is dropped and the peer told Invalid Attribute Value Length; the app
        // never sees a write.
        #expect(
            server.received(.executeWriteRequest(.init(flags: .write)), from: c1) == [
                .respond(
                    c1,
                    .errorResponse(
                        .init(
                            requestOpcode: .executeWriteRequest, handle: dynamic,
                            errorCode: .invalidAttributeValueLength)))
            ])
    }

    @Test func anAppsAnswerLongerThanAnAttributeIsCutAt512() throws {
        var server = try server()
        let asked = server.received(
            .readMultipleVariableRequest(.init(setOfHandles: [AttributeHandle(19), AttributeHandle(32)])), from: c1)
        guard case .readRequest(let id, _, _, _) = asked.first else {
            Issue.record("expected the app to be asked, got \(asked)")
            return
        }
        let answer = server.respond(to: id, result: .success, value: [UInt8](repeating: 7, count: 70_000))
        #expect(
            answer == [
                .respond(
                    c1,
                    .readMultipleVariableResponse(
                        .init(lengthValueTupleList: [
                            .init(value: [0x01]),
                            .init(valueLength: 512, value: [UInt8](repeating: 7, count: 23 - 1 - 3 - 2)),
                        ])))
            ])
    }

    @Test func anMTUBelowTheMinimumIsTakenAs23() throws {
        var server = try server()
        server.mtuChanged(c1, to: 0)
        let read = server.received(.readRequest(.init(handle: AttributeHandle(28))), from: c1)
        guard case .respond(_, .readResponse(let response)) = read.first else {
            Issue.record("expected a read response, got \(read)")
            return
        }
        #expect(response.value.count == 22)
    }

    @Test func aDeviceNameIsCutToWholeCharactersWithin248Octets() {
        let database = GATTDatabase(deviceName: String(repeating: "é", count: 300))  // 600 octets
        #expect(database.deviceName == String(repeating: "é", count: 124))
        let emoji = GATTDatabase(deviceName: String(repeating: "x", count: 246) + "🙂")  // 250 octets
        #expect(emoji.deviceName == String(repeating: "x", count: 246))
    }
}
