import BLECore
import NIOCore

extension ATTPDU {
    /// ATT_FIND_INFORMATION_REQ: the handles and types of the attributes in a range.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.3.1.
    public struct FindInformationRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.findInformationRequest
        public var startingHandle: AttributeHandle
        public var endingHandle: AttributeHandle
        public init(startingHandle: AttributeHandle, endingHandle: AttributeHandle) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
        }
        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            startingHandle = try p.attHandle(Self.opcode)
            endingHandle = try p.attHandle(Self.opcode)
            try p.attExpectEnd(Self.opcode)
        }
        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(startingHandle)
            b.writeHandle(endingHandle)
        }
    }

    /// ATT_FIND_INFORMATION_RSP: handle–type pairs, all with UUIDs of one width.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.3.2.
    public struct FindInformationResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.findInformationResponse

        /// The Format field: the width of every UUID in the list.
        public struct Format: RawRepresentable, Sendable, Hashable {
            public var rawValue: UInt8
            public init(rawValue: UInt8) { self.rawValue = rawValue }
            /// Format 0x01: handles with 16-bit UUIDs.
            public static let uuid16 = Format(rawValue: 0x01)
            /// Format 0x02: handles with 128-bit UUIDs.
            public static let uuid128 = Format(rawValue: 0x02)
            var uuidLength: Int? { self == .uuid16 ? 2 : self == .uuid128 ? 16 : nil }
        }

        public struct Information: Sendable, Hashable {
            public var handle: AttributeHandle
            public var type: BluetoothUUID
            public init(handle: AttributeHandle, type: BluetoothUUID) {
                self.handle = handle
                self.type = type
            }
        }

        public var format: Format
        /// At least one entry.
        public var information: [Information]

        /// `format` defaults to 16-bit when every type is a 16-bit UUID.
        public init(format: Format? = nil, information: [Information]) {
            self.format = format ?? (information.allSatisfy { $0.type.uint16 != nil } ? .uuid16 : .uuid128)
            self.information = information
        }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            format = Format(rawValue: try p.attUInt8(Self.opcode))
            guard let uuidLength = format.uuidLength else {
                throw ATTError(.invalidValue, opcode: Self.opcode, "format \(format.rawValue)")
            }
            let entry = 2 + uuidLength
            guard p.readableBytes > 0 else { throw ATTError(.truncatedPDU, opcode: Self.opcode, "no entries") }
            guard p.readableBytes % entry == 0 else {
                throw ATTError(
                    .invalidLength, opcode: Self.opcode, "\(p.readableBytes) octets of \(entry)-octet entries")
            }
            information = []
            while p.readableBytes > 0 {
                let handle = try p.attHandle(Self.opcode)
                information.append(Information(handle: handle, type: try p.attUUID(length: uuidLength, Self.opcode)))
            }
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeLE(format.rawValue)
            for entry in information {
                b.writeHandle(entry.handle)
                if format == .uuid16 {
                    b.writeLE(entry.type.uint16 ?? 0)
                } else {
                    b.writeBytes(entry.type.bytes128.reversed())
                }
            }
        }
    }

    /// ATT_FIND_BY_TYPE_VALUE_REQ: the attributes of a 16-bit type whose value equals the one given.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.3.3.
    public struct FindByTypeValueRequest: ATTPDUMessage {
        public static let opcode = ATTOpcode.findByTypeValueRequest
        public var startingHandle: AttributeHandle
        public var endingHandle: AttributeHandle
        /// A 16-bit UUID (2 octets on the wire).
        public var attributeType: UInt16
        public var attributeValue: [UInt8]

        public init(
            startingHandle: AttributeHandle, endingHandle: AttributeHandle, attributeType: UInt16,
            attributeValue: [UInt8]
        ) {
            self.startingHandle = startingHandle
            self.endingHandle = endingHandle
            self.attributeType = attributeType
            self.attributeValue = attributeValue
        }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            startingHandle = try p.attHandle(Self.opcode)
            endingHandle = try p.attHandle(Self.opcode)
            attributeType = try p.attUInt16(Self.opcode)
            attributeValue = p.readRemainingBytes()
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            b.writeHandle(startingHandle)
            b.writeHandle(endingHandle)
            b.writeLE(attributeType)
            b.writeBytes(attributeValue)
        }
    }

    /// ATT_FIND_BY_TYPE_VALUE_RSP: found handles with the ends of their groups.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.3.4.
    public struct FindByTypeValueResponse: ATTPDUMessage {
        public static let opcode = ATTOpcode.findByTypeValueResponse

        public struct HandlesInformation: Sendable, Hashable {
            public var foundAttributeHandle: AttributeHandle
            /// The group's last handle; the found handle itself for an attribute that is no grouping type.
            public var groupEndHandle: AttributeHandle
            public init(foundAttributeHandle: AttributeHandle, groupEndHandle: AttributeHandle) {
                self.foundAttributeHandle = foundAttributeHandle
                self.groupEndHandle = groupEndHandle
            }
        }

        /// At least one entry.
        public var handlesInformation: [HandlesInformation]
        public init(handlesInformation: [HandlesInformation]) { self.handlesInformation = handlesInformation }

        public init(decoding p: inout ByteBuffer) throws(ATTError) {
            guard p.readableBytes > 0 else { throw ATTError(.truncatedPDU, opcode: Self.opcode, "no entries") }
            guard p.readableBytes % 4 == 0 else {
                throw ATTError(.invalidLength, opcode: Self.opcode, "\(p.readableBytes) octets of 4-octet entries")
            }
            handlesInformation = []
            while p.readableBytes > 0 {
                let found = try p.attHandle(Self.opcode)
                handlesInformation.append(
                    .init(foundAttributeHandle: found, groupEndHandle: try p.attHandle(Self.opcode)))
            }
        }

        public func encodeParameters(into b: inout ByteBuffer) {
            for entry in handlesInformation {
                b.writeHandle(entry.foundAttributeHandle)
                b.writeHandle(entry.groupEndHandle)
            }
        }
    }
}
