import BLEHCI
import Foundation
import Synchronization

/// Writes HCI traffic in the btsnoop format (version 1, datalink 1002: HCI UART, i.e. H4), which Wireshark,
/// tshark, Android's bug reports and Apple's PacketLogger read.
///
/// File layout, all integers big-endian:
///
/// ```
/// header  "btsnoop\0" (8) | version u32 = 1 | datalink u32 = 1002
/// record  original length u32 | included length u32 | flags u32 | cumulative drops u32 |
///         timestamp i64 (microseconds since midnight, 1 January 0 AD) | packet data
/// ```
///
/// The packet data is the H4 packet indicator followed by the HCI packet, so the two lengths are the packet
/// length plus one. Flags bit 0 is the direction (0: sent, host to controller; 1: received, controller to
/// host); bit 1 is set for commands and events and clear for data (ACL, SCO, ISO). Drops are always 0.
///
/// Timestamps come from the injected clock (microseconds since the Unix epoch), so tests write identical
/// bytes every run. Records from both directions may arrive from different threads; they are serialised in
/// the order `record` is called. A failing sink (disk full) does not disturb the link: the first error is kept
/// in `failure` and later records are dropped.
///
/// - SeeAlso: RFC 1761 (snoop version 2, which btsnoop follows), and the btsnoop datalink 1002 for H4.
public final class BTSnoopWriter: Sendable {
    /// Who sent a recorded packet.
    public enum Direction: Sendable, Hashable {
        /// Host to controller (flags bit 0 clear).
        case sent
        /// Controller to host (flags bit 0 set).
        case received
    }

    /// Microseconds since the Unix epoch.
    public typealias Clock = @Sendable () -> Int64

    /// The file identification pattern, "btsnoop" and a NUL.
    public static let identification: [UInt8] = Array("btsnoop".utf8) + [0]
    /// The only btsnoop version.
    public static let version: UInt32 = 1
    /// Datalink type 1002: HCI UART (H4), packets carry their H4 indicator.
    public static let datalinkH4: UInt32 = 1002
    /// Microseconds from midnight, 1 January 0 AD to the Unix epoch: what btsnoop timestamps add.
    public static let epochOffset: Int64 = 0x00dc_ddb3_0f2f_8000

    /// The wall clock, in microseconds since the Unix epoch.
    public static let wallClock: Clock = {
        Int64((Date().timeIntervalSince1970 * 1_000_000).rounded())
    }

    private struct State {
        var sink: (any BTSnoopSink)?
        var failure: (any Error)?
        var records = 0
    }

    private let state: Mutex<State>
    private let clock: Clock

    /// Starts a capture: writes the file header to `sink`.
    ///
    /// - Throws: what the sink throws writing the header.
    public init(sink: any BTSnoopSink, clock: @escaping Clock = BTSnoopWriter.wallClock) throws {
        try sink.write(Self.header())
        self.state = Mutex(State(sink: sink))
        self.clock = clock
    }

    /// Starts a capture in a new file at `path` (replacing any file there), written through `BTSnoopFileSink`.
    public convenience init(path: String, clock: @escaping Clock = BTSnoopWriter.wallClock) throws {
        try self.init(sink: try BTSnoopFileSink(path: path), clock: clock)
    }

    /// Appends one record, timestamped now by the clock. Does nothing after `close` or a sink failure.
    public func record(_ packet: HCIPacket, direction: Direction) {
        state.withLock { state in
            guard let sink = state.sink else { return }
            let bytes = Self.record(packet, direction: direction, unixMicroseconds: clock())
            do {
                try sink.write(bytes)
                state.records += 1
            } catch {
                state.failure = error
                state.sink = nil
                sink.close()
            }
        }
    }

    /// Ends the capture and closes the sink; later records are dropped. Closing twice does nothing.
    public func close() {
        let sink: (any BTSnoopSink)? = state.withLock { state in
            defer { state.sink = nil }
            return state.sink
        }
        sink?.close()
    }

    /// How many records were written.
    public var recordCount: Int { state.withLock { $0.records } }

    /// The error that stopped the capture, if the sink failed.
    public var failure: (any Error)? { state.withLock { $0.failure } }

    // MARK: - Encoding

    /// The 16-byte file header.
    public static func header() -> [UInt8] {
        var bytes = identification
        bytes.appendBigEndian(version)
        bytes.appendBigEndian(datalinkH4)
        return bytes
    }

    /// The flags word of a record: bit 0 the direction, bit 1 command/event versus data.
    public static func flags(for packetType: HCIPacketType, direction: Direction) -> UInt32 {
        let directionBit: UInt32 = direction == .received ? 0b01 : 0
        let commandOrEvent = packetType == .command || packetType == .event
        return directionBit | (commandOrEvent ? 0b10 : 0)
    }

    /// One whole record: the 24-byte record header and the H4 packet.
    public static func record(_ packet: HCIPacket, direction: Direction, unixMicroseconds: Int64) -> [UInt8] {
        let data = H4Encoder.encode(packet)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24 + data.count)
        bytes.appendBigEndian(UInt32(data.count))  // original length
        bytes.appendBigEndian(UInt32(data.count))  // included length: never truncated
        bytes.appendBigEndian(flags(for: packet.packetType, direction: direction))
        bytes.appendBigEndian(UInt32(0))  // cumulative drops
        bytes.appendBigEndian(UInt64(bitPattern: unixMicroseconds &+ epochOffset))
        bytes += data
        return bytes
    }
}

extension [UInt8] {
    fileprivate mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        var big = value.bigEndian
        Swift.withUnsafeBytes(of: &big) { append(contentsOf: $0) }
    }
}
