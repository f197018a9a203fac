import BLECore
import BLEHCI
import BLETransport
import Foundation
import NIOCore
import Synchronization
import Testing

/// A sink that keeps the bytes in memory.
final class MemorySink: BTSnoopSink {
    let bytes = Mutex<[UInt8]>([])
    let closed = Mutex(false)
    let failAfter: Int?
    init(failAfter: Int? = nil) { self.failAfter = failAfter }
    struct Full: Error {}
    func write(_ chunk: [UInt8]) throws {
        try bytes.withLock {
            if let failAfter, $0.count + chunk.count > failAfter { throw Full() }
            $0 += chunk
        }
    }
    func close() { closed.withLock { $0 = true } }
    var contents: [UInt8] { bytes.withLock { $0 } }
    var isClosed: Bool { closed.withLock { $0 } }
}

/// Reads a btsnoop file back, checking everything the format fixes.
struct BTSnoopFile {
    struct Record: Equatable {
        var originalLength: UInt32
        var includedLength: UInt32
        var flags: UInt32
        var drops: UInt32
        var timestamp: Int64
        var data: [UInt8]
    }
    struct Malformed: Error, CustomStringConvertible { var description: String }

    var version: UInt32
    var datalink: UInt32
    var records: [Record]

    init(_ bytes: [UInt8]) throws {
        var offset = 0
        func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard offset + count <= bytes.count else { throw Malformed(description: "truncated at \(offset)") }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
        func u32() throws -> UInt32 { try take(4).reduce(0) { $0 << 8 | UInt32($1) } }
        func i64() throws -> Int64 { Int64(bitPattern: try take(8).reduce(0) { $0 << 8 | UInt64($1) }) }

        guard Array(try take(8)) == Array("btsnoop".utf8) + [0] else { throw Malformed(description: "bad magic") }
        version = try u32()
        datalink = try u32()
        records = []
        while offset < bytes.count {
            let original = try u32()
            let included = try u32()
            let flags = try u32()
            let drops = try u32()
            let timestamp = try i64()
            let data = Array(try take(Int(included)))
            records.append(
                Record(
                    originalLength: original, includedLength: included, flags: flags, drops: drops,
                    timestamp: timestamp, data: data))
        }
    }

    /// Each record's data as an HCI packet, through the H4 decoder.
    func packets() throws -> [HCIPacket] {
        try records.map { record in
            var buffer = ByteBuffer(bytes: record.data)
            var decoder = H4Decoder()
            guard let packet = try decoder.decode(&buffer), buffer.readableBytes == 0 else {
                throw Malformed(description: "record is not one H4 packet: \(record.data.hexString)")
            }
            return packet
        }
    }
}

/// A clock that ticks one microsecond per reading from 2023-11-14T22:13:20Z.
final class TickingClock: Sendable {
    let next = Mutex<Int64>(1_700_000_000_000_000)
    var clock: BTSnoopWriter.Clock {
        { [self] in
            self.next.withLock { value in
                defer { value += 1 }
                return value
            }
        }
    }
}

