import BLEATT
import BLECore

/// Read Characteristic Value (or Descriptor), becoming Read Long when needed: a Read Request, and while
/// the part received fills ATT_MTU-1 octets, Read Blob Requests from the end of what arrived, until a
/// shorter part (or 512 octets, the longest value there is).
///
/// A server that answers the first Read Blob with Attribute Not Long (the value was exactly ATT_MTU-1
/// octets) ends the read with what arrived.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.8.1 (Read Characteristic Value), 4.8.3 (Read Long
///   Characteristic Values), 4.12.1 and 4.12.2 (descriptors).
public struct GATTReadValue: GATTProcedure {
    public var handle: AttributeHandle
    private var value: [UInt8] = []
    public init(handle: AttributeHandle) { self.handle = handle }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep { .send(.readRequest(.init(handle: handle))) }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        let part: [UInt8]
        switch result {
        case .success(.readResponse(let response)) where value.isEmpty: part = response.value
        case .success(.readBlobResponse(let response)): part = response.partAttributeValue
        case .success: return .invalid("not a Read or Read Blob Response")
        case .failure(.errorResponse(let error)) where error.errorCode == .attributeNotLong && !value.isEmpty:
            return .finished(.success(.value(value)))
        case .failure(let failure): return .fail(failure)
        }
        value += part
        // No attribute value is longer than 512 octets (Vol 3, Part F, 3.2.9): a server whose parts add up to more
        // is answered as a write that long is, with Invalid Attribute Value Length.
        guard value.count <= GATTDatabase.maximumValueLength else {
            return .finished(
                .failure(
                    GATTError(
                        .invalidResponse, attErrorCode: .invalidAttributeValueLength, handle: handle,
                        "the server's parts add up to \(value.count) octets, more than the 512 a value may have")))
        }
        guard part.count >= Int(mtu) - 1, value.count < GATTDatabase.maximumValueLength else {
            return .finished(.success(.value(value)))
        }
        return .send(.readBlobRequest(.init(handle: handle, offset: UInt16(value.count))))
    }
}
