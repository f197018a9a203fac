import BLEATT
import BLECore
import NIOCore

extension FuzzTarget {
    /// SDUs from the peer into `ATTPDU` and into one link's `ATTBearer`, which plays client and server at once,
    /// between its own requests, indications, answers, timeouts and a disconnection. Whatever decodes
    /// re-encodes to the same PDU; every transaction completes exactly once; what the bearer sends decodes; an
    /// SDU read in place (`received(bytes:)`) acts as the same SDU in a buffer.
    static let att = FuzzTarget("att", "ATT PDUs into ATTPDU and an ATTBearer in both roles") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        var link = BearerAccount(bearer: ATTBearer(localRxMTU: ATTBearer.defaultMTU + reader.uint16() % 600))
        var nextID: UInt64 = 1
        var handedUp: ATTPDU?
        while !reader.isEmpty {
            switch reader.below(24) {
            case 0:
                let request: ATTPDU =
                    reader.bool()
                    ? .readRequest(.init(handle: AttributeHandle(reader.uint16())))
                    : .writeRequest(.init(handle: AttributeHandle(reader.uint16()), value: reader.chunk()))
                try link.request(request, id: nextID)
                nextID += 1
            case 1:
                try link.started(ATTRequestID(nextID))
                try link.apply(link.bearer.exchangeMTU(id: ATTRequestID(nextID)))
                nextID += 1
            case 2:
                try link.indicate(.init(handle: AttributeHandle(reader.uint16()), value: reader.chunk()), id: nextID)
                nextID += 1
            case 3:
                // The server answers what it was handed: an error response, as any request may get.
                guard let request = handedUp else { break }
                handedUp = nil
                let answer = ATTPDU.errorResponse(
                    .init(
                        requestOpcode: request.opcode, handle: AttributeHandle(reader.uint16()),
                        errorCode: ATTErrorCode(rawValue: reader.byte())))
                try link.apply(link.bearer.sendResponse(answer))
            case 4:
                let notification = ATTPDU.handleValueNotification(
                    .init(handle: AttributeHandle(reader.uint16()), value: reader.chunk()))
                if let pdu = try? link.bearer.sendUnacknowledged(notification) { try link.apply([.send(pdu)]) }
            case 5:
                try link.apply(link.bearer.timerFired(reader.bool() ? .transaction : .indication))
            case 6:
                try link.apply(link.bearer.linkDisconnected())
            default:
                let sdu = reader.chunk()
                try decodeATT(sdu)
                let wasOpen = link.bearer.isOpen
                // The SDU read in place, as the host reads one that fills its packet, acts as the buffer does.
                var inPlace = link.bearer
                let inPlaceActions = inPlace.received(bytes: sdu[...])
                let actions = try link.apply(link.bearer.received(ByteBuffer(bytes: sdu)))
                try expect(inPlaceActions == actions, "\(sdu) read in place gave \(inPlaceActions), not \(actions)")
                if !wasOpen { try expect(actions.isEmpty, "a bearer no longer open acted on an SDU") }
                for case .request(let request) in actions { handedUp = request }
            }
        }
        try link.checkEveryTransactionEnded()
    }

    /// Whatever decodes carries the opcode it was read with and re-encodes to the same PDU.
    static func decodeATT(_ bytes: [UInt8]) throws(Violation) {
        guard let pdu = try? ATTPDU(bytes: bytes) else { return }
        try expect(pdu.opcode.rawValue == bytes[0], "\(pdu) does not carry the opcode it was read with")
        try expect((try? ATTPDU(buffer: pdu.encoded())) == pdu, "\(pdu) does not survive its own encoding")
    }
}

/// One bearer and an account of its transactions: each request and indication started completes exactly once,
/// the bearer closes at most once, and every PDU it sends decodes.
struct BearerAccount {
    var bearer: ATTBearer
    var started: Set<ATTRequestID> = []
    var completed: [ATTRequestID: Result<ATTPDU, ATTRequestFailure>] = [:]
    var startedIndications: Set<ATTRequestID> = []
    var completedIndications: Set<ATTRequestID> = []
    var closedBy: ATTError?

    mutating func started(_ id: ATTRequestID) throws(FuzzTarget.Violation) {
        try expect(started.insert(id).inserted, "request \(id) started twice")
    }

    mutating func request(_ pdu: ATTPDU, id: UInt64) throws(FuzzTarget.Violation) {
        try started(ATTRequestID(id))
        try apply(bearer.sendRequest(pdu, id: ATTRequestID(id)))
    }

    mutating func indicate(_ indication: ATTPDU.HandleValueIndication, id: UInt64) throws(FuzzTarget.Violation) {
        startedIndications.insert(ATTRequestID(id))
        try apply(bearer.sendIndication(indication, id: ATTRequestID(id)))
    }

    @discardableResult
    mutating func apply(_ actions: [ATTBearer.Action]) throws(FuzzTarget.Violation) -> [ATTBearer.Action] {
        for action in actions {
            switch action {
            case .complete(let id, let result):
                try expect(started.contains(id), "request \(id) completed but was never started")
                try expect(completed[id] == nil, "request \(id) completed twice")
                completed[id] = result
            case .indicationComplete(let id, _):
                try expect(startedIndications.contains(id), "indication \(id) completed but was never started")
                try expect(completedIndications.insert(id).inserted, "indication \(id) completed twice")
            case .closeBearer(let error):
                try expect(closedBy == nil, "the bearer closed twice")
                closedBy = error
            case .mtuChanged(let mtu):
                try expect(
                    (ATTBearer.defaultMTU...bearer.localRxMTU).contains(mtu),
                    "ATT_MTU \(mtu) is outside 23...\(bearer.localRxMTU)")
            case .send(let bytes):
                try expect(
                    (try? ATTPDU(buffer: bytes)) != nil,
                    "the bearer sent \(bytes.hexDump(format: .plain)), which does not decode")
            case .startTimer, .cancelTimer, .request, .command, .notification, .indication:
                break
            }
        }
        return actions
    }

    /// Once the bearer is closed or its link gone, nothing is left waiting.
    func checkEveryTransactionEnded() throws(FuzzTarget.Violation) {
        guard !bearer.isOpen else { return }
        let waiting = started.subtracting(completed.keys)
        try expect(waiting.isEmpty, "requests \(waiting) never completed after the bearer ended")
        let waitingIndications = startedIndications.subtracting(completedIndications)
        try expect(waitingIndications.isEmpty, "indications \(waitingIndications) never completed")
    }
}
