import BLECore
import BLEHCI
import BLETransport
import BLEVirtualController
import Testing

/// Arbitrary HCI commands and ACL data from a host into a virtual controller with a live link: no trap, every
/// command answered by exactly one Command Complete or Command Status, and the radio keeps running.
@Suite struct ControllerRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    /// The commands the virtual controller implements, so random parameters reach their parsers.
    static let implemented: [UInt16] = [
        0x0406, 0x041D, 0x0C01, 0x0C03, 0x0C63, 0x0C6C, 0x0C6D, 0x1001, 0x1002, 0x1003, 0x1005, 0x1009, 0x1405,
        0x2001, 0x2002, 0x2003, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x200B, 0x200C, 0x200D, 0x200E,
        0x200F, 0x2010, 0x2011, 0x2012, 0x2013, 0x2016, 0x2017, 0x2018, 0x2019, 0x201A, 0x201B, 0x2020, 0x2021,
        0x2022, 0x2023, 0x2024, 0x202F, 0x2030, 0x2031, 0x2032, 0x2060,
    ]

    /// A random command: mostly an implemented opcode, else any OCF in the link control, controller and
    /// baseband, informational, status or LE groups; random parameters, their first two octets often the
    /// live connection handle.
    static func randomCommand(_ g: inout Generator, handle: UInt16) -> (opcode: UInt16, parameters: [UInt8]) {
        let opcode: UInt16
        if g.chance(70) {
            opcode = implemented[g.below(implemented.count)]
        } else {
            let ogf: UInt16 = [0x01, 0x03, 0x04, 0x05, 0x08][g.below(5)]
            opcode = ogf << 10 | UInt16(g.below(0x400))
        }
        var parameters = g.bytes(g.chance(85) ? g.below(40) : g.below(256))
        if parameters.count >= 2, g.chance(50) {
            parameters[0] = UInt8(handle & 0xFF)
            parameters[1] = UInt8(handle >> 8)
        }
        // Reset and Disconnect are legal and tested elsewhere; here they would only end the link early.
        if opcode == 0x0C03 || opcode == 0x0406 { return (0x1009, []) }
        return (opcode, parameters)
    }

    /// The Command Complete and Command Status events among `packets` that answer `opcode`, and those that
    /// answer anything else.
    static func answers(in packets: [TestHost.Received], to opcode: UInt16) -> (mine: Int, others: Int) {
        var mine = 0
        var others = 0
        for r in packets {
            guard case .event(let e) = r.packet else { continue }
            let p = e.parameters
            let answered: UInt16?
            switch e.code.rawValue {
            case 0x0E where p.count >= 3: answered = u16(p, 1)
            case 0x0F where p.count >= 4: answered = u16(p, 2)
            default: answered = nil
            }
            guard let answered else { continue }
            if answered == opcode { mine += 1 } else { others += 1 }
        }
        return (mine, others)
    }

    @Test func randomCommandsAreEachAnsweredOnce() async throws {
        var g = Generator(seed: 0xC0DE)
        let pair = try await ConnectedPair.make(seed: 7)
        let host = pair.central
        let address = try await host.command(0x1009)
        for _ in 0..<2000 {
            let (opcode, parameters) = Self.randomCommand(&g, handle: pair.centralHandle)
            let before = host.received.count
            host.send(opcode, parameters)
            try await pair.radio.run(for: .milliseconds(2))
            let (mine, others) = Self.answers(in: Array(host.received[before...]), to: opcode)
            #expect(mine == 1, "0x\(String(opcode, radix: 16)) \(parameters.hexString): \(mine) answers")
            #expect(others == 0)
        }
        try await Self.checkStillRunning(pair, address: address)
    }

    /// The controller still answers, its radio still runs, and a new pair can connect on it.
    static func checkStillRunning(_ pair: ConnectedPair, address: [UInt8]) async throws {
        let start = pair.radio.now
        #expect(try await pair.central.command(0x1009) == address)
        try await pair.radio.run(for: .milliseconds(50))
        #expect(pair.radio.now >= start + .milliseconds(50))
        _ = try await ConnectedPair.make(radio: pair.radio)
    }

    /// Random ACL packets, for the live link and for handles that are not: over-long ones and a full buffer
    /// are reported as Data Buffer Overflow, the rest carried or dropped; the link carries valid data after.
    @Test func randomACLKeepsTheLinkWorking() async throws {
        var g = Generator(seed: 0xACE)
        let pair = try await ConnectedPair.make(seed: 9)
        let address = try await pair.central.command(0x1009)
        for round in 0..<1000 {
            let handle = g.chance(80) ? pair.centralHandle : UInt16(g.below(0x1000))
            let length = g.chance(80) ? g.below(40) : g.below(400)
            pair.central.sendACL(handle: handle, boundary: g.next() & 0b11, g.bytes(length))
            if round % 10 == 9 { try await pair.radio.run(for: .milliseconds(30)) }
        }
        try await pair.radio.run(for: .milliseconds(200))
        // Every buffer the host filled came back (Number Of Completed Packets) or was refused: the controller
        // takes a fresh packet without overflow.
        pair.central.clear()
        pair.peripheral.clear()
        let frame: [UInt8] = [0x03, 0x00, 0x04, 0x00, 0x0A, 0x01, 0x00]  // an ATT Read Request for handle 1
        pair.central.sendACL(handle: pair.centralHandle, boundary: 0b00, frame)
        try await pair.radio.run(for: .milliseconds(100))
        #expect(pair.central.events(code: 0x1A).isEmpty, "a buffer was never returned")
        #expect(pair.peripheral.acl.map(\.data) == [frame])
        try await Self.checkStillRunning(pair, address: address)
    }
}
