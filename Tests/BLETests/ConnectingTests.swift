import BLE
import Foundation
import Testing

/// `connect`, `cancelPeripheralConnection`, `retrievePeripherals`, `retrieveConnectedPeripherals` and the
/// connection callbacks.
@Suite struct ConnectingTests {
    /// Scans until the sensor is found, stops, and returns its peripheral (not connected).
    func discoverSensor(_ rig: Rig) async throws -> Peripheral {
        rig.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !rig.phone.discoveries.isEmpty }, "discovery")
        rig.central.stopScan()
        return try #require(rig.phone.discoveries.first?.peripheral)
    }

    @Test func connectReportsDidConnect() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await discoverSensor(rig)
        rig.phone.clear()
        #expect(peripheral.state == .disconnected)
        rig.central.connect(peripheral, options: .init(notifyOnConnection: true, notifyOnDisconnection: true))
        #expect(peripheral.state == .connecting)
        try await rig.run(.seconds(2))
        #expect(peripheral.state == .connected)
        #expect(rig.phone.lines == ["didConnect \(peripheral.identifier)"])
        // iOS requires the service list: an empty one returns nothing (IOSRules.md 8.9).
        #expect(rig.central.retrieveConnectedPeripherals(withServices: []).isEmpty)
    }

    @Test func connectionRequestDoesNotTimeOut() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await discoverSensor(rig)
        rig.sensor.manager.stopAdvertising()
        try await rig.run(.milliseconds(200))
        rig.phone.clear()
        rig.central.connect(peripheral)
        try await rig.run(.seconds(60))
        #expect(peripheral.state == .connecting)
        #expect(rig.phone.events.isEmpty)
        // The peripheral shows up again: the old request completes.
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(until: { peripheral.state == .connected }, "connection")
        #expect(rig.phone.lines == ["didConnect \(peripheral.identifier)"])
    }

    @Test func cancellingAPendingConnection() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await discoverSensor(rig)
        rig.sensor.manager.stopAdvertising()
        try await rig.run(.milliseconds(200))
        rig.phone.clear()
        rig.central.connect(peripheral)
        try await rig.run(.seconds(5))
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.lines == ["didDisconnect \(peripheral.identifier)"])
        // The request is gone: the peripheral advertising again does not connect.
        rig.sensor.manager.startAdvertising(Sensor.advertisement)
        try await rig.run(.seconds(3))
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.events.count == 1)
    }

    @Test func cancellingALiveConnection() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        rig.central.cancelPeripheralConnection(peripheral)
        #expect(peripheral.state == .disconnecting)
        try await rig.run(.seconds(1))
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.lines == ["didDisconnect \(peripheral.identifier)"])  // no error: the app asked
        #expect(rig.central.retrieveConnectedPeripherals(withServices: []).isEmpty)
        // Cancelling again is harmless.
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(rig.phone.events.count == 1)
    }

    @Test func reconnectingAfterADisconnect() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { peripheral.state == .disconnected }, "disconnect")
        rig.central.connect(peripheral)
        try await rig.run(until: { peripheral.state == .connected }, "reconnection")
        #expect(rig.phone.events.filter { $0.isConnect }.count == 1)
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        #expect(peripheral.services?.contains { $0.uuid == Profile.service } == true)
    }

    @Test func retrievePeripheralsByIdentifier() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await discoverSensor(rig)
        #expect(rig.central.retrievePeripherals(withIdentifiers: [peripheral.identifier]) == [peripheral])
        #expect(rig.central.retrievePeripherals(withIdentifiers: [UUID()]).isEmpty)

        // Another app on the same phone, with an identifier it stored: reconnect without scanning.
        let other = CentralRecorder(system: rig.phoneSystem, label: "other-app")
        try await rig.run(until: { other.central.state == .poweredOn }, "power on")
        let retrieved = other.central.retrievePeripherals(withIdentifiers: [peripheral.identifier, UUID()])
        #expect(retrieved.count == 1)
        let known = try #require(retrieved.first)
        #expect(known.identifier == peripheral.identifier)
        #expect(known.state == .disconnected)
        other.central.connect(known)
        try await rig.run(until: { known.state == .connected }, "connection by identifier")
        #expect(other.lines.last == "didConnect \(peripheral.identifier)")
        // The first app did not ask for it and hears nothing.
        #expect(!rig.phone.events.contains { $0.isConnect })
    }

    @Test func retrieveConnectedPeripheralsByService() async throws {
        let (rig, peripheral) = try await Rig.connected()
        #expect(rig.central.retrieveConnectedPeripherals(withServices: [Profile.service]) == [peripheral])
        #expect(rig.central.retrieveConnectedPeripherals(withServices: [.battery, .heartRate]) == [peripheral])
        #expect(rig.central.retrieveConnectedPeripherals(withServices: [.heartRate]).isEmpty)
        #expect(rig.central.retrieveConnectedPeripherals(withServices: []).isEmpty)  // iOS: the list is required
        rig.central.cancelPeripheralConnection(peripheral)
        try await rig.run(.seconds(1))
        #expect(rig.central.retrieveConnectedPeripherals(withServices: [Profile.service]).isEmpty)
    }

    /// The link layer gives up when the peripheral goes silent right after accepting the connection
    /// indication: the central sees `didFailToConnect` (Connection Failed to be Established).
    @Test func didFailToConnectWhenTheConnectionIsNotEstablished() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let peripheral = try await discoverSensor(rig)
        rig.phone.clear()
        let sensorSystem = rig.sensorSystem
        // When the sensor's controller reports the new connection (LE Meta: LE Connection Complete or LE
        // Enhanced Connection Complete, status success), the sensor leaves.
        rig.radio.setTraceHandler { _, name, direction, packet in
            let text = "\(packet)"
            if name == "sensor", "\(direction)" == "C>H",
                text.contains("LE Meta (0x3E), 0100") || text.contains("LE Meta (0x3E), 0a00")
            {
                sensorSystem.move(to: RadioPosition(x: 1000, y: 0))
            }
        }
        rig.central.connect(peripheral)
        try await rig.run(.seconds(3))
        rig.radio.setTraceHandler(nil)
        #expect(peripheral.state == .disconnected)
        #expect(rig.phone.events.count == 1)
        guard case .didFailToConnect(let p, let error) = rig.phone.events.first else {
            Issue.record("expected didFailToConnect, got \(rig.phone.lines)")
            return
        }
        #expect(p === peripheral)
        #expect(error?.code == .connectionFailed)
    }
}
