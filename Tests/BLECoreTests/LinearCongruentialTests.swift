import Testing

@testable import BLECore

/// The small generator gives MMIX's sequence, so what a seed drew before (a host's static address, the demo's
/// readings, the robustness tests' inputs) is drawn again.
@Suite struct LinearCongruentialTests {
    @Test func theFirstDrawsFromSeedZeroAreMMIXs() {
        var generator = LinearCongruential(seed: 0)
        let drawn = (0..<3).map { _ in generator.next() }
        // The first draw from 0 is the increment itself.
        #expect(drawn == [0x1405_7B7E_F767_814F, 0x1A08_EE11_84BA_6D32, 0x9AF6_7822_2E72_8119])
        #expect(generator.state == drawn.last)
    }

    @Test func theHighBitsAreTheTop31OfEachDraw() {
        var generator = LinearCongruential(seed: 42)
        let drawn = (0..<3).map { _ in generator.nextHighBits() }
        // The draws from 42: 0x9177_8AED_87EE_5EB1, 0x39B7_F8A5_C64C_F56C, 0x69AF_C5A5_E88B_394B.
        #expect(drawn == [0x48BB_C576, 0x1CDB_FC52, 0x34D7_E2D2])
    }
}
