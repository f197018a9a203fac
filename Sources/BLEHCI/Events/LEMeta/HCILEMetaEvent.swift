import BLECore
import NIOCore

/// An LE Meta event, decoded by subevent: one case per subevent this module knows, `.unknown` keeping any
/// other subevent with its bytes.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65 (LE Meta event).
public enum HCILEMetaEvent: Sendable, Hashable {
    case connectionComplete(ConnectionComplete)
    case advertisingReport(AdvertisingReport)
    case connectionUpdateComplete(ConnectionUpdateComplete)
    case readRemoteFeaturesComplete(ReadRemoteFeaturesComplete)
    case longTermKeyRequest(LongTermKeyRequest)
    case remoteConnectionParameterRequest(RemoteConnectionParameterRequest)
    case dataLengthChange(DataLengthChange)
    case enhancedConnectionComplete(EnhancedConnectionComplete)
    case phyUpdateComplete(PHYUpdateComplete)
    case extendedAdvertisingReport(ExtendedAdvertisingReport)
    /// A subevent this module does not decode: its code and the bytes after it.
    case unknown(subevent: HCILEMetaSubevent, parameters: [UInt8])

    /// Decodes the LE Meta event parameters (subevent code first).
    public init(parameters buffer: inout ByteBuffer) throws {
        let subevent = HCILEMetaSubevent(rawValue: try buffer.hciRead(UInt8.self, "Subevent_Code"))
        switch subevent {
        case ConnectionComplete.subeventCode: self = .connectionComplete(try .init(parameters: &buffer))
        case AdvertisingReport.subeventCode: self = .advertisingReport(try .init(parameters: &buffer))
        case ConnectionUpdateComplete.subeventCode: self = .connectionUpdateComplete(try .init(parameters: &buffer))
        case ReadRemoteFeaturesComplete.subeventCode: self = .readRemoteFeaturesComplete(try .init(parameters: &buffer))
        case LongTermKeyRequest.subeventCode: self = .longTermKeyRequest(try .init(parameters: &buffer))
        case RemoteConnectionParameterRequest.subeventCode:
            self = .remoteConnectionParameterRequest(try .init(parameters: &buffer))
        case DataLengthChange.subeventCode: self = .dataLengthChange(try .init(parameters: &buffer))
        case EnhancedConnectionComplete.subeventCode: self = .enhancedConnectionComplete(try .init(parameters: &buffer))
        case PHYUpdateComplete.subeventCode: self = .phyUpdateComplete(try .init(parameters: &buffer))
        case ExtendedAdvertisingReport.subeventCode: self = .extendedAdvertisingReport(try .init(parameters: &buffer))
        default: self = .unknown(subevent: subevent, parameters: buffer.readRemainingBytes())
        }
    }

    /// Decodes an LE Meta event packet.
    public init(packet: HCIEventPacket) throws {
        guard packet.code == .leMeta else {
            throw HCIError(.unexpectedEvent, "expected LE Meta, got \(packet.code)")
        }
        var buffer = ByteBuffer(hciBytes: packet.parameters)
        try self.init(parameters: &buffer)
    }

    /// The subevent code.
    public var subevent: HCILEMetaSubevent {
        switch self {
        case .connectionComplete: return ConnectionComplete.subeventCode
        case .advertisingReport: return AdvertisingReport.subeventCode
        case .connectionUpdateComplete: return ConnectionUpdateComplete.subeventCode
        case .readRemoteFeaturesComplete: return ReadRemoteFeaturesComplete.subeventCode
        case .longTermKeyRequest: return LongTermKeyRequest.subeventCode
        case .remoteConnectionParameterRequest: return RemoteConnectionParameterRequest.subeventCode
        case .dataLengthChange: return DataLengthChange.subeventCode
        case .enhancedConnectionComplete: return EnhancedConnectionComplete.subeventCode
        case .phyUpdateComplete: return PHYUpdateComplete.subeventCode
        case .extendedAdvertisingReport: return ExtendedAdvertisingReport.subeventCode
        case .unknown(let subevent, _): return subevent
        }
    }

    /// The event as an LE Meta HCI Event packet.
    public var packet: HCIEventPacket {
        switch self {
        case .connectionComplete(let event): return event.packet
        case .advertisingReport(let event): return event.packet
        case .connectionUpdateComplete(let event): return event.packet
        case .readRemoteFeaturesComplete(let event): return event.packet
        case .longTermKeyRequest(let event): return event.packet
        case .remoteConnectionParameterRequest(let event): return event.packet
        case .dataLengthChange(let event): return event.packet
        case .enhancedConnectionComplete(let event): return event.packet
        case .phyUpdateComplete(let event): return event.packet
        case .extendedAdvertisingReport(let event): return event.packet
        case .unknown(let subevent, let parameters):
            return HCIEventPacket(code: .leMeta, parameters: [subevent.rawValue] + parameters)
        }
    }
}
