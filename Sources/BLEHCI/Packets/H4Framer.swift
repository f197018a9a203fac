import BLECore
import NIOCore

/// Splits an H4 (UART transport) byte stream into HCI packets: each packet is preceded by a one-byte packet
/// indicator, and its own header says how long it is.
///
/// `decode(_:)` returns `nil`, consuming nothing, until a whole packet is buffered; it throws on a packet
/// indicator that is not one of the five HCI packet types, after which the stream has lost its framing.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 2 (UART transport: protocol); Vol 4, Part E, 5.4.
public struct H4Decoder: Sendable {
    public init() {}

    /// Reads one packet from the front of `buffer`, or returns `nil` (consuming nothing) if more bytes are needed.
    public mutating func decode(_ buffer: inout ByteBuffer) throws -> HCIPacket? {
        let start = buffer.readerIndex
        guard let indicator = buffer.getInteger(at: start, as: UInt8.self) else { return nil }
        let type = HCIPacketType(rawValue: indicator)
        let header = start + 1

        // Header length and the offset and size of its length field, per packet type.
        let headerLength: Int
        let payloadLength: Int?
        switch type {
        case .command:
            headerLength = HCICommandPacket.headerLength
            payloadLength = buffer.getInteger(at: header + 2, as: UInt8.self).map(Int.init)
        case .acl:
            headerLength = HCIACLDataPacket.headerLength
            payloadLength = buffer.getInteger(at: header + 2, endianness: .little, as: UInt16.self).map(Int.init)
        case .sco:
            // Connection handle and flags (2), data total length (1): Vol 4, Part E, 5.4.3.
            headerLength = 3
            payloadLength = buffer.getInteger(at: header + 2, as: UInt8.self).map(Int.init)
        case .event:
            headerLength = HCIEventPacket.headerLength
            payloadLength = buffer.getInteger(at: header + 1, as: UInt8.self).map(Int.init)
        case .iso:
            // Handle and flags (2), then a 14-bit ISO data load length (2): Vol 4, Part E, 5.4.5.
            headerLength = 4
            payloadLength = buffer.getInteger(at: header + 2, endianness: .little, as: UInt16.self).map {
                Int($0 & 0x3FFF)
            }
        default:
            throw HCIError.unknownPacketType(indicator)
        }
        guard let payloadLength else { return nil }
        let packetLength = headerLength + payloadLength
        guard let bytes = buffer.getBytes(at: header, length: packetLength) else { return nil }
        // The header's own length field guarantees the inner decoders see a whole packet.
        let packet = try HCIPacket(type: type, decoding: bytes)
        buffer.moveReaderIndex(forwardBy: 1 + packetLength)
        return packet
    }
}

/// Writes HCI packets as an H4 stream: the packet indicator, then the packet.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 2 (UART transport: protocol).
public enum H4Encoder {
    /// Appends the packet indicator and the packet.
    public static func encode(_ packet: HCIPacket, into buffer: inout ByteBuffer) {
        buffer.writeInteger(packet.packetType.rawValue)
        packet.encode(into: &buffer)
    }

    /// The packet indicator followed by the packet.
    public static func encode(_ packet: HCIPacket) -> [UInt8] {
        var buffer = ByteBuffer()
        encode(packet, into: &buffer)
        return buffer.readRemainingBytes()
    }
}
