import BLEHCI

/// How long HCI packets take between a host and its virtual controller.
///
/// `ideal` (the default) takes no time, as between a phone's host and its built-in controller. `uart(baud:)` is
/// an H4 UART with 8N1 framing (10 bits on the wire per byte), as a USB-serial dongle or a board on a serial
/// port: each direction carries one byte at a time, so a packet arrives once its indicator and bytes have
/// crossed, after the packets ahead of it. At 1,000,000 baud a 251-byte LL payload's ACL packet (256 bytes with
/// its headers and indicator) takes 2.56 ms, a little more than it takes on LE 1M air.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 2 (UART transport layer).
public enum HostControllerLink: Sendable, Hashable, CustomStringConvertible {
    case ideal
    case uart(baud: Int)

    /// Nanoseconds `packet` takes to cross, H4 indicator included.
    func transferTime(of packet: HCIPacket) -> Int64 {
        guard case .uart(let baud) = self, baud > 0 else { return 0 }
        let bytes = Int64(H4Encoder.encode(packet).count)
        return bytes * 10 * VirtualTime.second / Int64(baud)
    }

    public var description: String {
        switch self {
        case .ideal: "ideal"
        case .uart(let baud): "UART at \(baud) baud"
        }
    }
}
