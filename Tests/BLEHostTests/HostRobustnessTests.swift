import BLEATT
import BLECore
import BLEHCI
import BLEHost
import BLETransport
import Testing

/// Arbitrary HCI events and arbitrary ACL data into a host with live links: no trap, and afterwards a GATT
/// read on the link still completes.
@Suite struct HostRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    typealias ReadResult = Result<[UInt8], HostError>
    static let central = ConnectionHandle(1), peripheral = ConnectionHandle(2)

    /// A started host with a central link (MTU exchanged) and a peripheral link.
    static func harness() throws -> HostHarness {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)
        harness.connect(2, role: .peripheral)
        harness.controller.clear()
        harness.log.clear()
        return harness
    }

    /// The controller reports every ACL packet the host sent so far done, so credits never run out.
    static func returnCredits(_ harness: HostHarness) {
        harness.completed(1, 100)
        harness.completed(2, 100)
    }

    /// Reads attribute 0x0010 on the central link; the peer answers `01 02`. Returns what the read gave.
    static func read(_ harness: HostHarness) -> (result: ReadResult?, calls: Int) {
        let outcome = Outcome<ReadResult>()
        harness.host.read(on: central, attribute: AttributeHandle(0x0010), completion: outcome.handler)
        returnCredits(harness)
        if harness.controller.att(on: central).last == [0x0A, 0x10, 0x00] {
            harness.controller.deliverL2CAP(handle: central, channel: .att, [0x0B, 0x01, 0x02])
        }
        return (outcome.value, outcome.count)
    }

    // MARK: - Events

    static let eventCodes: [HCIEventCode] = [
        .disconnectionComplete, .encryptionChange, .readRemoteVersionInformationComplete,
        .commandComplete, .commandStatus, .hardwareError, .numberOfCompletedPackets,
        .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta, .leMeta, .leMeta,
        .leMeta, HCIEventCode(rawValue: 0xFF),
    ]

    /// A random event, its handles mostly those of live links. `nil` for one that would legitimately end or
    /// replace a live link (its loss is not what this test is about).
    static func randomEvent(_ g: inout Generator) -> HCIEventPacket? {
        let code = eventCodes[g.below(eventCodes.count)]
        var parameters = g.bytes(g.below(g.chance(80) ? 20 : 64))
        if code == .leMeta, !parameters.isEmpty { parameters[0] = UInt8(1 + g.below(0x0E)) }
        // Point handle fields at live links most of the time (the handle follows the status, or the subevent).
        let handleOffset = code == .leMeta && (parameters.first == 0x03 || parameters.first == 0x07) ? 2 : 1
        if parameters.count >= handleOffset + 2, g.chance(60) {
            parameters[handleOffset] = UInt8(1 + g.below(2))
            parameters[handleOffset + 1] = 0
        }
        let packet = HCIEventPacket(code: code, parameters: parameters)
        switch try? HCIEvent(packet) {
        case .disconnectionComplete(let event)? where [central, peripheral].contains(event.handle):
            return nil
        case .leMeta(.connectionComplete(let event))? where [central, peripheral].contains(event.handle):
            return nil
        case .leMeta(.enhancedConnectionComplete(let event))? where [central, peripheral].contains(event.handle):
            return nil
        case .hardwareError?:
            // The host resets the controller and every link ends (FailuresTests' controller-reset cases).
            return nil
        default:
            return packet
        }
    }

    @Test func randomEventsThenAReadStillCompletes() throws {
        var g = Generator(seed: 0xE7E)
        let harness = try Self.harness()
        var delivered = 0
        for _ in 0..<3000 {
            guard let packet = Self.randomEvent(&g) else { continue }
            harness.controller.pipe.deliverToHost(.event(packet))
            harness.controller.pump()
            delivered += 1
        }
        #expect(delivered > 2000)
        #expect(harness.host.links.count >= 2)
        let (result, calls) = Self.read(harness)
        #expect(calls == 1)
        #expect(try result?.get() == [0x01, 0x02])
    }

    // MARK: - ACL data

    /// ATT opcodes a peer client may send (requests, commands) and server-initiated ones, none of which can
    /// close this side's bearer.
    static let harmlessATTOpcodes: [UInt8] = [
        0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20,
        0x52, 0xD2, 0x1B, 0x1D, 0x1E, 0x23, 0x7F,
    ]

    /// One ACL packet of garbage: any handle (mostly live ones), any boundary flag, and either a B-frame on
    /// ATT, signalling, SMP or an unknown channel (its length right or not), or bare random bytes.
    static func randomACL(_ g: inout Generator, attResponses: Bool) -> HCIACLDataPacket {
        let handle = g.chance(85) ? ConnectionHandle(UInt16(1 + g.below(2))) : ConnectionHandle(UInt16(g.below(0x0F00)))
        let boundary = HCIACLDataPacket.PacketBoundaryFlag(rawValue: g.chance(70) ? 0b10 : g.next())
        var data: [UInt8]
        if g.chance(75) {
            let channel: UInt16 = [0x0004, 0x0005, 0x0006, 0x0040, 0x0003, UInt16(g.below(0x10000))][g.below(6)]
            var payload = g.bytes(g.below(30))
            if channel == 0x0004 {
                payload = [attResponses ? g.next() : harmlessATTOpcodes[g.below(harmlessATTOpcodes.count)]] + payload
            } else if channel == 0x0005 || channel == 0x0006, !payload.isEmpty, g.chance(60) {
                payload[0] = UInt8(g.below(0x20))
            }
            let length = g.chance(85) ? UInt16(payload.count) : UInt16(g.below(0x10000))
            data = le16(length) + le16(channel) + payload
        } else {
            data = g.bytes(g.below(40))
        }
        if boundary == .continuing, handle == central, !attResponses {
            // A continuation could complete a frame begun by an earlier packet on ATT with a response in it.
            data = []
        }
        return HCIACLDataPacket(handle: handle, packetBoundary: boundary, data: data)
    }

    /// Garbage on every channel but ATT responses: the central link's bearer stays open and the read succeeds.
    @Test func randomACLThenAReadStillSucceeds() throws {
        var g = Generator(seed: 0xAC1)
        let harness = try Self.harness()
        for _ in 0..<1500 {
            let packet = Self.randomACL(&g, attResponses: false)
            harness.controller.pipe.deliverToHost(.acl(packet))
            harness.controller.pump()
            Self.returnCredits(harness)
        }
        #expect(harness.host.links.count == 2)
        #expect(!harness.controller.opcodes.contains(HCIDisconnect.opcode), "the host gave up a link")
        let (result, calls) = Self.read(harness)
        #expect(calls == 1)
        #expect(try result?.get() == [0x01, 0x02])
    }

    /// Garbage of every kind, ATT responses included: the read completes exactly once, with the value if the
    /// central link's bearer survived, else with an error, the host having asked for the link to go.
    @Test func randomACLOfEveryKindThenAReadCompletes() throws {
        var g = Generator(seed: 0xACA11)
        var succeeded = 0
        var failed = 0
        for _ in 0..<20 {
            let harness = try Self.harness()
            for _ in 0..<(1 + g.below(60)) {
                harness.controller.pipe.deliverToHost(.acl(Self.randomACL(&g, attResponses: true)))
                harness.controller.pump()
                Self.returnCredits(harness)
            }
            let gaveUp = harness.controller.opcodes.contains(HCIDisconnect.opcode)
            let (result, calls) = Self.read(harness)
            #expect(calls == 1)
            switch result {
            case .success(let value)?:
                succeeded += 1
                #expect(value == [0x01, 0x02])
                #expect(!gaveUp)
            case .failure?:
                failed += 1
                #expect(gaveUp, "a read failed on a link the host kept")
            case nil:
                Issue.record("the read never completed")
            }
        }
        #expect(succeeded > 0 && failed > 0)
    }
}
