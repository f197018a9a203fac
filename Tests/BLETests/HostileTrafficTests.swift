import BLE
import BLEATT
import Foundation
import Synchronization
import Testing

/// A hostile peripheral's traffic: notifications and indications for what was never discovered or asked for,
/// floods of both, indications of ours it never confirms, signalling junk, silence (the 30 s ATT transaction
/// timeout) and a link dropped in the middle of every GATT procedure. Each operation ends once, with its own
/// error, within a bound of virtual time; the link lives where the peer only talked nonsense.
@Suite struct HostileTrafficTests {
    typealias Peer = HostilePeripheral

    /// Subscribes to the notifier (or indicator) characteristic, honestly answered.
    static func subscribe(_ room: HostileRoom, _ peripheral: Peripheral, _ uuid: BluetoothUUID = Peer.notifier)
        async throws -> Characteristic
    {
        let characteristic = try room.characteristic(uuid, on: peripheral)
        peripheral.setNotifyValue(true, for: characteristic)
        try await room.run(until: { characteristic.isNotifying }, "subscription")
        room.phone.clear()
        return characteristic
    }

    static func values(_ room: HostileRoom) -> [Data?] {
        room.phone.valueUpdates.map(\.value)
    }

    // MARK: Notifications and indications

    /// Notifications for a handle nobody discovered, and for a characteristic the app did not subscribe to, are
    /// not shown; an indication for an unknown handle is still confirmed (Core Spec Vol 3 Part F 3.4.7.2).
    @Test func notificationsForHandlesNeverDiscoveredOrSubscribedAreNotShown() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        let notifier = try await Self.subscribe(room, peripheral)
        room.peer.perform([
            .att(Peer.notification(AttributeHandle(0x0F00), [1])),
            .att(Peer.notification(room.handles.described, [2])),
            .att(Peer.indication(AttributeHandle(0x0F01), [3])),
            .att(Peer.notification(AttributeHandle(0), [4])),
        ])
        try await room.run(.seconds(1))
        #expect(room.phone.events.isEmpty, "\(room.phone.lines)")
        #expect(room.peer.confirmations == 1)
        room.peer.perform([.att(Peer.notification(room.handles.notifier, [5]))])
        try await room.run(until: { !room.phone.valueUpdates.isEmpty }, "the subscribed value")
        #expect(Self.values(room) == [Data([5])])
        #expect(notifier.value == Data([5]))
    }

    /// A notification longer than ATT_MTU breaks no rule worth the link: it is dropped, and what follows arrives.
    @Test func aNotificationLongerThanTheMTUIsDropped() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        _ = try await Self.subscribe(room, peripheral)
        let mtu = try #require(peripheral.link?.attMTU)
        room.peer.perform([
            .att(Peer.notification(room.handles.notifier, [UInt8](repeating: 0xEE, count: mtu))),
            .att(Peer.notification(room.handles.notifier, [7])),
        ])
        try await room.run(until: { !room.phone.valueUpdates.isEmpty }, "the next value")
        try await room.run(.seconds(1))
        #expect(Self.values(room) == [Data([7])])
        #expect(peripheral.state == .connected)
    }

    @Test func aFloodOfNotificationsArrivesInOrderAndTheLinkStaysUsable() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        _ = try await Self.subscribe(room, peripheral)
        let count = 3000
        room.peer.perform((0..<count).map { .att(Peer.notification(room.handles.notifier, Peer.le16(UInt16($0)))) })
        try await room.run(until: { room.phone.valueUpdates.count >= count }, within: .seconds(60), "the flood")
        let values = Self.values(room)
        #expect(values == (0..<count).map { Data(Peer.le16(UInt16($0))) })
        #expect(try await room.readsHonestly(peripheral))
    }

    /// Indications sent all at once, none waiting for the confirmation of the one before (which a server must):
    /// each is shown and confirmed, once.
    @Test func aFloodOfIndicationsNotWaitingForConfirmationsIsShownAndConfirmedOneByOne() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        _ = try await Self.subscribe(room, peripheral, Peer.indicator)
        let count = 500
        room.peer.perform((0..<count).map { .att(Peer.indication(room.handles.indicator, Peer.le16(UInt16($0)))) })
        try await room.run(until: { room.peer.confirmations >= count }, within: .seconds(60), "the confirmations")
        try await room.run(.seconds(1))
        #expect(room.peer.confirmations == count)
        #expect(Self.values(room) == (0..<count).map { Data(Peer.le16(UInt16($0))) })
        #expect(try await room.readsHonestly(peripheral))
    }

    /// The peer, as a client of the phone's own server, subscribes to its Service Changed indications and never
    /// confirms one. When an app of the phone publishes a service, the indication goes out; after the ATT
    /// transaction timeout (30 s) our bearer is closed and the link dropped, and the central's read pending on
    /// that link ends too. (A `PeripheralManager` does not see a client on a link where the phone is central:
    /// it knows centrals only from links where it is peripheral, so the peer subscribes to the system's own
    /// indication here.)
    @Test func aPeerThatSubscribesToOurIndicationsAndNeverConfirmsLosesTheLinkAfter30Seconds() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            // A read of the peer's is left unanswered too, so it is pending when the link goes.
            .init(.att(.readRequest), [.silence])
        ])
        // The phone's database: Service Changed's CCCD is handle 9. The peer subscribes to indications.
        room.peer.perform([.att([0x12, 0x09, 0x00, 0x02, 0x00])])
        try await room.run(until: { !room.peer.received(.writeResponse).isEmpty }, "the subscription")
        let server = PeripheralRecorder(system: room.phoneSystem, label: "phone-server")
        let service = MutableService(type: "0B57113E-00A0-4000-8000-00805F9B34FB", primary: true)
        try await room.run(until: { server.manager.state == .poweredOn }, "the phone's server")
        let start = room.radio.now
        server.manager.add(service)
        peripheral.readValue(for: try room.characteristic(Peer.value, on: peripheral))
        try await room.run(until: { !room.received(indications: room.peer).isEmpty }, "the indication")
        try await room.run(until: { peripheral.state == .disconnected }, within: .seconds(32), "the link's end")
        let elapsed = room.radio.now - start
        #expect(elapsed >= .seconds(30) && elapsed <= .seconds(30.2), "after \(elapsed)")
        try await room.run(.seconds(1))
        #expect(room.phone.valueUpdates.count == 1)
        #expect(room.phone.valueUpdates.first?.error?.code == .transactionTimeout, "\(room.phone.lines)")
        HostileResponseTests.expectDisconnected(room, peripheral)
        #expect(room.received(indications: room.peer).count == 1)
        #expect(room.peer.confirmations == 0)
    }

    // MARK: L2CAP signalling junk

    @Test func anUnknownSignallingCommandIsRejectedAndTheLinkLives() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        room.peer.perform([.signaling(Peer.signalingCommand(0x3C, identifier: 9, [1, 2, 3]))])
        try await room.run(.seconds(1))
        // Command Reject, reason "command not understood", with the same identifier.
        #expect(room.peer.signaling == [[0x01, 9, 0x02, 0x00, 0x00, 0x00]])
        #expect(try await room.readsHonestly(peripheral))
    }

    @Test func signallingCommandsWithBadLengthsAreRejectedOrDroppedAndTheLinkLives() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        room.peer.perform([
            // A request whose length field says 16 octets and carries 8.
            .signaling(Peer.signalingCommand(0x12, identifier: 3, [UInt8](repeating: 0x10, count: 8), length: 16)),
            // A request that says less than it carries.
            .signaling(Peer.signalingCommand(0x12, identifier: 4, [UInt8](repeating: 0x10, count: 8), length: 2)),
            // A header cut short, and an empty frame.
            .signaling([0x12, 0x05]), .signaling([]),
            // A response too short to be one.
            .signaling(Peer.signalingCommand(0x13, identifier: 6, [0x00])),
            // Longer than the signalling MTU (23).
            .signaling(Peer.signalingCommand(0x12, identifier: 7, [UInt8](repeating: 0, count: 60))),
        ])
        try await room.run(.seconds(1))
        // Each request is answered once, with a Command Reject; the responses (identifier 6) and the empty frame
        // are not; nothing reaches the app.
        let replies = room.peer.signaling
        #expect(replies.allSatisfy { $0.first == 0x01 }, "\(replies)")
        #expect(replies.map { $0[1] } == [3, 4, 5, 7], "\(replies)")
        #expect(room.phone.events.isEmpty)
        #expect(try await room.readsHonestly(peripheral))
    }

    /// A Connection Parameter Update Request with nonsense (minimum above maximum, a latency and timeout that
    /// cannot hold together) is refused, and the link keeps its parameters.
    @Test func aConnectionParameterUpdateRequestWithNonsenseValuesIsRefused() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        let before = try #require(peripheral.link)
        room.peer.perform([
            .signaling(
                Peer.connectionParameterUpdate(
                    identifier: 0x21, intervalMin: 0x0C80, intervalMax: 0x0006, latency: 500, timeout: 0x000A)),
            .signaling(
                Peer.connectionParameterUpdate(
                    identifier: 0x22, intervalMin: 0x0000, intervalMax: 0xFFFF, latency: 0xFFFF, timeout: 0xFFFF)),
        ])
        try await room.run(.seconds(2))
        // Connection Parameter Update Response, result 0x0001 (rejected), each with its identifier.
        #expect(
            room.peer.signaling == [[0x13, 0x21, 0x02, 0x00, 0x01, 0x00], [0x13, 0x22, 0x02, 0x00, 0x01, 0x00]])
        #expect(peripheral.link?.interval == before.interval)
        #expect(peripheral.link?.supervisionTimeout == before.supervisionTimeout)
        #expect(try await room.readsHonestly(peripheral))
    }

    @Test func aStormOfCommandRejectsIsIgnored() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        room.peer.perform(
            (0..<1000).map { .signaling(Peer.signalingCommand(0x01, identifier: UInt8($0 % 255 + 1), [0x00, 0x00])) })
        try await room.run(.seconds(5))
        #expect(room.peer.signaling.isEmpty, "a reject was answered: \(room.peer.signaling.prefix(3))")
        #expect(room.phone.events.isEmpty)
        #expect(try await room.readsHonestly(peripheral))
    }

    /// Frames on a channel nobody opened, an empty ATT frame, a continuation with no start, a start whose frame
    /// never completes before the next one begins: each is dropped, and the link goes on.
    @Test func brokenAndStrayL2CAPFramesAreDroppedAndTheLinkLives() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        room.peer.perform([
            .l2cap(channel: 0x0040, [1, 2, 3]),
            .l2cap(channel: 0x0003, [1]),
            .l2cap(channel: 0x0004, []),
            .acl([0x01, 0x02, 0x03], boundary: 0b01),
            .acl([0x64, 0x00, 0x04, 0x00, 0x0A], boundary: 0b10),
        ])
        try await room.run(.seconds(1))
        #expect(peripheral.state == .connected)
        #expect(room.phone.events.isEmpty)
        #expect(try await room.readsHonestly(peripheral))
    }

    // MARK: A peer that never answers

    /// Core Spec Vol 3 Part F 3.3.3: a request unanswered for 30 s ends the transaction; no more requests may be
    /// sent on that bearer. Every request pending on it then fails, each once, and the link goes; a request made
    /// after fails at once.
    @Test func aPeerThatNeverAnswersFailsEveryPendingRequestAfter30Seconds() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            .init(.att(.readRequest), [.silence]), .init(.att(.writeRequest), [.silence]),
        ])
        let value = try room.characteristic(Peer.value, on: peripheral)
        let described = try room.characteristic(Peer.described, on: peripheral)
        let notifier = try room.characteristic(Peer.notifier, on: peripheral)
        let start = room.radio.now
        peripheral.readValue(for: value)
        peripheral.writeValue(Data([9]), for: value, type: .withResponse)
        peripheral.readValue(for: described)
        peripheral.setNotifyValue(true, for: notifier)
        try await room.run(.seconds(29.9))
        #expect(room.phone.events.isEmpty)
        try await room.run(until: { peripheral.state == .disconnected }, within: .seconds(2), "the link's end")
        try await room.run(.seconds(1))
        let log = room.phone.log
        #expect(log.count == 5, "\(room.phone.lines)")
        for entry in log.dropLast() {
            #expect(entry.event.error?.code == .transactionTimeout, "\(entry.event)")
            #expect(entry.time - start >= .seconds(30) && entry.time - start <= .seconds(30.1))
        }
        let sent = room.peer.received.filter { $0.time >= start }.map(\.request.opcode)
        #expect(sent == [.readRequest], "a request went out after the timeout: \(sent)")
        HostileResponseTests.expectDisconnected(room, peripheral)
        let mark = room.phone.events.count
        peripheral.readValue(for: value)
        try await room.run(.seconds(1))
        #expect(room.since(mark).map { $0.error?.code } == [.notConnected])
    }

    /// The peer answers the first page of characteristics, then stops answering.
    @Test func aPeerThatFallsSilentInTheMiddleOfADiscoveryTimesItOut() async throws {
        let room = HostileRoom()
        let first = room.handles.service.lowerBound
        room.peer.setScript([
            .init(
                .att(.readByTypeRequest) { $0.searchedType == .characteristicDeclaration && $0.handle! > first },
                [.silence])
        ])
        let peripheral = try await room.connect()
        peripheral.discoverServices([Peer.service])
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "services")
        let service = try #require(peripheral.services?.first)
        room.phone.clear()
        peripheral.discoverCharacteristics(nil, for: service)
        try await room.run(until: { peripheral.state == .disconnected }, within: .seconds(32), "the link's end")
        try await room.run(.seconds(1))
        #expect(room.phone.events.first?.isCharacteristicDiscovery == true)
        #expect(room.phone.events.first?.error?.code == .transactionTimeout)
        #expect(room.peer.received(.readByTypeRequest).filter { $0.handle! > first }.count == 1)
        HostileResponseTests.expectDisconnected(room, peripheral)
    }

    // MARK: The link dropped in the middle of every GATT procedure

    enum Procedure: String, CaseIterable, Sendable {
        case discoverServices, discoverIncludedServices, discoverCharacteristics, discoverDescriptors
        case read, readBlob, readDescriptor, write, longWrite, executeWrite, subscribe
    }

    /// The peer disconnects (Remote User Terminated Connection) on receiving the procedure's request (for the long
    /// ones, one in the middle): the procedure ends once with `.peripheralDisconnected`, before
    /// `didDisconnectPeripheral`, which reports the same.
    @Test(arguments: Procedure.allCases)
    func aDisconnectInTheMiddleOfAProcedureEndsItWithPeripheralDisconnected(_ procedure: Procedure) async throws {
        let room = HostileRoom(mtu: procedure == .readBlob ? 23 : 247)
        let h = room.handles
        let cut: [HostilePeripheral.Act] = [.disconnect(.remoteUserTerminatedConnection)]
        let trigger: HostilePeripheral.Trigger
        switch procedure {
        case .discoverServices: trigger = .att(.readByGroupTypeRequest)
        case .discoverIncludedServices: trigger = .search(.readByTypeRequest, for: .include)
        case .discoverCharacteristics:
            trigger = .att(.readByTypeRequest) {
                $0.searchedType == .characteristicDeclaration && h.service.contains($0.handle!)
            }
        case .discoverDescriptors: trigger = .att(.findInformationRequest) { $0.handle! > h.described }
        case .read: trigger = .read(h.value)
        case .readBlob: trigger = .att(.readBlobRequest) { $0.ordinal == 1 }
        case .readDescriptor: trigger = .read(h.userDescription)
        case .write: trigger = .write(h.value)
        case .longWrite: trigger = .att(.prepareWriteRequest) { $0.ordinal == 1 }
        case .executeWrite: trigger = .att(.executeWriteRequest)
        case .subscribe: trigger = .write(h.notifierCCCD)
        }
        let peripheral: Peripheral
        if procedure == .discoverServices {
            room.peer.setScript([.init(trigger, cut)])
            peripheral = try await room.connect(settle: false)
        } else {
            peripheral = try await room.connect()
            if ![.discoverIncludedServices, .discoverCharacteristics, .discoverDescriptors].contains(procedure) {
                _ = try await room.discover(peripheral)
                let described = try room.characteristic(Peer.described, on: peripheral)
                peripheral.discoverDescriptors(for: described)
                try await room.run(.milliseconds(500))
            }
            room.peer.setScript([.init(trigger, cut)])
        }
        room.phone.clear()

        func service() throws -> Service { try #require(peripheral.services?.first { $0.uuid == Peer.service }) }
        func discoverService() async throws {
            peripheral.discoverServices([Peer.service])
            try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "services")
            room.phone.clear()
        }
        let ends: (CentralEvent) -> Bool
        switch procedure {
        case .discoverServices:
            peripheral.discoverServices(nil)
            ends = \.isServiceDiscovery
        case .discoverIncludedServices:
            try await discoverService()
            peripheral.discoverIncludedServices(nil, for: try service())
            ends = \.isIncludedDiscovery
        case .discoverCharacteristics:
            try await discoverService()
            peripheral.discoverCharacteristics(nil, for: try service())
            ends = \.isCharacteristicDiscovery
        case .discoverDescriptors:
            try await discoverService()
            peripheral.discoverCharacteristics(nil, for: try service())
            try await room.run(until: { room.phone.events.contains(where: \.isCharacteristicDiscovery) }, "chars")
            room.phone.clear()
            peripheral.discoverDescriptors(for: try room.characteristic(Peer.described, on: peripheral))
            ends = \.isDescriptorDiscovery
        case .read:
            peripheral.readValue(for: try room.characteristic(Peer.value, on: peripheral))
            ends = \.isValueUpdate
        case .readBlob:
            peripheral.readValue(for: try room.characteristic(Peer.long, on: peripheral))
            ends = \.isValueUpdate
        case .readDescriptor:
            let described = try room.characteristic(Peer.described, on: peripheral)
            peripheral.readValue(for: try #require(described.descriptors?.first))
            ends = { if case .didUpdateDescriptorValue = $0 { true } else { false } }
        case .write:
            peripheral.writeValue(
                Data([4]), for: try room.characteristic(Peer.value, on: peripheral), type: .withResponse)
            ends = \.isWrite
        case .longWrite, .executeWrite:
            let long = try room.characteristic(Peer.long, on: peripheral)
            peripheral.writeValue(Data(repeating: 0x5A, count: 300), for: long, type: .withResponse)
            ends = \.isWrite
        case .subscribe:
            peripheral.setNotifyValue(true, for: try room.characteristic(Peer.notifier, on: peripheral))
            ends = \.isNotificationState
        }
        try await room.run(until: { peripheral.state == .disconnected }, within: .seconds(3), "the link's end")
        try await room.run(.seconds(1))
        let events = room.phone.events
        #expect(events.filter(ends).count == 1, "\(procedure): \(room.phone.lines)")
        #expect(events.first(where: ends)?.error?.code == .peripheralDisconnected, "\(procedure): \(room.phone.lines)")
        #expect(happensBefore(events, ends, \.isDisconnect))
        #expect(events.last?.error?.code == .peripheralDisconnected)
        HostileResponseTests.expectDisconnected(room, peripheral)
    }
}
