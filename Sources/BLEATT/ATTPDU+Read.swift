import BLECore
import NIOCore

extension ATTPDU {
    /// ATT_READ_BY_TYPE_REQ: the values of the attributes of one type in a range.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.1.
    public struct ReadByTypeRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.readByTypeRequest
        public var startingHandle: AttributeHandle
        public var endingHandle: AttributeHandle
        /// 2 or 16 octets on the wire.
        public var attributeType: BluetoothUUID
        public init(startingHandle: AttributeHandle, endingHandle: AttributeHandle, attributeType: BluetoothUUID) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
            self.attributeType = attributeType
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            startingHandle = try p.attHandle(Self.opcode)
            endingHandle = try p.attHandle(Self.opcode)
            attributeType = try p.attRemainingUUID(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(startingHandle)
            b.writeHandle(endingHandle)
            b.writeATTUUID(attributeType)
        }
    }

    /// ATT_READ_BY_TYPE_RSP: a Length octet, then handle–value pairs of that length each.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.2.
    public struct ReadByTypeResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.readByTypeResponse

        public struct AttributeData: Sendable, Hashable {
            public var handle: AttributeHandle
            public var value: [UInt8]
            public init(handle: AttributeHandle, value: [UInt8]) {
                self.handle = handle
                self.value = value
            }
        }

        /// At least one entry; every value has the same length (at most 253 octets).
        public var attributeData: [AttributeData]
        public init(attributeData: [AttributeData]) { self.attributeData = attributeData }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            let length = Int(try p.attUInt8(Self.opcode))
            guard length >= 2 else { throw ATTError(.invalidLength, opcode: Self.opcode, "length \(length)") }
            guard p.readableBytes > 0 else { throw ATTError(.truncatedPDU, opcode: Self.opcode, "no entries") }
            guard p.readableBytes % length == 0 else {
                throw ATTError(
                    .invalidLength, opcode: Self.opcode, "\(p.readableBytes) octets of \(length)-octet entries")
            }
            attributeData = []
            while p.readableBytes > 0 {
                let handle = try p.attHandle(Self.opcode)
                attributeData.append(AttributeData(handle: handle, value: try p.attBytes(length - 2, Self.opcode)))
            }
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            let valueLength = attributeData.first?.value.count ?? 0
            b.writeLE(UInt8(clamping: 2 + valueLength))
            for entry in attributeData {
                b.writeHandle(entry.handle)
                b.writeBytes(entry.value.prefix(valueLength))
            }
        }
    }

    /// ATT_READ_REQ.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.3.
    public struct ReadRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.readRequest
        public var handle: AttributeHandle
        public init(handle: AttributeHandle) { self.handle = handle }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            try p.attExpectEnd(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeHandle(handle) }
    }

    /// ATT_READ_RSP: the value, at most ATT_MTU-1 octets of it.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.4.
    public struct ReadResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.readResponse
        public var value: [UInt8]
        public init(value: [UInt8]) { self.value = value }
        public init(decoding p: inout ByteBuffer) throws(ATTError) { value = p.readRemainingBytes() }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeBytes(value) }
    }

    /// ATT_READ_BLOB_REQ: part of a long value, from an offset.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.5.
    public struct ReadBlobRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.readBlobRequest
        public var handle: AttributeHandle
        /// Octets from the start of the value.
        public var offset: UInt16
        public init(handle: AttributeHandle, offset: UInt16) {
            self.handle = handle
            self.offset = offset
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            handle = try p.attHandle(Self.opcode)
            offset = try p.attUInt16(Self.opcode)
            try p.attExpectEnd(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(handle)
            b.writeLE(offset)
        }
    }

    /// ATT_READ_BLOB_RSP: the value from the requested offset, at most ATT_MTU-1 octets.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.6.
    public struct ReadBlobResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.readBlobResponse
        public var partAttributeValue: [UInt8]
        public init(partAttributeValue: [UInt8]) { self.partAttributeValue = partAttributeValue }
        public init(decoding p: inout ByteBuffer) throws(ATTError) { partAttributeValue = p.readRemainingBytes() }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeBytes(partAttributeValue) }
    }

    /// ATT_READ_MULTIPLE_REQ: two or more handles whose values are read together.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.7.
    public struct ReadMultipleRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.readMultipleRequest
        public var setOfHandles: [AttributeHandle]
        public init(setOfHandles: [AttributeHandle]) { self.setOfHandles = setOfHandles }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            setOfHandles = try decodeHandleSet(&p, Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) { for handle in setOfHandles { b.writeHandle(handle) } }
    }

    /// ATT_READ_MULTIPLE_RSP: the values concatenated (at most ATT_MTU-1 octets in all).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.8.
    public struct ReadMultipleResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.readMultipleResponse
        public var setOfValues: [UInt8]
        public init(setOfValues: [UInt8]) { self.setOfValues = setOfValues }
        public init(decoding p: inout ByteBuffer) throws(ATTError) { setOfValues = p.readRemainingBytes() }
        public func encodeParameters(into b: inout ByteBuffer) { b.writeBytes(setOfValues) }
    }

    /// ATT_READ_BY_GROUP_TYPE_REQ: the groups (services) of one grouping type in a range.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.9.
    public struct ReadByGroupTypeRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.readByGroupTypeRequest
        public var startingHandle: AttributeHandle
        public var endingHandle: AttributeHandle
        /// 2 or 16 octets on the wire.
        public var attributeGroupType: BluetoothUUID
        public init(startingHandle: AttributeHandle, endingHandle: AttributeHandle, attributeGroupType: BluetoothUUID) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
            self.attributeGroupType = attributeGroupType
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            startingHandle = try p.attHandle(Self.opcode)
            endingHandle = try p.attHandle(Self.opcode)
            attributeGroupType = try p.attRemainingUUID(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(startingHandle)
            b.writeHandle(endingHandle)
            b.writeATTUUID(attributeGroupType)
        }
    }

    /// ATT_READ_BY_GROUP_TYPE_RSP: a Length octet, then (handle, end group handle, value) entries.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.10.
    public struct ReadByGroupTypeResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.readByGroupTypeResponse

        public struct AttributeData: Sendable, Hashable {
            public var handle: AttributeHandle
            public var endGroupHandle: AttributeHandle
            public var value: [UInt8]
            public init(handle: AttributeHandle, endGroupHandle: AttributeHandle, value: [UInt8]) {
                self.handle = handle
                self.endGroupHandle = endGroupHandle
                self.value = value
            }
        }

        /// At least one entry; every value has the same length (at most 251 octets).
        public var attributeData: [AttributeData]
        public init(attributeData: [AttributeData]) { self.attributeData = attributeData }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            let length = Int(try p.attUInt8(Self.opcode))
            guard length >= 4 else { throw ATTError(.invalidLength, opcode: Self.opcode, "length \(length)") }
            guard p.readableBytes > 0 else { throw ATTError(.truncatedPDU, opcode: Self.opcode, "no entries") }
            guard p.readableBytes % length == 0 else {
                throw ATTError(
                    .invalidLength, opcode: Self.opcode, "\(p.readableBytes) octets of \(length)-octet entries")
            }
            attributeData = []
            while p.readableBytes > 0 {
                let handle = try p.attHandle(Self.opcode)
                let end = try p.attHandle(Self.opcode)
                attributeData.append(
                    .init(handle: handle, endGroupHandle: end, value: try p.attBytes(length - 4, Self.opcode)))
            }
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            let valueLength = attributeData.first?.value.count ?? 0
            b.writeLE(UInt8(clamping: 4 + valueLength))
            for entry in attributeData {
                b.writeHandle(entry.handle)
                b.writeHandle(entry.endGroupHandle)
                b.writeBytes(entry.value.prefix(valueLength))
            }
        }
    }

    /// ATT_READ_MULTIPLE_VARIABLE_REQ: two or more handles whose values are read with their lengths.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.11.
    public struct ReadMultipleVariableRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.readMultipleVariableRequest
        public var setOfHandles: [AttributeHandle]
        public init(setOfHandles: [AttributeHandle]) { self.setOfHandles = setOfHandles }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            setOfHandles = try decodeHandleSet(&p, Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) { for handle in setOfHandles { b.writeHandle(handle) } }
    }

    /// ATT_READ_MULTIPLE_VARIABLE_RSP: a Length Value Tuple List.
    ///
    /// The list is cut at ATT_MTU-1 octets, so the last tuple's value may be shorter than its Value Length:
    /// each tuple keeps the length it declared next to the octets that arrived.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.4.12.
    public struct ReadMultipleVariableResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.readMultipleVariableResponse

        public struct LengthValue: Sendable, Hashable {
            /// The attribute value's whole length, in octets.
            public var valueLength: UInt16
            /// The octets carried; fewer than `valueLength` only in the last, truncated tuple.
            public var value: [UInt8]
            public init(valueLength: UInt16, value: [UInt8]) {
                self.valueLength = valueLength
                self.value = value
            }
            public init(value: [UInt8]) { self.init(valueLength: UInt16(clamping: value.count), value: value) }
            public var isTruncated: Bool { value.count < Int(valueLength) }
        }

        public var lengthValueTupleList: [LengthValue]
        public init(lengthValueTupleList: [LengthValue]) { self.lengthValueTupleList = lengthValueTupleList }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            lengthValueTupleList = []
            while p.readableBytes > 0 {
                let length = try p.attUInt16(Self.opcode)
                let available = min(Int(length), p.readableBytes)
                if available < Int(length) && available != p.readableBytes {
                    throw ATTError(.invalidLength, opcode: Self.opcode)
                }
                lengthValueTupleList.append(
                    LengthValue(valueLength: length, value: try p.attBytes(available, Self.opcode)))
            }
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            for tuple in lengthValueTupleList {
                b.writeLE(tuple.valueLength)
                b.writeBytes(tuple.value)
            }
        }
    }
}

private func decodeHandleSet(_ p: inout ByteBuffer, _ opcode: ATTOpcode) throws(ATTError) -> [AttributeHandle] {
    guard p.readableBytes >= 4 else {
        throw ATTError(.truncatedPDU, opcode: opcode, "a set of handles has at least two")
    }
    guard p.readableBytes % 2 == 0 else { throw ATTError(.invalidLength, opcode: opcode) }
    var handles: [AttributeHandle] = []
    while p.readableBytes > 0 { handles.append(try p.attHandle(opcode)) }
    return handles
}
