import BLECore
import BLEHCI
import BLETransport
import BLEVirtualController
import Foundation
import Synchronization
import Testing

@Suite struct HCIBasicsTests {
    @Test func unknownOpcodeGetsCommandCompleteWithUnknownHCICommand() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "a"))
        host.send(0xFC01, [1, 2, 3])
        try await radio.run(for: .milliseconds(1))
        let events = host.events
        #expect(events.count == 1)
        // Command Complete: Num_HCI_Command_Packets 1, opcode 0xFC01, status 0x01.
        #expect(events.first?.code == 0x0E)
        #expect(events.first?.parameters == [0x01, 0x01, 0xFC, 0x01])
    }

    @Test func initialisationCommands() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(
            radio.addController(
                name: "a", address: BluetoothAddress(string: "11:22:33:44:55:66"),
                aclBufferLength: 200, aclBufferCount: 4))
        #expect(try await host.command(0x0C03) == [0])
        #expect(try await host.command(0x1009) == [0, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11])
        #expect(try await host.command(0x2002) == [0, 200, 0, 4])
        #expect(try await host.command(0x2060) == [0, 200, 0, 4, 0, 0, 0])
        let version = try await host.command(0x1001)
        #expect(version.first == 0 && version.count == 9 && version[1] == 0x0D)
        let commands = try await host.command(0x1002)
        #expect(commands.count == 65)
        #expect(commands[1 + 35] & (1 << 6) != 0)  // LE Set PHY
        #expect(commands[1 + 0] & (1 << 5) != 0)  // Disconnect
        #expect(commands[1 + 27] & 0b1100_0000 == 0b1100_0000)  // LE Encrypt, LE Rand
        #expect(commands[1 + 28] == 0b111)  // LE Enable Encryption, LE Long Term Key Request (Negative) Reply
        let features = try await host.command(0x2003)
        // Bits 0 (LE Encryption), 1, 2, 3, 5; 8 (2M) and 11 (Coded).
        #expect(features == [0, 0x2F, 0x09, 0, 0, 0, 0, 0, 0])
        // 251 octets, 17,040 µs (0x4290: 251 octets on LE Coded), both ways.
        #expect(try await host.command(0x202F) == [0, 251, 0, 0x90, 0x42, 251, 0, 0x90, 0x42])
        #expect(try await host.command(0x2023) == [0, 27, 0, 0x48, 0x01])
        #expect(try await host.command(0x0C6D, [1, 0]) == [0])
        #expect(try await host.command(0x2018).count == 9)
    }

    @Test func parameterErrorsAndDisallowedCommands() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "a"))
        try await host.setUp()
        // Advertising data longer than 31 bytes.
        #expect(try await host.command(0x2008, [32] + [UInt8](repeating: 0, count: 31)) == [0x12])
        // Truncated Set Event Mask.
        #expect(try await host.command(0x0C01, [1, 2]) == [0x12])
        // Create Connection Cancel with nothing to cancel.
        #expect(try await host.command(0x200E) == [0x0C])
        // Changing advertising parameters while advertising.
        try await host.setAdvertising()
        try await host.enableAdvertising()
        #expect(try await host.command(0x2006, le16(0x20) + le16(0x20) + [0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0]) == [0x0C])
        // Disconnect of an unknown handle: Command Status with Unknown Connection Identifier.
        #expect(try await host.command(0x0406, [0x40, 0x00, 0x13]) == [0x02])
    }

    @Test func maskedEventsAreNotSent() async throws {
        let radio = SimulatedRadio(seed: 3)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let scanner = TestHost(radio.addController(name: "scan", position: .init(x: 1, y: 0)))
        try await advertiser.setUp()
        try await advertiser.setAdvertising(data: [2, 1, 6])
        try await advertiser.enableAdvertising()
        // The default event mask leaves LE Meta (bit 61) off.
        #expect(try await scanner.command(0x0C03) == [0])
        try await scanner.startScan(active: false)
        try await radio.run(for: .seconds(1))
        #expect(scanner.reports.isEmpty)
    }

    @Test func hostSchedulerRunsTimersInVirtualTimeAndWaitsForDispatches() async throws {
        let radio = SimulatedRadio(seed: 1)
        let log = LockedLog()
        let queue = DispatchQueue(label: "test.delegate")
        radio.schedule(after: .milliseconds(30)) { log.append("t30@\(radio.now)") }
        let cancelled = radio.schedule(after: .milliseconds(20)) { log.append("cancelled") }
        radio.schedule(after: .milliseconds(10)) {
            radio.dispatch(on: queue) {
                Thread.sleep(forTimeInterval: 0.02)  // slow delegate: time must not move meanwhile
                log.append("dispatched@\(radio.now)")
            }
        }
        cancelled.cancel()
        try await radio.run(for: .milliseconds(50))
        #expect(log.entries == ["dispatched@\(Duration.milliseconds(10))", "t30@\(Duration.milliseconds(30))"])
        #expect(radio.now == .milliseconds(50))
    }

    /// A callback dispatched while a run ends (here by the run's own stop condition, as another thread's could
    /// be) is not left behind in the loop's queue: it runs on its queue once the run has returned.
    @Test func aCallbackDispatchedAsARunEndsStillRuns() async throws {
        let radio = SimulatedRadio(seed: 1)
        let log = LockedLog()
        let queue = DispatchQueue(label: "test.delegate")
        let stopped = try await radio.run(
            for: .seconds(1),
            until: {
                radio.dispatch(on: queue) { log.append("late") }
                return true
            })
        #expect(stopped)
        let deadline = ContinuousClock.now + .seconds(10)
        while log.entries.isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(log.entries == ["late"])
    }

    /// A callback dispatched before a run began, still running on its queue, finishes before the run takes a
    /// job of a task on the radio: their requests reach the agenda in the order they were made.
    @Test func aCallbackDispatchedBeforeTheRunFinishesBeforeTheRadiosTasks() async throws {
        let radio = SimulatedRadio(seed: 1)
        let log = LockedLog()
        let queue = DispatchQueue(label: "test.delegate")
        radio.dispatch(on: queue) {
            Thread.sleep(forTimeInterval: 0.05)
            log.append("callback")
        }
        let task = Task(executorPreference: radio) { log.append("task") }
        try await radio.run(for: .milliseconds(1))
        await task.value
        #expect(log.entries == ["callback", "task"])
    }
}

