import Foundation
import Testing

@testable import BLEVirtualController

@Suite struct RadioPropagationTests {
    /// The squared-distance test the links use agrees with the path-loss model at every transmit power, from
    /// 1 cm to beyond the longest range, off the boundary itself (where rounding may fall either way).
    @Test func theRangeTestAgreesWithThePathLossModel() {
        var checked = 0
        for power in Int8.min...Int8.max {
            var distance = 0.01
            while distance < 20_000 {
                let margin = abs(
                    RadioPropagation.meanReceivedPower(txPower: power, distance: distance)
                        - RadioPropagation.sensitivity)
                if margin > 1e-6 {
                    #expect(
                        RadioPropagation.reaches(txPower: power, squaredDistance: distance * distance)
                            == RadioPropagation.inRange(txPower: power, distance: distance),
                        "\(power) dBm at \(distance) m")
                    checked += 1
                }
                distance *= 1.07
            }
        }
        #expect(checked > 30_000)
        // The documented ranges: 100 m at 0 dBm (exactly on the boundary, in range), none past it.
        #expect(RadioPropagation.reaches(txPower: 0, squaredDistance: 100 * 100))
        #expect(!RadioPropagation.reaches(txPower: 0, squaredDistance: 100.01 * 100.01))
        #expect(!RadioPropagation.reaches(txPower: 0, squaredDistance: .infinity))
        #expect(!RadioPropagation.reaches(txPower: 0, squaredDistance: .nan))
        #expect(!RadioPropagation.reaches(txPower: -128, squaredDistance: 0))
    }
}
