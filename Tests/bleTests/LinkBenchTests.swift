import BLE
import BLEBench
import Testing

@testable import ble

/// `ble bench link` measures what the model says a link carries (virtual time: deterministic). The time limit is
/// a hang bound: a case takes seconds in a debug build, and more than two minutes under ThreadSanitizer on a loaded
/// machine.
@Suite(.timeLimit(.minutes(10))) struct LinkBenchTests {
    @Test(arguments: [
        LinkBenchmark(kind: .notifications, phy: .le1M, payload: 251, interval: .milliseconds(30)),
        LinkBenchmark(kind: .writesWithoutResponse, phy: .le2M, payload: 27, interval: .milliseconds(15)),
        // Long events: a sender whose queue ran dry between two sends would lose the rest of one (7 % here).
        LinkBenchmark(kind: .writesWithoutResponse, phy: .le2M, payload: 251, interval: .milliseconds(100)),
        LinkBenchmark(kind: .writes, phy: .le1M, payload: 251, interval: .milliseconds(50)),
        LinkBenchmark(kind: .indications, phy: .le2M, payload: 251, interval: .microseconds(7500)),
    ])
    func aCaseIsWithinTwoPercentOfTheModel(_ bench: LinkBenchmark) async throws {
        let measured = try await bench.measure(seconds: 3, seed: 1)
        #expect(abs(measured - bench.model) <= 0.02 * bench.model, "\(measured) kbit/s against \(bench.model)")
    }

    /// The model itself, against AirTimeModel.md's table.
    @Test func theModelMatchesThePublishedTable() {
        func model(_ kind: LinkBenchmark.Kind, _ phy: LinkPHY, _ payload: Int, _ ms: Double) -> Double {
            LinkBenchmark(kind: kind, phy: phy, payload: payload, interval: .microseconds(Int64(ms * 1000))).model
        }
        #expect(abs(model(.notifications, .le1M, 251, 30) - 781) < 1)
        #expect(abs(model(.notifications, .le1M, 27, 7.5) - 235) < 1)
        #expect(abs(model(.notifications, .le2M, 251, 7.5) - 1301) < 1)
        #expect(abs(model(.notifications, .le2M, 251, 100) - 1386) < 1)
        #expect(abs(model(.writes, .le1M, 251, 7.5) - 130) < 1)
        #expect(abs(model(.indications, .le1M, 251, 50) - 19.5) < 0.1)
    }
}
