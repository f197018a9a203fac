import BLECore
import BLEHCI
import BLEVirtualController
import Foundation
import Testing

@Suite struct ConnectionTests {
    @Test func connectionCompleteOnBothSidesWithRoles() async throws {
        let pair = try await ConnectedPair.make()
        let c = pair.central.leEvents(0x01)[0]
        let p = pair.peripheral.leEvents(0x01)[0]
        #expect(c.parameters[0] == 0 && c.parameters[3] == 0)  // success, role central
        #expect(p.parameters[0] == 0 && p.parameters[3] == 1)  // success, role peripheral
        #expect(Array(c.parameters[5..<11].reversed()) == pair.peripheral.controller.address.bytes)
        #expect(Array(p.parameters[5..<11].reversed()) == pair.central.controller.address.bytes)
        #expect(c.parameters[4] == 1 && p.parameters[4] == 1)  // random addresses
        #expect(u16(c.parameters, 11) == 24 && u16(p.parameters, 11) == 24)  // interval from the requested range
        #expect(c.time > p.time)  // the central reports after the first connection event
        // The advertiser stopped advertising.
        let scanner = TestHost(pair.radio.addController(name: "scanner", position: .init(x: 1, y: 1)))
        try await scanner.setUp()
        try await scanner.startScan(active: false)
        try await pair.radio.run(for: .seconds(1))
        #expect(scanner.reports.isEmpty)
    }

    @Test func createConnectionCancel() async throws {
        let radio = SimulatedRadio(seed: 2)
        let host = TestHost(radio.addController(name: "central"))
        try await host.setUp()
        let nobody = BluetoothAddress(string: "C1:22:33:44:55:66", type: .randomDevice)!
        #expect(try await host.command(0x200D, host.createConnection(to: nobody)) == [0])
        try await radio.run(for: .seconds(1))
        #expect(host.leEvents(0x01).isEmpty)
        #expect(try await host.command(0x200E) == [0])
        let complete = host.leEvents(0x01)
        #expect(complete.count == 1 && complete[0].parameters[0] == 0x02)  // Unknown Connection Identifier
        // Command Complete comes before the LE Connection Complete.
        let codes = host.events.suffix(2).map(\.code)
        #expect(codes == [0x0E, 0x3E])
    }

    @Test func aclDataBothWaysWithCompletedPackets() async throws {
        let pair = try await ConnectedPair.make()
        let message = (0..<60).map { UInt8($0) }
        pair.central.sendACL(handle: pair.centralHandle, boundary: 0b00, message)
        pair.peripheral.sendACL(handle: pair.peripheralHandle, boundary: 0b00, [1, 2, 3])
        try await pair.radio.run(for: .milliseconds(100))
        // 60 bytes with 27-byte PDUs: three LL PDUs, start then continuations.
        let received = pair.peripheral.acl
        #expect(received.map(\.data.count) == [27, 27, 6])
        #expect(received.map(\.boundary) == [0b10, 0b01, 0b01])
        #expect(received.flatMap(\.data) == message)
        #expect(received.allSatisfy { $0.handle == pair.peripheralHandle })
        #expect(pair.central.acl.map(\.data) == [[1, 2, 3]])
        // One Number Of Completed Packets per side: 1 packet for its handle.
        let nocp = pair.central.events(code: 0x13)
        #expect(nocp.map(\.parameters) == [[1] + le16(pair.centralHandle) + [1, 0]])
        #expect(pair.peripheral.events(code: 0x13).map(\.parameters) == [[1] + le16(pair.peripheralHandle) + [1, 0]])
    }

    @Test func bufferOverflowIsReported() async throws {
        let pair = try await ConnectedPair.make()
        pair.central.sendACL(handle: pair.centralHandle, [UInt8](repeating: 0, count: 252))
        try await pair.radio.run(for: .milliseconds(10))
        #expect(pair.central.events(code: 0x1A).map(\.parameters) == [[0x01]])
        #expect(pair.peripheral.acl.isEmpty)
    }

