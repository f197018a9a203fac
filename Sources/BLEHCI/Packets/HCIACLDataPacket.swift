import BLECore
import NIOCore

/// An HCI ACL Data packet: a 12-bit connection handle with two 2-bit flags, a 16-bit data length, and data.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.2 (HCI ACL Data packets).
public struct HCIACLDataPacket: Sendable, Hashable, CustomStringConvertible {
    /// Handle with flags (2 bytes) and data total length (2 bytes).
    public static let headerLength = 4

    /// The Packet_Boundary_Flag (bits 12-13 of the first header field).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.2.
    public struct PacketBoundaryFlag: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt8
        /// Keeps only the two low bits.
        public init(rawValue: UInt8) { self.rawValue = rawValue & 0b11 }

        /// 0b00: first fragment of a non-automatically-flushable L2CAP PDU (host to controller).
        public static let firstNonFlushable = PacketBoundaryFlag(rawValue: 0b00)
        /// 0b01: a continuing fragment.
        public static let continuing = PacketBoundaryFlag(rawValue: 0b01)
        /// 0b10: first fragment of an automatically flushable L2CAP PDU (what LE controllers send the host).
        public static let firstFlushable = PacketBoundaryFlag(rawValue: 0b10)
        /// 0b11: a complete L2CAP PDU, automatically flushable (not allowed on LE-U).
        public static let complete = PacketBoundaryFlag(rawValue: 0b11)

        /// `true` for the two "first fragment" values.
        public var isFirst: Bool { rawValue == 0b00 || rawValue == 0b10 }

        public var description: String {
            switch rawValue {
            case 0b00: return "first non-flushable"
            case 0b01: return "continuing"
            case 0b10: return "first flushable"
            default: return "complete"
            }
        }
    }

    public var handle: ConnectionHandle
    public var packetBoundary: PacketBoundaryFlag
    /// The Broadcast_Flag, 2 bits; 0b00 (point-to-point) on LE.
    public var broadcast: UInt8
    /// The data, at most 65535 bytes (and no more than the controller's buffer size).
    public var data: [UInt8]

    public init(handle: ConnectionHandle, packetBoundary: PacketBoundaryFlag, broadcast: UInt8 = 0, data: [UInt8]) {
        self.handle = handle
        self.packetBoundary = packetBoundary
        self.broadcast = broadcast & 0b11
        self.data = data
    }

    /// Decodes one whole packet (no H4 indicator); the length field must match the bytes present exactly.
    public init(decoding bytes: some Collection<UInt8>) throws {
        var buffer = ByteBuffer(hciBytes: bytes)
        try self.init(decoding: &buffer)
        guard buffer.readableBytes == 0 else {
            throw HCIError.lengthMismatch(
                "HCI ACL Data packet", declared: data.count, present: data.count + buffer.readableBytes)
        }
    }

    /// Reads one packet from the front of `buffer`; throws (consuming nothing) when it is incomplete.
    public init(decoding buffer: inout ByteBuffer) throws {
        var copy = buffer
        let header = try copy.hciRead(UInt16.self, "HCI ACL Data packet handle and flags")
        let length = Int(try copy.hciRead(UInt16.self, "HCI ACL Data packet data total length"))
        guard let data = copy.readBytes(length: length) else {
            throw HCIError.lengthMismatch("HCI ACL Data packet", declared: length, present: copy.readableBytes)
        }
        self.init(
            handle: ConnectionHandle(rawValue: header & 0x0FFF),
            packetBoundary: PacketBoundaryFlag(rawValue: UInt8((header >> 12) & 0b11)),
            broadcast: UInt8(header >> 14),
            data: data)
        buffer = copy
    }

    /// Appends the packet (no H4 indicator). More than 65535 data bytes is a programming error.
    public func encode(into buffer: inout ByteBuffer) {
        precondition(data.count <= Int(UInt16.max), "HCI ACL data exceeds 65535 bytes")
        let header =
            (handle.rawValue & 0x0FFF) | UInt16(packetBoundary.rawValue & 0b11) << 12 | UInt16(broadcast & 0b11) << 14
        buffer.writeInteger(header, endianness: .little)
        buffer.writeInteger(UInt16(data.count), endianness: .little)
        buffer.writeBytes(data)
    }

    /// The packet's bytes (no H4 indicator).
    public func encode() -> [UInt8] {
        var buffer = ByteBuffer()
        encode(into: &buffer)
        return buffer.readRemainingBytes()
    }

    public var description: String {
        "HCIACLDataPacket(\(handle), \(packetBoundary), bc \(broadcast), \(data.hexString))"
    }
}
