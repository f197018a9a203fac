import BLE
import Foundation
import Synchronization
import Testing

/// The same seed and the same inputs give the same run: every HCI packet at the same virtual time, and the
/// same delegate calls; another seed gives another run.
@Suite struct DeterminismTests {
    /// One HCI packet crossing a controller's pipe. The packet is kept whole (compared by value).
    struct TraceEntry: Hashable, CustomStringConvertible {
        var time: Duration
        var device: String
        var direction: String
        var packet: AnyHashable
        var description: String { "\(time) \(device) \(direction) \(packet)" }
    }

    struct Run {
        var trace: [TraceEntry]
        var phoneLog: [String]
        var sensorLog: [String]
    }

    /// A whole session: bring-up, scan, connect, discover everything, read, long write, subscribe, twenty
    /// notifications, unsubscribe, disconnect.
    func scenario(seed: UInt64) async throws -> Run {
        let rig = Rig(seed: seed)
        let trace = Mutex<[TraceEntry]>([])
        rig.radio.setTraceHandler { time, device, direction, packet in
            trace.withLock {
                $0.append(
                    TraceEntry(time: time, device: device, direction: "\(direction)", packet: AnyHashable(packet)))
            }
        }
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        rig.sensor.recorder[Profile.dynamic] = Data("determinism".utf8)
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        peripheral.writeValue(Data((0..<200).map { UInt8($0) }), for: dynamic, type: .withResponse)
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        for i in 0..<20 {
            _ = rig.sensor.manager.updateValue(Data([UInt8(i)]), for: rig.sensor.notifier, onSubscribedCentrals: nil)
            try await rig.run(.milliseconds(100))
        }
        peripheral.readRSSI()
        peripheral.setNotifyValue(false, for: notifier)
        try await rig.run(.seconds(1))
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        rig.radio.setTraceHandler(nil)
        return Run(trace: trace.withLock { $0 }, phoneLog: rig.phone.lines, sensorLog: rig.sensor.recorder.lines)
    }

    /// Where two traces first differ, for a readable failure.
    func firstDifference(_ a: [TraceEntry], _ b: [TraceEntry]) -> String? {
        for i in 0..<min(a.count, b.count) where a[i] != b[i] {
            let window = max(0, i - 6)..<min(i + 2, a.count, b.count)
            return "entry \(i): \(a[i]) vs \(b[i])\n" + window.map { "  \(a[$0])\n  \(b[$0])" }.joined(separator: "\n")
        }
        return a.count == b.count ? nil : "lengths \(a.count) vs \(b.count)"
    }

    @Test func sameSeedGivesTheSameTrace() async throws {
        let first = try await scenario(seed: 42)
        let second = try await scenario(seed: 42)
        #expect(first.trace.count > 200)
        #expect(firstDifference(first.trace, second.trace) == nil)
        #expect(first.trace == second.trace)
        #expect(first.phoneLog == second.phoneLog)
        #expect(first.sensorLog == second.sensorLog)
        // The session did what it says.
        #expect(first.phoneLog.filter { $0.hasPrefix("didUpdateValue \(Profile.notifier.uuidString)") }.count == 20)
        #expect(first.phoneLog.last?.hasPrefix("didDisconnect") == true)
    }

    @Test func differentSeedGivesADifferentTrace() async throws {
        let first = try await scenario(seed: 42)
        let other = try await scenario(seed: 7)
        #expect(first.trace != other.trace)
        // What the apps did is the same, even if when and how the radio carried it differ. The peripheral's
        // identifier is drawn by the phone's system from the seed (random per phone, as on iOS): it differs.
        func actions(_ log: [String], identifier: String) -> [String] {
            log.filter { !$0.hasPrefix("didDiscover ") && !$0.hasPrefix("didReadRSSI") }.map {
                $0.replacingOccurrences(of: identifier, with: "IDENTIFIER")
            }
        }
        let firstID = try #require(first.phoneLog.first { $0.hasPrefix("didConnect ") }?.dropFirst(11))
        let otherID = try #require(other.phoneLog.first { $0.hasPrefix("didConnect ") }?.dropFirst(11))
        #expect(firstID != otherID)
        #expect(
            actions(first.phoneLog, identifier: String(firstID)) == actions(other.phoneLog, identifier: String(otherID))
        )
    }
}
