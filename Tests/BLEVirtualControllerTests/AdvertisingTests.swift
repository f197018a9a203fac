import BLECore
import BLEHCI
import BLEVirtualController
import Foundation
import Testing

@Suite struct AdvertisingTests {
    @Test func passiveScanningReportsAdvertisementsWithRSSI() async throws {
        let radio = SimulatedRadio(seed: 7)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let scanner = TestHost(radio.addController(name: "scan", position: .init(x: 5, y: 0)))
        try await advertiser.setUp()
        try await scanner.setUp()
        try await advertiser.setAdvertising(
            type: 0, interval: 0x00A0, data: [2, 1, 6, 3, 9, 0x41, 0x42],
            scanResponse: [3, 9, 0x43, 0x44])
        try await advertiser.enableAdvertising()
        try await scanner.startScan(active: false)
        try await radio.run(for: .seconds(2))
        let reports = scanner.reports
        // 100 ms interval + 0...10 ms delay: ~19 events in 2 s, each heard once by a continuous scanner.
        #expect(reports.count >= 15 && reports.count <= 21)
        #expect(reports.allSatisfy { $0.type == 0x00 && $0.data == [2, 1, 6, 3, 9, 0x41, 0x42] })
        #expect(reports.allSatisfy { $0.address == advertiser.controller.address.bytes })
        let expected = RadioPropagation.meanReceivedPower(txPower: 0, distance: 5)
        #expect(reports.allSatisfy { abs(Double($0.rssi) - expected) <= 2.5 })
        #expect(Set(reports.map(\.rssi)).count > 1)  // jitter
    }

    /// The first advertising event comes one interval and one advDelay after the enable, not at once.
    @Test func theFirstAdvertisementComesAfterAnIntervalAndADelay() async throws {
        for seed: UInt64 in [1, 2, 3, 4] {
            let radio = SimulatedRadio(seed: seed)
            let advertiser = TestHost(radio.addController(name: "adv"))
            let scanner = TestHost(radio.addController(name: "scan", position: .init(x: 5, y: 0)))
            try await advertiser.setUp()
            try await scanner.setUp()
            try await advertiser.setAdvertising(type: 0, interval: 0x00A0, data: [2, 1, 6])
            try await scanner.startScan(active: false)
            let enabled = radio.now
            try await advertiser.enableAdvertising()
            try await radio.run(for: .seconds(1))
            let first = try #require(scanner.reports.first).time - enabled
            // 0x00A0 × 0.625 ms = 100 ms, then advDelay 0...10 ms (and the 1 ms the enable command took).
            #expect(first >= .milliseconds(100) && first <= .milliseconds(112), "first report after \(first)")
        }
    }

    @Test func activeScanningAddsScanResponses() async throws {
        let radio = SimulatedRadio(seed: 7)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let scanner = TestHost(radio.addController(name: "scan", position: .init(x: 5, y: 0)))
        try await advertiser.setUp()
        try await scanner.setUp()
        try await advertiser.setAdvertising(type: 0, data: [2, 1, 6], scanResponse: [3, 9, 0x43, 0x44])
        try await advertiser.enableAdvertising()
        try await scanner.startScan(active: true)
        try await radio.run(for: .seconds(1))
        let reports = scanner.reports
        #expect(reports.count >= 10)
        // Every ADV_IND report is followed by the SCAN_RSP report carrying the scan response data.
        for (i, r) in reports.enumerated() where r.type == 0x00 {
            #expect(i + 1 < reports.count && reports[i + 1].type == 0x04 && reports[i + 1].data == [3, 9, 0x43, 0x44])
        }
        #expect(reports.filter { $0.type == 0x04 }.count == reports.filter { $0.type == 0x00 }.count)

        // A non-connectable, non-scannable advertiser is never asked for a scan response.
        try await advertiser.enableAdvertising(false)
        try await advertiser.setAdvertising(type: 3, data: [2, 1, 4])
        try await advertiser.enableAdvertising()
        scanner.clear()
        try await radio.run(for: .seconds(1))
        #expect(!scanner.reports.isEmpty && scanner.reports.allSatisfy { $0.type == 0x03 })
    }

