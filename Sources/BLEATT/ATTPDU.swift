import BLECore
import NIOCore

/// An Attribute Protocol PDU: the opcode and its parameters (the L2CAP SDU on the ATT fixed channel, 0x0004).
///
/// One nested struct per PDU, each with its `static let opcode`; an opcode this stack does not know is kept
/// whole as ``unknown(opcode:bytes:)``. Decode with ``init(bytes:)`` (or ``decode(_:)``), encode with
/// ``encoded()`` / ``encode(into:)``.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.3 (Attribute PDU) and 3.4 (Attribute Protocol PDUs).
public enum ATTPDU: Sendable, Hashable {
    case errorResponse(ErrorResponse)
    case exchangeMTURequest(ExchangeMTURequest)
    case exchangeMTUResponse(ExchangeMTUResponse)
    case findInformationRequest(FindInformationRequest)
    case findInformationResponse(FindInformationResponse)
    case findByTypeValueRequest(FindByTypeValueRequest)
    case findByTypeValueResponse(FindByTypeValueResponse)
    case readByTypeRequest(ReadByTypeRequest)
    case readByTypeResponse(ReadByTypeResponse)
    case readRequest(ReadRequest)
    case readResponse(ReadResponse)
    case readBlobRequest(ReadBlobRequest)
    case readBlobResponse(ReadBlobResponse)
    case readMultipleRequest(ReadMultipleRequest)
    case readMultipleResponse(ReadMultipleResponse)
    case readByGroupTypeRequest(ReadByGroupTypeRequest)
    case readByGroupTypeResponse(ReadByGroupTypeResponse)
    case writeRequest(WriteRequest)
    case writeResponse(WriteResponse)
    case writeCommand(WriteCommand)
    case signedWriteCommand(SignedWriteCommand)
    case prepareWriteRequest(PrepareWriteRequest)
    case prepareWriteResponse(PrepareWriteResponse)
    case executeWriteRequest(ExecuteWriteRequest)
    case executeWriteResponse(ExecuteWriteResponse)
    case handleValueNotification(HandleValueNotification)
    case handleValueIndication(HandleValueIndication)
    case handleValueConfirmation(HandleValueConfirmation)
    case readMultipleVariableRequest(ReadMultipleVariableRequest)
    case readMultipleVariableResponse(ReadMultipleVariableResponse)
    case multipleHandleValueNotification(MultipleHandleValueNotification)
    /// A PDU with an opcode this stack does not decode; `bytes` are its parameters (after the opcode).
    case unknown(opcode: ATTOpcode, bytes: [UInt8])

    /// Decodes one whole PDU. Throws ``ATTError`` on an empty PDU, any shortfall or a bad length.
    public init(bytes: some Sequence<UInt8>) throws(ATTError) {
        try self.init(buffer: ByteBuffer(bytes: Array(bytes)))
    }

    /// Decodes one whole PDU from the buffer's readable bytes. Throws on any shortfall or bad length.
    public init(buffer: ByteBuffer) throws(ATTError) {
        var buffer = buffer
        guard let raw = buffer.readLE(UInt8.self) else { throw ATTError(.truncatedPDU, "an empty ATT PDU") }
        let opcode = ATTOpcode(raw)
        switch opcode {
        case ErrorResponse.opcode: self = .errorResponse(try .init(decoding: &buffer))
        case ExchangeMTURequest.opcode: self = .exchangeMTURequest(try .init(decoding: &buffer))
        case ExchangeMTUResponse.opcode: self = .exchangeMTUResponse(try .init(decoding: &buffer))
        case FindInformationRequest.opcode: self = .findInformationRequest(try .init(decoding: &buffer))
        case FindInformationResponse.opcode: self = .findInformationResponse(try .init(decoding: &buffer))
        case FindByTypeValueRequest.opcode: self = .findByTypeValueRequest(try .init(decoding: &buffer))
        case FindByTypeValueResponse.opcode: self = .findByTypeValueResponse(try .init(decoding: &buffer))
        case ReadByTypeRequest.opcode: self = .readByTypeRequest(try .init(decoding: &buffer))
        case ReadByTypeResponse.opcode: self = .readByTypeResponse(try .init(decoding: &buffer))
        case ReadRequest.opcode: self = .readRequest(try .init(decoding: &buffer))
        case ReadResponse.opcode: self = .readResponse(try .init(decoding: &buffer))
        case ReadBlobRequest.opcode: self = .readBlobRequest(try .init(decoding: &buffer))
        case ReadBlobResponse.opcode: self = .readBlobResponse(try .init(decoding: &buffer))
        case ReadMultipleRequest.opcode: self = .readMultipleRequest(try .init(decoding: &buffer))
        case ReadMultipleResponse.opcode: self = .readMultipleResponse(try .init(decoding: &buffer))
        case ReadByGroupTypeRequest.opcode: self = .readByGroupTypeRequest(try .init(decoding: &buffer))
        case ReadByGroupTypeResponse.opcode: self = .readByGroupTypeResponse(try .init(decoding: &buffer))
        case WriteRequest.opcode: self = .writeRequest(try .init(decoding: &buffer))
        case WriteResponse.opcode: self = .writeResponse(try .init(decoding: &buffer))
        case WriteCommand.opcode: self = .writeCommand(try .init(decoding: &buffer))
        case SignedWriteCommand.opcode: self = .signedWriteCommand(try .init(decoding: &buffer))
        case PrepareWriteRequest.opcode: self = .prepareWriteRequest(try .init(decoding: &buffer))
        case PrepareWriteResponse.opcode: self = .prepareWriteResponse(try .init(decoding: &buffer))
        case ExecuteWriteRequest.opcode: self = .executeWriteRequest(try .init(decoding: &buffer))
        case ExecuteWriteResponse.opcode: self = .executeWriteResponse(try .init(decoding: &buffer))
        case HandleValueNotification.opcode: self = .handleValueNotification(try .init(decoding: &buffer))
        case HandleValueIndication.opcode: self = .handleValueIndication(try .init(decoding: &buffer))
        case HandleValueConfirmation.opcode: self = .handleValueConfirmation(try .init(decoding: &buffer))
        case ReadMultipleVariableRequest.opcode: self = .readMultipleVariableRequest(try .init(decoding: &buffer))
        case ReadMultipleVariableResponse.opcode:
            self = .readMultipleVariableResponse(try .init(decoding: &buffer))
        case MultipleHandleValueNotification.opcode:
            self = .multipleHandleValueNotification(try .init(decoding: &buffer))
        default: self = .unknown(opcode: opcode, bytes: buffer.readRemainingBytes())
        }
    }

