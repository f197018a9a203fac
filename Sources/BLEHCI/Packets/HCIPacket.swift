import BLECore
import NIOCore

/// One HCI packet of any type, as it crosses the host-controller interface.
///
/// Command, ACL and event packets are decoded; synchronous (SCO) and isochronous (ISO) packets, which this
/// stack does not interpret, travel as `.other` with their H4 indicator and raw bytes.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4 (HCI data formats); Vol 4, Part A, 2 (H4 packet indicators).
public enum HCIPacket: Sendable, Hashable, CustomStringConvertible {
    case command(HCICommandPacket)
    case acl(HCIACLDataPacket)
    case event(HCIEventPacket)
    /// Any other packet type: `type` is its H4 indicator, `bytes` the whole packet after it.
    case other(type: UInt8, bytes: [UInt8])

    /// The packet's H4 indicator.
    public var packetType: HCIPacketType {
        switch self {
        case .command: return .command
        case .acl: return .acl
        case .event: return .event
        case .other(let type, _): return HCIPacketType(rawValue: type)
        }
    }

    /// Decodes one whole packet of the given type (no H4 indicator in `bytes`).
    public init(type: HCIPacketType, decoding bytes: some Collection<UInt8>) throws {
        switch type {
        case .command: self = .command(try HCICommandPacket(decoding: bytes))
        case .acl: self = .acl(try HCIACLDataPacket(decoding: bytes))
        case .event: self = .event(try HCIEventPacket(decoding: bytes))
        default: self = .other(type: type.rawValue, bytes: Array(bytes))
        }
    }

    /// Appends the packet without its H4 indicator.
    public func encode(into buffer: inout ByteBuffer) {
        switch self {
        case .command(let packet): packet.encode(into: &buffer)
        case .acl(let packet): packet.encode(into: &buffer)
        case .event(let packet): packet.encode(into: &buffer)
        case .other(_, let bytes): buffer.writeBytes(bytes)
        }
    }

    /// The packet's bytes without its H4 indicator.
    public func encode() -> [UInt8] {
        var buffer = ByteBuffer()
        encode(into: &buffer)
        return buffer.readRemainingBytes()
    }

    public var description: String {
        switch self {
        case .command(let packet): return packet.description
        case .acl(let packet): return packet.description
        case .event(let packet): return packet.description
        case .other(let type, let bytes): return "HCIPacket(\(HCIPacketType(rawValue: type)), \(bytes.hexString))"
        }
    }
}
