import BLEGATT
import BLEHost
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// The system knows each manager by its internal session (`CentralSession`, `PeripheralSession`), which the
/// manager owns and which holds the manager weakly: what reaches a session whose manager has gone is dropped,
/// except a central's request, which is refused so that the central is not left waiting.
@Suite struct ManagerSessionTests {
    /// The system held the manager itself before, so a request it had routed to a manager was always answered (by
    /// the app, or refused by the manager's end). Routed to a session whose manager went away meanwhile, the read
    /// is refused at once with Unlikely Error, as the manager's end refuses the requests it holds, instead of
    /// leaving the central to the 30 s ATT transaction timeout.
    @Test func aReadRoutedToTheSessionOfAManagerThatWentAwayIsRefused() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .ignore
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(until: { !rig.sensor.recorder.reads.isEmpty }, "the read reaching the app")
        // The host's request, which the app got and will not answer (the recorder ignores it): handed to the
        // session of a manager gone, as if the system had routed it there.
        let read = try #require(rig.sensor.recorder.reads.first)
        let request = GATTServerRequestID(rawValue: try #require(read.id))
        let attribute = try #require(
            rig.sensor.manager.locked.withLock { s in
                s.published.lazy.flatMap(\.characteristics).first { $0.value === rig.sensor.dynamic }?.key
            })
        let link = ConnectionHandle(read.central.handle.withLock { $0 })

        // Another manager of the sensor's system, gone, leaving its session.
        let queue = DispatchQueue(label: "swift-ble.test.gone")
        var gone: PeripheralManager? = PeripheralManager(delegate: nil, queue: queue, system: rig.sensorSystem)
        let session = try #require(gone?.session)
        gone = nil
        queue.sync {}  // what was queued for it let go of it
        #expect(session.manager == nil)

        session.apply(.server(.serverRead(request, link, attribute: attribute, offset: 0)))
        try await rig.run(until: { !rig.phone.valueUpdates.isEmpty }, within: .seconds(1), "the read's answer")
        #expect(rig.phone.valueUpdates.first?.error?.code == .att(.unlikelyError))
        #expect(dynamic.value == nil)
    }
}
