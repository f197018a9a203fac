import BLEATT
import BLECore
import BLEGATT
import NIOCore

extension FuzzTarget {
    /// Responses from a peer server into the GATT client: the first octet picks how. Even: one procedure
    /// stepped by hand, each of its requests answered from the input (the small database's real answer, that
    /// answer damaged, any PDU, or a failure); its requests fit the ATT_MTU, its searches only move forward,
    /// and it finishes. Odd: up to three operations through a `GATTClient` over a client `ATTBearer`, the
    /// bearer fed response bytes and timeouts, then the link lost; each operation completes exactly once.
    static let gattClient = FuzzTarget("gatt-client", "ATT responses into GATT procedures and a GATTClient") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        if reader.bool() {
            try clientOverBearer(&reader)
        } else {
            try steppedProcedure(&reader)
        }
    }

    private static func steppedProcedure(_ reader: inout FuzzInput) throws(Violation) {
        let mtu = [23, 23, 48, 185, 517][reader.below(5)] as UInt16
        var peer = ServerPeer(mtu: mtu)
        let operation = operation(&reader)
        var procedure = operation.procedure
        var step = procedure.start(mtu: mtu)
        var last: (ATTOpcode, Int)?
        var steps = 0
        while case .send(let request) = step {
            try expect(request.encodedLength <= Int(mtu), "\(operation): \(request) exceeds ATT_MTU \(mtu)")
            if let key = progress(of: request) {
                if let (opcode, previous) = last, opcode == request.opcode {
                    try expect(key > previous, "\(operation): \(request) does not move forward")
                }
                last = (request.opcode, key)
            }
            // A procedure that still asks when the input is spent is left there; one that loops is caught above.
            steps += 1
            guard !reader.isEmpty, steps < 10_000 else { return }
            step = procedure.received(peer.answer(request, &reader), mtu: mtu)
        }
    }

    private static func clientOverBearer(_ reader: inout FuzzInput) throws(Violation) {
        var peer = ServerPeer(mtu: ATTBearer.maximumMTU)
        var link = ClientLink()
        let count = 1 + reader.below(3)
        for n in 0..<count {
            try link.perform(link.client.start(operation(&reader), id: GATTOperationID(UInt64(n))))
        }
        link.started = count
        while !reader.isEmpty, link.bearer.hasPendingRequests {
            switch reader.below(16) {
            case 0:
                try link.deliver(link.bearer.timerFired(.transaction))
            default:
                guard let request = link.outstanding else { return }
                let bytes: [UInt8]
                switch peer.answer(request, &reader) {
                case .success(let pdu): bytes = pdu.bytes
                case .failure(.errorResponse(let error)): bytes = ATTPDU.errorResponse(error).bytes
                case .failure: bytes = reader.chunk()
                }
                try link.deliver(link.bearer.received(ByteBuffer(bytes: bytes)))
            }
        }
        // The link goes: whatever is still running or queued fails, once.
        try link.deliver(link.bearer.linkDisconnected())
        try link.perform(link.client.linkDisconnected())
        try expect(link.completions.count == count, "\(count - link.completions.count) operations never completed")
        try expect(!link.client.isBusy, "the client is still busy after the link went")
    }

    /// How far a search reaches: its starting handle (or a blob or prepare offset), which must grow from one
    /// request to the next of the same kind, or the procedure could loop.
    private static func progress(of pdu: ATTPDU) -> Int? {
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

    /// An operation on handles and UUIDs from the input (mostly inside the small database).
    private static func operation(_ reader: inout FuzzInput) -> GATTOperation {
        func handle() -> AttributeHandle {
            reader.below(4) == 0 ? AttributeHandle(reader.uint16()) : AttributeHandle(UInt16(reader.below(40)))
        }
        func uuid() -> BluetoothUUID {
            let known: [BluetoothUUID] = [
                .heartRate, .heartRateMeasurement, .bodySensorLocation, .batteryLevel,
                "6E400001-B5A3-F393-E0A9-E50E24DCCA9E", "6E400002-B5A3-F393-E0A9-E50E24DCCA9E",
            ]
            return reader.below(4) == 0 ? BluetoothUUID(reader.uint16()) : known[reader.below(known.count)]
        }
        func range() -> ClosedRange<AttributeHandle> {
            let (a, b) = (handle(), handle())
            return min(a, b)...max(a, b)
        }
        switch reader.below(11) {
        case 0: return .exchangeMTU(clientRxMTU: ATTBearer.defaultMTU + reader.uint16() % 600)
        case 1: return .discoverAllPrimaryServices
        case 2: return .discoverPrimaryServices(uuid: uuid())
        case 3: return .findIncludedServices(GATTService(uuid: uuid(), isPrimary: true, handleRange: range()))
        case 4:
            let service = GATTService(uuid: uuid(), isPrimary: true, handleRange: range())
            return .discoverCharacteristics(service, uuid: reader.bool() ? uuid() : nil)
        case 5:
            let declaration = AttributeHandle(UInt16(reader.below(40)))
            let value = AttributeHandle(declaration.rawValue + 1)
            let end = max(value, handle())
            return .discoverDescriptors(
                GATTCharacteristic(
                    uuid: uuid(), properties: GATTCharacteristicProperties(rawValue: reader.byte()),
                    declarationHandle: declaration, valueHandle: value, endHandle: end))
        case 6: return .readUsingCharacteristicUUID(uuid(), range: range())
        case 7: return .write(handle(), value: reader.chunk())
        case 8: return .setClientConfiguration(descriptor: handle(), GATTClientConfiguration(rawValue: reader.uint16()))
        default: return .read(handle())
        }
    }
}