    @Test func throughputIsBoundedByAirTime() async throws {
        // 1M PHY, 251-byte LL payloads, 7.5 ms interval: 3 exchanges of 2468 µs per event, 803 kbit/s of LL payload.
        let pair = try await ConnectedPair.make(intervalUnits: 6, dataLength: 251)
        let dlc = pair.central.leEvents(0x07)
        #expect(dlc.count == 1 && u16(dlc[0].parameters, 2) == 251 && u16(dlc[0].parameters, 6) == 251)
        let sender = pair.peripheral
        let handle = pair.peripheralHandle
        let chunk = [UInt8](repeating: 0xAB, count: 251)
        // Keep all 8 buffers full: send again whenever packets complete.
        sender.onPacket { packet in
            guard case .event(let e) = packet, e.code.rawValue == 0x13 else { return }
            for _ in 0..<Int(u16(e.parameters, 3)) { sender.sendACL(handle: handle, chunk) }
        }
        for _ in 0..<8 { sender.sendACL(handle: handle, chunk) }
        let start = pair.radio.now
        try await pair.radio.run(for: .seconds(2))
        let received = pair.central.acl.filter { $0.time > start }.reduce(0) { $0 + $1.data.count }
        let kbps = Double(received * 8) / 2.0 / 1000
        let bound = 3.0 * 251 * 8 / 7.5  // kbit/s
        print("LL payload throughput, 1M, DL 251, CI 7.5 ms: \(kbps) kbit/s (bound \(bound))")
        // The 2 s window holds 266.7 events; it may catch the start of one more.
        #expect(Double(received) <= (2.0 / 0.0075 + 1) * 3 * 251)
        #expect(kbps >= bound * 0.95)
    }

    @Test func throughputOn2MWithShortPDUs() async throws {
        let pair = try await ConnectedPair.make(intervalUnits: 6)
        #expect(try await pair.central.command(0x2032, le16(pair.centralHandle) + [0, 2, 2, 0, 0]) == [0])
        try await pair.radio.run(for: .milliseconds(100))
        #expect(pair.central.leEvents(0x0C).map(\.parameters) == [[0] + le16(pair.centralHandle) + [2, 2]])
        #expect(pair.peripheral.leEvents(0x0C).map(\.parameters) == [[0] + le16(pair.peripheralHandle) + [2, 2]])
        #expect(
            try await pair.peripheral.command(0x2030, le16(pair.peripheralHandle)) == [0] + le16(pair.peripheralHandle)
                + [2, 2])
        let sender = pair.central
        let handle = pair.centralHandle
        let chunk = [UInt8](repeating: 1, count: 27)
        sender.onPacket { packet in
            guard case .event(let e) = packet, e.code.rawValue == 0x13 else { return }
            for _ in 0..<Int(u16(e.parameters, 3)) { sender.sendACL(handle: handle, chunk) }
        }
        for _ in 0..<8 { sender.sendACL(handle: handle, chunk) }
        let start = pair.radio.now
        try await pair.radio.run(for: .seconds(1))
        let received = pair.peripheral.acl.filter { $0.time > start }.reduce(0) { $0 + $1.data.count }
        // 2M, 27 bytes: T_pair = 4·(2+4+2+27+3) + 150 + 44 + 150 = 496 µs, 15 per 7.5 ms event, but only 8
        // buffers: the host refills once per event, so 8 PDUs per event.
        let kbps = Double(received * 8) / 1000
        print("LL payload throughput, 2M, DL 27, 8 buffers: \(kbps) kbit/s")
        #expect(kbps <= 15.0 * 27 * 8 / 7.5 + 1)
        #expect(kbps >= 8.0 * 27 * 8 / 7.5 * 0.95)
    }
}

@Suite struct MultipleConnectionTests {
    @Test func aCentralConnectsToSeveralPeripherals() async throws {
        let radio = SimulatedRadio(seed: 21)
        let central = TestHost(radio.addController(name: "central"))
        let peripherals = (0..<3).map {
            TestHost(radio.addController(name: "p\($0)", position: .init(x: Double($0) + 1, y: 0)))
        }
        try await central.setUp()
        for p in peripherals {
            try await p.setUp()
            try await p.setAdvertising(type: 0, interval: 0x0030)
            try await p.enableAdvertising()
        }
        for p in peripherals {
            #expect(
                try await central.command(
                    0x200D, central.createConnection(to: p.controller.address, intervalMin: 8, intervalMax: 8)) == [0])
            try await radio.run(for: .milliseconds(300))
        }
        let completes = central.leEvents(0x01)
        #expect(completes.count == 3 && completes.allSatisfy { $0.parameters[0] == 0 && $0.parameters[3] == 0 })
        let handles = completes.map { u16($0.parameters, 1) }
        #expect(Set(handles).count == 3)
        for (i, p) in peripherals.enumerated() {
            central.sendACL(handle: handles[i], [UInt8(i), 0xEE])
            _ = p
        }
        try await radio.run(for: .milliseconds(100))
        for (i, p) in peripherals.enumerated() {
            #expect(p.acl.map(\.data) == [[UInt8(i), 0xEE]])
        }
        #expect(central.events(code: 0x13).count == 3)
    }
}

@Suite struct PacingTests {
    @Test func realtimePacingTracksWallTime() async throws {
        let radio = SimulatedRadio(seed: 1)
        radio.schedule(after: .milliseconds(30)) {}
        let start = ContinuousClock.now
        try await radio.run(for: .milliseconds(60), pacing: .realtime)
        #expect(ContinuousClock.now - start >= .milliseconds(60))
        #expect(radio.now == .milliseconds(60))
    }
}
