import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Testing

/// The host's GATT server as a peer client sees it over a link (Core Spec 5.4, Vol 3, Part G, 4.8, 4.9,
/// 4.10), against a scripted controller.
@Suite struct GATTServerTests {
    static let link = ConnectionHandle(2)

    /// A started host serving `definition`, with a peripheral link up; start-up traffic forgotten.
    static func serving(
        _ definition: GATTServiceDefinition, profile: ControllerProfile = ControllerProfile(),
        configure: (inout HostConfiguration) -> Void = { _ in }
    ) throws -> (HostHarness, PublishedService) {
        let harness = HostHarness(profile: profile, configure: configure)
        try harness.started()
        let service = try harness.host.addService(definition).get()
        harness.connect(link.rawValue, role: .peripheral)
        harness.controller.clear()
        harness.log.clear()
        return (harness, service)
    }

    /// A battery level served with one controller ACL buffer and `queueDepth` notifications of host queue, its
    /// client subscribed to notifications (the Write Response sent and completed).
    static func subscribedWithOneBuffer(queueDepth: Int) throws -> (HostHarness, AttributeHandle) {
        var profile = ControllerProfile()
        profile.leBufferCount = 1
        let (harness, service) = try serving(batteryService(value: [0x64]), profile: profile) {
            $0.notificationQueueDepth = queueDepth
        }
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(handle: link, channel: .att, [0x12] + le16(value.rawValue + 1) + [0x01, 0x00])
        harness.completed(link.rawValue, 1)
        harness.controller.clear()
        harness.log.clear()
        return (harness, value)
    }

    /// How many `.readyToNotify` events the host emitted.
    static func readies(_ harness: HostHarness) -> Int {
        harness.events.filter { if case .readyToNotify = $0 { true } else { false } }.count
    }

