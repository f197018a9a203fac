import BLEHCI
import Foundation

/// Reads a btsnoop capture: ours (`BTSnoopWriter`), Android's HCI snoop log, Apple's PacketLogger export, or
/// Linux's `btmon -w`.
///
/// Three datalinks are read:
/// - 1001, HCI without encapsulation: the record's flags say the packet type (bit 1 set: command or event,
///   by direction; clear: ACL data).
/// - 1002, HCI UART (H4): each record starts with its H4 packet indicator. What `BTSnoopWriter` writes.
/// - 2001, the Linux monitor (btmon): the flags hold the adapter index (high 16 bits) and an opcode (low 16 bits)
///   that says what the record is; records that are not HCI packets (index added, system notes, …) are
///   delivered as `.monitor` with their bytes.
///
/// The reader never trusts the file: a length that runs past the end, a record larger than any HCI packet, a
/// wrong identification or an unknown version or datalink is a `BTSnoopReader.Error` naming the record and its
/// offset. Packet bytes that do not decode (a capture of a faulty device is what one reads them for) are a
/// record whose content is `.undecodable`, and reading goes on. A record cut short by the capture's snapshot
/// length (included length below the original) is `.truncated`.
///
/// - SeeAlso: RFC 1761 (snoop version 2, which btsnoop follows); `BTSnoopWriter` for the layout.
public struct BTSnoopReader: Sendable, Sequence {
    /// How records carry their packets.
    public enum Datalink: UInt32, Sendable, Hashable {
        /// HCI packets without an indicator; the flags give the type.
        case hciUnencapsulated = 1001
        /// HCI UART (H4): each packet starts with its indicator.
        case h4 = 1002
        /// The Linux monitor (btmon): the flags give an adapter index and an opcode.
        case linuxMonitor = 2001
    }

    /// Why a capture could not be read on.
    public enum Error: Swift.Error, Sendable, Hashable, CustomStringConvertible {
        /// The file does not start with "btsnoop\0" (or is shorter than its 16-octet header).
        case notBTSnoop
        /// A version other than 1.
        case unsupportedVersion(UInt32)
        /// A datalink this reader does not know (BCSP 1003 and three-wire 1004 among them).
        case unsupportedDatalink(UInt32)
        /// Record `record` (counted from 0), at byte `offset`, runs past the end of the file.
        case truncatedRecord(record: Int, offset: Int)
        /// Record `record` says it holds `length` octets, more than any HCI packet: the file is corrupt there.
        case recordTooLong(record: Int, offset: Int, length: Int)
        /// Record `record` says it includes more octets than its original packet had.
        case includedBeyondOriginal(record: Int, offset: Int, included: Int, original: Int)

        public var description: String {
            switch self {
            case .notBTSnoop:
                return "not a btsnoop capture (it does not start with \"btsnoop\\0\" and a 16-octet header)"
            case .unsupportedVersion(let version):
                return "btsnoop version \(version) is not supported (only version 1 exists)"
            case .unsupportedDatalink(let datalink):
                return
                    "btsnoop datalink \(datalink) is not supported (1001: HCI, 1002: HCI UART (H4), 2001: Linux monitor)"
            case .truncatedRecord(let record, let offset):
                return "the capture ends inside record \(record) (at byte \(offset)): the rest of it is missing"
            case .recordTooLong(let record, let offset, let length):
                return
                    "record \(record) (at byte \(offset)) claims \(length) octets, more than any HCI packet: the capture is corrupt from there"
            case .includedBeyondOriginal(let record, let offset, let included, let original):
                return
                    "record \(record) (at byte \(offset)) includes \(included) octets of a packet of \(original): the capture is corrupt from there"
            }
        }
    }

    /// What a record holds.
    public enum Content: Sendable, Hashable {
        /// A whole HCI packet, decoded.
        case packet(HCIPacket)
        /// An HCI packet whose bytes do not decode as its type: `type` is nil when even the type is unknown (an
        /// H4 indicator that is none of the five), `bytes` are the record's bytes after any indicator.
        case undecodable(type: HCIPacketType?, bytes: [UInt8], reason: String)
        /// The first octets of a packet the capture cut short (its snapshot length).
        case truncated(type: HCIPacketType?, bytes: [UInt8])
        /// A Linux-monitor record that is not an HCI packet (a new or removed adapter, a note, a log line, …).
        case monitor(opcode: UInt16, bytes: [UInt8])
    }

