import Foundation

/// The records of an air capture (pcap, `LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR`), as a test reads them back.
struct AirRecord {
    /// Virtual time of the packet's start, in nanoseconds since the capture's origin.
    var time: Int64
    var accessAddress: UInt32
    /// The PDU: header and payload.
    var pdu: [UInt8]
    /// The pseudo-header's PHY field: 0 LE 1M, 1 LE 2M, 2 LE Coded.
    var phy: Int

    var isAdvertising: Bool { accessAddress == 0x8E89_BED6 }
    /// The advertising PDU type (Core Spec 5.4, Vol 6, Part B, 2.3): 0 ADV_IND, 3 SCAN_REQ, 4 SCAN_RSP, ...
    var advertisingType: UInt8 { pdu[0] & 0x0F }

    /// How long the packet is on the air, from its PDU's length (LE 1M and 2M).
    var duration: Int64 {
        let octets = Int64(pdu.count)
        return phy == 1 ? 4 * (2 + 4 + octets + 3) * 1000 : 8 * (1 + 4 + octets + 3) * 1000
    }

    /// Every record of the capture at `path`, in file order.
    static func read(_ path: String) throws -> [AirRecord] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }
        var records: [AirRecord] = []
        var at = 24
        while at + 16 <= bytes.count {
            let time = (Int64(u32(at)) - 1_767_225_600) * 1_000_000_000 + Int64(u32(at + 4))
            let length = Int(u32(at + 8))
            let body = Array(bytes[(at + 16)..<(at + 16 + length)])
            let flags = UInt16(body[8]) | UInt16(body[9]) << 8
            let phy = Int(flags >> 14)
            let pduStart = 14 + (phy == 2 ? 1 : 0)
            records.append(
                AirRecord(
                    time: time, accessAddress: body[10..<14].reversed().reduce(0) { $0 << 8 | UInt32($1) },
                    pdu: Array(body[pduStart..<(body.count - 3)]), phy: phy))
            at += 16 + length
        }
        return records
    }
}
