import BLECore
import NIOCore

/// A basic information frame (B-frame): the L2CAP PDU of the LE fixed channels (ATT, LE signalling, SMP).
///
/// ```
/// | Length (2, LE) | Channel ID (2, LE) | Information payload (Length octets) |
/// ```
/// `Length` counts the payload only, 0...65535 octets.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 3.1 (Connection-oriented channels in Basic L2CAP mode).
public struct L2CAPBasicFrame: Hashable, Sendable, CustomStringConvertible {
    /// The length of the basic L2CAP header: length and channel ID.
    public static let headerLength = 4
    /// The largest payload the 16-bit length field can declare.
    public static let maximumPayloadLength = Int(UInt16.max)

    /// The destination channel.
    public var channelID: L2CAPChannelID
    /// The information payload (an ATT PDU, a signalling command, an SMP command...).
    public var payload: ByteBuffer

    /// A frame for `channelID` carrying `payload`.
    ///
    /// - Precondition: `payload.readableBytes <= 65535` (a longer payload cannot be framed: a programming error).
    public init(channelID: L2CAPChannelID, payload: ByteBuffer) {
        precondition(payload.readableBytes <= Self.maximumPayloadLength, "a B-frame payload is at most 65535 octets")
        self.channelID = channelID
        self.payload = payload
    }

    /// A frame for `channelID` carrying `payload`.
    public init(channelID: L2CAPChannelID, payload: [UInt8]) {
        self.init(channelID: channelID, payload: ByteBuffer(bytes: payload))
    }

    /// Decodes one whole B-frame, as reassembled from ACL fragments.
    ///
    /// Throws `.truncated` if the buffer is shorter than the header or the declared length, `.malformed` if
    /// octets follow the declared payload.
    public init(decoding bytes: ByteBuffer) throws(L2CAPError) {
        var buffer = bytes
        guard let frame = Self.read(from: &buffer) else {
            throw .truncated("B-frame of \(bytes.readableBytes) octets is shorter than its header or declared length")
        }
        guard buffer.readableBytes == 0 else {
            throw .malformed("\(buffer.readableBytes) octets follow the B-frame's declared payload")
        }
        self = frame
    }

    /// Decodes a B-frame from the start of `buffer`, for framing a byte stream.
    ///
    /// Returns `nil`, consuming nothing, when the buffer does not hold the whole frame yet. Every header is
    /// valid, so there is nothing to throw; `L2CAPRecombiner` applies a maximum length.
    public static func read(from buffer: inout ByteBuffer) -> L2CAPBasicFrame? {
        let start = buffer.readerIndex
        guard let length = buffer.readLE(UInt16.self), let cid = buffer.readLE(UInt16.self),
            let payload = buffer.readSlice(length: Int(length))
        else {
            buffer.moveReaderIndex(to: start)
            return nil
        }
        return L2CAPBasicFrame(channelID: L2CAPChannelID(rawValue: cid), payload: payload)
    }

    /// Appends the encoded frame to `buffer`; returns the number of octets written.
    @discardableResult
    public func encode(into buffer: inout ByteBuffer) -> Int {
        var written = buffer.writeLE(UInt16(payload.readableBytes))
        written += buffer.writeLE(channelID.rawValue)
        written += buffer.writeImmutableBuffer(payload)
        return written
    }

    /// The encoded frame.
    public var encoded: ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: Self.headerLength + payload.readableBytes)
        encode(into: &buffer)
        return buffer
    }

    /// The encoded frame as bytes, in one allocation (what one ACL packet carries when the frame fits it).
    public var bytes: [UInt8] {
        let length = payload.readableBytes
        return [UInt8](unsafeUninitializedCapacity: Self.headerLength + length) { out, count in
            out[0] = UInt8(truncatingIfNeeded: length)
            out[1] = UInt8(truncatingIfNeeded: length >> 8)
            out[2] = UInt8(truncatingIfNeeded: channelID.rawValue)
            out[3] = UInt8(truncatingIfNeeded: channelID.rawValue >> 8)
            payload.withUnsafeReadableBytes { bytes in
                _ = UnsafeMutableBufferPointer(rebasing: out[Self.headerLength...]).initialize(from: bytes)
            }
            count = Self.headerLength + length
        }
    }

    /// The encoded length: header plus payload.
    public var encodedLength: Int { Self.headerLength + payload.readableBytes }

    public var description: String {
        "L2CAPBasicFrame(cid: \(channelID), \(payload.readableBytes) octets: \(payload.readableBytesView.hexString))"
    }
}