    @Test func staticValueIsReadWithoutTheApplication() throws {
        let (harness, service) = try Self.serving(batteryService(value: [0x64]))
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x0A] + le16(value.rawValue))
        #expect(harness.controller.att(on: Self.link) == [[0x0B, 0x64]])
        #expect(harness.events.isEmpty)
    }

    @Test func dynamicReadIsAnsweredByTheApplication() throws {
        let (harness, service) = try Self.serving(batteryService(value: nil))
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x0A] + le16(value.rawValue))
        #expect(harness.controller.att(on: Self.link).isEmpty)  // waits for the application

        let reads = harness.events.compactMap { event -> (GATTServerRequestID, AttributeHandle, Int)? in
            if case .serverRead(let id, Self.link, let attribute, let offset) = event { return (id, attribute, offset) }
            return nil
        }
        let read = try #require(reads.first)
        #expect(reads.count == 1)
        #expect(read.1 == value)
        #expect(read.2 == 0)

        harness.host.respond(to: read.0, result: .success, value: [0x01, 0x02, 0x03])
        #expect(harness.controller.att(on: Self.link) == [[0x0B, 0x01, 0x02, 0x03]])
    }

    @Test func dynamicReadRefusedByTheApplication() throws {
        let (harness, service) = try Self.serving(batteryService(value: nil))
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x0A] + le16(value.rawValue))
        guard case .serverRead(let id, _, _, _) = try #require(harness.events.first) else {
            Issue.record("no serverRead event: \(harness.events)")
            return
        }
        harness.host.respond(to: id, result: .insufficientAuthentication, value: nil)
        // Error Response: request opcode 0x0A, the handle, Insufficient Authentication (0x05).
        #expect(harness.controller.att(on: Self.link) == [[0x01, 0x0A] + le16(value.rawValue) + [0x05]])
    }

    @Test func dynamicWriteIsAnsweredByTheApplication() throws {
        let definition = GATTServiceDefinition(
            uuid: BluetoothUUID(0xFFF0),
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: BluetoothUUID(0xFFF1), properties: [.write, .writeWithoutResponse],
                    permissions: [.writeable], value: nil)
            ])
        let (harness, service) = try Self.serving(definition)
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x12] + le16(value.rawValue) + [0xCA, 0xFE])
        guard case .serverWrite(let id?, Self.link, let writes) = try #require(harness.events.first) else {
            Issue.record("no serverWrite event: \(harness.events)")
            return
        }
        #expect(writes == [GATTWriteRequest(attribute: value, offset: 0, value: [0xCA, 0xFE])])
        #expect(harness.controller.att(on: Self.link).isEmpty)
        harness.host.respond(to: id, result: .success, value: nil)
        #expect(harness.controller.att(on: Self.link) == [[0x13]])

        // A Write Command reaches the application without an id and is never answered.
        harness.log.clear()
        harness.controller.clear()
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x52] + le16(value.rawValue) + [0x01])
        guard case .serverWrite(nil, Self.link, let commandWrites) = try #require(harness.events.first) else {
            Issue.record("no serverWrite event: \(harness.events)")
            return
        }
        #expect(commandWrites.map(\.value) == [[0x01]])
        #expect(harness.controller.att(on: Self.link).isEmpty)
    }

    @Test func notifyRefusesWhenTheQueueIsFullAndReadyToNotifyFollows() throws {
        var profile = ControllerProfile()
        profile.leBufferCount = 1
        let (harness, service) = try Self.serving(batteryService(value: [0x64]), profile: profile) {
            $0.notificationQueueDepth = 2
        }
        let value = service.characteristicValueHandles[0]

        // The client subscribes to notifications: Write Request to the CCCD (after the value).
        let cccd = value.rawValue + 1
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x12] + le16(cccd) + [0x01, 0x00])
        #expect(harness.controller.att(on: Self.link) == [[0x13]])
        #expect(
            harness.events.contains {
                if case .subscriptionChanged(Self.link, value, notify: true, indicate: false) = $0 { return true }
                return false
            })
        harness.completed(Self.link.rawValue, 1)
        harness.controller.clear()
        harness.log.clear()

        // One notification takes the only controller buffer, two more fill the queue of two, the fourth is
        // refused.
        #expect(harness.host.notify(attribute: value, value: [1], to: nil))
        #expect(harness.host.notify(attribute: value, value: [2], to: nil))
        #expect(harness.host.notify(attribute: value, value: [3], to: nil))
        #expect(!harness.host.notify(attribute: value, value: [4], to: nil))
        #expect(harness.controller.att(on: Self.link) == [[0x1B] + le16(value.rawValue) + [1]])
        #expect(harness.events.isEmpty)

        // The controller sends the first: the second leaves the queue, there is room again.
        harness.completed(Self.link.rawValue, 1)
        #expect(harness.controller.att(on: Self.link).count == 2)
        #expect(Self.readies(harness) == 1)
        #expect(harness.host.notify(attribute: value, value: [5], to: nil))

        // Everything goes out in order as buffers free up; no second readyToNotify without a refusal.
        harness.completed(Self.link.rawValue, 1)
        harness.completed(Self.link.rawValue, 1)
        #expect(harness.controller.att(on: Self.link).map { $0.last } == [1, 2, 3, 5])
        #expect(Self.readies(harness) == 1)
    }

    @Test func readyToNotifyWaitsUntilTheQueueIsDownToHalf() throws {
        let (harness, value) = try Self.subscribedWithOneBuffer(queueDepth: 4)

        // One in the controller's buffer, four queued, the sixth refused.
        for byte in UInt8(1)...5 { #expect(harness.host.notify(attribute: value, value: [byte], to: nil)) }
        #expect(!harness.host.notify(attribute: value, value: [6], to: nil))
        // Three queued, then two: the application hears it may send again at two (half of four), not before.
        harness.completed(Self.link.rawValue, 1)
        #expect(Self.readies(harness) == 0)
        harness.completed(Self.link.rawValue, 1)
        #expect(Self.readies(harness) == 1)
        // It fills the queue again from there.
        #expect(harness.host.notify(attribute: value, value: [6], to: nil))
        #expect(harness.host.notify(attribute: value, value: [7], to: nil))
        #expect(!harness.host.notify(attribute: value, value: [8], to: nil))
        for _ in 0..<6 { harness.completed(Self.link.rawValue, 1) }
        #expect(harness.controller.att(on: Self.link).map { $0.last } == [1, 2, 3, 4, 5, 6, 7])
        #expect(Self.readies(harness) == 2)
    }

    @Test func aRefusedNotifyIsReleasedWhenTheFullLinkGoesAway() throws {
        let (harness, value) = try Self.subscribedWithOneBuffer(queueDepth: 1)
        #expect(harness.host.notify(attribute: value, value: [1], to: nil))
        #expect(harness.host.notify(attribute: value, value: [2], to: nil))
        #expect(!harness.host.notify(attribute: value, value: [3], to: nil))
        // The only subscriber disconnects with its queue still full: the application may send again.
        harness.disconnected(Self.link.rawValue)
        #expect(Self.readies(harness) > 0)
    }

    @Test func notifyWithoutSubscribersSendsNothing() throws {
        let (harness, service) = try Self.serving(batteryService(value: [0x64]))
        #expect(harness.host.notify(attribute: service.characteristicValueHandles[0], value: [1], to: nil))
        #expect(harness.controller.acl.isEmpty)
    }

    @Test func indicationIsSentAndItsConfirmationAccepted() throws {
        let (harness, service) = try Self.serving(batteryService(value: [0x64]))
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(
            handle: Self.link, channel: .att, [0x12] + le16(value.rawValue + 1) + [0x02, 0x00])
        harness.completed(Self.link.rawValue, 1)
        harness.controller.clear()

        #expect(harness.host.notify(attribute: value, value: [7], to: nil))
        #expect(harness.controller.att(on: Self.link) == [[0x1D] + le16(value.rawValue) + [7]])
        harness.completed(Self.link.rawValue, 1)
        // A second indication waits for the confirmation of the first (one outstanding, Vol 3, Part F, 3.3.2).
        #expect(harness.host.notify(attribute: value, value: [8], to: nil))
        #expect(harness.controller.att(on: Self.link).count == 1)
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x1E])
        #expect(harness.controller.att(on: Self.link).map { $0.last } == [7, 8])
    }
    @Test func unconfirmedIndicationClosesTheBearerAndDropsTheLink() throws {
        let (harness, service) = try Self.serving(batteryService(value: [0x64]))
        let value = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(
            handle: Self.link, channel: .att, [0x12] + le16(value.rawValue + 1) + [0x02, 0x00])
        harness.completed(Self.link.rawValue, 1)
        harness.controller.clear()

        #expect(harness.host.notify(attribute: value, value: [7], to: nil))
        harness.scheduler.advance(by: .seconds(30) - .milliseconds(1))
        #expect(!harness.controller.opcodes.contains(.disconnect))
        harness.scheduler.advance(by: .milliseconds(1))
        let disconnect = try HCIDisconnect(packet: try #require(harness.controller.commands.last))
        #expect(disconnect.handle == Self.link)
    }
}
