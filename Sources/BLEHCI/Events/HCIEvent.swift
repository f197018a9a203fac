import BLECore
import NIOCore

/// An HCI event, decoded: one case per event this module knows, each carrying its parameters struct, and
/// `.unknown` keeping any other event packet unchanged.
///
/// `HCIEvent(packet)` decodes (the host side); `packet` encodes (the controller side).
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7 (Events).
public enum HCIEvent: Sendable, Hashable {
    case disconnectionComplete(DisconnectionComplete)
    case encryptionChange(EncryptionChange)
    case readRemoteVersionInformationComplete(ReadRemoteVersionInformationComplete)
    case commandComplete(CommandComplete)
    case commandStatus(CommandStatus)
    case hardwareError(HardwareError)
    case numberOfCompletedPackets(NumberOfCompletedPackets)
    case dataBufferOverflow(DataBufferOverflow)
    case encryptionKeyRefreshComplete(EncryptionKeyRefreshComplete)
    case leMeta(HCILEMetaEvent)
    /// An event this module does not decode, kept whole.
    case unknown(HCIEventPacket)

    /// Decodes an event packet. Unknown event codes (and LE subevents) are kept; a known event whose
    /// parameters are short or malformed throws `HCIError`.
    public init(_ packet: HCIEventPacket) throws {
        var buffer = ByteBuffer()
        try self.init(packet, decodingIn: &buffer)
    }

    /// Decodes an event packet as `init(_:)` does, reading its parameters through `buffer`, which is cleared
    /// first: a host that keeps one buffer for its events decodes without allocating one each time (the buffer
    /// is copied on write when a decoded event still holds part of it).
    public init(_ packet: HCIEventPacket, decodingIn buffer: inout ByteBuffer) throws {
        buffer.clear()
        buffer.writeBytes(packet.parameters)
        switch packet.code {
        case DisconnectionComplete.eventCode: self = .disconnectionComplete(try .init(parameters: &buffer))
        case EncryptionChange.eventCode: self = .encryptionChange(try .init(parameters: &buffer))
        case ReadRemoteVersionInformationComplete.eventCode:
            self = .readRemoteVersionInformationComplete(try .init(parameters: &buffer))
        case CommandComplete.eventCode: self = .commandComplete(try .init(parameters: &buffer))
        case CommandStatus.eventCode: self = .commandStatus(try .init(parameters: &buffer))
        case HardwareError.eventCode: self = .hardwareError(try .init(parameters: &buffer))
        case NumberOfCompletedPackets.eventCode: self = .numberOfCompletedPackets(try .init(parameters: &buffer))
        case DataBufferOverflow.eventCode: self = .dataBufferOverflow(try .init(parameters: &buffer))
        case EncryptionKeyRefreshComplete.eventCode:
            self = .encryptionKeyRefreshComplete(try .init(parameters: &buffer))
        case .leMeta: self = .leMeta(try HCILEMetaEvent(parameters: &buffer))
        default: self = .unknown(packet)
        }
    }

    /// Decodes the event packet of an `HCIPacket`; `nil` when it is not an event packet.
    public init?(_ packet: HCIPacket) throws {
        guard case .event(let event) = packet else { return nil }
        try self.init(event)
    }

    /// The event as an HCI Event packet.
    public var packet: HCIEventPacket {
        switch self {
        case .disconnectionComplete(let event): return event.packet
        case .encryptionChange(let event): return event.packet
        case .readRemoteVersionInformationComplete(let event): return event.packet
        case .commandComplete(let event): return event.packet
        case .commandStatus(let event): return event.packet
        case .hardwareError(let event): return event.packet
        case .numberOfCompletedPackets(let event): return event.packet
        case .dataBufferOverflow(let event): return event.packet
        case .encryptionKeyRefreshComplete(let event): return event.packet
        case .leMeta(let event): return event.packet
        case .unknown(let packet): return packet
        }
    }

    /// The event code.
    public var code: HCIEventCode {
        switch self {
        case .disconnectionComplete: return DisconnectionComplete.eventCode
        case .encryptionChange: return EncryptionChange.eventCode
        case .readRemoteVersionInformationComplete: return ReadRemoteVersionInformationComplete.eventCode
        case .commandComplete: return CommandComplete.eventCode
        case .commandStatus: return CommandStatus.eventCode
        case .hardwareError: return HardwareError.eventCode
        case .numberOfCompletedPackets: return NumberOfCompletedPackets.eventCode
        case .dataBufferOverflow: return DataBufferOverflow.eventCode
        case .encryptionKeyRefreshComplete: return EncryptionKeyRefreshComplete.eventCode
        case .leMeta: return .leMeta
        case .unknown(let packet): return packet.code
        }
    }
}
