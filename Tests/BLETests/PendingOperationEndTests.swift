import BLE
import Foundation
import Synchronization
import Testing

/// A read waiting for its answer ends, in either style, with the error that names why: the peer went away, the
/// app cancelled, a timeout, the controller powered off, or the system shut down.
@Suite struct PendingOperationEndTests {
    final class Outcome: Sendable {
        let error = Mutex<BluetoothError?>(nil)
    }

    enum Cause: String, CaseIterable, Sendable {
        case peerDisconnected, cancelled, timedOut, poweredOff, shutDown
    }

    enum Style: String, CaseIterable, Sendable {
        case delegate, async
    }

    static func expected(_ cause: Cause, _ style: Style) -> BluetoothError.Code {
        switch cause {
        case .peerDisconnected: .peripheralDisconnected
        case .cancelled: .operationCancelled
        // The delegate style has no timeout of its own: the ATT transaction timeout (30 s) ends the read.
        case .timedOut: style == .delegate ? .transactionTimeout : .timeout
        case .poweredOff: .transportClosed
        case .shutDown: .systemShutDown
        }
    }

    @Test(arguments: Cause.allCases, Style.allCases)
    func aPendingReadEndsWithItsOwnError(_ cause: Cause, _ style: Style) async throws {
        let (rig, peripheral) = try await Rig.connected()
        // The sensor's app takes the read and never answers: it stays pending until something ends it.
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let outcome = Outcome()
        var task: Task<Void, Never>?
        switch style {
        case .delegate:
            peripheral.readValue(for: dynamic)
        case .async:
            let timeout: Duration? = cause == .timedOut ? .seconds(2) : nil
            task = Task(executorPreference: rig.radio) {
                do {
                    _ = try await peripheral.readValue(for: dynamic, timeout: timeout)
                } catch let error as BluetoothError {
                    outcome.error.withLock { $0 = error }
                } catch {
                    outcome.error.withLock { $0 = BluetoothError(.unknown, "\(error)") }
                }
            }
        }
        try await rig.run(.milliseconds(500))
        #expect(rig.sensor.recorder.reads.count == 1)
        switch cause {
        case .peerDisconnected: await rig.sensorSystem.shutDown()
        case .cancelled: rig.central.cancelPeripheralConnection(peripheral)
        case .timedOut: break
        case .poweredOff: rig.phoneSystem.vanish()
        case .shutDown: await rig.phoneSystem.shutDown()
        }
        @Sendable func ended() -> BluetoothError? {
            switch style {
            case .delegate: rig.phone.valueUpdates.first?.error
            case .async: outcome.error.withLock { $0 }
            }
        }
        try await rig.run(until: { ended() != nil }, within: .seconds(40), "the read's end")
        #expect(ended()?.code == Self.expected(cause, style), "\(cause), \(style): \(ended().map { "\($0)" } ?? "-")")
        await task?.value
    }
}
