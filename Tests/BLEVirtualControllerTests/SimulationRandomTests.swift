import Testing

@testable import BLEVirtualController

/// The simulation's generator draws what it always drew from a seed (xoshiro256** from SplitMix64's first four
/// draws), so a run recorded with its seed replays.
@Suite struct SimulationRandomTests {
    @Test func theFirstDrawsFromSeedZero() {
        var random = SimulationRandom(seed: 0)
        let drawn = (0..<3).map { _ in random.next() }
        #expect(drawn == [0x99EC_5F36_CB75_F2B4, 0xBF6E_1F78_4956_452A, 0x1A5F_849D_4933_E6E0])
    }
}