    @Test func duplicateFilteringReportsEachAdvertiserOncePerSession() async throws {
        let radio = SimulatedRadio(seed: 9)
        let a = TestHost(radio.addController(name: "a"))
        let b = TestHost(radio.addController(name: "b", position: .init(x: 3, y: 0)))
        let scanner = TestHost(radio.addController(name: "scan", position: .init(x: 0, y: 3)))
        for host in [a, b, scanner] { try await host.setUp() }
        for host in [a, b] {
            try await host.setAdvertising(type: 2, data: [2, 1, 6], scanResponse: [2, 9, 0x41])
            try await host.enableAdvertising()
        }
        try await scanner.startScan(active: true, filterDuplicates: true)
        try await radio.run(for: .seconds(3))
        let reports = scanner.reports
        #expect(reports.count == 4)  // ADV_SCAN_IND and SCAN_RSP, from each advertiser
        #expect(Set(reports.map(\.address)).count == 2)
        // A new scan-enable session reports them again.
        #expect(try await scanner.command(0x200C, [0, 0]) == [0])
        try await scanner.startScan(active: false, filterDuplicates: true)
        scanner.clear()
        try await radio.run(for: .seconds(1))
        #expect(scanner.reports.count == 2)
    }

    @Test func scanWindowLimitsWhatIsHeard() async throws {
        let radio = SimulatedRadio(seed: 11)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let full = TestHost(radio.addController(name: "full", position: .init(x: 1, y: 0)))
        let tenth = TestHost(radio.addController(name: "tenth", position: .init(x: 0, y: 1)))
        for host in [advertiser, full, tenth] { try await host.setUp() }
        try await advertiser.setAdvertising(type: 3, interval: 0x0020)
        try await advertiser.enableAdvertising()
        try await full.startScan(active: false, interval: 0x00A0, window: 0x00A0)
        try await tenth.startScan(active: false, interval: 0x00A0, window: 0x0010)
        try await radio.run(for: .seconds(5))
        let all = full.reports.count
        let some = tenth.reports.count
        #expect(all > 150)
        #expect(some > 0 && Double(some) < Double(all) * 0.25)
    }

    @Test func outOfRangeAdvertisersAreNotHeard() async throws {
        let radio = SimulatedRadio(seed: 1)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let near = TestHost(radio.addController(name: "near", position: .init(x: 90, y: 0)))
        let far = TestHost(radio.addController(name: "far", position: .init(x: 120, y: 0)))
        for host in [advertiser, near, far] { try await host.setUp() }
        try await advertiser.setAdvertising(type: 3)
        try await advertiser.enableAdvertising()
        try await near.startScan(active: false)
        try await far.startScan(active: false)
        try await radio.run(for: .seconds(1))
        #expect(!near.reports.isEmpty)
        #expect(near.reports.allSatisfy { $0.rssi <= -90 })
        #expect(far.reports.isEmpty)
    }

    @Test func directedAdvertisingReachesOnlyItsTarget() async throws {
        let radio = SimulatedRadio(seed: 5)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let target = TestHost(radio.addController(name: "target", position: .init(x: 1, y: 0)))
        let other = TestHost(radio.addController(name: "other", position: .init(x: 0, y: 1)))
        for host in [advertiser, target, other] { try await host.setUp() }
        try await advertiser.setAdvertising(type: 4, interval: 0x0020, peer: target.controller.address)
        try await advertiser.enableAdvertising()
        try await target.startScan(active: true)
        try await other.startScan(active: true)
        try await radio.run(for: .seconds(1))
        #expect(!target.reports.isEmpty && target.reports.allSatisfy { $0.type == 0x01 && $0.data.isEmpty })
        #expect(other.reports.isEmpty)
    }

    @Test func highDutyDirectedAdvertisingTimesOut() async throws {
        let radio = SimulatedRadio(seed: 5)
        let advertiser = TestHost(radio.addController(name: "adv"))
        let target = TestHost(radio.addController(name: "target", position: .init(x: 1, y: 0)))
        for host in [advertiser, target] { try await host.setUp() }
        try await advertiser.setAdvertising(type: 1, peer: target.controller.address)
        let start = radio.now
        try await advertiser.enableAdvertising()
        try await target.startScan(active: false)
        try await radio.run(for: .seconds(2))
        let complete = advertiser.leEvents(0x01)
        #expect(complete.count == 1)
        #expect(complete.first?.parameters.first == 0x3C)  // Advertising Timeout
        if let t = complete.first?.time {
            #expect(t - start >= .milliseconds(1280) && t - start <= .milliseconds(1282))
        }
        // Every 3.75 ms for 1.28 s: ~341 events, the scanner listening continuously.
        #expect(target.reports.count > 300)
    }
}
