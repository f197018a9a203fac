import BLEATT
import BLECore

/// One attribute's handle and value, as a Read By Type Response lists them.
public struct GATTHandleValue: Sendable, Hashable {
    public var handle: AttributeHandle
    public var value: [UInt8]
    public init(handle: AttributeHandle, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }
}

/// Read Using Characteristic UUID: one Read By Type Request for `uuid` over `range`; the values of the first
/// response (each cut to what one response holds), in handle order. Attribute Not Found is an empty result,
/// not a failure: the server has no such characteristic. This is how a client reads the Database Hash (Core Spec
/// 5.4, Vol 3, Part G, 7.3: over 0x0001–0xFFFF, so that it needs no handle of a database that may have moved).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.8.2 (Read Using Characteristic UUID).
public struct GATTReadUsingCharacteristicUUID: GATTProcedure {
    public var uuid: BluetoothUUID
    public var range: ClosedRange<AttributeHandle>

    public init(uuid: BluetoothUUID, range: ClosedRange<AttributeHandle>) {
        self.uuid = uuid
        self.range = range
    }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep {
        .send(
            .readByTypeRequest(
                .init(startingHandle: range.lowerBound, endingHandle: range.upperBound, attributeType: uuid)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch result {
        case .failure(let failure) where failure.isAttributeNotFound: return .finished(.success(.handleValues([])))
        case .failure(let failure): return .fail(failure)
        case .success(.readByTypeResponse(let response)):
            let entries = response.attributeData.filter { range.contains($0.handle) }
            guard entries.count == response.attributeData.count else {
                return .invalid("a Read By Type Response named a handle outside the range asked for")
            }
            return .finished(
                .success(.handleValues(entries.map { GATTHandleValue(handle: $0.handle, value: $0.value) })))
        case .success: return .invalid("not a Read By Type Response")
        }
    }
}
