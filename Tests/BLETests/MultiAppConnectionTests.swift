import BLEHost
import BLESystem
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Two apps connecting on one phone: one link per peer, shared; each app its own `Peripheral` and its own
/// `didDisconnect`; the link down with the last app; pending connects of every app initiated together.
@Suite struct MultiAppConnectionTests {
    /// The rig's sensor advertising, and two apps on the phone, powered on.
    static func twoApps() async throws -> (Rig, first: CentralRecorder, second: CentralRecorder) {
        let rig = Rig()
        try await rig.startSensor()
        let first = CentralRecorder(system: rig.phoneSystem, label: "first", app: rig.phoneSystem.app(id: "com.a"))
        let second = CentralRecorder(
            system: rig.phoneSystem, label: "second", app: rig.phoneSystem.app(id: "com.b"))
        try await rig.run(
            until: { first.central.state == .poweredOn && second.central.state == .poweredOn }, "power on")
        return (rig, first, second)
    }

    static func connected(_ recorder: CentralRecorder) -> Bool { recorder.events.contains { $0.isConnect } }

    /// The first app finds the sensor and connects to it (and discovers its database when `discovering`).
    static func firstConnects(_ rig: Rig, _ first: CentralRecorder, discovering: Bool) async throws -> Peripheral {
        first.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !first.discoveries.isEmpty }, "discovery")
        let mine = try #require(first.discoveries.first?.peripheral)
        first.central.connect(mine)
        try await rig.run(until: { connected(first) }, "the first app's connection")
        if discovering { try await rig.discoverAll(mine, recorder: first) }
        return mine
    }

    /// The second app connects to the first app's peripheral, found by its identifier: the link is shared.
    static func secondJoins(_ rig: Rig, _ second: CentralRecorder, _ mine: Peripheral) async throws -> Peripheral {
        let theirs = try #require(second.central.retrievePeripherals(withIdentifiers: [mine.identifier]).first)
        second.central.connect(theirs)
        try await rig.run(until: { connected(second) }, "the second app's connection")
        return theirs
    }

    /// The phone's links, as its host holds them.
    static func links(_ rig: Rig) -> Int { rig.phoneSystem.core.host.links.count }

    @Test func appsShareOneLinkAndEachLeavesOnItsOwn() async throws {
        let (rig, first, second) = try await Self.twoApps()
        let mine = try await Self.firstConnects(rig, first, discovering: true)
        // The second app finds the link through the system, and its connect succeeds at once: the same link.
        let theirs = try #require(second.central.retrieveConnectedPeripherals(withServices: [Profile.service]).first)
        #expect(theirs !== mine && theirs.identifier == mine.identifier && theirs.state == .disconnected)
        second.central.connect(theirs)
        try await rig.run(until: { Self.connected(second) }, within: .milliseconds(1), "the second app's connection")
        #expect(Self.links(rig) == 1)

        // The first app leaves: its own didDisconnect, at once; the second stays connected and reads.
        first.clear()
        first.central.cancelPeripheralConnection(mine)
        try await rig.run(until: { first.events.contains { $0.isDisconnect } }, within: .milliseconds(1), "leaving")
        #expect(first.lines == ["didDisconnect \(mine.identifier)"])
        #expect(mine.state == .disconnected && theirs.state == .connected && Self.links(rig) == 1)
        try await rig.discoverAll(theirs, recorder: second)
        let fixed = try rig.characteristic(Profile.fixed, on: theirs)
        second.clear()
        theirs.readValue(for: fixed)
        try await rig.run(until: { !second.valueUpdates.isEmpty }, "the second app's read")
        #expect(second.valueUpdates.first?.value == Profile.fixedValue)

        // The last app leaves: the link goes down.
        second.central.cancelPeripheralConnection(theirs)
        try await rig.run(until: { second.events.contains { $0.isDisconnect } }, "the last app leaving")
        try await rig.run(until: { Self.links(rig) == 0 }, "the link down")
        #expect(first.events.filter { $0.isDisconnect }.count == 1)  // nothing more for the first app
    }

    @Test func aDeviceThatNeverAppearsBlocksNoOtherApp() async throws {
        let (rig, first, second) = try await Self.twoApps()
        let ghost = first.central.peripheral(
            for: BluetoothAddress(bytes: [0xC7, 0x01, 0x02, 0x03, 0x04, 0x05], type: .randomDevice))
        first.central.connect(ghost)
        try await rig.run(.milliseconds(500))
        second.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !second.discoveries.isEmpty }, "discovery")
        let sensor = try #require(second.discoveries.first?.peripheral)
        second.central.connect(sensor)
        try await rig.run(until: { Self.connected(second) }, "the connection behind a pending one")
        // The ghost's connect is still pending: connects never time out.
        try await rig.run(.seconds(30))
        #expect(ghost.state == .connecting)
        #expect(!first.events.contains { if case .didFailToConnect = $0 { true } else { $0.isDisconnect } })
        first.central.cancelPeripheralConnection(ghost)
        try await rig.run(until: { first.events.contains { $0.isDisconnect } }, "the cancelled attempt")
    }

    @Test func aReleasedManagerTakesItsPendingConnectsWithIt() async throws {
        let (rig, first, second) = try await Self.twoApps()
        do {
            let transient = CentralRecorder(system: rig.phoneSystem, label: "transient")
            try await rig.run(until: { transient.central.state == .poweredOn }, "power on")
            let ghost = transient.central.peripheral(
                for: BluetoothAddress(bytes: [0xC7, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E], type: .randomDevice))
            transient.central.connect(ghost)
            try await rig.run(.milliseconds(200))
        }
        try await rig.run(.milliseconds(200))
        // Nothing of the released manager is initiated any more, and the next connect goes straight through.
        #expect(rig.phoneSystem.core.host.links.isEmpty)
        second.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !second.discoveries.isEmpty }, "discovery")
        let sensor = try #require(second.discoveries.first?.peripheral)
        second.central.connect(sensor)
        try await rig.run(until: { Self.connected(second) }, "the connection")
        withExtendedLifetime(first) {}
    }

    /// Two apps subscribed to one characteristic over a shared link: the peer sees one subscription; both hear
    /// each notification; one app's unsubscribe ends nothing for the other; the last one's ends it on the peer.
    @Test func subscriptionsAreSharedAndEndWithTheLastApp() async throws {
        let (rig, first, second) = try await Self.twoApps()
        let mine = try await Self.firstConnects(rig, first, discovering: false)
        let theirs = try await Self.secondJoins(rig, second, mine)
        try await rig.discoverAll(mine, recorder: first)
        try await rig.discoverAll(theirs, recorder: second)
        let a = try rig.characteristic(Profile.notifier, on: mine)
        let b = try rig.characteristic(Profile.notifier, on: theirs)
        mine.setNotifyValue(true, for: a)
        theirs.setNotifyValue(true, for: b)
        try await rig.run(until: { a.isNotifying && b.isNotifying }, "both subscribed")
        let subscribes = rig.sensor.recorder.events.filter { if case .didSubscribe = $0 { true } else { false } }
        #expect(subscribes.count == 1, "the peer saw \(subscribes.count) subscriptions")

        func notify(_ byte: UInt8) async throws {
            first.clear()
            second.clear()
            #expect(rig.sensor.manager.updateValue(Data([byte]), for: rig.sensor.notifier, onSubscribedCentrals: nil))
            try await rig.run(.milliseconds(300))
        }
        try await notify(1)
        #expect(first.valueUpdates.map(\.value) == [Data([1])] && second.valueUpdates.map(\.value) == [Data([1])])

        // The first app unsubscribes: the peer keeps its subscriber, the second app keeps hearing.
        mine.setNotifyValue(false, for: a)
        try await rig.run(until: { !a.isNotifying }, "the first app unsubscribed")
        #expect(!rig.sensor.recorder.events.contains { if case .didUnsubscribe = $0 { true } else { false } })
        try await notify(2)
        #expect(first.valueUpdates.isEmpty && second.valueUpdates.map(\.value) == [Data([2])])

        // The last one: the peer hears the unsubscribe.
        theirs.setNotifyValue(false, for: b)
        try await rig.run(
            until: { rig.sensor.recorder.events.contains { if case .didUnsubscribe = $0 { true } else { false } } },
            "the peer's unsubscribe")
    }

    /// The second app on a link discovers the whole database without a request to the peer: the first app's
    /// discovery is the system's, kept for the link's life.
    @Test func aSecondAppsDiscoveryIsAnsweredFromTheFirstOnes() async throws {
        let (rig, first, second) = try await Self.twoApps()
        let mine = try await Self.firstConnects(rig, first, discovering: true)
        let theirs = try await Self.secondJoins(rig, second, mine)
        try await rig.run(.milliseconds(300))

        let sent = Mutex(0)
        rig.radio.setTraceHandler { _, name, direction, packet in
            if name == "phone", direction == .hostToController, case .acl = packet { sent.withLock { $0 += 1 } }
        }
        try await rig.discoverAll(theirs, recorder: second)
        rig.radio.setTraceHandler(nil)
        #expect(sent.withLock { $0 } == 0, "the phone sent \(sent.withLock { $0 }) ACL packets")
        let names = { (p: Peripheral) in
            (p.services ?? []).flatMap { service in (service.characteristics ?? []).map(\.uuid.uuidString) }
        }
        #expect(names(theirs) == names(mine) && !names(theirs).isEmpty)
    }

    /// More pending connects than the controller's accept list holds, the real device asked last: the others
    /// take turns with it, and it connects within a few turns.
    @Test func aCrowdOfAbsentDevicesBlocksNoOtherForLong() async throws {
        let (rig, first, second) = try await Self.twoApps()
        let ghosts = (0..<9).map { i in
            first.central.peripheral(
                for: BluetoothAddress(bytes: [0xC7, 0x10, 0x20, 0x30, 0x40, UInt8(i)], type: .randomDevice))
        }
        for ghost in ghosts { first.central.connect(ghost) }
        try await rig.run(.milliseconds(500))
        second.central.scanForPeripherals(withServices: [Profile.service])
        try await rig.run(until: { !second.discoveries.isEmpty }, "discovery")
        let sensor = try #require(second.discoveries.first?.peripheral)
        second.central.stopScan()
        second.central.connect(sensor)
        try await rig.run(until: { Self.connected(second) }, within: .seconds(10), "the connection behind nine")
        #expect(ghosts.allSatisfy { $0.state == .connecting })
    }
}
