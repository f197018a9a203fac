import BLE
import Foundation
import Synchronization
import Testing

/// iOS 17's `enableAutoReconnect` and the five-argument `didDisconnectPeripheral` (IOSRules.md 7): after a link
/// loss the system connects again by itself, the app hears of the loss with `isReconnecting`, the peripheral
/// reads `.connecting` meanwhile, and `didConnect` follows when the device is back.
@Suite struct AutoReconnectTests {
    /// An iOS 17 app: it implements only the five-argument disconnection, as such an app does.
    final class ModernApp: CentralManagerDelegate, @unchecked Sendable {
        struct Ending {
            var timestamp: CFAbsoluteTime
            var isReconnecting: Bool
            var error: BluetoothError?
            var state: PeripheralState
            var time: Duration
        }
        let system: BluetoothSystem
        let queue = DispatchQueue(label: "test.modern")
        private(set) var central: CentralManager!
        let endings = Mutex<[Ending]>([])
        let connects = Mutex<[Duration]>([])
        let failures = Mutex<Int>(0)

        init(system: BluetoothSystem) {
            self.system = system
            central = CentralManager(delegate: self, queue: queue, options: nil, system: system)
        }

        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            connects.withLock { $0.append(system.now) }
        }
        func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
            failures.withLock { $0 += 1 }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, timestamp: CFAbsoluteTime,
            isReconnecting: Bool, error: (any Error)?
        ) {
            let ending = Ending(
                timestamp: timestamp, isReconnecting: isReconnecting, error: error as? BluetoothError,
                state: peripheral.state, time: system.now)
            endings.withLock { $0.append(ending) }
        }
    }

    /// A phone running `ModernApp` and the rig's sensor, connected (`enableAutoReconnect` as asked).
    static func connected(autoReconnect: Bool?) async throws -> (Rig, ModernApp, Peripheral) {
        let rig = Rig()
        let app = ModernApp(system: rig.phoneSystem)
        try await rig.startSensor()
        try await rig.run(until: { app.central.state == .poweredOn }, "power on")
        let peripheral = try await rig.connect()
        // The rig's own manager lets go; the modern app connects by identifier, with no scan.
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { peripheral.state == .disconnected }, "the rig's manager let go")
        let mine = try #require(app.central.retrievePeripherals(withIdentifiers: [peripheral.identifier]).first)
        app.central.connect(mine, options: .init(enableAutoReconnect: autoReconnect))
        try await rig.run(until: { mine.state == .connected }, "connection")
        return (rig, app, mine)
    }

    /// The sensor leaves: the supervision timeout ends the link, the app hears it with `isReconnecting` and the
    /// time the link ended, the peripheral reads `.connecting`; the sensor comes back and `didConnect` follows
    /// with no call from the app.
    @Test func aLostLinkComesBackByItself() async throws {
        let (rig, app, peripheral) = try await Self.connected(autoReconnect: true)
        let departure = rig.radio.now
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { !app.endings.withLock { $0.isEmpty } }, within: .seconds(10), "link loss")
        let ending = try #require(app.endings.withLock { $0.first })
        #expect(ending.isReconnecting)
        #expect(ending.error?.code == .connectionTimeout)
        #expect(ending.state == .connecting)
        #expect(peripheral.state == .connecting)
        // The timestamp is the system's time as a date, at the loss (5 s supervision timeout after the move).
        let lossAt = rig.phoneSystem.absoluteTime - Double((rig.radio.now - ending.time).components.seconds)
        #expect(abs(ending.timestamp - lossAt) < 1)
        let elapsed = ending.time - departure
        #expect(elapsed >= .milliseconds(4900) && elapsed <= .milliseconds(5200), "lost after \(elapsed)")

        // Out of range for a minute: still trying, nothing more reported.
        try await rig.run(.seconds(60))
        #expect(peripheral.state == .connecting)
        #expect(app.endings.withLock { $0.count } == 1)
        #expect(app.failures.withLock { $0 } == 0)

        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(until: { app.connects.withLock { $0.count } == 2 }, within: .seconds(10), "reconnection")
        #expect(peripheral.state == .connected)
        // Connected again, the peripheral works as before: its services are discovered and read afresh.
        peripheral.discoverServices([.battery])
        try await rig.run(until: { peripheral.services?.contains { $0.uuid == .battery } == true }, "discovery")
    }

    /// Cancelling while the system reconnects ends it: `didDisconnectPeripheral` with no error and
    /// `isReconnecting` false, and the device's return no longer connects it.
    @Test func cancellingEndsTheReconnection() async throws {
        let (rig, app, peripheral) = try await Self.connected(autoReconnect: true)
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { peripheral.state == .connecting }, within: .seconds(10), "link loss")
        try await rig.run(.milliseconds(100))
        app.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { app.endings.withLock { $0.count } == 2 }, "cancellation")
        let ending = try #require(app.endings.withLock { $0.last })
        #expect(!ending.isReconnecting)
        #expect(ending.error == nil)
        #expect(peripheral.state == .disconnected)
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(.seconds(5))
        #expect(app.connects.withLock { $0.count } == 1)
        #expect(peripheral.state == .disconnected)
    }

    /// Without the option, a link loss is final: `isReconnecting` false, `.disconnected`, no new connection.
    @Test func withoutTheOptionALossIsFinal() async throws {
        let (rig, app, _) = try await Self.connected(autoReconnect: nil)
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { !app.endings.withLock { $0.isEmpty } }, within: .seconds(10), "link loss")
        let ending = try #require(app.endings.withLock { $0.first })
        #expect(!ending.isReconnecting)
        #expect(ending.error?.code == .connectionTimeout)
        #expect(ending.state == .disconnected)
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(.seconds(5))
        #expect(app.connects.withLock { $0.count } == 1)
    }

    /// An app that implements the legacy method hears every disconnection there, reconnections included
    /// (IOSRules.md 7.3), and the async layer's disconnections say `isReconnecting`; a task waiting to connect
    /// meanwhile returns when the link is back.
    @Test func theLegacyCallbackAndTheAsyncLayerHearItToo() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { peripheral.state == .disconnected }, "disconnection")
        rig.central.connect(peripheral, options: .init(enableAutoReconnect: true))
        try await rig.run(until: { peripheral.state == .connected }, "connection")
        rig.phone.clear()
        let seen = Mutex<[PeripheralDisconnection]>([])
        let stream = rig.central.disconnections
        let watcher = Task {
            for await d in stream {
                seen.withLock { $0.append(d) }
                if d.isReconnecting { break }
            }
        }
        try await rig.run(.milliseconds(10))
        rig.sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
        try await rig.run(until: { !rig.phone.disconnections.isEmpty }, within: .seconds(10), "link loss")
        await watcher.value
        #expect(seen.withLock { $0.first?.isReconnecting } == true)
        #expect(seen.withLock { $0.first?.error?.code } == .connectionTimeout)
        #expect(rig.phone.disconnections.count == 1)
        #expect(rig.phone.disconnections.first?.error?.code == .connectionTimeout)

        let central = rig.central
        let waiting = Task { try await central.connect(peripheral, timeout: nil) }
        try await rig.run(.seconds(1))
        rig.sensorSystem.move(to: RadioPosition(x: 2, y: 0))
        try await rig.run(until: { peripheral.state == .connected }, "reconnection")
        try await rig.run(.milliseconds(10))
        try await waiting.value
        #expect(rig.phone.events.filter { if case .didConnect = $0 { true } else { false } }.count == 1)
    }
}
