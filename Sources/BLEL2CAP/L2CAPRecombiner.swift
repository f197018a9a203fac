import BLECore
import NIOCore

/// Reassembles the ACL data packets of one connection into B-frames.
///
/// Feed every ACL packet received on the connection, in order, with its packet boundary flag. A first packet
/// (any flag but `.continuing`) starts a PDU; its octets begin with the 4-octet basic header, which may itself be
/// split across packets. Continuing packets append to it until the header's length is reached.
///
/// Nothing here depends on the controller's buffer size: a controller may deliver a whole PDU in one packet
/// longer than the size it advertised, and that is accepted. What bounds memory is `maximumPayloadLength`.
///
/// Failures never trap and never stop reassembly: each is reported in `Output.errors` and the recombiner carries
/// on with the next first fragment.
/// - a continuing packet with no PDU under way is dropped (`.unexpectedContinuation`);
/// - a first packet while a PDU is incomplete drops the incomplete PDU (`.incompleteFrameDropped`) and starts
///   the new one;
/// - octets beyond the declared length drop the PDU (`.fragmentOverrun`);
/// - a declared length above `maximumPayloadLength` drops the PDU (`.frameTooLong`) and silently skips its
///   remaining continuing packets.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 7.2 (Fragmentation and recombination); Vol 4, Part E, 5.4.2.
public struct L2CAPRecombiner: Sendable {
    /// What one packet produced: at most one complete frame, and what went wrong on the way.
    public struct Output: Hashable, Sendable {
        /// The frame this packet completed, if any.
        public var frame: L2CAPBasicFrame?
        /// What was dropped, in order. Usually empty; two entries when a new first packet both dropped an
        /// incomplete PDU and was itself faulty.
        public var errors: [L2CAPError]

        public init(frame: L2CAPBasicFrame? = nil, errors: [L2CAPError] = []) {
            self.frame = frame
            self.errors = errors
        }

        /// Nothing complete yet, nothing wrong.
        public static let needMoreFragments = Output()
    }

    private enum State: Sendable {
        case idle
        /// The octets of the PDU so far, header included.
        case assembling(ByteBuffer)
        /// Skipping the continuing packets of a PDU that was too long; `remaining` octets are still due.
        case discarding(remaining: Int)
    }

    /// The longest payload accepted; a basic header declaring more drops the frame.
    public let maximumPayloadLength: Int
    private var state: State = .idle

    /// - Parameter maximumPayloadLength: the longest B-frame payload to accept, at most 65535 (the length
    ///   field's range, which is also the default). A host may lower it to the largest MTU it offers.
    public init(maximumPayloadLength: Int = L2CAPBasicFrame.maximumPayloadLength) {
        self.maximumPayloadLength = min(max(0, maximumPayloadLength), L2CAPBasicFrame.maximumPayloadLength)
    }

    /// Whether a PDU is partly received.
    public var isAssembling: Bool {
        if case .assembling = state { return true }
        return false
    }

    /// When this one packet is a whole frame and nothing else is under way (the recombiner is idle, the packet
    /// starts a PDU, its basic header declares exactly the octets that follow and no more than the maximum): the
    /// frame's channel and payload, read in place from the packet's bytes. `receive` would give the same frame,
    /// after copying the bytes into a buffer; nil means the packet goes to `receive`. The recombiner stays idle
    /// either way, as `receive` would leave it.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 3.1 (basic L2CAP mode: a 2-octet length, a 2-octet channel ID).
    public func wholeFrame(
        in bytes: [UInt8], boundary: L2CAPPacketBoundary
    ) -> (channel: L2CAPChannelID, payload: ArraySlice<UInt8>)? {
        guard case .idle = state, boundary.isStart, bytes.count >= L2CAPBasicFrame.headerLength else { return nil }
        let declared = Int(bytes[0]) | Int(bytes[1]) << 8
        guard declared == bytes.count - L2CAPBasicFrame.headerLength, declared <= maximumPayloadLength else {
            return nil
        }
        let channel = L2CAPChannelID(rawValue: UInt16(bytes[2]) | UInt16(bytes[3]) << 8)
        return (channel, bytes[L2CAPBasicFrame.headerLength...])
    }

    /// Feeds one ACL packet.
    public mutating func receive(_ fragment: L2CAPFragment) -> Output {
        receive(fragment.data, boundary: fragment.boundary)
    }

    /// Feeds one ACL packet's data with its packet boundary flag.
    public mutating func receive(_ data: ByteBuffer, boundary: L2CAPPacketBoundary) -> Output {
        var errors: [L2CAPError] = []
        if boundary.isStart {
            if case .assembling(let partial) = state {
                errors.append(
                    .incompleteFrameDropped(
                        "a first fragment arrived with \(partial.readableBytes) octets of the previous PDU pending"))
            }
            state = .assembling(data)
        } else {
            switch state {
            case .idle:
                return Output(errors: [
                    .unexpectedContinuation(
                        "continuing fragment of \(data.readableBytes) octets with no PDU under way")
                ])
            case .discarding(let remaining):
                let left = remaining - data.readableBytes
                state = left > 0 ? .discarding(remaining: left) : .idle
                return .needMoreFragments
            case .assembling(var partial):
                state = .idle  // drop our reference so the append does not copy
                partial.writeImmutableBuffer(data)
                state = .assembling(partial)
            }
        }
        var output = evaluate()
        output.errors.insert(contentsOf: errors, at: 0)
        return output
    }

    /// Forgets any partial PDU (for example when the link closes).
    public mutating func reset() {
        state = .idle
    }

    /// Looks at the PDU under way: complete, too long, overrun, or waiting.
    private mutating func evaluate() -> Output {
        guard case .assembling(let partial) = state else { return .needMoreFragments }
        guard let length = partial.getInteger(at: partial.readerIndex, endianness: .little, as: UInt16.self) else {
            return .needMoreFragments  // the header itself is still split
        }
        let declared = Int(length)
        let total = L2CAPBasicFrame.headerLength + declared
        if declared > maximumPayloadLength {
            let remaining = total - partial.readableBytes
            state = remaining > 0 ? .discarding(remaining: remaining) : .idle
            return Output(errors: [
                .frameTooLong(
                    "basic header declares \(declared) octets, the maximum is \(maximumPayloadLength)")
            ])
        }
        if partial.readableBytes > total {
            state = .idle
            return Output(errors: [
                .fragmentOverrun(
                    "fragments carry \(partial.readableBytes - L2CAPBasicFrame.headerLength) octets, the header declares \(declared)"
                )
            ])
        }
        guard partial.readableBytes == total else { return .needMoreFragments }
        state = .idle
        var buffer = partial
        // The length check above guarantees a whole frame.
        guard let frame = L2CAPBasicFrame.read(from: &buffer) else { return .needMoreFragments }
        return Output(frame: frame)
    }
}
