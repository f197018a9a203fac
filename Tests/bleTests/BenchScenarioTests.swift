import ArgumentParser
import BLE
import BLEBench
import Foundation
import Testing

@testable import ble

/// bumble-bench's GATT packet format (BLEHost.docc/Peers.md), both ways.
@Suite struct BumbleBenchPacketTests {
    @Test func aSequencePacketIsItsHeaderThenZeros() {
        let packet = BumbleBenchPacket(
            type: .sequence, flags: .last, sequence: 0x0102_0304, timestamp: 0x0A0B_0C0D, payloadLength: 2)
        let bytes: [UInt8] = [
            0x01,  // type: SEQUENCE
            0x01,  // flags: LAST
            0x04, 0x03, 0x02, 0x01,  // sequence, u32 LE
            0x0D, 0x0C, 0x0B, 0x0A,  // timestamp in µs, u32 LE
            0x00, 0x00,  // payload
        ]
        #expect(packet.bytes == bytes)
        #expect(BumbleBenchPacket(decoding: bytes) == packet)
    }

    @Test func resetAndAckAreShort() {
        #expect(BumbleBenchPacket(type: .reset).bytes == [0x00])
        #expect(BumbleBenchPacket(decoding: [0x00]) == BumbleBenchPacket(type: .reset))
        let ack: [UInt8] = [0x02, 0x00, 0x07, 0x00, 0x00, 0x00]  // ACK, no flags, sequence 7
        #expect(BumbleBenchPacket(type: .ack, sequence: 7).bytes == ack)
        #expect(BumbleBenchPacket(decoding: ack) == BumbleBenchPacket(type: .ack, sequence: 7))
    }

    @Test(arguments: [[], [0x03], [0x02, 0x00, 0x07, 0x00, 0x00], [0x01, 0x00, 1, 0, 0, 0, 2, 0, 0]] as [[UInt8]])
    func whatBumbleRefusesDoesNotDecode(_ bytes: [UInt8]) {
        #expect(BumbleBenchPacket(decoding: bytes) == nil)
    }
}

/// The benches run and print what they claim, at small sizes (the figures are the benchmarks', not these tests').
@Suite(.timeLimit(.minutes(3))) struct BenchScenarioTests {
    @Test(arguments: LinkBenchmark.Receiver.allCases)
    func theHostBenchCarriesBumbleBenchPacketsInSequence(_ receiver: LinkBenchmark.Receiver) async throws {
        let bench = HostBenchCommand.bench(format: .bumbleBench, receiver: receiver)
        let m = try await bench.run(seconds: 0.5, seed: 1)
        #expect(m.values > 0)
        #expect(m.inSequence == m.values)
        #expect(m.bytes == m.values * 244)
        #expect(m.wallSeconds > 0 && m.bytesPerWallSecond > 0)
    }

    @Test func aWindowOfValuesClosesAtThatCount() async throws {
        let bench = HostBenchCommand.bench(format: .plain)
        let m = try await bench.run(seconds: 10, seed: 1, values: 50)
        #expect(m.values == 50)
        #expect(m.virtualSeconds < 10)
    }

    @Test func aSmallRoomDeliversWhatItsSensorsSend() async throws {
        let r = try await ScaleBenchmark(centrals: 2, peripheralsPerCentral: 3).run(seconds: 2, seed: 3)
        #expect(r.links == 6)
        #expect(r.subscribed == 6)
        #expect(r.expected == 120)
        #expect(r.deliveredShare >= 0.95 && r.received <= r.sent)
        #expect(r.realTimeFactor > 0)
    }

    /// Links the setup is still bringing up when the window opens do not count: not in what is expected, and
    /// not in what is delivered (they made "delivered" read more than 100 %).
    @Test func linksSubscribedAfterTheWindowOpensDoNotCount() async throws {
        let room = ScaleBenchmark(centrals: 1, peripheralsPerCentral: 6, rate: 5, interval: .milliseconds(500))
        let r = try await room.run(seconds: 40, seed: 3, setupLimit: .seconds(20))
        #expect(r.subscribed > 0 && r.subscribed < r.links, "\(r)")
        #expect(r.received <= r.expected && r.received <= r.sent)
        #expect(r.deliveredShare >= 0.9)
    }

    @Test(arguments: [
        ["--seconds", "nan"], ["--seconds", "inf"], ["--seconds", "-1"], ["--runs", "0"], ["--format", "json"],
        ["--receiver", "callback"],
    ])
    func theHostBenchRefusesBadOptions(_ arguments: [String]) {
        #expect(throws: (any Error).self) { try HostBenchCommand.parse(arguments) }
    }

    @Test(arguments: [
        ["--seconds", "nan"], ["--rate", "inf"], ["--rate", "-1"], ["--interval-ms", "nan"], ["--case", "0x5"],
        ["--case", "50"], ["--value-length", "-1"], ["--seconds", "-1"],
    ])
    func theScaleBenchRefusesBadOptions(_ arguments: [String]) {
        #expect(throws: (any Error).self) { try ScaleBenchCommand.parse(arguments) }
    }

    @Test func theScaleBenchReadsItsCases() {
        #expect(ScaleBenchCommand.parseCase("50x20")! == (50, 20))
        #expect(ScaleBenchCommand.parseCase("1X1000")! == (1, 1000))
        #expect(ScaleBenchCommand.parseCase("x20") == nil)
    }
}
