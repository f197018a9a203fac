import BLE
import Foundation
import Testing

/// The GATT cache: what was discovered on a peer is kept in the system store under the peer's Database Hash, so
/// a reconnection costs one read of the hash; a changed hash or Service Changed drops it.
@Suite struct GATTCacheTests {
    static func temporary(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
    }

    static func remove(_ paths: String...) {
        for path in paths {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
    }

    /// What an app sees of a discovered peripheral: each service with its characteristics and their descriptors.
    static func tree(_ peripheral: Peripheral) -> [String] {
        (peripheral.services ?? []).map { service in
            let characteristics = (service.characteristics ?? []).map { c in
                "\(c.uuid.uuidString)[\((c.descriptors ?? []).map(\.uuid.uuidString).joined(separator: ","))]"
            }
            return "\(service.uuid.uuidString): " + characteristics.joined(separator: " ")
        }
    }

    /// Connects `app` to the sensor by its identifier (no scan) and waits for the link.
    static func reconnect(_ app: CentralRecorder, to identifier: UUID, on rig: Rig) async throws -> Peripheral {
        let before = app.events.count
        let peripheral = try #require(app.central.retrievePeripherals(withIdentifiers: [identifier]).first)
        app.central.connect(peripheral)
        try await rig.run(
            until: { app.events.dropFirst(before).contains { $0.isConnect } }, "the reconnection")
        try await rig.run(.milliseconds(500))
        return peripheral
    }

    /// A phone with `store` and a capture in `snoop`, connected to the sensor, every attribute discovered.
    static func discovered(store: String, snoop: String) async throws -> (Rig, Peripheral) {
        let rig = Rig(phone: .init(btsnoop: snoop, storePath: store))
        try await rig.startSensor()
        let peripheral = try await rig.connect()
        try await rig.discoverAll(peripheral)
        return (rig, peripheral)
    }

    /// The tree the phone's app discovers after disconnecting from `peripheral` and connecting again.
    static func rediscovered(_ peripheral: Peripheral, on rig: Rig) async throws -> [String] {
        try await disconnect(peripheral, rig.phone, on: rig)
        _ = try await reconnect(rig.phone, to: peripheral.identifier, on: rig)
        try await rig.discoverAll(peripheral)
        return tree(peripheral)
    }

    static func disconnect(_ peripheral: Peripheral, _ app: CentralRecorder, on rig: Rig) async throws {
        let before = app.events.count
        app.central.cancelPeripheralConnection(peripheral)
        try await rig.run(until: { app.events.dropFirst(before).contains { $0.isDisconnect } }, "the disconnection")
    }

    @Test func aRestartedPhoneRediscoversAnUnchangedDatabaseWithOneRead() async throws {
        let store = Self.temporary("phone.sqlite")
        let snoop = Self.temporary("phone.btsnoop")
        defer { Self.remove(store, snoop) }
        let rig = Rig(phone: .init(storePath: store))
        try await rig.startSensor()
        let first = try await rig.connect()
        try await rig.discoverAll(first)
        let discovered = Self.tree(first)
        #expect(discovered.contains { $0.hasPrefix("180F") })
        let identifier = first.identifier
        await rig.phoneSystem.shutDown()
        try await rig.run(until: { rig.central.state == .poweredOff }, "the power off")

        // The same phone after a restart, with a capture of what its host sends.
        let restarted = try BluetoothSystem.makeSimulated(
            on: rig.radio, name: "phone", configuration: .init(btsnoop: snoop, storePath: store))
        let app = CentralRecorder(system: restarted, label: "restarted")
        try await rig.run(until: { app.central.state == .poweredOn }, "power on")
        let again = try await Self.reconnect(app, to: identifier, on: rig)
        try await rig.discoverAll(again, recorder: app)
        #expect(Self.tree(again) == discovered)
        // Reading and subscribing work through the cached handles.
        let fixed = try rig.characteristic(Profile.fixed, on: again)
        again.readValue(for: fixed)
        try await rig.run(until: { fixed.value == Profile.fixedValue }, "the read")
        await restarted.shutDown()

        let sent = try SnoopATT.sent(in: snoop)
        #expect(sent.filter(\.isHashRead).count == 1)
        #expect(sent.filter(\.isDiscovery).isEmpty, "\(sent.filter(\.isDiscovery))")
    }

    @Test func aDatabaseChangedWhileDisconnectedIsDiscoveredAgain() async throws {
        let store = Self.temporary("phone.sqlite")
        let snoop = Self.temporary("phone.btsnoop")
        defer { Self.remove(store, snoop) }
        let (rig, peripheral) = try await Self.discovered(store: store, snoop: snoop)
        let before = Self.tree(peripheral)
        #expect(before.contains { $0.hasPrefix("180F") })
        try await Self.disconnect(peripheral, rig.phone, on: rig)

        // The sensor drops its battery service while nobody is connected: no Service Changed can tell anyone.
        rig.sensor.manager.remove(rig.sensor.battery)
        try await rig.run(.milliseconds(100))
        let mark = rig.phone.events.count
        _ = try await Self.reconnect(rig.phone, to: peripheral.identifier, on: rig)
        // The hash read as the link came up differs: the app hears that what it discovered is gone.
        let modified = rig.phone.events.dropFirst(mark).compactMap { event -> [Service]? in
            if case .didModifyServices(let services) = event { services } else { nil }
        }
        #expect(modified.count == 1)
        #expect(modified.first?.count == before.count)
        #expect(peripheral.services?.isEmpty ?? true)
        try await rig.discoverAll(peripheral)
        let after = Self.tree(peripheral)
        #expect(after == before.filter { !$0.hasPrefix("180F") })

        // The new database is what the cache holds now: the next reconnection asks nothing again.
        #expect(try await Self.rediscovered(peripheral, on: rig) == after)
        await rig.phoneSystem.shutDown()

        let sent = try SnoopATT.sent(in: snoop)
        let byConnection = Dictionary(grouping: sent, by: \.connection)
        #expect(byConnection[1]?.contains { $0.isDiscovery } == true)
        #expect(byConnection[2]?.contains { $0.isDiscovery } == true, "the changed database is discovered")
        #expect(byConnection[3]?.contains { $0.isDiscovery } == false, "\(byConnection[3] ?? [])")
        #expect(byConnection[3]?.filter(\.isHashRead).count == 1)
    }

    @Test func serviceChangedDropsTheCache() async throws {
        let store = Self.temporary("phone.sqlite")
        let snoop = Self.temporary("phone.btsnoop")
        defer { Self.remove(store, snoop) }
        let (rig, peripheral) = try await Self.discovered(store: store, snoop: snoop)
        // Connected: the sensor removes a service, and Service Changed says so.
        let mark = rig.phone.events.count
        rig.sensor.manager.remove(rig.sensor.battery)
        try await rig.run(
            until: {
                rig.phone.events.dropFirst(mark).contains { if case .didModifyServices = $0 { true } else { false } }
            }, "didModifyServices")
        try await rig.discoverAll(peripheral)
        let after = Self.tree(peripheral)
        #expect(!after.contains { $0.hasPrefix("180F") })
        // The cache now holds the database as it is: a reconnection asks nothing but the hash.
        #expect(try await Self.rediscovered(peripheral, on: rig) == after)
        await rig.phoneSystem.shutDown()
        let sent = try SnoopATT.sent(in: snoop)
        let second = sent.filter { $0.connection == 2 }
        #expect(!second.contains { $0.isDiscovery }, "\(second)")
        #expect(second.filter(\.isHashRead).count == 1)
    }
}