/// The peer server as the input plays it: a request answered with the small database's real answer, that
/// answer with one octet changed, any PDU, an Error Response, or a failure of the link or bearer. Bytes that
/// do not decode come back as the bearer reports them (a protocol violation closes it).
struct ServerPeer {
    var server = GATTServer(database: FuzzTarget.fuzzDatabase)
    let connection = ConnectionHandle(1)

    init(mtu: UInt16) {
        server.connected(connection)
        server.mtuChanged(connection, to: mtu)
    }

    mutating func answer(_ request: ATTPDU, _ reader: inout FuzzInput) -> Result<ATTPDU, ATTRequestFailure> {
        var bytes: [UInt8]
        switch reader.below(8) {
        case 0:
            return .failure(
                .errorResponse(
                    .init(
                        requestOpcode: request.opcode, handle: AttributeHandle(reader.uint16()),
                        errorCode: ATTErrorCode(rawValue: reader.byte()))))
        case 1:
            let failures: [ATTRequestFailure] = [
                .disconnected, .bearerClosed(ATTError(.transactionTimeout)), .rejected(ATTError(.exceedsMTU)),
            ]
            return .failure(failures[reader.below(failures.count)])
        case 2:
            bytes = reader.chunk()
        default:
            bytes = realAnswer(request)
            if reader.bool(), !bytes.isEmpty {
                bytes[reader.below(bytes.count)] = reader.byte()
            }
        }
        guard let pdu = try? ATTPDU(bytes: bytes) else {
            return .failure(.bearerClosed(ATTError(.protocolViolation)))
        }
        if case .errorResponse(let error) = pdu { return .failure(.errorResponse(error)) }
        return .success(pdu)
    }

    /// The server's answer, with the app giving dynamic values a fixed value and accepting writes.
    private mutating func realAnswer(_ request: ATTPDU) -> [UInt8] {
        var work = server.received(request, from: connection)[...]
        while let action = work.popFirst() {
            switch action {
            case .respond(_, let pdu): return pdu.bytes
            case .readRequest(let id, _, _, let offset):
                let value = Array("a dynamic value, long enough to need a blob read or two".utf8)
                work += server.respond(to: id, result: .success, value: Array(value.dropFirst(offset)))
            case .writeRequests(let id?, _, _): work += server.respond(to: id, result: .success)
            case .writeRequests(nil, _, _), .subscriptionChanged, .valueWritten, .writeCommandRefused: break
            }
        }
        return [ATTOpcode.errorResponse.rawValue, request.opcode.rawValue, 0, 0, ATTErrorCode.unlikelyError.rawValue]
    }
}

/// A `GATTClient` over its link's client `ATTBearer`, wired as the host wires them, counting completions.
struct ClientLink {
    var bearer = ATTBearer()
    var client = GATTClient()
    var completions: Set<GATTOperationID> = []
    var started = 0
    /// The request the bearer last put on the wire: the one outstanding while it has any.
    var outstanding: ATTPDU?

    mutating func perform(_ actions: [GATTClient.Action]) throws(FuzzTarget.Violation) {
        for action in actions {
            switch action {
            case .sendRequest(let pdu, let id):
                try deliver(bearer.sendRequest(pdu, id: id), sending: pdu)
            case .complete(let id, _):
                try expect(completions.insert(id).inserted, "\(id) completed twice")
            }
        }
    }

    mutating func deliver(_ actions: [ATTBearer.Action], sending request: ATTPDU? = nil) throws(FuzzTarget.Violation) {
        for action in actions {
            switch action {
            case .send(let bytes):
                if let request {
                    outstanding = request
                } else if let pdu = try? ATTPDU(buffer: bytes), pdu.opcode.kind == .request {
                    outstanding = pdu
                }
            case .complete(let id, let result): try perform(client.requestCompleted(id, result))
            case .mtuChanged(let mtu): client.mtuChanged(mtu)
            default: break
            }
        }
    }
}
