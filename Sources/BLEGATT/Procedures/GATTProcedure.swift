import BLEATT
import BLECore

/// What a GATT procedure produced.
public enum GATTResult: Sendable, Hashable {
    /// The ATT_MTU agreed by an MTU exchange.
    case mtu(UInt16)
    case services([GATTService])
    case includedServices([GATTService])
    case characteristics([GATTCharacteristic])
    case descriptors([GATTDescriptor])
    /// A value read (whole, for a long read).
    case value([UInt8])
    /// The values read by type (Read Using Characteristic UUID), in handle order.
    case handleValues([GATTHandleValue])
    /// A write with response completed.
    case written
}

/// One step of a procedure: the next request to send, or the end.
public enum GATTProcedureStep: Sendable, Hashable {
    case send(ATTPDU)
    case finished(Result<GATTResult, GATTError>)
}

/// A GATT procedure as a small pure stepper: ``start(mtu:)`` yields the first request; each response (or
/// failure) of the request it asked for goes to ``received(_:mtu:)``, which yields the next request or the
/// result. The procedure never sees more than one request at a time.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4 (GATT feature requirements).
public protocol GATTProcedure: Sendable {
    mutating func start(mtu: UInt16) -> GATTProcedureStep
    mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep
}

extension GATTProcedureStep {
    static func fail(_ failure: ATTRequestFailure) -> GATTProcedureStep {
        .finished(.failure(GATTError(failure: failure)))
    }
    static func invalid(_ message: String) -> GATTProcedureStep {
        .finished(.failure(GATTError(.invalidResponse, message)))
    }
}

extension ATTRequestFailure {
    /// Whether this is the server's Attribute Not Found, the normal end of a discovery.
    var isAttributeNotFound: Bool {
        if case .errorResponse(let response) = self { return response.errorCode == .attributeNotFound }
        return false
    }
}
