import Testing

@testable import BLECore

/// The seeded generator gives SplitMix64's published sequence, so what a seed drew before it is drawn again.
@Suite struct SeededRandomTests {
    @Test func theFirstDrawsFromSeedZeroAreSplitMix64s() {
        var generator = SeededRandom(seed: 0)
        let drawn = (0..<3).map { _ in generator.next() }
        #expect(drawn == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
    }

    @Test func mixIsTheDrawFromThatState() {
        for seed: UInt64 in [0, 1, 2024, .max] {
            var generator = SeededRandom(seed: seed)
            #expect(SeededRandom.mix(seed) == generator.next())
        }
    }
}
