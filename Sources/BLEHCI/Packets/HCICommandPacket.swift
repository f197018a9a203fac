import BLECore
import NIOCore

/// An HCI Command packet: a 16-bit opcode, a one-byte parameter length and up to 255 parameter bytes.
///
/// The host sends these; the controller decodes them. `encode()` writes the packet without the H4 indicator.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.1 (HCI Command packet).
public struct HCICommandPacket: Sendable, Hashable, CustomStringConvertible {
    /// The largest parameter block a command packet can carry (its length field is one byte).
    public static let maximumParameterLength = 255
    /// Opcode (2 bytes) and parameter length (1 byte).
    public static let headerLength = 3

    public var opcode: HCIOpcode
    /// The parameter bytes, at most 255.
    public var parameters: [UInt8]

    public init(opcode: HCIOpcode, parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }

    /// Decodes one whole packet (no H4 indicator); the length field must match the bytes present exactly.
    public init(decoding bytes: some Collection<UInt8>) throws {
        var buffer = ByteBuffer(hciBytes: bytes)
        try self.init(decoding: &buffer)
        guard buffer.readableBytes == 0 else {
            throw HCIError.lengthMismatch(
                "HCI Command packet", declared: parameters.count, present: parameters.count + buffer.readableBytes)
        }
    }

    /// Reads one packet from the front of `buffer`; throws (consuming nothing) when it is incomplete.
    public init(decoding buffer: inout ByteBuffer) throws {
        var copy = buffer
        let opcode = HCIOpcode(rawValue: try copy.hciRead(UInt16.self, "HCI Command packet opcode"))
        let length = Int(try copy.hciRead(UInt8.self, "HCI Command packet parameter length"))
        guard let parameters = copy.readBytes(length: length) else {
            throw HCIError.lengthMismatch("HCI Command packet", declared: length, present: copy.readableBytes)
        }
        self.init(opcode: opcode, parameters: parameters)
        buffer = copy
    }

    /// Appends the packet (no H4 indicator). More than 255 parameter bytes is a programming error.
    public func encode(into buffer: inout ByteBuffer) {
        precondition(parameters.count <= Self.maximumParameterLength, "HCI command parameters exceed 255 bytes")
        buffer.writeInteger(opcode.rawValue, endianness: .little)
        buffer.writeInteger(UInt8(parameters.count))
        buffer.writeBytes(parameters)
    }

    /// The packet's bytes (no H4 indicator).
    public func encode() -> [UInt8] {
        var buffer = ByteBuffer()
        encode(into: &buffer)
        return buffer.readRemainingBytes()
    }

    public var description: String { "HCICommandPacket(\(opcode), \(parameters.hexString))" }
}
