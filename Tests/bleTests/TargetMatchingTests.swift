import ArgumentParser
import BLE
import Foundation
import Synchronization
import Testing

@testable import ble

/// TARGET names match without regard to case, but a name spelled exactly as typed wins over one that only
/// differs in case, even when the other is heard first.
@Suite(.timeLimit(.minutes(1))) struct TargetMatchingTests {
    /// Runs `connect(to:)` for `typed` in a room with a "lamp" (heard first: nearer, advertising sooner) and a
    /// "Lamp"; returns the name of the device it connected to.
    static func connect(typing typed: String, seed: UInt64) async throws -> String? {
        let radio = SimulatedRadio(seed: seed)
        let devices = [("lamp", 1.0), ("Lamp", 3.0)].map { name, x in
            ServedDevice(
                system: BluetoothSystem.simulated(on: radio, name: name, position: RadioPosition(x: x, y: 0)),
                profile: BatteryProfile.make(name: name))
        }
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let tool = CentralTool(system: phone)
        let target = try TargetOptions.parse([typed, "--timeout", "10"])
        let outcome = Mutex<Result<String?, any Error>?>(nil)
        let flow = Task(executorPreference: radio) { () -> String? in
            let peripheral = try await tool.connect(to: target)
            return peripheral.name
        }
        Task(executorPreference: radio) {
            let result = await flow.result
            outcome.withLock { $0 = result }
        }
        try await radio.run(for: .seconds(15))
        flow.cancel()
        withExtendedLifetime(devices) {}
        return try #require(outcome.withLock { $0 }, "the flow did not end").get()
    }

    @Test func theExactSpellingWinsOverAnEarlierMatchInAnotherCase() async throws {
        for seed: UInt64 in [1, 2, 3] {
            #expect(try await Self.connect(typing: "Lamp", seed: seed) == "Lamp")
            #expect(try await Self.connect(typing: "lamp", seed: seed) == "lamp")
        }
    }

    @Test func aMatchInAnotherCaseIsTakenWhenNoExactOneExists() async throws {
        let name = try await Self.connect(typing: "LAMP", seed: 4)
        #expect(name == "lamp" || name == "Lamp")
    }
}
