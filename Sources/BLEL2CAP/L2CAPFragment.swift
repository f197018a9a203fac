import BLECore
import NIOCore

/// The Packet_Boundary_Flag of an HCI ACL data packet: where the packet's octets sit in an L2CAP PDU.
///
/// BLEL2CAP defines its own copy so that it does not depend on BLEHCI; the raw values are HCI's.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.2 (HCI ACL Data packets).
public enum L2CAPPacketBoundary: UInt8, Hashable, Sendable, CaseIterable {
    /// 0b00: first fragment of a non-automatically-flushable PDU; what a host sends on LE.
    case firstNonFlushable = 0b00
    /// 0b01: a continuing fragment.
    case continuing = 0b01
    /// 0b10: first fragment of an automatically flushable PDU; what a controller delivers on LE.
    case firstFlushable = 0b10
    /// 0b11: a complete PDU in one packet (automatically flushable; not used on LE-U, accepted as a start).
    case complete = 0b11

    /// Whether a packet with this flag begins a PDU.
    public var isStart: Bool { self != .continuing }
}

/// One ACL data packet's worth of an L2CAP PDU: its boundary flag and its octets.
public struct L2CAPFragment: Hashable, Sendable, CustomStringConvertible {
    public var boundary: L2CAPPacketBoundary
    public var data: ByteBuffer

    public init(boundary: L2CAPPacketBoundary, data: ByteBuffer) {
        self.boundary = boundary
        self.data = data
    }

    public init(boundary: L2CAPPacketBoundary, data: [UInt8]) {
        self.init(boundary: boundary, data: ByteBuffer(bytes: data))
    }

    public var description: String { "\(boundary): \(data.readableBytesView.hexString)" }
}
