import BLEATT
import BLECore

/// Exchange MTU: the client offers its receive MTU once per connection.
///
/// A server that answers Request Not Supported leaves the ATT_MTU at 23, which is the result then.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.3.1 (Exchange MTU).
public struct GATTExchangeMTU: GATTProcedure {
    public var clientRxMTU: UInt16
    public init(clientRxMTU: UInt16 = ATTBearer.maximumMTU) { self.clientRxMTU = clientRxMTU }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep {
        .send(.exchangeMTURequest(.init(clientRxMTU: clientRxMTU)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch result {
        case .success(.exchangeMTUResponse(let response)):
            return .finished(.success(.mtu(max(ATTBearer.defaultMTU, min(clientRxMTU, response.serverRxMTU)))))
        case .success: return .invalid("not an Exchange MTU Response")
        case .failure(.errorResponse(let error)) where error.errorCode == .requestNotSupported:
            return .finished(.success(.mtu(ATTBearer.defaultMTU)))
        case .failure(let failure): return .fail(failure)
        }
    }
}
