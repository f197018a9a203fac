import Foundation
import HeapModule
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
    /// For an encrypted PDU: whether the sniffer checked its MIC, and whether the MIC was valid (then `pdu` shows
    /// the payload decrypted, MIC kept, and `onAir` holds the PDU as transmitted, whose CRC the record carries).
    var micChecked = false
    var micValid = false
    var onAir: [UInt8]?
}

/// Writes air packets as pcap with `LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR` (256): a 10-byte pseudo-header (channel,
/// signal power, noise power, access address offenses, reference access address, flags), then the access
/// address, the PDU and its CRC. An encrypted PDU is recorded decrypted, its MIC kept, and flagged so. Timestamps
/// are virtual time from 2026-01-01T00:00:00Z, so a capture of the same run is the same file.
///
/// Records are in time order, as a sniffer writes them. The radio makes packets in the order it processes
/// events, which is not quite their order on the air (an exchange's packets are made when it ends, an
/// advertising event's when it starts), so packets wait in a heap until virtual time has passed them by more
/// than any one exchange can last (`reorderWindow`).
///
/// - SeeAlso: https://www.tcpdump.org/linktypes/LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR.html; Core Spec 5.4, Vol 6,
///   Part B, 2.1 (packet format), 3.1.1 (CRC).
final class AirCaptureFile: Sendable {
    private let handle: Mutex<FileHandle?>
    /// Packets not written yet, earliest first (by time, then by the order they were made).
    private let pending = Mutex((heap: Heap<PendingPacket>(), made: 0))
    static let origin: Int64 = 1_767_225_600  // 2026-01-01T00:00:00Z, seconds
    /// Longer than any exchange (two 251-octet PDUs on LE Coded take 34.4 ms).
    static let reorderWindow: Int64 = 100 * VirtualTime.millisecond

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw SimulationError.cannotCapture(path: path)
        }
        guard let file = FileHandle(forWritingAtPath: path) else { throw SimulationError.cannotCapture(path: path) }
        var header = ByteWriter(capacity: 24)
        header.u32(0xA1B2_3C4D)  // pcap, nanosecond timestamps
        header.u16(UInt16(2))
        header.u16(UInt16(4))
        header.u32(0)  // thiszone
        header.u32(0)  // sigfigs
        header.u32(65535)  // snaplen
        header.u32(256)  // LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR
        do {
            try file.write(contentsOf: Data(header.bytes))
        } catch {
            throw SimulationError.cannotCapture(path: path)
        }
        handle = Mutex(file)
    }

    /// Takes `packet`, made at virtual time `now`, and writes every packet that nothing made later can precede.
    func write(_ packet: AirPacket, now: Int64) {
        let ready = pending.withLock { pending in
            pending.made += 1
            pending.heap.insert(PendingPacket(packet: packet, made: pending.made))
            var ready: [AirPacket] = []
            while let first = pending.heap.min, first.packet.time <= now - Self.reorderWindow {
                ready.append(pending.heap.removeMin().packet)
            }
            return ready
        }
        for packet in ready { record(packet) }
    }

    private func record(_ packet: AirPacket) {
        var body = ByteWriter(capacity: 10 + 4 + 1 + packet.pdu.count + 3)
        body.u8(Self.rfChannel(packet.channel))
        body.i8(packet.rssi)
        body.u8(0)  // noise power (not valid)
        body.u8(0)  // access address offenses (not valid)
        body.u32(packet.accessAddress)  // reference access address
        // Dewhitened, signal power valid, reference access address valid; PDU type; PHY. The CRC is left for the
        // reader to check (Wireshark checks it where it knows CRCInit), rather than declared valid.
        let phy: UInt16 =
            switch packet.phy {
            case .le1M: 0
            case .le2M: 1
            case .leCoded: 2
            }
        var flags: UInt16 = 0x0001 | 0x0002 | 0x0010 | (packet.direction << 7) | (phy << 14)
        // An encrypted PDU: the sniffer checked the CRC on what it received, and the MIC (0x1000), valid (0x2000)
        // when it could decrypt the payload (0x0008). A reader cannot check a CRC over decrypted bytes itself.
        if packet.micChecked { flags |= 0x0400 | 0x0800 | 0x1000 }
        if packet.micValid { flags |= 0x0008 | 0x2000 }
        body.u16(flags)
        body.u32(packet.accessAddress)
        // LE Coded packets carry their coding indicator after the access address (0: S=8).
        if packet.phy == .leCoded { body.u8(0) }
        body.append(packet.pdu)
        body.u24(Self.crc(packet.onAir ?? packet.pdu, initial: packet.crcInit))
        var record = ByteWriter(capacity: 16 + body.bytes.count)
        let seconds = packet.time / 1_000_000_000
        record.u32(UInt32(truncatingIfNeeded: Self.origin + seconds))
        record.u32(UInt32(truncatingIfNeeded: packet.time % 1_000_000_000))
        record.u32(UInt32(body.bytes.count))
        record.u32(UInt32(body.bytes.count))
        record.append(body.bytes)
        let bytes = Data(record.bytes)
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

    /// Writes the packets still waiting and closes the file.
    func close() {
        var rest = pending.withLock { pending in
            defer { pending.heap = Heap() }
            return pending.heap
        }
        while let next = rest.popMin() { record(next.packet) }
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

private struct PendingPacket: Comparable, Sendable {
    var packet: AirPacket
    var made: Int
    static func < (a: Self, b: Self) -> Bool { (a.packet.time, a.made) < (b.packet.time, b.made) }
    static func == (a: Self, b: Self) -> Bool { a.made == b.made }
}
