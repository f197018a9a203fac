import BLECore
import BLEHCI
import NIOCore
import Testing

/// Arbitrary bytes into every decoder: each must return or throw, never trap.
@Suite struct RobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
    }

    @Test func randomEventParametersNeverTrap() {
        var generator = Generator(seed: 42)
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
        var generator = Generator(seed: 7)
        let opcodes = HCICommandRegistry.standard.opcodes
        for _ in 0..<2000 {
            let opcode = opcodes[Int(generator.next()) % opcodes.count]
            let packet = HCICommandPacket(opcode: opcode, parameters: generator.bytes(Int(generator.next()) % 40))
            _ = try? decodeCommand(packet)
        }
    }

    @Test func randomH4StreamNeverTraps() {
        var generator = Generator(seed: 99)
        for _ in 0..<200 {
            var decoder = H4Decoder()
            var buffer = ByteBuffer(bytes: generator.bytes(64))
            while let packet = try? decoder.decode(&buffer) {
                _ = packet
            }
        }
    }
}