@Suite struct BTSnoopTests {
    static let reset = HCIPacket.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0C03)))
    static let resetComplete = HCIPacket.event(
        HCIEventPacket(code: HCIEventCode(rawValue: 0x0E), parameters: [0x01, 0x03, 0x0C, 0x00]))
    static let acl = HCIPacket.acl(
        HCIACLDataPacket(
            handle: ConnectionHandle(rawValue: 0x0040), packetBoundary: .firstNonFlushable,
            data: [0x01, 0x00, 0x04, 0x00, 0x02]))
    static let sco = HCIPacket.other(type: 0x03, bytes: [0x40, 0x00, 0x02, 0xAA, 0xBB])

    @Test func header() {
        #expect(
            BTSnoopWriter.header() == [
                0x62, 0x74, 0x73, 0x6E, 0x6F, 0x6F, 0x70, 0x00,  // "btsnoop\0"
                0x00, 0x00, 0x00, 0x01,  // version 1
                0x00, 0x00, 0x03, 0xEA,  // datalink 1002 (H4)
            ])
    }

    /// One record per packet type and direction, and the bytes it must have.
    static let records: [(packet: HCIPacket, direction: BTSnoopWriter.Direction, bytes: [UInt8])] = [
        (
            reset, .sent,
            [
                0x00, 0x00, 0x00, 0x04,  // original length: indicator + 3
                0x00, 0x00, 0x00, 0x04,  // included length
                0x00, 0x00, 0x00, 0x02,  // flags: sent, command
                0x00, 0x00, 0x00, 0x00,  // cumulative drops
                0x00, 0xE2, 0xE7, 0xD7, 0x27, 0x4D, 0xC0, 0x00,  // 1_700_000_000_000_000 us + 0x00dcddb30f2f8000
                0x01, 0x03, 0x0C, 0x00,  // H4 command: HCI_Reset, no parameters
            ]
        ),
        (
            resetComplete, .received,
            [
                0x00, 0x00, 0x00, 0x07,
                0x00, 0x00, 0x00, 0x07,
                0x00, 0x00, 0x00, 0x03,  // flags: received, event
                0x00, 0x00, 0x00, 0x00,
                0x00, 0xE2, 0xE7, 0xD7, 0x27, 0x4D, 0xC0, 0x00,
                0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00,  // H4 event: Command Complete (Reset, success)
            ]
        ),
        (
            acl, .sent,
            [
                0x00, 0x00, 0x00, 0x0A,
                0x00, 0x00, 0x00, 0x0A,
                0x00, 0x00, 0x00, 0x00,  // flags: sent, data
                0x00, 0x00, 0x00, 0x00,
                0x00, 0xE2, 0xE7, 0xD7, 0x27, 0x4D, 0xC0, 0x00,
                0x02, 0x40, 0x00, 0x05, 0x00, 0x01, 0x00, 0x04, 0x00, 0x02,  // H4 ACL: handle 0x040, 5 bytes
            ]
        ),
        (
            acl, .received,
            [
                0x00, 0x00, 0x00, 0x0A,
                0x00, 0x00, 0x00, 0x0A,
                0x00, 0x00, 0x00, 0x01,  // flags: received, data
                0x00, 0x00, 0x00, 0x00,
                0x00, 0xE2, 0xE7, 0xD7, 0x27, 0x4D, 0xC0, 0x00,
                0x02, 0x40, 0x00, 0x05, 0x00, 0x01, 0x00, 0x04, 0x00, 0x02,
            ]
        ),
        (
            sco, .received,
            [
                0x00, 0x00, 0x00, 0x06,
                0x00, 0x00, 0x00, 0x06,
                0x00, 0x00, 0x00, 0x01,  // flags: received, data
                0x00, 0x00, 0x00, 0x00,
                0x00, 0xE2, 0xE7, 0xD7, 0x27, 0x4D, 0xC0, 0x00,
                0x03, 0x40, 0x00, 0x02, 0xAA, 0xBB,  // H4 SCO, kept as raw bytes
            ]
        ),
    ]

    @Test(arguments: records)
    func record(_ golden: (packet: HCIPacket, direction: BTSnoopWriter.Direction, bytes: [UInt8])) {
        #expect(
            BTSnoopWriter.record(golden.packet, direction: golden.direction, unixMicroseconds: 1_700_000_000_000_000)
                == golden.bytes)
    }

    @Test func flags() {
        #expect(BTSnoopWriter.flags(for: .command, direction: .sent) == 2)
        #expect(BTSnoopWriter.flags(for: .event, direction: .received) == 3)
        #expect(BTSnoopWriter.flags(for: .acl, direction: .sent) == 0)
        #expect(BTSnoopWriter.flags(for: .acl, direction: .received) == 1)
        #expect(BTSnoopWriter.flags(for: .iso, direction: .received) == 1)
    }

    @Test func writerProducesAFileTheParserReadsBack() throws {
        let sink = MemorySink()
        let clock = TickingClock()
        let writer = try BTSnoopWriter(sink: sink, clock: clock.clock)
        writer.record(Self.reset, direction: .sent)
        writer.record(Self.resetComplete, direction: .received)
        writer.record(Self.acl, direction: .sent)
        #expect(writer.recordCount == 3)
        writer.close()
        writer.record(Self.acl, direction: .received)  // after close: dropped
        #expect(sink.isClosed)

        let file = try BTSnoopFile(sink.contents)
        #expect(file.version == 1)
        #expect(file.datalink == 1002)
        #expect(file.records.map(\.flags) == [2, 3, 0])
        #expect(file.records.map(\.drops) == [0, 0, 0])
        #expect(file.records.map(\.timestamp) == [0, 1, 2].map { 0x00dc_ddb3_0f2f_8000 + 1_700_000_000_000_000 + $0 })
        #expect(
            file.records.allSatisfy {
                $0.originalLength == $0.includedLength && Int($0.includedLength) == $0.data.count
            })
        #expect(try file.packets() == [Self.reset, Self.resetComplete, Self.acl])
    }

    @Test func aFailingSinkStopsTheCaptureNotTheCaller() throws {
        let sink = MemorySink(failAfter: 16 + 28)
        let writer = try BTSnoopWriter(sink: sink, clock: TickingClock().clock)
        writer.record(Self.reset, direction: .sent)  // 28 bytes: fits
        writer.record(Self.resetComplete, direction: .received)  // does not
        writer.record(Self.reset, direction: .sent)
        #expect(writer.recordCount == 1)
        #expect(writer.failure is MemorySink.Full)
        #expect(sink.isClosed)
        #expect(try BTSnoopFile(sink.contents).records.count == 1)
    }

    @Test func fileSinkWritesEachRecordAsItComes() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("btsnoop-\(UUID().uuidString).log")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BTSnoopWriter(path: path, clock: TickingClock().clock)
        writer.record(Self.reset, direction: .sent)
        writer.record(Self.resetComplete, direction: .received)
        // Readable before close: every record is already in the file.
        let early = try BTSnoopFile(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        #expect(try early.packets() == [Self.reset, Self.resetComplete])
        writer.record(Self.sco, direction: .received)
        writer.close()
        let file = try BTSnoopFile(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        #expect(file.datalink == 1002)
        #expect(try file.packets() == [Self.reset, Self.resetComplete, Self.sco])
    }

    @Test func fileSinkNamesAPathItCannotCreate() {
        #expect(throws: TransportError(.openFailed)) {
            _ = try BTSnoopFileSink(path: "/nonexistent-directory/capture.log")
        }
    }
}