    /// One record of the capture.
    public struct Record: Sendable, Hashable {
        /// Its position, counted from 0.
        public var index: Int
        /// Host to controller (`.sent`) or controller to host (`.received`).
        public var direction: BTSnoopWriter.Direction
        /// When it was captured, in microseconds since the Unix epoch.
        public var unixMicroseconds: Int64
        /// The packets the capturing side reports lost before this one, cumulatively.
        public var drops: UInt32
        /// The adapter it belongs to (Linux monitor captures; 0 otherwise).
        public var adapter: UInt16
        /// The packet's length before any truncation, its indicator included for H4.
        public var originalLength: Int
        /// The octets the record holds (below `originalLength` when the capture cut the packet).
        public var includedLength: Int
        public var content: Content
    }

    /// The largest record a capture of HCI may hold: an H4 indicator and an ACL packet of the largest length
    /// (a 4-octet header and 65,535 octets, Vol 4 Part E 5.4.2). Anything longer is corruption.
    public static let largestRecord = 1 + 4 + 65_535

    /// The capture's datalink.
    public let datalink: Datalink
    private let bytes: [UInt8]

    /// Reads the header of the capture in `bytes`.
    ///
    /// - Throws: `Error` `.notBTSnoop`, `.unsupportedVersion` or `.unsupportedDatalink`.
    public init(bytes: [UInt8]) throws(Error) {
        guard bytes.count >= 16, Array(bytes[0..<8]) == BTSnoopWriter.identification else { throw .notBTSnoop }
        let version = bytes.bigEndianUInt32(at: 8)
        guard version == BTSnoopWriter.version else { throw .unsupportedVersion(version) }
        let link = bytes.bigEndianUInt32(at: 12)
        guard let datalink = Datalink(rawValue: link) else { throw .unsupportedDatalink(link) }
        self.datalink = datalink
        self.bytes = bytes
    }