    /// Same as ``init(buffer:)``.
    public static func decode(_ buffer: ByteBuffer) throws(ATTError) -> ATTPDU {
        try ATTPDU(buffer: buffer)
    }

    /// The body of this PDU as a message, when it is a known one.
    private var message: (any ATTPDUMessage)? {
        switch self {
        case .errorResponse(let m): return m
        case .exchangeMTURequest(let m): return m
        case .exchangeMTUResponse(let m): return m
        case .findInformationRequest(let m): return m
        case .findInformationResponse(let m): return m
        case .findByTypeValueRequest(let m): return m
        case .findByTypeValueResponse(let m): return m
        case .readByTypeRequest(let m): return m
        case .readByTypeResponse(let m): return m
        case .readRequest(let m): return m
        case .readResponse(let m): return m
        case .readBlobRequest(let m): return m
        case .readBlobResponse(let m): return m
        case .readMultipleRequest(let m): return m
        case .readMultipleResponse(let m): return m
        case .readByGroupTypeRequest(let m): return m
        case .readByGroupTypeResponse(let m): return m
        case .writeRequest(let m): return m
        case .writeResponse(let m): return m
        case .writeCommand(let m): return m
        case .signedWriteCommand(let m): return m
        case .prepareWriteRequest(let m): return m
        case .prepareWriteResponse(let m): return m
        case .executeWriteRequest(let m): return m
        case .executeWriteResponse(let m): return m
        case .handleValueNotification(let m): return m
        case .handleValueIndication(let m): return m
        case .handleValueConfirmation(let m): return m
        case .readMultipleVariableRequest(let m): return m
        case .readMultipleVariableResponse(let m): return m
        case .multipleHandleValueNotification(let m): return m
        case .unknown: return nil
        }
    }

    /// The PDU's opcode.
    public var opcode: ATTOpcode {
        if case .unknown(let opcode, _) = self { return opcode }
        return type(of: message!).opcode  // `message` is nil only for `.unknown`, handled above
    }

    /// Appends the opcode and parameters to `buffer`.
    public func encode(into buffer: inout ByteBuffer) {
        buffer.writeLE(opcode.rawValue)
        if case .unknown(_, let bytes) = self {
            buffer.writeBytes(bytes)
        } else {
            message!.encodeParameters(into: &buffer)  // `message` is nil only for `.unknown`, handled above
        }
    }

    /// The whole PDU as a buffer, allocated once: room for the PDUs that carry a value (notifications,
    /// indications, writes, read responses) is known before writing.
    public func encoded() -> ByteBuffer {
        // A buffer made empty and then reserved is allocated twice.
        var buffer = ByteBufferAllocator().buffer(capacity: capacityHint)
        encode(into: &buffer)
        return buffer
    }

    /// The encoded length of the PDUs that carry a value; 23 (the default ATT_MTU) for the rest.
    private var capacityHint: Int {
        switch self {
        case .handleValueNotification(let n): 3 + n.value.count
        case .handleValueIndication(let i): 3 + i.value.count
        case .writeCommand(let w): 3 + w.value.count
        case .writeRequest(let w): 3 + w.value.count
        case .readResponse(let r): 1 + r.value.count
        case .unknown(_, let bytes): 1 + bytes.count
        default: Int(ATTBearer.defaultMTU)
        }
    }

    /// The whole PDU as bytes.
    public var bytes: [UInt8] {
        var buffer = encoded()
        return buffer.readRemainingBytes()
    }

    /// The encoded length in octets (compare with the ATT_MTU).
    public var encodedLength: Int { encoded().readableBytes }
}

/// The parameters of one ATT PDU type: its opcode, and how its parameters decode and encode.
public protocol ATTPDUMessage: Sendable, Hashable {
    static var opcode: ATTOpcode { get }
    /// Decodes the parameters (everything after the opcode). Consumes the whole buffer or throws.
    init(decoding parameters: inout ByteBuffer) throws(ATTError)
    /// Appends the parameters (not the opcode).
    func encodeParameters(into buffer: inout ByteBuffer)
}
