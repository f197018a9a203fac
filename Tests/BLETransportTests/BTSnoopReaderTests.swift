import BLECore
import BLEHCI
import BLETransport
import Foundation
import Testing

/// `BTSnoopReader` on what our writer writes, on hand-made captures of the other two datalinks (Android's 1001,
/// btmon's 2001), and on files that are not btsnoop, cut short or corrupt.
@Suite struct BTSnoopReaderTests {
    typealias Record = BTSnoopReader.Record

    /// A header for `datalink`.
    static func header(_ datalink: UInt32, version: UInt32 = 1) -> [UInt8] {
        Array("btsnoop".utf8) + [0] + bigEndian(version) + bigEndian(datalink)
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }

    /// A record of `data` with these flags, at `micros` after the Unix epoch.
    static func record(
        _ data: [UInt8], flags: UInt32, micros: Int64 = 1_700_000_000_000_000, original: Int? = nil
    ) -> [UInt8] {
        let stamp = UInt64(bitPattern: micros + BTSnoopWriter.epochOffset)
        return bigEndian(UInt32(original ?? data.count)) + bigEndian(UInt32(data.count)) + bigEndian(flags)
            + bigEndian(0) + bigEndian(UInt32(stamp >> 32)) + bigEndian(UInt32(truncatingIfNeeded: stamp)) + data
    }

    static let reset = BTSnoopTests.reset
    static let resetComplete = BTSnoopTests.resetComplete
    static let acl = BTSnoopTests.acl
    static let sco = BTSnoopTests.sco

    @Test func readsBackWhatTheWriterWrote() throws {
        let sink = MemorySink()
        let clock = TickingClock()
        let writer = try BTSnoopWriter(sink: sink, clock: clock.clock)
        let written: [(HCIPacket, BTSnoopWriter.Direction)] = [
            (Self.reset, .sent), (Self.resetComplete, .received), (Self.acl, .sent), (Self.acl, .received),
            (Self.sco, .received),
        ]
        for (packet, direction) in written { writer.record(packet, direction: direction) }
        writer.close()

        let reader = try BTSnoopReader(bytes: sink.contents)
        #expect(reader.datalink == .h4)
        let records = try reader.records()
        #expect(records.map(\.content) == written.map { .packet($0.0) })
        #expect(records.map(\.direction) == written.map(\.1))
        #expect(records.map(\.index) == Array(0..<5))
        #expect(records.map(\.unixMicroseconds) == (0..<5).map { 1_700_000_000_000_000 + Int64($0) })
        #expect(records.allSatisfy { $0.drops == 0 && $0.adapter == 0 })
        #expect(records.map(\.originalLength) == [4, 7, 10, 10, 6])
    }

