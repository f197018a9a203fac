import BLEATT
import BLECore
import BLEGATT
import NIOCore
import Testing

/// Arbitrary and mutated requests into the GATT server, and arbitrary and mutated responses into every client
/// procedure: no trap, every request answered exactly once, every procedure finishing in bounded steps.
@Suite struct GATTRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
        /// A handle that mostly lands in the test database (1...30), sometimes at its edges.
        mutating func handle() -> AttributeHandle {
            switch below(10) {
            case 0: return AttributeHandle(0)
            case 1: return .max
            case 2: return AttributeHandle(UInt16(below(0x10000)))
            default: return AttributeHandle(UInt16(below(34)))
            }
        }
        mutating func uuid() -> BluetoothUUID {
            let known: [BluetoothUUID] = [
                .primaryService, .secondaryService, .include, .characteristicDeclaration,
                .clientCharacteristicConfiguration, .heartRate, .bodySensorLocation,
                longValueUUID, dynamicUUID, secretUUID, customServiceUUID,
            ]
            if chance(80) { return known[below(known.count)] }
            return chance(50) ? BluetoothUUID(UInt16(below(0x10000))) : BluetoothUUID(bytes128: bytes(16))
        }
        mutating func value() -> [UInt8] {
            switch below(10) {
            case 0: return bytes(below(600))
            case 1, 2: return [UInt8(below(4)), 0]  // CCCD-shaped
            default: return bytes(below(24))
            }
        }
        /// An error code: mostly Attribute Not Found (the normal end of a discovery), else any.
        mutating func errorCode() -> ATTErrorCode { chance(50) ? .attributeNotFound : ATTErrorCode(rawValue: next()) }
    }

    static let c1 = ConnectionHandle(1), c2 = ConnectionHandle(2), c3 = ConnectionHandle(3)

    /// A well-formed request (or command) of a random kind aimed mostly at real attributes.
    static func structuredRequest(_ g: inout Generator) -> ATTPDU {
        switch g.below(14) {
        case 0: return .readRequest(.init(handle: g.handle()))
        case 1:
            return .readBlobRequest(
                .init(handle: g.handle(), offset: UInt16(g.chance(80) ? g.below(600) : g.below(0x10000))))
        case 2:
            return .readByTypeRequest(
                .init(startingHandle: g.handle(), endingHandle: g.handle(), attributeType: g.uuid()))
        case 3:
            return .readByGroupTypeRequest(
                .init(
                    startingHandle: g.handle(), endingHandle: g.handle(),
                    attributeGroupType: g.uuid()))
        case 4: return .findInformationRequest(.init(startingHandle: g.handle(), endingHandle: g.handle()))
        case 5:
            return .findByTypeValueRequest(
                .init(
                    startingHandle: g.handle(), endingHandle: g.handle(),
                    attributeType: g.uuid().uint16 ?? 0x2800,
                    attributeValue: g.chance(50) ? g.uuid().attWireBytes : g.value()))
        case 6: return .readMultipleRequest(.init(setOfHandles: (0..<(2 + g.below(5))).map { _ in g.handle() }))
        case 7: return .readMultipleVariableRequest(.init(setOfHandles: (0..<(2 + g.below(5))).map { _ in g.handle() }))
        case 8: return .writeRequest(.init(handle: g.handle(), value: g.value()))
        case 9: return .writeCommand(.init(handle: g.handle(), value: g.value()))
        case 10, 11:
            return .prepareWriteRequest(
                .init(
                    handle: g.handle(), offset: UInt16(g.below(g.chance(80) ? 600 : 0x10000)),
                    partAttributeValue: g.bytes(g.below(30))))
        case 12: return .executeWriteRequest(.init(flags: .init(rawValue: g.chance(80) ? UInt8(g.below(2)) : g.next())))
        default:
            return .signedWriteCommand(
                .init(handle: g.handle(), value: g.bytes(g.below(8)), authenticationSignature: g.bytes(12)))
        }
    }

    /// Flips, replaces, cuts or extends the bytes of a PDU.
    static func mutate(_ bytes: [UInt8], _ g: inout Generator) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<(1 + g.below(3)) {
            switch g.below(4) {
            case 0: bytes[g.below(bytes.count)] ^= 1 << (g.next() % 8)
            case 1: bytes[g.below(bytes.count)] = g.next()
            case 2 where bytes.count > 1: bytes.removeLast(g.below(bytes.count - 1) + 1)
            default: bytes += g.bytes(1 + g.below(3))
            }
        }
        return bytes
    }

    /// A request PDU as a peer's bearer would hand it up: structured, mutated, or random bytes that decode.
    static func peerRequest(_ g: inout Generator) -> ATTPDU? {
        let bytes: [UInt8]
        switch g.below(3) {
        case 0: return structuredRequest(&g)
        case 1: bytes = mutate(structuredRequest(&g).bytes, &g)
        default:
            bytes =
                [[0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20, 0x52, 0xD2, 0x7F][g.below(14)]]
                + g.bytes(g.below(30))
        }
        guard let pdu = try? ATTPDU(bytes: bytes), pdu.opcode.kind == .request || pdu.opcode.kind == .command else {
            return nil
        }
        return pdu
    }

    /// Plays the app: answers every question the server asks at once (mostly success, sometimes an error),
    /// and returns the ATT responses the server produced, by connection.
    static func runApp(_ server: inout GATTServer, _ actions: [GATTServer.Action], _ g: inout Generator)
        -> [(ConnectionHandle, ATTPDU)]
    {
        var responses: [(ConnectionHandle, ATTPDU)] = []
        var work = actions
        while !work.isEmpty {
            let action = work.removeFirst()
            switch action {
            case .respond(let connection, let pdu):
                responses.append((connection, pdu))
            case .readRequest(let id, _, _, _):
                work +=
                    g.chance(80)
                    ? server.respond(to: id, result: .success, value: g.value())
                    : server.respond(to: id, result: ATTErrorCode(rawValue: g.next()))
                #expect(server.respond(to: id, result: .success).isEmpty, "answered twice")
            case .writeRequests(let id, _, let writes):
                #expect(!writes.isEmpty)
                if let id {
                    work += server.respond(to: id, result: g.chance(80) ? .success : ATTErrorCode(rawValue: g.next()))
                }
            case .subscriptionChanged, .valueWritten, .writeCommandRefused:
                break
            }
        }
        return responses
    }

    /// Checks the answers to one request: exactly one, to the right connection, of the right kind, within the
    /// connection's ATT_MTU; none for a command.
    static func checkAnswers(
        _ responses: [(ConnectionHandle, ATTPDU)], to request: ATTPDU, on connection: ConnectionHandle,
        mtu: UInt16
    ) {
        guard request.opcode.kind == .request else {
            #expect(responses.isEmpty, "a command was answered: \(request)")
            return
        }
        #expect(responses.count == 1, "\(request) got \(responses.count) answers")
        for (to, response) in responses {
            #expect(to == connection)
            // A Prepare Write Response echoes the request's part, so it is as long as the request. Requests
            // longer than ATT_MTU never reach the server: the bearer answers them Invalid PDU (ATTBearerTests).
            if request.encodedLength <= Int(mtu) {
                #expect(response.encodedLength <= Int(mtu), "\(response) exceeds ATT_MTU \(mtu)")
            }
            #expect((try? ATTPDU(buffer: response.encoded())) == response, "\(response) does not survive the wire")
            if case .errorResponse(let error) = response {
                #expect(error.requestOpcode == request.opcode)
            } else {
                #expect(response.opcode == request.opcode.responseOpcode, "\(response) answers \(request)")
            }
        }
    }

    // MARK: - Server

    @Test func randomRequestsAreAnsweredExactlyOnce() throws {
        var g = Generator(seed: 0x5E7)
        var server = GATTServer(database: try testDatabase(), maximumPrepareQueueLength: 8)
        let connections = [Self.c1, Self.c2, Self.c3]
        for c in connections { server.connected(c) }
        server.mtuChanged(Self.c2, to: 517)
        server.mtuChanged(Self.c3, to: 48)
        server.encryptionChanged(Self.c3, isEncrypted: true)
        for _ in 0..<4000 {
            if g.chance(1) {
                // A client goes and comes back: its state starts over.
                let c = connections[g.below(connections.count)]
                server.disconnected(c)
                server.connected(c)
                if c == Self.c2 { server.mtuChanged(c, to: 517) }
            }
            guard let request = Self.peerRequest(&g) else { continue }
            let connection = connections[g.below(connections.count)]
            let mtu = server.mtu(of: connection)
            let responses = Self.runApp(&server, server.received(request, from: connection), &g)
            Self.checkAnswers(responses, to: request, on: connection, mtu: mtu)
        }
        // After all that, well-formed requests still get their usual answers.
        #expect(
            server.received(.readRequest(.init(handle: AttributeHandle(19))), from: Self.c1)
                == [.respond(Self.c1, .readResponse(.init(value: [0x01])))])
        #expect(
            server.received(
                .readByGroupTypeRequest(
                    .init(
                        startingHandle: AttributeHandle(1), endingHandle: .max,
                        attributeGroupType: .primaryService)), from: Self.c1) == [
                    .respond(
                        Self.c1,
                        .readByGroupTypeResponse(
                            .init(attributeData: [
                                .init(
                                    handle: AttributeHandle(1), endGroupHandle: AttributeHandle(5), value: [0x00, 0x18]),
                                .init(
                                    handle: AttributeHandle(6), endGroupHandle: AttributeHandle(13),
                                    value: [0x01, 0x18]),
                                .init(
                                    handle: AttributeHandle(14), endGroupHandle: AttributeHandle(21),
                                    value: [0x0D, 0x18]),
                            ])))
                ])
    }

    /// App answers that arrive late, twice, or after the client left do nothing.
    @Test func lateAndUnknownAppAnswersAreIgnored() throws {
        var g = Generator(seed: 0x1A7E)
        var server = GATTServer(database: try testDatabase())
        server.connected(Self.c1)
        var asked: [GATTServerRequestID] = []
        for _ in 0..<300 {
            guard let request = Self.peerRequest(&g) else { continue }
            for action in server.received(request, from: Self.c1) {
                if case .readRequest(let id, _, _, _) = action { asked.append(id) }
                if case .writeRequests(let id?, _, _) = action { asked.append(id) }
            }
        }
        #expect(!asked.isEmpty)
        server.disconnected(Self.c1)
        for id in asked { #expect(server.respond(to: id, result: .success, value: [1]).isEmpty) }
        #expect(server.respond(to: GATTServerRequestID(rawValue: 0xDEAD), result: .success).isEmpty)
    }

    // MARK: - Client procedures

    /// Every operation a client can run against the test database (handles as its layout puts them).
    static let operations: [GATTOperation] = {
        let heartRate = GATTService(
            uuid: heartRateUUID, isPrimary: true,
            handleRange: AttributeHandle(14)...AttributeHandle(21))
        let custom = GATTService(
            uuid: customServiceUUID, isPrimary: true,
            handleRange: AttributeHandle(25)...AttributeHandle(34))
        let whole = GATTService(
            uuid: customServiceUUID, isPrimary: true, handleRange: AttributeHandle(1)...AttributeHandle.max)
        let long = GATTCharacteristic(
            uuid: longValueUUID, properties: [.read, .write, .indicate],
            declarationHandle: AttributeHandle(27), valueHandle: AttributeHandle(28),
            endHandle: AttributeHandle(30))
        let open = GATTCharacteristic(
            uuid: longValueUUID, properties: [.read], declarationHandle: AttributeHandle(1),
            valueHandle: AttributeHandle(2), endHandle: .max)
        return [
            .exchangeMTU(clientRxMTU: 517), .exchangeMTU(clientRxMTU: 23),
            .discoverAllPrimaryServices, .discoverPrimaryServices(uuid: heartRateUUID),
            .discoverPrimaryServices(uuid: customServiceUUID),
            .findIncludedServices(custom), .findIncludedServices(whole),
            .discoverCharacteristics(heartRate, uuid: nil), .discoverCharacteristics(custom, uuid: dynamicUUID),
            .discoverCharacteristics(whole, uuid: nil),
            .discoverDescriptors(long), .discoverDescriptors(open),
            .read(AttributeHandle(19)), .read(AttributeHandle(28)), .read(AttributeHandle(3)),
            .write(AttributeHandle(31), value: [1, 2, 3]), .write(AttributeHandle(28), value: longValue),
            .setClientConfiguration(descriptor: AttributeHandle(29), [.indication]),
        ]
    }()

    /// A response to `request`: the real server's answer, that answer damaged, random bytes, or a failure.
    /// Damaged or random bytes that no longer decode come back as the bearer would report them.
    static func response(to request: ATTPDU, _ server: inout GATTServer, _ g: inout Generator)
        -> Result<ATTPDU, ATTRequestFailure>
    {
        let choice = g.below(100)
        if choice < 15 {
            let failures: [ATTRequestFailure] = [
                .errorResponse(.init(requestOpcode: request.opcode, handle: g.handle(), errorCode: g.errorCode())),
                .errorResponse(.init(requestOpcode: request.opcode, handle: g.handle(), errorCode: g.errorCode())),
                .disconnected, .bearerClosed(ATTError(.transactionTimeout)), .rejected(ATTError(.exceedsMTU)),
            ]
            return .failure(failures[g.below(failures.count)])
        }
        var bytes: [UInt8]
        if choice < 75 {
            let answers = runApp(&server, server.received(request, from: c1), &g)
            guard let answer = answers.first?.1 else { return .failure(.disconnected) }
            bytes = answer.bytes
            if choice >= 45 { bytes = mutate(bytes, &g) }
        } else {
            let opcode = g.chance(70) ? (request.opcode.responseOpcode ?? .errorResponse).rawValue : g.next()
            bytes = [opcode] + g.bytes(g.below(40))
        }
        guard let pdu = try? ATTPDU(bytes: bytes) else {
            return .failure(.bearerClosed(ATTError(.protocolViolation)))
        }
        if case .errorResponse(let error) = pdu { return .failure(.errorResponse(error)) }
        return .success(pdu)
    }

    /// How far a search request reaches: its starting handle (or a blob/prepare offset), which must grow
    /// from one request to the next of the same kind, or the procedure could loop.
    static func progressKey(_ pdu: ATTPDU) -> Int? {
        switch pdu {
        case .readByTypeRequest(let r): return Int(r.startingHandle.rawValue)
        case .readByGroupTypeRequest(let r): return Int(r.startingHandle.rawValue)
        case .findInformationRequest(let r): return Int(r.startingHandle.rawValue)
        case .findByTypeValueRequest(let r): return Int(r.startingHandle.rawValue)
        case .readBlobRequest(let r): return Int(r.offset)
        case .prepareWriteRequest(let r): return Int(r.offset)
        default: return nil
        }
    }

    /// Each procedure, stepped by hand and fed random and damaged responses of any kind, finishes within a
    /// bounded number of steps, and its searches only move forward.
    @Test(arguments: operations.indices)
    func proceduresFedRandomResponsesFinish(_ index: Int) throws {
        let operation = Self.operations[index]
        var g = Generator(seed: 0x57E9 &+ UInt64(index) &* 7919)
        for round in 0..<60 {
            var server = GATTServer(database: try testDatabase())
            server.connected(Self.c1)
            let mtu: UInt16 = [23, 23, 48, 185, 517][g.below(5)]
            server.mtuChanged(Self.c1, to: mtu)
            var procedure = operation.procedure
            var step = procedure.start(mtu: mtu)
            var last: (ATTOpcode, Int)?
            var steps = 0
            while case .send(let request) = step {
                steps += 1
                guard steps <= 600 else { break }
                #expect(request.encodedLength <= Int(mtu), "\(operation) round \(round): \(request) exceeds the MTU")
                if let key = Self.progressKey(request) {
                    if let (opcode, previous) = last, opcode == request.opcode {
                        #expect(key > previous, "\(operation) round \(round): \(request) does not move forward")
                    }
                    last = (request.opcode, key)
                }
                step = procedure.received(Self.response(to: request, &server, &g), mtu: mtu)
            }
            #expect(steps <= 600, "\(operation) round \(round) still running after 600 steps")
        }
    }

    /// The same through a ``GATTClient`` and a real client ``ATTBearer``, which filters what reaches the
    /// procedures: every operation completes exactly once, and after a closed bearer the client is told.
    @Test func clientOverABearerAlwaysCompletes() throws {
        var g = Generator(seed: 0xC11E)
        for round in 0..<300 {
            var server = GATTServer(database: try testDatabase())
            server.connected(Self.c1)
            var bearer = ATTBearer()
            var client = GATTClient()
            var completions: [GATTOperationID: Result<GATTResult, GATTError>] = [:]
            /// The request the bearer last put on the wire: the one outstanding while it has any.
            var current: ATTPDU?
            func perform(_ actions: [GATTClient.Action]) {
                for action in actions {
                    switch action {
                    case .sendRequest(let pdu, let id):
                        for b in bearer.sendRequest(pdu, id: id) {
                            switch b {
                            case .send: current = pdu
                            case .complete(let id, let result): perform(client.requestCompleted(id, result))
                            default: break
                            }
                        }
                    case .complete(let id, let result):
                        #expect(completions[id] == nil, "round \(round): \(id) completed twice")
                        completions[id] = result
                    }
                }
            }
            func deliver(_ actions: [ATTBearer.Action]) {
                for b in actions {
                    switch b {
                    case .send(let bytes):
                        // The bearer's own answers (confirmations, error responses) go to the peer; requests
                        // it sends on the client's behalf become the outstanding one.
                        if let pdu = try? ATTPDU(buffer: bytes), pdu.opcode.kind == .request { current = pdu }
                    case .complete(let id, let result): perform(client.requestCompleted(id, result))
                    case .mtuChanged(let mtu): client.mtuChanged(mtu)
                    default: break
                    }
                }
            }
            let count = 1 + g.below(3)
            for n in 0..<count {
                let operation = Self.operations[g.below(Self.operations.count)]
                perform(client.start(operation, id: GATTOperationID(UInt64(n))))
            }
            var steps = 0
            while bearer.hasPendingRequests, let request = current, steps < 2000 {
                steps += 1
                let bytes: [UInt8]
                switch Self.response(to: request, &server, &g) {
                case .success(let pdu): bytes = g.chance(10) ? Self.mutate(pdu.bytes, &g) : pdu.bytes
                case .failure(.errorResponse(let error)): bytes = ATTPDU.errorResponse(error).bytes
                case .failure: bytes = [g.next()] + g.bytes(g.below(8))
                }
                deliver(bearer.received(ByteBuffer(bytes: bytes)))
            }
            if !bearer.isOpen {
                // The bearer failed its pending request; what is still queued in the client fails on its next
                // request, which the closed bearer refuses at once.
                #expect(completions.count == count, "round \(round): \(count - completions.count) operations hang")
            } else {
                #expect(steps < 2000)
                #expect(completions.count == count, "round \(round): \(completions.count) of \(count) completed")
            }
            #expect(!client.isBusy)
        }
    }
}

