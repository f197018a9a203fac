import Foundation

/// The packets of a btsnoop capture (H4 datalink), in order: whether each was received from the controller, and its
/// H4 bytes (the packet type first).
func snoopPackets(in path: String) throws -> [(received: Bool, data: [UInt8])] {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    func u32(_ at: Int) -> Int { (0..<4).reduce(0) { $0 << 8 | Int(bytes[at + $1]) } }
    var packets: [(received: Bool, data: [UInt8])] = []
    var at = 16
    while at + 24 <= bytes.count {
        let length = u32(at + 4)
        packets.append((u32(at + 8) & 0x01 == 1, Array(bytes[(at + 24)..<min(bytes.count, at + 24 + length)])))
        at += 24 + length
    }
    return packets
}

/// The ATT PDUs a host sent, read back from its btsnoop capture (H4 datalink), with the number of connections
/// completed before each: what a test checks when it asks "what went over the air after the reconnection?".
struct SnoopATT: CustomStringConvertible {
    /// How many LE Connection Complete events the host had received before this PDU.
    var connection: Int
    /// The ATT PDU (opcode first), from the first fragment of its L2CAP frame.
    var pdu: [UInt8]

    var opcode: UInt8 { pdu[0] }
    var description: String { "#\(connection) " + pdu.map { String(format: "%02x", $0) }.joined() }

    /// A discovery request (Vol 3, Part G, 4.4–4.7): Find Information, Find By Type Value, Read By Group Type,
    /// or Read By Type for anything but the Database Hash (0x2B2A).
    var isDiscovery: Bool {
        switch opcode {
        case 0x04, 0x06, 0x10: return true
        case 0x08: return !(pdu.count == 7 && pdu[5] == 0x2A && pdu[6] == 0x2B)
        default: return false
        }
    }

    /// A Read By Type of the Database Hash.
    var isHashRead: Bool { opcode == 0x08 && pdu.count == 7 && pdu[5] == 0x2A && pdu[6] == 0x2B }

    /// Every ATT PDU the host sent in the capture at `path`, in order.
    static func sent(in path: String) throws -> [SnoopATT] {
        var found: [SnoopATT] = []
        var connections = 0
        for (received, data) in try snoopPackets(in: path) {
            guard let type = data.first else { continue }
            if received, type == 0x04, data.count >= 4, data[1] == 0x3E, data[3] == 0x01 || data[3] == 0x0A {
                connections += 1
            }
            // ACL from the host, first fragment (PB 00), L2CAP channel 0x0004.
            guard !received, type == 0x02, data.count >= 10, data[2] & 0x30 == 0x00,
                data[7] == 0x04, data[8] == 0x00
            else { continue }
            found.append(SnoopATT(connection: connections, pdu: Array(data[9...])))
        }
        return found
    }
}

/// The HCI commands a host sent, read back from its btsnoop capture: each opcode with its parameters.
struct SnoopCommand {
    var opcode: UInt16
    var parameters: [UInt8]

    static func sent(in path: String) throws -> [SnoopCommand] {
        var found: [SnoopCommand] = []
        for (received, data) in try snoopPackets(in: path) {
            guard !received, data.count >= 4, data[0] == 0x01 else { continue }
            found.append(SnoopCommand(opcode: UInt16(data[1]) | UInt16(data[2]) << 8, parameters: Array(data[4...])))
        }
        return found
    }
}
