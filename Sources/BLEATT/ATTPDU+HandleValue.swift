import BLECore
import NIOCore

extension ATTPDU {
    /// ATT_HANDLE_VALUE_NTF: a server-initiated value, not acknowledged.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.7.1.
    public struct HandleValueNotification: ATTPDUMessage {
        public static let opcode = ATTOpcode.handleValueNotification
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

    /// ATT_HANDLE_VALUE_IND: a server-initiated value the client confirms.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.7.2.
    public struct HandleValueIndication: ATTPDUMessage {
        public static let opcode = ATTOpcode.handleValueIndication
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

    /// ATT_HANDLE_VALUE_CFM (no parameters).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.7.3.
    public struct HandleValueConfirmation: ATTPDUMessage {
        public static let opcode = ATTOpcode.handleValueConfirmation
        public init() {}
        public init(decoding p: inout ByteBuffer) throws(ATTError) { try p.attExpectEnd(Self.opcode) }
        public func encodeParameters(into b: inout ByteBuffer) {}
    }

    /// ATT_MULTIPLE_HANDLE_VALUE_NTF: several values in one unacknowledged PDU, each with its length.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.7.4.
    public struct MultipleHandleValueNotification: ATTPDUMessage {
        public static let opcode = ATTOpcode.multipleHandleValueNotification

        public struct HandleLengthValue: Sendable, Hashable {
            public var handle: AttributeHandle
            public var value: [UInt8]
            public init(handle: AttributeHandle, value: [UInt8]) {
                self.handle = handle
                self.value = value
            }
        }

        /// At least two tuples.
        public var handleLengthValueTupleList: [HandleLengthValue]
        public init(handleLengthValueTupleList: [HandleLengthValue]) {
            self.handleLengthValueTupleList = handleLengthValueTupleList
        }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            guard p.readableBytes > 0 else { throw ATTError(.truncatedPDU, opcode: Self.opcode, "no tuples") }
            handleLengthValueTupleList = []
            while p.readableBytes > 0 {
                let handle = try p.attHandle(Self.opcode)
                let length = try p.attUInt16(Self.opcode)
                handleLengthValueTupleList.append(
                    .init(handle: handle, value: try p.attBytes(Int(length), Self.opcode)))
            }
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            for tuple in handleLengthValueTupleList {
                b.writeHandle(tuple.handle)
                b.writeLE(UInt16(clamping: tuple.value.count))
                b.writeBytes(tuple.value)
            }
        }
    }
}
