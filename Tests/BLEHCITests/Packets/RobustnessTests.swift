import BLECore
import BLEHCI
import NIOCore
import Testing

/// Arbitrary bytes into every decoder: each must return or throw, never trap.
@Suite struct RobustnessTests {
    /// A small deterministic generator (64-bit LCG), so a failure replays.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
    }

    @Test func randomEventParametersNeverTrap() {
        var generator = Generator(state: 42)
        let codes: [HCIEventCode] = [
            .disconnectionComplete, .encryptionChange, .readRemoteVersionInformationComplete,
            .commandComplete, .commandStatus, .hardwareError, .numberOfCompletedPackets,
            .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta,
        ]
        for _ in 0..<2000 {
            let code = codes[Int(generator.next()) % codes.count]
            var parameters = generator.bytes(Int(generator.next()) % 40)
            if code == .leMeta, !parameters.isEmpty { parameters[0] %= 0x10 }
            let packet = HCIEventPacket(code: code, parameters: parameters)
            if let event = try? HCIEvent(packet) {
                // Whatever decodes re-encodes to a packet that decodes to the same event.
                #expect((try? HCIEvent(event.packet)) == event)
            }
        }
    }

    @Test func randomCommandParametersNeverTrap() {
        var generator = Generator(state: 7)
        let opcodes = HCICommandRegistry.standard.opcodes
        for _ in 0..<2000 {
            let opcode = opcodes[Int(generator.next()) % opcodes.count]
            let packet = HCICommandPacket(opcode: opcode, parameters: generator.bytes(Int(generator.next()) % 40))
            _ = try? decodeCommand(packet)
        }
    }

    @Test func randomH4StreamNeverTraps() {
        var generator = Generator(state: 99)
        for _ in 0..<200 {
            var decoder = H4Decoder()
            var buffer = ByteBuffer(bytes: generator.bytes(64))
            while let packet = try? decoder.decode(&buffer) {
                _ = packet
            }
        }
    }
}
