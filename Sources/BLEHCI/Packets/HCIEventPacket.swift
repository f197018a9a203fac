import BLECore
import NIOCore

/// An HCI Event packet: a one-byte event code, a one-byte parameter length and up to 255 parameter bytes.
///
/// The controller sends these; the host decodes them (see `HCIEvent`). `encode()` writes the packet without
/// the H4 indicator.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.4 (HCI Event packet).
public struct HCIEventPacket: Sendable, Hashable, CustomStringConvertible {
    /// The largest parameter block an event packet can carry (its length field is one byte).
    public static let maximumParameterLength = 255
    /// Event code (1 byte) and parameter length (1 byte).
    public static let headerLength = 2

    public var code: HCIEventCode
    /// The parameter bytes, at most 255.
    public var parameters: [UInt8]

    public init(code: HCIEventCode, parameters: [UInt8] = []) {
        self.code = code
        self.parameters = parameters
    }

    /// Decodes one whole packet (no H4 indicator); the length field must match the bytes present exactly.
    public init(decoding bytes: some Collection<UInt8>) throws {
        var buffer = ByteBuffer(hciBytes: bytes)
        try self.init(decoding: &buffer)
        guard buffer.readableBytes == 0 else {
            throw HCIError.lengthMismatch(
                "HCI Event packet", declared: parameters.count, present: parameters.count + buffer.readableBytes)
        }
    }

    /// Reads one packet from the front of `buffer`; throws (consuming nothing) when it is incomplete.
    public init(decoding buffer: inout ByteBuffer) throws {
        var copy = buffer
        let code = HCIEventCode(rawValue: try copy.hciRead(UInt8.self, "HCI Event packet event code"))
        let length = Int(try copy.hciRead(UInt8.self, "HCI Event packet parameter length"))
        guard let parameters = copy.readBytes(length: length) else {
            throw HCIError.lengthMismatch("HCI Event packet", declared: length, present: copy.readableBytes)
        }
        self.init(code: code, parameters: parameters)
        buffer = copy
    }

    /// Appends the packet (no H4 indicator). More than 255 parameter bytes is a programming error.
    public func encode(into buffer: inout ByteBuffer) {
        precondition(parameters.count <= Self.maximumParameterLength, "HCI event parameters exceed 255 bytes")
        buffer.writeInteger(code.rawValue)
        buffer.writeInteger(UInt8(parameters.count))
        buffer.writeBytes(parameters)
    }

    /// The packet's bytes (no H4 indicator).
    public func encode() -> [UInt8] {
        var buffer = ByteBuffer()
        encode(into: &buffer)
        return buffer.readRemainingBytes()
    }

    public var description: String { "HCIEventPacket(\(code), \(parameters.hexString))" }
}
