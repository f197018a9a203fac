import BLE
import Foundation
import Synchronization
import Testing

/// An async scan asked for before the manager is on starts when it is, and one that cannot run ends with the
/// state's reason, never in silence.
@Suite struct AsyncScanStateTests {
    final class Outcome: Sendable {
        let found = Mutex<[String]>([])
        let ending = Mutex<Result<Void, BluetoothError>?>(nil)
        var error: BluetoothError? {
            if case .failure(let error) = ending.withLock({ $0 }) { return error }
            return nil
        }
    }

    /// Iterates `stream` into `outcome` until it ends (or `limit` names have been found).
    static func collect(
        _ stream: AsyncThrowingStream<DiscoveredPeripheral, any Error>, into outcome: Outcome, limit: Int = .max
    ) async {
        do {
            for try await discovery in stream {
                let count = outcome.found.withLock { found -> Int in
                    found.append(discovery.advertisementData.localName ?? "?")
                    return found.count
                }
                if count >= limit { break }
            }
            outcome.ending.withLock { $0 = .success(()) }
        } catch let error as BluetoothError {
            outcome.ending.withLock { $0 = .failure(error) }
        } catch {
            outcome.ending.withLock { $0 = .failure(BluetoothError(.unknown, "\(error)")) }
        }
    }

    @Test func aScanAskedForBeforePowerOnStartsWhenTheManagerIsOn() async throws {
        let rig = Rig()
        // At once, before the phone's controller is even initialised.
        #expect(rig.central.state == .unknown)
        let outcome = Outcome()
        let stream = rig.central.scan(withServices: [Profile.service])
        let task = Task(executorPreference: rig.radio) { await Self.collect(stream, into: outcome, limit: 1) }
        try await rig.startSensor()
        try await rig.run(until: { outcome.ending.withLock { $0 } != nil }, "the scan's discovery")
        #expect(outcome.found.withLock { $0 } == ["sensor"])
        #expect(outcome.error == nil)
        await task.value
    }

    @Test func aScanOfAnAppNotAllowedBluetoothThrowsWhy() async throws {
        let rig = Rig()
        try await rig.startSensor()
        rig.phoneSystem.authorization = .denied
        try await rig.run(until: { rig.central.state == .unauthorized }, "unauthorized")
        let outcome = Outcome()
        let task = Task(executorPreference: rig.radio) {
            await Self.collect(rig.central.scan(withServices: nil), into: outcome)
        }
        try await rig.run(until: { outcome.ending.withLock { $0 } != nil }, "the scan's end")
        #expect(outcome.error?.code == .operationNotSupported)
        #expect(outcome.error?.message.contains("not authorized") == true)
        await task.value
    }

    @Test func aScanThatIsRunningEndsWithTheReasonWhenTheControllerGoesAway() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let outcome = Outcome()
        let task = Task(executorPreference: rig.radio) {
            await Self.collect(rig.central.scan(withServices: [Profile.service]), into: outcome)
        }
        try await rig.run(until: { !outcome.found.withLock { $0.isEmpty } }, "a discovery")
        rig.phoneSystem.vanish()
        try await rig.run(until: { outcome.ending.withLock { $0 } != nil }, "the scan's end")
        #expect(outcome.error?.code == .transportClosed)
        #expect(
            outcome.error?.message.hasPrefix("Bluetooth is powered off: ") == true, "\(outcome.error?.message ?? "")")
        // A scan asked for now fails at once, with the same reason.
        let late = Outcome()
        await Self.collect(rig.central.scan(withServices: nil), into: late)
        #expect(late.error?.code == .transportClosed)
        #expect(late.error?.message == outcome.error?.message)
        await task.value
    }
}