    @Test func readsAFileWrittenToDisk() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reader-\(UUID().uuidString).log").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BTSnoopWriter(path: path)
        writer.record(Self.reset, direction: .sent)
        writer.close()
        #expect(try BTSnoopReader(path: path).records().map(\.content) == [.packet(Self.reset)])
        #expect(throws: TransportError(.openFailed)) { try BTSnoopReader(path: path + ".missing") }
    }

    /// Datalink 1001 (Android's HCI snoop log, PacketLogger): no indicator; flags bit 1 says command or event.
    @Test func unencapsulatedRecordsTakeTheirTypeFromTheFlags() throws {
        let bytes =
            Self.header(1001)
            + Self.record(Self.reset.encode(), flags: 2) + Self.record(Self.resetComplete.encode(), flags: 3)
            + Self.record(Self.acl.encode(), flags: 0) + Self.record(Self.acl.encode(), flags: 1)
        let records = try BTSnoopReader(bytes: bytes).records()
        #expect(
            records.map(\.content) == [
                .packet(Self.reset), .packet(Self.resetComplete), .packet(Self.acl), .packet(Self.acl),
            ])
        #expect(records.map(\.direction) == [.sent, .received, .sent, .received])
    }

    /// Datalink 2001 (`btmon -w`): the flags are the adapter index and the monitor's opcode; what is not a packet
    /// (a new adapter, a note) is delivered as it is.
    @Test func linuxMonitorRecordsNameTheirAdapterAndKind() throws {
        let newIndex: [UInt8] = [0x00, 0x01] + Array(repeating: 0, count: 6) + Array("hci1\0\0\0\0".utf8)
        let bytes =
            Self.header(2001)
            + Self.record(newIndex, flags: 1 << 16 | 0) + Self.record(Self.reset.encode(), flags: 1 << 16 | 2)
            + Self.record(Self.resetComplete.encode(), flags: 1 << 16 | 3)
            + Self.record(Self.acl.encode(), flags: 1 << 16 | 4) + Self.record(Self.acl.encode(), flags: 1 << 16 | 5)
            + Self.record(Array("a note".utf8), flags: 1 << 16 | 12)
        let records = try BTSnoopReader(bytes: bytes).records()
        #expect(
            records.map(\.content) == [
                .monitor(opcode: 0, bytes: newIndex), .packet(Self.reset), .packet(Self.resetComplete),
                .packet(Self.acl), .packet(Self.acl), .monitor(opcode: 12, bytes: Array("a note".utf8)),
            ])
        #expect(records.map(\.direction)[1...4] == [.sent, .received, .sent, .received])
        #expect(records.allSatisfy { $0.adapter == 1 })
    }

    @Test func aPacketThatDoesNotDecodeIsShownAndReadingGoesOn() throws {
        // An event whose length says 9 octets with 1 present; an indicator that is no HCI packet; then a good one.
        let bytes =
            Self.header(1002) + Self.record([0x04, 0x0E, 0x09, 0x01], flags: 3) + Self.record([0x09, 0xAA], flags: 1)
            + Self.record(H4Encoder.encode(Self.reset), flags: 2)
        let records = try BTSnoopReader(bytes: bytes).records()
        #expect(records.count == 3)
        guard case .undecodable(let type, let data, let reason) = records[0].content else {
            Issue.record("\(records[0].content)")
            return
        }
        #expect(type == .event && data == [0x0E, 0x09, 0x01] && !reason.isEmpty)
        guard case .undecodable(nil, [0x09, 0xAA], let why) = records[1].content else {
            Issue.record("\(records[1].content)")
            return
        }
        #expect(why.contains("0x9"))
        #expect(records[2].content == .packet(Self.reset))
    }

    @Test func aRecordCutByTheSnapshotLengthIsTruncated() throws {
        let bytes = Self.header(1002) + Self.record([0x02, 0x40, 0x00, 0x05], flags: 0, original: 10)
        let records = try BTSnoopReader(bytes: bytes).records()
        #expect(records.map(\.content) == [.truncated(type: .acl, bytes: [0x40, 0x00, 0x05])])
        #expect(records.first?.originalLength == 10)
    }

    @Test func headersThatAreNotBTSnoopAreRefused() {
        #expect(throws: BTSnoopReader.Error.notBTSnoop) { try BTSnoopReader(bytes: []) }
        #expect(throws: BTSnoopReader.Error.notBTSnoop) { try BTSnoopReader(bytes: Array("btsnoop\0".utf8)) }
        #expect(throws: BTSnoopReader.Error.notBTSnoop) { try BTSnoopReader(bytes: Array("{\"services\": []}".utf8)) }
        #expect(throws: BTSnoopReader.Error.unsupportedVersion(2)) {
            try BTSnoopReader(bytes: Self.header(1002, version: 2))
        }
        #expect(throws: BTSnoopReader.Error.unsupportedDatalink(1003)) { try BTSnoopReader(bytes: Self.header(1003)) }
        #expect(
            BTSnoopReader.Error.unsupportedDatalink(1003).description
                == "btsnoop datalink 1003 is not supported (1001: HCI, 1002: HCI UART (H4), 2001: Linux monitor)")
    }

    /// A capture cut part way (a writer killed mid-record): the records before the cut, then an error naming
    /// the record and its offset, and nothing after.
    @Test func aFileCutPartWayGivesItsRecordsThenTheError() throws {
        let whole = Self.header(1002) + Self.record(H4Encoder.encode(Self.reset), flags: 2)
        let second = Self.record(H4Encoder.encode(Self.acl), flags: 0)
        for cut in [1, 23, 24, second.count - 1] {
            let reader = try BTSnoopReader(bytes: whole + second.prefix(cut))
            var iterator = reader.makeIterator()
            #expect(try iterator.nextRecord()?.content == .packet(Self.reset))
            #expect(throws: BTSnoopReader.Error.truncatedRecord(record: 1, offset: whole.count)) {
                try iterator.nextRecord()
            }
            #expect(iterator.failure == .truncatedRecord(record: 1, offset: whole.count))
            #expect(try iterator.nextRecord() == nil)
            #expect(throws: BTSnoopReader.Error.truncatedRecord(record: 1, offset: whole.count)) {
                try reader.records()
            }
            #expect(Array(reader).count == 1)
        }
        #expect(
            BTSnoopReader.Error.truncatedRecord(record: 1, offset: 40).description
                == "the capture ends inside record 1 (at byte 40): the rest of it is missing")
    }

    @Test func lengthsNoHCIPacketHasAreCorruption() throws {
        let huge = Self.bigEndian(0x7FFF_FFFF) + Self.bigEndian(0x7FFF_FFFF) + Array(repeating: 0, count: 16)
        #expect(throws: BTSnoopReader.Error.recordTooLong(record: 0, offset: 16, length: 0x7FFF_FFFF)) {
            try BTSnoopReader(bytes: Self.header(1002) + huge).records()
        }
        // The largest ACL packet is a record of 65,540 octets; one more is too long.
        let largest = [0x02, 0x40, 0x00, 0xFF, 0xFF] + Array(repeating: UInt8(0), count: 65_535)
        let records = try BTSnoopReader(bytes: Self.header(1002) + Self.record(largest, flags: 0)).records()
        #expect(records.count == 1)
        #expect(throws: BTSnoopReader.Error.recordTooLong(record: 0, offset: 16, length: 65_541)) {
            try BTSnoopReader(bytes: Self.header(1002) + Self.record(largest + [0], flags: 0)).records()
        }
        let overIncluded = Self.header(1002) + Self.record(H4Encoder.encode(Self.reset), flags: 2, original: 3)
        #expect(throws: BTSnoopReader.Error.includedBeyondOriginal(record: 0, offset: 16, included: 4, original: 3)) {
            try BTSnoopReader(bytes: overIncluded).records()
        }
    }
}
