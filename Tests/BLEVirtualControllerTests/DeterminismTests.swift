import BLECore
import BLEHCI
import BLEVirtualController
import Foundation
import Synchronization
import Testing

@Suite struct DeterminismTests {
    /// A busy little world: two advertisers, an active scanner that connects to one of them and exchanges data.
    func scenarioTrace(seed: UInt64, airCapture: String? = nil) async throws -> [String] {
        let radio = SimulatedRadio(seed: seed)
        if let airCapture { try radio.startAirCapture(to: airCapture) }
        defer { radio.stopAirCapture() }
        let trace = Mutex<[String]>([])
        radio.setTraceHandler { time, name, direction, packet in
            trace.withLock { $0.append("\(time) \(name) \(direction) \(packet)") }
        }
        radio.packetLossRate = 0.05
        let a = TestHost(radio.addController(name: "a"))
        let b = TestHost(radio.addController(name: "b", position: .init(x: 4, y: 0)))
        let c = TestHost(radio.addController(name: "c", position: .init(x: 0, y: 7)))
        for host in [a, b, c] { try await host.setUp() }
        try await a.setAdvertising(type: 0, data: [2, 1, 6], scanResponse: [2, 9, 0x41])
        try await b.setAdvertising(type: 2, data: [2, 1, 4])
        try await a.enableAdvertising()
        try await b.enableAdvertising()
        try await c.startScan(active: true)
        try await radio.run(for: .seconds(1))
        try await c.command(0x200C, [0, 0])
        try await c.command(0x200D, c.createConnection(to: a.controller.address))
        try await radio.run(for: .milliseconds(300))
        if let handle = c.leEvents(0x01).first.map({ u16($0.parameters, 1) }) {
            for i in 0..<5 { c.sendACL(handle: handle, [UInt8](repeating: UInt8(i), count: 100)) }
        }
        try await radio.run(for: .seconds(1))
        return trace.withLock { $0 }
    }

    @Test func sameSeedSameTraceDifferentSeedDifferentTrace() async throws {
        let first = try await scenarioTrace(seed: 42)
        let second = try await scenarioTrace(seed: 42)
        let other = try await scenarioTrace(seed: 43)
        #expect(first.count > 100)
        #expect(first == second)
        #expect(first != other)
    }

    /// Recording the air changes nothing in the run, and the file is a pcap of link-layer packets
    /// (LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR), one record per PDU, in time order. (tshark checks the CRCs: test_cli.py.)
    @Test func anAirCaptureChangesNothingAndHoldsTheLinkLayer() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("air-\(UUID().uuidString).pcap").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let plain = try await scenarioTrace(seed: 5)
        let captured = try await scenarioTrace(seed: 5, airCapture: path)
        #expect(plain == captured)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.count > 24)
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }
        #expect(u32(0) == 0xA1B2_3C4D)  // nanosecond pcap
        #expect(u32(20) == 256)  // LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR
        // Walk the records: each is a 10-byte pseudo-header, an access address, a PDU and its CRC.
        var at = 24
        var advertising = 0
        var data = 0
        var times: [UInt64] = []
        while at + 16 <= bytes.count {
            times.append(UInt64(u32(at)) * 1_000_000_000 + UInt64(u32(at + 4)))
            let length = Int(u32(at + 8))
            let record = Array(bytes[(at + 16)..<(at + 16 + length)])
            let accessAddress = record[10..<14].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(Int(record[15]) == length - 10 - 4 - 2 - 3)  // the PDU's length field
            if accessAddress == 0x8E89_BED6 { advertising += 1 } else { data += 1 }
            at += 16 + length
        }
        #expect(at == bytes.count)
        #expect(advertising > 10 && data > 10)
        // In time order, as a sniffer writes them, though b advertises while a and c exchange data.
        let backwards = zip(times, times.dropFirst()).filter { $0 > $1 }.count
        #expect(backwards == 0, "records out of time order")
    }

    @Test func derivedAddressesAreStaticRandomAndStable() {
        let a1 = SimulatedRadio(seed: 1).addController(name: "phone").address
        let a2 = SimulatedRadio(seed: 1).addController(name: "phone").address
        let b = SimulatedRadio(seed: 1).addController(name: "sensor").address
        #expect(a1 == a2 && a1 != b)
        #expect(a1.randomKind == .staticAddress)
    }

    @Test func aMinuteOfABusyConnection() async throws {
        // Not a timed assertion: a smoke check that prints how long a minute of virtual time takes.
        let pair = try await ConnectedPair.make(intervalUnits: 6, dataLength: 251)
        let sender = pair.peripheral
        let handle = pair.peripheralHandle
        let chunk = [UInt8](repeating: 0x5A, count: 244)
        sender.onPacket { packet in
            guard case .event(let e) = packet, e.code.rawValue == 0x13 else { return }
            for _ in 0..<Int(u16(e.parameters, 3)) { sender.sendACL(handle: handle, chunk) }
        }
        for _ in 0..<8 { sender.sendACL(handle: handle, chunk) }
        let wallStart = ContinuousClock.now
        try await pair.radio.run(for: .seconds(60))
        let wall = ContinuousClock.now - wallStart
        let bytes = pair.central.acl.reduce(0) { $0 + $1.data.count }
        print("60 s of virtual time, 7.5 ms interval, notification stream: \(wall) wall, \(bytes) bytes delivered")
        #expect(bytes > 60 * 90_000)
        pair.central.clear()
        pair.peripheral.clear()
        sender.onPacket(nil)
        // And an idle hour costs almost nothing.
        let idleStart = ContinuousClock.now
        try await pair.radio.run(for: .seconds(3600))
        print("an idle hour: \(ContinuousClock.now - idleStart) wall")
        #expect(pair.central.events(code: 0x05).isEmpty)
    }
}

/// A caller's "forever" (`.seconds(Int64.max)`) as a delay or a run length saturates; it never traps.
@Suite struct FarFutureTests {
    @Test func aDelayOrARunOfForeverSaturates() async throws {
        let radio = SimulatedRadio(seed: 3)
        let fired = Mutex(false)
        radio.schedule(after: .seconds(Int64.max)) { fired.withLock { $0 = true } }
        try await radio.run(for: .seconds(1))
        #expect(radio.now == .seconds(1))
        #expect(!fired.withLock { $0 })
        let stopped = try await radio.run(for: .seconds(Int64.max), until: { fired.withLock { $0 } })
        #expect(stopped)
        #expect(radio.now == .nanoseconds(Int64.max / 2))  // where "forever" was clamped to, about 146 years
        // Virtual time ends there: a later run returns at once rather than overflow.
        try await radio.run(for: .seconds(Int64.max))
        #expect(radio.now == .nanoseconds(Int64.max / 2))
    }
}
