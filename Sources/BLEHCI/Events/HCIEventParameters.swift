import BLECore
import NIOCore

/// The parameters of one HCI event: its event code and how its parameter bytes encode and decode.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.4 and 7.7.
public protocol HCIEventParameters: Sendable, Hashable {
    static var eventCode: HCIEventCode { get }
    /// Decodes the parameter bytes; throws `HCIError` when they are short or malformed. Bytes after the last
    /// known parameter are ignored, as later spec versions may append parameters.
    init(parameters: inout ByteBuffer) throws
    /// Appends the parameter bytes (everything after the parameter length byte).
    func encodeParameters(into buffer: inout ByteBuffer)
}

/// The parameters of one LE Meta subevent: its subevent code and the bytes after the subevent byte.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.
public protocol HCILEMetaEventParameters: Sendable, Hashable {
    static var subeventCode: HCILEMetaSubevent { get }
    /// Decodes the bytes after the subevent code; throws `HCIError` when they are short or malformed.
    init(parameters: inout ByteBuffer) throws
    /// Appends the bytes after the subevent code.
    func encodeParameters(into buffer: inout ByteBuffer)
}

extension HCIEventParameters {
    /// This event as an HCI Event packet.
    public var packet: HCIEventPacket {
        var buffer = ByteBuffer()
        encodeParameters(into: &buffer)
        return HCIEventPacket(code: Self.eventCode, parameters: buffer.readRemainingBytes())
    }

    /// Decodes `Self` from an event packet, checking its event code.
    public init(packet: HCIEventPacket) throws {
        guard packet.code == Self.eventCode else {
            throw HCIError(.unexpectedEvent, "expected \(Self.eventCode), got \(packet.code)")
        }
        var buffer = ByteBuffer(hciBytes: packet.parameters)
        try self.init(parameters: &buffer)
    }
}

extension HCILEMetaEventParameters {
    /// This subevent as an LE Meta HCI Event packet.
    public var packet: HCIEventPacket {
        var buffer = ByteBuffer()
        buffer.writeInteger(Self.subeventCode.rawValue)
        encodeParameters(into: &buffer)
        return HCIEventPacket(code: .leMeta, parameters: buffer.readRemainingBytes())
    }

    /// Decodes `Self` from an LE Meta event packet, checking the event and subevent codes.
    public init(packet: HCIEventPacket) throws {
        var buffer = ByteBuffer(hciBytes: packet.parameters)
        let subevent = buffer.readInteger(as: UInt8.self).map(HCILEMetaSubevent.init(rawValue:))
        guard packet.code == .leMeta, subevent == Self.subeventCode else {
            throw HCIError(.unexpectedEvent, "expected LE Meta \(Self.subeventCode), got \(packet.code)")
        }
        try self.init(parameters: &buffer)
    }
}
