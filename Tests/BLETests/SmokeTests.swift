import BLE
import Foundation
import Testing

@Suite struct SmokeTests {
    @Test func bringUp() async throws {
        let (rig, peripheral) = try await Rig.connected()
        #expect(peripheral.state == .connected)
        print(peripheral.services ?? [])
        for s in peripheral.services ?? [] { print(s, s.characteristics ?? [], (s.characteristics ?? []).map { $0.descriptors ?? [] }) }
        withExtendedLifetime(rig) {}
    }
}
