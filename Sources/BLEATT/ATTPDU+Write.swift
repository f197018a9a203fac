import BLECore
import NIOCore

extension ATTPDU {
    /// ATT_WRITE_REQ.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.5.1.
    public struct WriteRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.writeRequest
        public var handle: AttributeHandle
        /// At most ATT_MTU-3 octets.
        public var value: [UInt8]
        public init(handle: AttributeHandle, value: [UInt8]) {
            self.handle = handle
            self.value = value
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            value = p.readRemainingBytes()
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(handle)
            b.writeBytes(value)
        }
    }

    /// ATT_WRITE_RSP (no parameters).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.5.2.
    public struct WriteResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.writeResponse
        public init() {}
        public init(decoding p: inout ByteBuffer) throws(ATTError) { try p.attExpectEnd(Self.opcode) }
        public func encodeParameters(into b: inout ByteBuffer) {}
    }

    /// ATT_WRITE_CMD: a write that is never answered.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.5.3.
    public struct WriteCommand: ATTPDUMessage {
        public static let opcode = ATTOpcode.writeCommand
        public var handle: AttributeHandle
        /// At most ATT_MTU-3 octets.
        public var value: [UInt8]
        public init(handle: AttributeHandle, value: [UInt8]) {
            self.handle = handle
            self.value = value
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            value = p.readRemainingBytes()
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(handle)
            b.writeBytes(value)
        }
    }

    /// ATT_SIGNED_WRITE_CMD: a write command with a 12-octet authentication signature (decoded and kept; this
    /// stack does not verify signatures).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.5.4; Vol 3, Part H, 2.4.5 (Signing algorithm).
    public struct SignedWriteCommand: ATTPDUMessage {
        public static let opcode = ATTOpcode.signedWriteCommand
        public var handle: AttributeHandle
        /// At most ATT_MTU-15 octets.
        public var value: [UInt8]
        /// 12 octets: SignCounter (4) and MAC (8).
        public var authenticationSignature: [UInt8]
        public init(handle: AttributeHandle, value: [UInt8], authenticationSignature: [UInt8]) {
            self.handle = handle
            self.value = value
            self.authenticationSignature = authenticationSignature
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            guard p.readableBytes >= 12 else {
                throw ATTError(.truncatedPDU, opcode: Self.opcode, "no room for the 12-octet signature")
            }
            value = try p.attBytes(p.readableBytes - 12, Self.opcode)
            authenticationSignature = p.readRemainingBytes()
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(handle)
            b.writeBytes(value)
            b.writeBytes(authenticationSignature)
        }
    }

    /// ATT_PREPARE_WRITE_REQ: one part of a long (or reliable) write, queued by the server.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.6.1.
    public struct PrepareWriteRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.prepareWriteRequest
        public var handle: AttributeHandle
        /// Where this part goes in the value, in octets.
        public var offset: UInt16
        /// At most ATT_MTU-5 octets.
        public var partAttributeValue: [UInt8]
        public init(handle: AttributeHandle, offset: UInt16, partAttributeValue: [UInt8]) {
            self.handle = handle
            self.offset = offset
            self.partAttributeValue = partAttributeValue
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            offset = try p.attUInt16(Self.opcode)
            partAttributeValue = p.readRemainingBytes()
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(handle)
            b.writeLE(offset)
            b.writeBytes(partAttributeValue)
        }
    }

    /// ATT_PREPARE_WRITE_RSP: the request's fields echoed back.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.6.2.
    public struct PrepareWriteResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.prepareWriteResponse
        public var handle: AttributeHandle
        public var offset: UInt16
        public var partAttributeValue: [UInt8]
        public init(handle: AttributeHandle, offset: UInt16, partAttributeValue: [UInt8]) {
            self.handle = handle
            self.offset = offset
            self.partAttributeValue = partAttributeValue
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            offset = try p.attUInt16(Self.opcode)
            partAttributeValue = p.readRemainingBytes()
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(handle)
            b.writeLE(offset)
            b.writeBytes(partAttributeValue)
        }
    }

    /// ATT_EXECUTE_WRITE_REQ: write (or cancel) every prepared value.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.6.3.
    public struct ExecuteWriteRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.executeWriteRequest

        public struct Flags: RawRepresentable, Sendable, Hashable {
            public var rawValue: UInt8
            public init(rawValue: UInt8) { self.rawValue = rawValue }
            /// 0x00: cancel all prepared writes.
            public static let cancel = Flags(rawValue: 0x00)
            /// 0x01: immediately write all pending prepared values.
            public static let write = Flags(rawValue: 0x01)
        }

        public var flags: Flags
        public init(flags: Flags) { self.flags = flags }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            flags = Flags(rawValue: try p.attUInt8(Self.opcode))
            try p.attExpectEnd(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeLE(flags.rawValue) }
    }

    /// ATT_EXECUTE_WRITE_RSP (no parameters).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.6.4.
    public struct ExecuteWriteResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.executeWriteResponse
        public init() {}
        public init(decoding p: inout ByteBuffer) throws(ATTError) { try p.attExpectEnd(Self.opcode) }
        public func encodeParameters(into b: inout ByteBuffer) {}
    }
}
