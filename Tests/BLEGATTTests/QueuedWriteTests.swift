import BLEATT
import BLECore
import BLEGATT
import Testing

/// Queued writes (Prepare Write Requests, then Execute Write Request) against stored values: each part lands at
/// its offset over the current value, in the order queued, across handles; an offset past the end, or a value
/// over 512 octets, refuses the whole queue at Execute and writes nothing; Execute with flags 0x00 cancels.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.6.1-3.4.6.4; Part G, 4.9.4-4.9.5.
@Suite struct QueuedWriteTests {
    let c1 = ConnectionHandle(1)
    let ten: [UInt8] = Array(0...9)

    /// A server with two writable stored values: A (00 01 ... 09) and B (AA BB CC DD); their value handles.
    func server() throws -> (GATTServer, a: AttributeHandle, b: AttributeHandle) {
        var database = GATTDatabase(deviceName: "queued")
        let layout = try database.add(
            GATTServiceDefinition(
                uuid: BluetoothUUID("0000FF00-0000-1000-8000-00805F9B34FB"),
                characteristics: [
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID("0000FF03-0000-1000-8000-00805F9B34FB"), properties: [.read, .write],
                        permissions: [.readable, .writeable], value: ten),
                    GATTCharacteristicDefinition(
                        uuid: BluetoothUUID("0000FF04-0000-1000-8000-00805F9B34FB"), properties: [.read, .write],
                        permissions: [.readable, .writeable], value: [0xAA, 0xBB, 0xCC, 0xDD]),
                ]))
        var server = GATTServer(database: database)
        server.connected(c1)
        return (
            server, layout.characteristics[0].characteristic.valueHandle,
            layout.characteristics[1].characteristic.valueHandle
        )
    }

    /// Queues the parts (each answered by its echo) and executes with `flags`; the server's answer to Execute.
    func queue(
        _ parts: [(AttributeHandle, UInt16, [UInt8])], on server: inout GATTServer,
        flags: ATTPDU.ExecuteWriteRequest.Flags = .write
    ) -> [GATTServer.Action] {
        for (handle, offset, value) in parts {
            let echo = server.received(
                .prepareWriteRequest(.init(handle: handle, offset: offset, partAttributeValue: value)), from: c1)
            #expect(
                echo == [
                    .respond(
                        c1, .prepareWriteResponse(.init(handle: handle, offset: offset, partAttributeValue: value)))
                ])
        }
        return server.received(.executeWriteRequest(.init(flags: flags)), from: c1)
    }

    func refusal(_ handle: AttributeHandle, _ code: ATTErrorCode) -> [GATTServer.Action] {
        [.respond(c1, .errorResponse(.init(requestOpcode: .executeWriteRequest, handle: handle, errorCode: code)))]
    }

    @Test func aPartInsideTheValueKeepsTheOctetsAroundIt() throws {
        var (server, a, _) = try server()
        let answer = queue([(a, 5, [0xFF, 0xFF])], on: &server)
        let written: [UInt8] = [0, 1, 2, 3, 4, 0xFF, 0xFF, 7, 8, 9]
        #expect(
            answer == [.valueWritten(c1, attribute: a, value: written), .respond(c1, .executeWriteResponse(.init()))])
        #expect(server.database.attribute(at: a)?.value == written)
    }

    @Test func aPartAtTheEndExtendsTheValueAndOnePastItIsRefused() throws {
        var (server, a, _) = try server()
        _ = queue([(a, 10, [0xEE])], on: &server)
        #expect(server.database.attribute(at: a)?.value == ten + [0xEE])
        // Now 11 octets long: offset 12 would leave octet 11 undefined.
        #expect(queue([(a, 12, [0xAA])], on: &server) == refusal(a, .invalidOffset))
        #expect(server.database.attribute(at: a)?.value == ten + [0xEE])
    }

    @Test func partsApplyInTheOrderQueuedAcrossHandles() throws {
        var (server, a, b) = try server()
        // B's first part is in the middle: its head and tail stay. A's second part overlaps its first and wins.
        let answer = queue([(a, 2, [0x20, 0x21, 0x22]), (b, 1, [0x11]), (a, 3, [0x31])], on: &server)
        let newA: [UInt8] = [0, 1, 0x20, 0x31, 0x22, 5, 6, 7, 8, 9]
        let newB: [UInt8] = [0xAA, 0x11, 0xCC, 0xDD]
        #expect(
            answer == [
                .valueWritten(c1, attribute: a, value: newA), .valueWritten(c1, attribute: b, value: newB),
                .respond(c1, .executeWriteResponse(.init())),
            ])
        #expect(server.database.attribute(at: a)?.value == newA)
        #expect(server.database.attribute(at: b)?.value == newB)
    }

    @Test func aLongWriteFromOffsetZeroIsTheWholeNewValue() throws {
        var (server, a, _) = try server()
        // Shorter than the old value: nothing of the old one is left after it, as after a Write Request.
        _ = queue([(a, 0, [0x50, 0x51]), (a, 2, [0x52])], on: &server)
        #expect(server.database.attribute(at: a)?.value == [0x50, 0x51, 0x52])
    }

    @Test func anyPartRefusedLeavesEveryValueAsItWas() throws {
        var (server, a, b) = try server()
        // B's part is fine, A's lies past A's end: nothing is written, B included.
        #expect(queue([(b, 0, [1]), (a, 11, [2])], on: &server) == refusal(a, .invalidOffset))
        #expect(server.database.attribute(at: a)?.value == ten)
        #expect(server.database.attribute(at: b)?.value == [0xAA, 0xBB, 0xCC, 0xDD])
        // Parts that together pass 512 octets: Invalid Attribute Value Length at Execute, and nothing written.
        let parts: [(AttributeHandle, UInt16, [UInt8])] = stride(from: 0, to: 520, by: 20).map {
            (a, UInt16($0), [UInt8](repeating: 7, count: 20))
        }
        var big = GATTServer(database: server.database, maximumPrepareQueueLength: 64)
        big.connected(c1)
        #expect(queue(parts, on: &big) == refusal(a, .invalidAttributeValueLength))
        #expect(big.database.attribute(at: a)?.value == ten)
        // Exactly 512 is allowed.
        let full: [(AttributeHandle, UInt16, [UInt8])] = stride(from: 0, to: 512, by: 16).map {
            (a, UInt16($0), [UInt8](repeating: 8, count: 16))
        }
        _ = queue(full, on: &big)
        #expect(big.database.attribute(at: a)?.value == [UInt8](repeating: 8, count: 512))
    }

    @Test func executeWithFlagsZeroCancelsAndTheQueueIsGone() throws {
        var (server, a, _) = try server()
        #expect(queue([(a, 0, [0xCA])], on: &server, flags: .cancel) == [.respond(c1, .executeWriteResponse(.init()))])
        #expect(server.database.attribute(at: a)?.value == ten)
        // The cancelled part is not applied by a later Execute either.
        #expect(
            server.received(.executeWriteRequest(.init(flags: .write)), from: c1) == [
                .respond(c1, .executeWriteResponse(.init()))
            ])
        #expect(server.database.attribute(at: a)?.value == ten)
    }

    @Test(arguments: [
        // (current, parts, expected value or error)
        ([UInt8](0...9), [(5, [0xFF, 0xFF] as [UInt8])], [0, 1, 2, 3, 4, 0xFF, 0xFF, 7, 8, 9] as [UInt8]?),
        ([0, 1, 2], [(3, [9])], [0, 1, 2, 9]),
        ([0, 1, 2], [(4, [9])], nil),
        ([0, 1, 2], [(0, [7])], [7]),
        ([], [(0, [1, 2]), (2, [3])], [1, 2, 3]),
        ([], [(1, [1])], nil),
        ([0, 1, 2, 3, 4, 5], [(0, [9]), (4, [8])], [9, 1, 2, 3, 8]),
    ])
    func theRuleOverBytes(current: [UInt8], parts: [(Int, [UInt8])], expected: [UInt8]?) {
        let result = GATTQueuedWrites.value(applying: parts.map { (offset: $0.0, value: $0.1) }, to: current)
        switch result {
        case .success(let value): #expect(value == expected)
        case .failure(let refusal):
            #expect(expected == nil)
            #expect(refusal.code == .invalidOffset)
        }
    }
}
