import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Testing

/// LE ACL data flow (Core Spec 5.4, Vol 4, Part E, 4.1.1 and 5.4.2; Vol 3, Part A, 7.2 fragmentation and
/// recombination) against a scripted controller.
@Suite struct ACLFlowTests {
    @Test(arguments: [27, 251] as [UInt16])
    func outgoingPDUsAreFragmentedToTheBufferLengthAndPacedByCredits(_ length: UInt16) throws {
        var profile = ControllerProfile()
        profile.leBufferLength = length
        profile.leBufferCount = 2
        let harness = HostHarness(profile: profile)
        try harness.started()
        harness.connectCentral(1)

        let value = (0..<500).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let result = Outcome<Result<Void, HostError>>()
        harness.host.write(
            on: ConnectionHandle(1), attribute: AttributeHandle(0x0010), value: value,
            completion: result.handler)

        // One B-frame: length 503, CID 0x0004, ATT Write Request (0x12) to handle 0x0010, the value.
        let frame = le16(503) + le16(0x0004) + [0x12, 0x10, 0x00] + value
        let fragments = (frame.count + Int(length) - 1) / Int(length)
        #expect(fragments == (length == 27 ? 19 : 3))

        // Never more in flight than the controller's two buffers; each completed packet lets one more go.
        #expect(harness.controller.acl.count == 2)
        var completed = 0
        while harness.controller.acl.count < fragments, completed < 50 {
            harness.completed(1, 1)
            completed += 1
            #expect(harness.controller.acl.count == min(2 + completed, fragments))
        }
        let acl = harness.controller.acl
        #expect(acl.count == fragments)
        #expect(acl.allSatisfy { $0.data.count <= Int(length) && $0.handle == ConnectionHandle(1) })
        #expect(acl.first?.packetBoundary == .firstNonFlushable)
        #expect(acl.dropFirst().allSatisfy { $0.packetBoundary == .continuing })
        #expect(acl.flatMap(\.data) == frame)

        // The Write Response completes the write.
        harness.controller.deliverL2CAP(handle: ConnectionHandle(1), channel: .att, [0x13])
        #expect(result.value.map { (try? $0.get()) != nil } == true)
    }

    /// A started host with `buffers` LE ACL buffers and central links with handles 1 to `count`, connected in
    /// that order (each opens with an Exchange MTU Request).
    static func centrals(_ count: UInt16, buffers: UInt8) throws -> HostHarness {
        var profile = ControllerProfile()
        profile.leBufferCount = buffers
        let harness = HostHarness(profile: profile)
        try harness.started()
        for handle in 1...count { harness.connect(handle, role: .central) }
        return harness
    }