    /// Reads the capture in the file at `path`.
    ///
    /// - Throws: `TransportError` `.openFailed` when the file cannot be read; `Error` for what `init(bytes:)`
    ///   refuses.
    public init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            var isFolder: ObjCBool = false
            let reason =
                !FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
                ? "no such file" : isFolder.boolValue ? "it is a folder" : "it is not readable"
            throw TransportError(.openFailed, "cannot read the btsnoop file \(path): \(reason)")
        }
        try self.init(bytes: [UInt8](data))
    }

    public func makeIterator() -> Iterator {
        Iterator(datalink: datalink, bytes: bytes)
    }

    /// Every record, or the first error: what a caller that wants all or nothing uses.
    public func records() throws(Error) -> [Record] {
        var iterator = makeIterator()
        var records: [Record] = []
        while let record = try iterator.nextRecord() { records.append(record) }
        return records
    }

    /// Walks the records. `next()` ends at the first error too; `nextRecord()` throws it, and `failure` keeps it.
    public struct Iterator: IteratorProtocol, Sendable {
        private let datalink: Datalink
        private let bytes: [UInt8]
        private var offset = 16
        private var index = 0
        /// The error that ended the walk, if one did.
        public private(set) var failure: Error?

        init(datalink: Datalink, bytes: [UInt8]) {
            self.datalink = datalink
            self.bytes = bytes
        }

        public mutating func next() -> Record? {
            do {
                return try nextRecord()
            } catch {
                return nil
            }
        }

        /// The next record, nil at the end of the file, or the error that makes the rest unreadable.
        public mutating func nextRecord() throws(Error) -> Record? {
            if failure != nil { return nil }
            guard offset < bytes.count else { return nil }
            do {
                return try readRecord()
            } catch {
                failure = error
                throw error
            }
        }

        private mutating func readRecord() throws(Error) -> Record {
            let start = offset
            guard bytes.count - start >= 24 else { throw .truncatedRecord(record: index, offset: start) }
            let original = Int(bytes.bigEndianUInt32(at: start))
            let included = Int(bytes.bigEndianUInt32(at: start + 4))
            let flags = bytes.bigEndianUInt32(at: start + 8)
            let drops = bytes.bigEndianUInt32(at: start + 12)
            let timestamp = Int64(bitPattern: bytes.bigEndianUInt64(at: start + 16))
            guard included <= Self.largest(datalink) else {
                throw .recordTooLong(record: index, offset: start, length: included)
            }
            guard included <= original else {
                throw .includedBeyondOriginal(record: index, offset: start, included: included, original: original)
            }
            guard bytes.count - (start + 24) >= included else { throw .truncatedRecord(record: index, offset: start) }
            let data = Array(bytes[(start + 24)..<(start + 24 + included)])
            let (direction, adapter, content) = Self.content(
                of: data, flags: flags, datalink: datalink, complete: included == original)
            let record = Record(
                index: index, direction: direction, unixMicroseconds: timestamp &- BTSnoopWriter.epochOffset,
                drops: drops, adapter: adapter, originalLength: original, includedLength: included, content: content)
            offset = start + 24 + included
            index += 1
            return record
        }

        /// The largest record a datalink allows: without the H4 indicator for 1001; the monitor's records are HCI
        /// packets or short notes.
        private static func largest(_ datalink: Datalink) -> Int {
            datalink == .h4 ? BTSnoopReader.largestRecord : BTSnoopReader.largestRecord - 1
        }

        private static func content(
            of data: [UInt8], flags: UInt32, datalink: Datalink, complete: Bool
        ) -> (BTSnoopWriter.Direction, UInt16, Content) {
            switch datalink {
            case .h4:
                let direction: BTSnoopWriter.Direction = flags & 1 == 0 ? .sent : .received
                guard let indicator = data.first else {
                    let content: Content =
                        complete
                        ? .undecodable(type: nil, bytes: [], reason: "an empty record")
                        : .truncated(type: nil, bytes: [])
                    return (direction, 0, content)
                }
                let type = HCIPacketType(rawValue: indicator)
                guard Self.knownTypes.contains(type) else {
                    return (
                        direction, 0,
                        .undecodable(
                            type: nil, bytes: data,
                            reason: "H4 indicator 0x\(String(indicator, radix: 16)) is no HCI packet")
                    )
                }
                return (direction, 0, decode(type, Array(data.dropFirst()), complete: complete))
            case .hciUnencapsulated:
                let direction: BTSnoopWriter.Direction = flags & 1 == 0 ? .sent : .received
                let type: HCIPacketType = flags & 2 == 0 ? .acl : (direction == .sent ? .command : .event)
                return (direction, 0, decode(type, data, complete: complete))
            case .linuxMonitor:
                let opcode = UInt16(truncatingIfNeeded: flags)
                let adapter = UInt16(truncatingIfNeeded: flags >> 16)
                // btmon's opcodes (the Linux kernel's HCI monitor channel): 2 command, 3 event, 4 and 5 ACL sent
                // and received, 6 and 7 SCO, 18 and 19 ISO.
                let packet: (HCIPacketType, BTSnoopWriter.Direction)? =
                    switch opcode {
                    case 2: (.command, .sent)
                    case 3: (.event, .received)
                    case 4: (.acl, .sent)
                    case 5: (.acl, .received)
                    case 6: (.sco, .sent)
                    case 7: (.sco, .received)
                    case 18: (.iso, .sent)
                    case 19: (.iso, .received)
                    default: nil
                    }
                guard let (type, direction) = packet else {
                    return (.received, adapter, .monitor(opcode: opcode, bytes: data))
                }
                return (direction, adapter, decode(type, data, complete: complete))
            }
        }

        private static let knownTypes: Set<HCIPacketType> = [.command, .acl, .sco, .event, .iso]

        private static func decode(_ type: HCIPacketType, _ bytes: [UInt8], complete: Bool) -> Content {
            guard complete else { return .truncated(type: type, bytes: bytes) }
            do {
                return .packet(try HCIPacket(type: type, decoding: bytes))
            } catch {
                return .undecodable(type: type, bytes: bytes, reason: "\(error)")
            }
        }
    }
}

extension [UInt8] {
    fileprivate func bigEndianUInt32(at offset: Int) -> UInt32 {
        self[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    fileprivate func bigEndianUInt64(at offset: Int) -> UInt64 {
        self[offset..<(offset + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
