import BLE
import Foundation
import Testing

@testable import ble

/// What `ble scan` measures of a device from its reports, and the names a TARGET finds.
@Suite struct ScanStatisticsTests {
    /// Reports at these times (milliseconds) with these RSSI values.
    static func statistics(_ reports: [(Int, Int)]) -> ScanStatistics {
        var s = ScanStatistics(at: .milliseconds(reports[0].0), rssi: reports[0].1)
        for (time, rssi) in reports.dropFirst() { s.record(at: .milliseconds(time), rssi: rssi) }
        return s
    }

    @Test func countsAndRSSIRange() {
        let s = Self.statistics([(0, -60), (100, -50), (200, 127), (300, -55)])
        #expect(s.packets == 4)
        #expect(s.minimumRSSI == -60)
        #expect(s.maximumRSSI == -50)
        #expect(s.averageRSSI == -55)
        // 127 (not measured) is counted as a report but not as a strength.
        #expect(s.recentRSSI == [-60, -50, -55])
        #expect(s.firstSeen == .zero)
        #expect(s.lastSeen == .milliseconds(300))
    }

    @Test func theHistoryKeepsTheLatestValues() {
        let s = Self.statistics((0..<40).map { ($0 * 100, -40 - $0) })
        #expect(s.recentRSSI == (24..<40).map { -40 - $0 })
        #expect(s.minimumRSSI == -79)
        #expect(s.maximumRSSI == -40)
    }

    @Test func theIntervalIsTheUsualGapBetweenTwoEvents() {
        // Every 100 ms plus a delay of 0 to 10 ms; the scanner missed some events (gaps of two and three
        // intervals), and each advertisement came with its scan response 1 ms later.
        let gaps = [103, 108, 205, 101, 106, 310, 104, 109, 102, 207, 105]
        var time = 0
        var reports = [(0, -50), (1, -50)]
        for gap in gaps {
            time += gap
            reports += [(time, -50), (time + 1, -50)]
        }
        let s = Self.statistics(reports)
        #expect(s.advertisingInterval == .milliseconds(105))
    }

    @Test func noIntervalFromTooFewReports() {
        #expect(Self.statistics([(0, -50)]).advertisingInterval == nil)
        #expect(Self.statistics([(0, -50), (100, -50), (200, -50)]).advertisingInterval == nil)
        #expect(
            Self.statistics([(0, -50), (100, -50), (200, -50), (300, -50)]).advertisingInterval == .milliseconds(100))
    }

    @Test func aDeviceIsGoneAfterFiveSecondsOrThreeOfItsIntervals() {
        let fast = Self.statistics([(0, -50), (100, -50), (200, -50), (300, -50)])
        #expect(fast.age(at: .milliseconds(1300)) == .seconds(1))
        #expect(!fast.isGone(at: .milliseconds(5300)))
        #expect(fast.isGone(at: .milliseconds(5301)))
        let slow = Self.statistics([(0, -50), (4000, -50), (8000, -50), (12000, -50)])
        #expect(!slow.isGone(at: .seconds(12 + 12)))
        #expect(slow.isGone(at: .milliseconds(24001)))
    }

    @Test func theTableRowFitsEightyColumnsBeforeTheName() {
        let s = Self.statistics([(0, -60), (100, -50), (200, -55), (300, -55)])
        let row = ScanFormat.row(
            ScanReport.sample(name: "HRM-Demo", services: [.heartRate]), s, now: .milliseconds(500))
        #expect(row == "00:1B:DC:0A:12:34   -55  -60/-55/-50       4    100 ms  0.2s     HRM-Demo  180D")
        #expect(ScanFormat.tableHeader.count <= 80)
        let gone = ScanFormat.row(ScanReport.sample(name: nil, services: []), s, now: .seconds(20))
        #expect(gone.contains("  gone 19s  (no name)"))
    }

    @Test func aShortenedNameIsFoundByATargetThatBeginsWithIt() {
        let matcher = TargetMatcher(text: "A-Sensor-With-A-Very-Long-Name-Indeed")
        #expect(matcher.match(names: ["A-Sensor-With"], shortened: "A-Sensor-With") == .loose)
        #expect(matcher.match(names: ["a-sensor-with"], shortened: "a-sensor-with") == .loose)
        // Not a shortened name: a name that merely begins the TARGET is another device.
        #expect(matcher.match(names: ["A-Sensor-With"], shortened: nil) == nil)
        #expect(matcher.match(names: ["A-Sensor-Wit"], shortened: "A-Sensor-Wix") == nil)
        #expect(TargetMatcher(text: "A-Sensor").match(names: ["A-Sensor"], shortened: "A-Sensor") == .exact)
    }

    @Test func theShortenedNameIsReadFromTheStructures() {
        var shortened = AdvertisingData()
        shortened.addLocalName("A-Sensor", complete: false)
        var advertisement = AdvertisementData(localName: "A-Sensor")
        advertisement.rawAdvertisement = Data(shortened.bytes)
        advertisement.rawScanResponse = Data()
        #expect(TargetMatcher.shortenedName(advertisement) == "A-Sensor")
        var complete = AdvertisingData()
        complete.addLocalName("A-Sensor-With-A-Name", complete: true)
        advertisement.rawScanResponse = Data(complete.bytes)
        #expect(TargetMatcher.shortenedName(advertisement) == nil)
    }
}

extension ScanReport {
    static func sample(name: String?, services: [BluetoothUUID]) -> ScanReport {
        ScanReport(
            identifier: UUID(), address: BluetoothAddress(string: "00:1B:DC:0A:12:34")!, name: name,
            advertisement: AdvertisementData(localName: name, serviceUUIDs: services.isEmpty ? nil : services),
            rssi: -55, time: .zero, date: Date(timeIntervalSince1970: 0))
    }
}
