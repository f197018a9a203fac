import BLECore
import NIOCore

extension ATTPDU {
    /// ATT_ERROR_RSP: a server's refusal of one request.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.1.1.
    public struct ErrorResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.errorResponse
        /// The opcode of the request that failed.
        public var requestOpcode: ATTOpcode
        /// The handle in error (0x0000 when the request has none).
        public var handle: AttributeHandle
        public var errorCode: ATTErrorCode

        public init(requestOpcode: ATTOpcode, handle: AttributeHandle, errorCode: ATTErrorCode) {
            self.requestOpcode = requestOpcode
            self.handle = handle
            self.errorCode = errorCode
        }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            requestOpcode = ATTOpcode(try p.attUInt8(Self.opcode))
            handle = try p.attHandle(Self.opcode)
            errorCode = ATTErrorCode(try p.attUInt8(Self.opcode))
            try p.attExpectEnd(Self.opcode)
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeLE(requestOpcode.rawValue)
            b.writeHandle(handle)
            b.writeLE(errorCode.rawValue)
        }
    }

    /// ATT_EXCHANGE_MTU_REQ: the client's receive MTU.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.2.1.
    public struct ExchangeMTURequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.exchangeMTURequest
        /// Octets, at least 23 (the default ATT_MTU on LE).
        public var clientRxMTU: UInt16
        public init(clientRxMTU: UInt16) { self.clientRxMTU = clientRxMTU }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            clientRxMTU = try p.attUInt16(Self.opcode)
            try p.attExpectEnd(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeLE(clientRxMTU) }
    }

    /// ATT_EXCHANGE_MTU_RSP: the server's receive MTU.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.2.2.
    public struct ExchangeMTUResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.exchangeMTUResponse
        /// Octets, at least 23.
        public var serverRxMTU: UInt16
        public init(serverRxMTU: UInt16) { self.serverRxMTU = serverRxMTU }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            serverRxMTU = try p.attUInt16(Self.opcode)
            try p.attExpectEnd(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeLE(serverRxMTU) }
    }
}