@Suite struct RecordingTransportTests {
    @Test func recordsBothWaysAndForwards() throws {
        let pipe = HCIPipe()
        let sink = MemorySink()
        let writer = try BTSnoopWriter(sink: sink, clock: TickingClock().clock)
        let recording = RecordingTransport(wrapping: pipe.hostEnd, writer: writer)

        let atController = Mutex<[HCIPacket]>([])
        let atHost = Mutex<[HCITransportEvent]>([])
        pipe.attachController { packet in
            atController.withLock { $0.append(packet) }
            pipe.deliverToHost(BTSnoopTests.resetComplete)
        }
        recording.setReceiver { event in atHost.withLock { $0.append(event) } }

        recording.send(BTSnoopTests.reset)
        #expect(atController.withLock { $0 } == [BTSnoopTests.reset])
        #expect(atHost.withLock { $0.count } == 1)

        pipe.closeFromController(reason: "unplugged")
        recording.send(BTSnoopTests.acl)  // after close: neither recorded nor sent
        #expect(atController.withLock { $0.count } == 1)
        let events = atHost.withLock { $0 }
        #expect(events.count == 2)
        if case .closed(let reason) = events.last { #expect(reason == "unplugged") } else { Issue.record("no close") }
        #expect(sink.isClosed)

        let file = try BTSnoopFile(sink.contents)
        #expect(file.records.map(\.flags) == [2, 3])
        #expect(try file.packets() == [BTSnoopTests.reset, BTSnoopTests.resetComplete])
    }

    /// A transport that reads on a thread of its own hands a packet over while the host, in its domain, is still
    /// answering the one before: recorded in the domain, the capture shows the answer first, as the host acted
    /// (recorded on the reading thread, the second packet came before the answer: a Disconnection Complete
    /// before the response to the request it ended, which tshark flags as data on a closed handle).
    @Test func withTheHostsDomainAPacketIsRecordedWhenTheHostTakesIt() throws {
        let pipe = HCIPipe()
        let sink = MemorySink()
        let writer = try BTSnoopWriter(sink: sink, clock: TickingClock().clock)
        let domain = DispatchHostScheduler(label: "test.recording.domain")
        let recording = RecordingTransport(wrapping: pipe.hostEnd, writer: writer, domain: domain)
        pipe.attachController { _ in }
        let secondHandedOver = DispatchSemaphore(value: 0)
        let answered = DispatchSemaphore(value: 0)
        // The host, as HostDriver does: it takes each packet in its domain and answers the first one there,
        // once the second has been handed over.
        recording.setReceiver { event in
            domain.execute {
                guard case .packet(let packet) = event, packet == BTSnoopTests.resetComplete else { return }
                _ = secondHandedOver.wait(timeout: .now() + 10)
                recording.send(BTSnoopTests.reset)
                answered.signal()
            }
        }
        pipe.deliverToHost(BTSnoopTests.resetComplete)
        pipe.deliverToHost(BTSnoopTests.acl)
        secondHandedOver.signal()
        #expect(answered.wait(timeout: .now() + 10) == .success)
        let settled = DispatchSemaphore(value: 0)
        domain.execute { settled.signal() }
        #expect(settled.wait(timeout: .now() + 10) == .success)

        let file = try BTSnoopFile(sink.contents)
        #expect(try file.packets() == [BTSnoopTests.resetComplete, BTSnoopTests.reset, BTSnoopTests.acl])
        #expect(file.records.map(\.flags) == [3, 2, 1])
    }

    @Test func closeFromTheHostStopsRecording() throws {
        let pipe = HCIPipe()
        let sink = MemorySink()
        let writer = try BTSnoopWriter(sink: sink, clock: TickingClock().clock)
        let recording = RecordingTransport(wrapping: pipe.hostEnd, writer: writer)
        let closes = Mutex(0)
        pipe.attachController { _ in }
        recording.setReceiver { event in
            if case .closed(nil) = event { closes.withLock { $0 += 1 } }
        }
        recording.send(BTSnoopTests.reset)
        recording.close()
        recording.send(BTSnoopTests.reset)
        #expect(closes.withLock { $0 } == 1)
        #expect(try BTSnoopFile(sink.contents).records.count == 1)
        #expect(sink.isClosed)
    }
}
