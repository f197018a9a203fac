import BLE
import Foundation

/// What a benchmark's notifications carry.
public enum PacketFormat: String, Sendable, Hashable, CaseIterable {
    /// Values of repeated bytes, on a service of our own.
    case plain
    /// bumble-bench's GATT packets on its service and characteristics (`BumbleBenchPacket`).
    case bumbleBench = "bumble-bench"
}

/// One packet of Bumble's `bumble-bench` tool in GATT mode, so that `ble bench` and Bumble's tool speak the same
/// format: `type (u8) | flags (u8) | sequence (u32 LE) | timestamp in µs (u32 LE) | payload`. A RESET is the type
/// octet alone and an ACK stops after the sequence number (BLEHost.docc/Peers.md). The client writes with Write
/// Commands to `writeCharacteristic`; the server notifies on `notifyCharacteristic`.
public struct BumbleBenchPacket: Sendable, Hashable {
    /// The packet's type octet.
    public struct PacketType: RawRepresentable, Sendable, Hashable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Starts a run: the receiver resets its counters.
        public static let reset = PacketType(rawValue: 0)
        /// A data packet with the next sequence number.
        public static let sequence = PacketType(rawValue: 1)
        /// The receiver's acknowledgement of the last packet.
        public static let ack = PacketType(rawValue: 2)
    }

    /// The flags octet.
    public struct Flags: OptionSet, Sendable, Hashable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The last packet of a run: the receiver answers with an ACK.
        public static let last = Flags(rawValue: 1)
    }

    /// bumble-bench's GATT service and characteristics (`SPEED_SERVICE_UUID`, `SPEED_TX_UUID`, `SPEED_RX_UUID`).
    public static let service = BluetoothUUID(string: "50DB505C-8AC4-4738-8448-3B1D9CC09CC5")!
    public static let writeCharacteristic = BluetoothUUID(string: "E789C754-41A1-45F4-A948-A0A1A90DBA53")!
    public static let notifyCharacteristic = BluetoothUUID(string: "016A2CC7-E14B-4819-935F-1F56EAE4098D")!

    /// The octets before a SEQUENCE packet's payload.
    public static let headerLength = 10

    public var type: PacketType
    public var flags: Flags
    public var sequence: UInt32
    /// Microseconds on the sender's clock, modulo 2^32.
    public var timestamp: UInt32
    /// The payload's length; its octets are zeros (bumble-bench sends `bytes(packet_size - 10)`).
    public var payloadLength: Int

    public init(
        type: PacketType, flags: Flags = [], sequence: UInt32 = 0, timestamp: UInt32 = 0, payloadLength: Int = 0
    ) {
        self.type = type
        self.flags = flags
        self.sequence = sequence
        self.timestamp = timestamp
        self.payloadLength = max(0, payloadLength)
    }

    /// The packet's octets.
    public var bytes: [UInt8] {
        if type == .reset { return [type.rawValue] }
        var out = [type.rawValue, flags.rawValue]
        out.reserveCapacity(Self.headerLength + payloadLength)
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: sequence >> shift)) }
        if type == .ack { return out }
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: timestamp >> shift)) }
        out.append(contentsOf: repeatElement(0, count: payloadLength))
        return out
    }

    /// Decodes a packet as bumble-bench does: nil for an empty one, an unknown type, or one shorter than its
    /// type needs (6 octets for an ACK, 10 for a SEQUENCE).
    public init?<Bytes: Collection<UInt8>>(decoding data: Bytes) {
        let octets = Array(data)
        guard let first = octets.first else { return nil }
        let type = PacketType(rawValue: first)
        switch type {
        case .reset:
            self.init(type: .reset)
            return
        case .ack, .sequence:
            break
        default:
            return nil
        }
        guard octets.count >= (type == .ack ? 6 : Self.headerLength) else { return nil }
        func u32(_ at: Int) -> UInt32 {
            (0..<4).reduce(0) { $0 | UInt32(octets[at + $1]) << (8 * UInt32($1)) }
        }
        self.init(
            type: type, flags: Flags(rawValue: octets[1]), sequence: u32(2),
            timestamp: type == .ack ? 0 : u32(6), payloadLength: type == .ack ? 0 : octets.count - Self.headerLength)
    }
}

/// A benchmark that could not run.
public struct BenchError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