    @Test func numberOfCompletedPacketsForSeveralLinksAtOnce() throws {
        let harness = try Self.centrals(3, buffers: 2)
        // Each central link opens with an Exchange MTU Request; two buffers: the third waits.
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1, 2])
        harness.controller.deliver(
            .numberOfCompletedPackets(
                .init(entries: [
                    .init(handle: ConnectionHandle(1), numCompletedPackets: 1),
                    .init(handle: ConnectionHandle(2), numCompletedPackets: 1),
                ])))
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1, 2, 3])
    }

    @Test func disconnectionCompleteReturnsTheLinksCredits() throws {
        let harness = try Self.centrals(2, buffers: 1)
        // One buffer: link 1's Exchange MTU Request holds it, link 2's waits.
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1])

        // The controller frees a closed link's buffers without reporting them (Vol 4, Part E, 4.3).
        harness.disconnected(1)
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1, 2])

        // A stale report for the closed link gives nothing back: link 2 still holds the only buffer.
        harness.completed(1, 1)
        harness.controller.deliverL2CAP(handle: ConnectionHandle(2), channel: .att, [0x03] + le16(517))
        let read = Outcome<Result<[UInt8], HostError>>()
        harness.host.read(on: ConnectionHandle(2), attribute: AttributeHandle(0x0003), completion: read.handler)
        #expect(harness.controller.acl.count == 2)
        harness.completed(2, 1)
        #expect(harness.controller.acl.count == 3)
        #expect(harness.controller.att(on: ConnectionHandle(2)).last == [0x0A, 0x03, 0x00])
    }

    /// A link that goes down with fragments still queued takes them with it, and the links after it keep their
    /// turns (the host counts what is queued on all links, so that a pump with nothing queued looks at no link).
    @Test func aLinkThatGoesDownWithDataQueuedLeavesTheOthersTheirTurns() throws {
        let harness = try Self.centrals(3, buffers: 1)
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1])
        harness.disconnected(2)
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1])
        harness.completed(1, 1)
        #expect(harness.controller.acl.map(\.handle.rawValue) == [1, 3])
        harness.completed(3, 1)
        #expect(harness.controller.acl.count == 2, "nothing else was queued")
        // A new request on link 1 goes out at once: the count came back to what is queued.
        let read = Outcome<Result<[UInt8], HostError>>()
        harness.controller.deliverL2CAP(handle: ConnectionHandle(1), channel: .att, [0x03] + le16(517))
        harness.host.read(on: ConnectionHandle(1), attribute: AttributeHandle(0x0003), completion: read.handler)
        #expect(harness.controller.att(on: ConnectionHandle(1)).last == [0x0A, 0x03, 0x00])
    }

    @Test func dataForAnUnknownHandleIsIgnored() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.deliverL2CAP(handle: ConnectionHandle(9), channel: .att, [0x0A, 0x01, 0x00])
        #expect(harness.controller.sent.isEmpty)
        #expect(harness.host.isOpen)
    }

    @Test func incomingFragmentsAreRecombined() throws {
        let harness = HostHarness()
        try harness.started()
        let service = try harness.host.addService(batteryService(value: [0x64])).get()
        harness.connect(2, role: .peripheral)
        harness.controller.clear()

        // A Read Request in 3-byte ACL packets: first (flushable), then continuing fragments.
        let valueHandle = service.characteristicValueHandles[0]
        harness.controller.deliverL2CAP(
            handle: ConnectionHandle(2), channel: .att,
            [0x0A] + le16(valueHandle.rawValue), fragmentLength: 3)
        #expect(harness.controller.att(on: ConnectionHandle(2)) == [[0x0B, 0x64]])
    }

    @Test func wholePDUInOneACLPacketLargerThanTheBufferIsAccepted() throws {
        // Bumble sends a whole L2CAP PDU in one ACL packet whatever the buffer size.
        let harness = HostHarness()  // LE buffers of 27 octets
        try harness.started()
        harness.connectCentral(1)

        let value = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        harness.controller.deliverL2CAP(handle: ConnectionHandle(1), channel: .att, [0x1B, 0x20, 0x00] + value)
        let updates = harness.events.compactMap { event -> [UInt8]? in
            if case .valueUpdated(ConnectionHandle(1), AttributeHandle(0x0020), let v, isIndication: false) = event {
                return v
            }
            return nil
        }
        #expect(updates == [value])
    }

    @Test func unknownFixedChannelIsDropped() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(2, role: .peripheral)
        harness.controller.clear()
        harness.controller.deliverL2CAP(
            handle: ConnectionHandle(2), channel: L2CAPChannelID(rawValue: 0x0003), [1, 2, 3])
        #expect(harness.controller.acl.isEmpty)
        #expect(harness.host.links.count == 1)
    }
}

/// A Battery Service with one readable (and notifying) Battery Level characteristic; `value` nil makes it
/// dynamic.
func batteryService(value: [UInt8]?) -> GATTServiceDefinition {
    GATTServiceDefinition(
        uuid: BluetoothUUID(0x180F),
        characteristics: [
            GATTCharacteristicDefinition(
                uuid: BluetoothUUID(0x2A19), properties: [.read, .notify, .indicate],
                permissions: [.readable], value: value)
        ])
}