/// Regression: a server listing characteristic declarations out of handle order (found by the robustness
/// suite) must not yield a characteristic whose end lies before its own value.
@Test func outOfOrderCharacteristicDeclarationsAreOrdered() {
    let service = GATTService(
        uuid: .heartRate, isPrimary: true, handleRange: AttributeHandle(0x14)...AttributeHandle(0x34))
    var procedure = GATTDiscoverCharacteristics(service: service)
    _ = procedure.start(mtu: 23)
    let response = ATTPDU.readByTypeResponse(
        .init(attributeData: [
            .init(handle: AttributeHandle(0x24), value: [0x02, 0x21, 0x00, 0x38, 0x2A]),  // read, value 0x21, 2A38
            .init(handle: AttributeHandle(0x1c), value: [0x10, 0x19, 0x00, 0x37, 0x2A]),  // notify, value 0x19, 2A37
        ]))
    guard case .send = procedure.received(.success(response), mtu: 23) else {
        Issue.record("the procedure should ask for the rest of the service")
        return
    }
    let done = ATTRequestFailure.errorResponse(
        .init(
            requestOpcode: .readByTypeRequest, handle: AttributeHandle(0x25),
            errorCode: .attributeNotFound))
    guard case .finished(.success(.characteristics(let found))) = procedure.received(.failure(done), mtu: 23) else {
        Issue.record("the procedure should finish with the characteristics")
        return
    }
    #expect(found.map(\.uuid) == [.heartRateMeasurement, .bodySensorLocation])
    #expect(found.map(\.endHandle) == [AttributeHandle(0x23), AttributeHandle(0x34)])
    #expect(found.allSatisfy { $0.valueHandle <= $0.endHandle })
}
