import BLEHCI
import BLESystem
import BLETransport
import Foundation
import Synchronization
import Testing

@testable import BLE

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

    /// A controller that refuses to scan: LE Set Scan Enable (enabling) is answered with Command Disallowed, as a
    /// controller busy with something it cannot scan beside would; every other packet passes.
    final class ScanRefusingTransport: HCITransport {
        let inner: any HCITransport
        let receiver = Mutex<(@Sendable (HCITransportEvent) -> Void)?>(nil)
        let refusals = Mutex(0)

        init(_ inner: any HCITransport) { self.inner = inner }

        func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
            self.receiver.withLock { $0 = receiver }
            inner.setReceiver(receiver)
        }

        func send(_ packet: HCIPacket) {
            guard case .command(let command) = packet, command.opcode == .leSetScanEnable,
                command.parameters.first == 1
            else { return inner.send(packet) }
            refusals.withLock { $0 += 1 }
            let opcode = command.opcode.rawValue
            let complete = HCIEventPacket(
                code: .commandComplete,
                parameters: [1, UInt8(opcode & 0xFF), UInt8(opcode >> 8), HCIStatus.commandDisallowed.rawValue])
            receiver.withLock { $0 }?(.packet(.event(complete)))
        }

        func close() { inner.close() }
    }

    @Test func aScanTheControllerRefusesEndsWithItsReason() async throws {
        let radio = SimulatedRadio(seed: 3)
        let controller = radio.addController(name: "phone")
        let transport = ScanRefusingTransport(controller.hostTransport)
        let configuration = BluetoothSystem.Configuration()
        let store = try BluetoothSystem.openStore(configuration, seed: 3, now: { 0 })
        let core = SystemCore(
            name: "phone", transport: transport, scheduler: radio,
            configuration: configuration.hostConfiguration(name: "phone", store: store), store: store,
            appRules: configuration.appRules)
        let system = BluetoothSystem(core: core, virtualController: controller)
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: system)
        let outcome = Outcome()
        let task = Task(executorPreference: radio) {
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            await Self.collect(central.scan(withServices: nil), into: outcome)
        }
        let deadline = radio.now + .seconds(5)
        while outcome.ending.withLock({ $0 }) == nil, radio.now < deadline {
            try await radio.run(for: .milliseconds(10))
        }
        // Not in silence: the stream ends with what the controller said, and the manager is not scanning.
        #expect(transport.refusals.withLock { $0 } == 1)
        #expect(outcome.error?.hciStatus == .commandDisallowed)
        #expect(
            outcome.error?.message.hasPrefix("the controller did not scan: ") == true,
            "\(String(describing: outcome.error))")
        #expect(!central.isScanning)
        #expect(central.state == .poweredOn)
        task.cancel()  // (a stream that never ended would hold the task, and the test, for ever)
        try await task.value
    }
}
