import BLEATT
import BLECore

/// Write Characteristic Value (or Descriptor) with a response, becoming Write Long when needed: a Write
/// Request when the value fits ATT_MTU-3 octets; otherwise Prepare Write Requests of ATT_MTU-5 octets with
/// their offsets, each echo checked against what was sent, then Execute Write. On an error, or an echo
/// that differs, the prepared writes are cancelled (Execute Write with the cancel flag) before the
/// procedure fails.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.9.3 (Write Characteristic Value), 4.9.4 (Write Long
///   Characteristic Values), 4.12.3 and 4.12.4 (descriptors).
public struct GATTWriteValue: GATTProcedure {
    public var handle: AttributeHandle
    public var value: [UInt8]

    private enum Phase: Sendable {
        case writing
        case preparing(offset: Int, sent: [UInt8])
        case executing
        case cancelling(GATTError)
    }
    private var phase: Phase = .writing

    public init(handle: AttributeHandle, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep {
        if value.count <= Int(mtu) - 3 {
            phase = .writing
            return .send(.writeRequest(.init(handle: handle, value: value)))
        }
        return prepare(from: 0, mtu: mtu)
    }

    private mutating func prepare(from offset: Int, mtu: UInt16) -> GATTProcedureStep {
        guard offset < value.count else {
            phase = .executing
            return .send(.executeWriteRequest(.init(flags: .write)))
        }
        guard offset <= Int(UInt16.max) else { return .finished(.failure(GATTError(.rejected, "value too long"))) }
        let part = Array(value[offset...].prefix(Int(mtu) - 5))
        phase = .preparing(offset: offset, sent: part)
        return .send(.prepareWriteRequest(.init(handle: handle, offset: UInt16(offset), partAttributeValue: part)))
    }

    private mutating func cancel(_ error: GATTError) -> GATTProcedureStep {
        phase = .cancelling(error)
        return .send(.executeWriteRequest(.init(flags: .cancel)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch (phase, result) {
        case (.writing, .success(.writeResponse)), (.executing, .success(.executeWriteResponse)):
            return .finished(.success(.written))
        case (.preparing(let offset, let sent), .success(.prepareWriteResponse(let echo))):
            guard echo.handle == handle, Int(echo.offset) == offset, echo.partAttributeValue == sent else {
                return cancel(
                    GATTError(.writeVerificationFailed, handle: handle, "the echo at offset \(offset) differs"))
            }
            return prepare(from: offset + sent.count, mtu: mtu)
        case (.preparing, .failure(.errorResponse(let response))):
            return cancel(GATTError(failure: .errorResponse(response)))
        case (.cancelling(let error), .success(.executeWriteResponse)),
            (.cancelling(let error), .failure(.errorResponse)):
            return .finished(.failure(error))
        case (_, .failure(let failure)):
            return .fail(failure)
        case (_, .success(let pdu)):
            return .invalid("unexpected \(pdu.opcode)")
        }
    }
}
