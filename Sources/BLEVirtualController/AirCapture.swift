import Foundation
import Synchronization

/// One link-layer packet on the simulated air, as a sniffer would record it.
struct AirPacket: Sendable {
    /// Virtual time of the packet's start, in nanoseconds.
    var time: Int64
    /// RF channel index 0...39 (37-39 advertising).
    var channel: Int
    var accessAddress: UInt32
    /// The PDU: its 2-byte header and payload (the CRC is computed when written).
    var pdu: [UInt8]
    var crcInit: UInt32
    var phy: LEPhy
    /// 0 advertising, 2 data central to peripheral, 3 data peripheral to central (the pseudo-header's PDU type).
    var direction: UInt16
    /// The transmitter's power at the sniffer, dBm.
    var rssi: Int8
}

/// Writes air packets as pcap with `LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR` (256): a 10-byte pseudo-header (channel,
/// signal power, noise power, access address offenses, reference access address, flags), then the access
/// address, the PDU and its CRC. Timestamps are virtual time from 2026-01-01T00:00:00Z, so a capture of the same
/// run is the same file.
///
/// - SeeAlso: https://www.tcpdump.org/linktypes/LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR.html; Core Spec 5.4, Vol 6,
///   Part B, 2.1 (packet format), 3.1.1 (CRC).
final class AirCaptureFile: Sendable {
    private let handle: Mutex<FileHandle?>
    static let origin: Int64 = 1_767_225_600  // 2026-01-01T00:00:00Z, seconds

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw SimulationError.cannotCapture(path: path)
        }
        guard let file = FileHandle(forWritingAtPath: path) else { throw SimulationError.cannotCapture(path: path) }
        var header: [UInt8] = []
        header.appendLE(UInt32(0xA1B2_3C4D))  // pcap, nanosecond timestamps
        header.appendLE(UInt16(2))
        header.appendLE(UInt16(4))
        header.appendLE(UInt32(0))  // thiszone
        header.appendLE(UInt32(0))  // sigfigs
        header.appendLE(UInt32(65535))  // snaplen
        header.appendLE(UInt32(256))  // LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR
        do {
            try file.write(contentsOf: Data(header))
        } catch {
            throw SimulationError.cannotCapture(path: path)
        }
        handle = Mutex(file)
    }

    func write(_ packet: AirPacket) {
        var body: [UInt8] = []
        body.append(Self.rfChannel(packet.channel))
        body.append(UInt8(bitPattern: packet.rssi))
        body.append(0)  // noise power (not valid)
        body.append(0)  // access address offenses (not valid)
        body.appendLE(packet.accessAddress)  // reference access address
        // Dewhitened, signal power valid, reference access address valid; PDU type; PHY. The CRC is left for the
        // reader to check (Wireshark checks it where it knows CRCInit), rather than declared valid.
        let phy: UInt16 =
            switch packet.phy {
            case .le1M: 0
            case .le2M: 1
            case .leCoded: 2
            }
        let flags: UInt16 = 0x0001 | 0x0002 | 0x0010 | (packet.direction << 7) | (phy << 14)
        body.appendLE(flags)
        body.appendLE(packet.accessAddress)
        // LE Coded packets carry their coding indicator after the access address (0: S=8).
        if packet.phy == .leCoded { body.append(0) }
        body.append(contentsOf: packet.pdu)
        let crc = Self.crc(packet.pdu, initial: packet.crcInit)
        body.append(contentsOf: [UInt8(crc & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8((crc >> 16) & 0xFF)])
        var record: [UInt8] = []
        let seconds = packet.time / 1_000_000_000
        record.appendLE(UInt32(truncatingIfNeeded: Self.origin + seconds))
        record.appendLE(UInt32(truncatingIfNeeded: packet.time % 1_000_000_000))
        record.appendLE(UInt32(body.count))
        record.appendLE(UInt32(body.count))
        let bytes = Data(record + body)
        // A write that fails (a full disk) ends the capture rather than the run.
        handle.withLock { file in
            do {
                try file?.write(contentsOf: bytes)
            } catch {
                try? file?.close()
                file = nil
            }
        }
    }

    /// The RF channel (frequency = 2402 MHz + 2 MHz × RF channel) of a channel index: the pseudo-header counts RF
    /// channels, and the advertising channels 37, 38 and 39 sit at RF 0, 12 and 39 (Vol 6, Part B, 1.4.1).
    static func rfChannel(_ index: Int) -> UInt8 {
        switch index {
        case 37: return 0
        case 38: return 12
        case 39: return 39
        case 0...10: return UInt8(index + 1)
        default: return UInt8(clamping: index + 2)
        }
    }

    func close() {
        handle.withLock { file in
            try? file?.close()
            file = nil
        }
    }

    /// The LL CRC (Vol 6, Part B, 3.1.1): a 24-bit shift register preset with CRCInit (0x555555 on the advertising
    /// channels), polynomial x²⁴ + x¹⁰ + x⁹ + x⁶ + x⁴ + x³ + x + 1, fed the PDU least significant bit first.
    /// Returned as the three bytes go on the air, the first in the low byte: the register's most significant bit
    /// is sent first, and each byte goes out least significant bit first.
    static func crc(_ pdu: [UInt8], initial: UInt32) -> UInt32 {
        var register = initial & 0xFF_FFFF
        for byte in pdu {
            for bit in 0..<8 {
                let feedback = ((register >> 23) & 1) ^ UInt32((byte >> UInt8(bit)) & 1)
                register = (register << 1) & 0xFF_FFFF
                if feedback != 0 { register ^= 0x00_065B }
            }
        }
        func reversed(_ byte: UInt32) -> UInt32 {
            var out: UInt32 = 0
            for i in 0..<8 where byte & (1 << UInt32(i)) != 0 { out |= 1 << UInt32(7 - i) }
            return out
        }
        return reversed((register >> 16) & 0xFF) | reversed((register >> 8) & 0xFF) << 8
            | reversed(register & 0xFF) << 16
    }
}

extension Array where Element == UInt8 {
    fileprivate mutating func appendLE(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF), UInt8(value >> 24),
        ])
    }
    fileprivate mutating func appendLE(_ value: UInt16) {
        append(contentsOf: [UInt8(value & 0xFF), UInt8(value >> 8)])
    }
}