final class LockedLog: Sendable {
    private let state = Mutex<[String]>([])
    func append(_ s: String) { state.withLock { $0.append(s) } }
    var entries: [String] { state.withLock { $0 } }
}

/// HCI packets over a slow host link take the time their bytes take, one after another in each direction.
@Suite struct HostLinkTimingTests {
    @Test func aResetOverAOneMegabaudUARTTakesItsBytesTime() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "dongle", hostLink: .uart(baud: 1_000_000)))
        let sent = radio.now
        host.send(0x0C03)
        try await radio.run(for: .milliseconds(5))
        let complete = try #require(host.events(code: 0x0E).first)
        // 4 bytes of command (01 03 0C 00) then 7 of Command Complete (04 0E 04 01 03 0C 00), 10 µs each.
        #expect(complete.time - sent == .microseconds(110))
    }

    @Test func packetsQueueBehindEachOtherOnTheWire() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "dongle", hostLink: .uart(baud: 115_200)))
        let sent = radio.now
        host.send(0x0C03)
        host.send(0x1001)  // Read Local Version Information, sent at the same instant
        try await radio.run(for: .milliseconds(10))
        let answers = host.events(code: 0x0E).map { $0.time - sent }
        #expect(answers.count == 2)
        // At 115200 baud a byte takes 86.8 µs: the second command waits for the first on the way in, and its
        // 15-byte answer for the first answer on the way out.
        func bytes(_ n: Int64) -> Duration { .nanoseconds(n * 10 * 1_000_000_000 / 115_200) }
        // Each packet's time is rounded down to a whole nanosecond: a few nanoseconds of slack.
        func near(_ a: Duration, _ b: Duration) -> Bool { abs((a - b) / .nanoseconds(1)) <= 5 }
        #expect(near(answers[0], bytes(4 + 7)), "\(answers[0])")  // command 1 in, answer 1 out
        #expect(near(answers[1], bytes(4 + 7 + 15)), "\(answers[1])")  // answer 2 follows answer 1 out
    }

    @Test func anIdealLinkTakesNoTime() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "phone"))
        let sent = radio.now
        host.send(0x0C03)
        try await radio.run(for: .milliseconds(1))
        #expect(try #require(host.events(code: 0x0E).first).time == sent)
    }
}
