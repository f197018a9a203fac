import BLEATT
import BLECore
import BLEHCI
import BLEHost
import Testing

/// The ATT bearer and GATT client as the host runs them on a link (Core Spec 5.4, Vol 3, Part F, 3.2.8,
/// 3.3.2, 3.3.3, 3.4.7), against a scripted controller.
@Suite struct ATTClientTests {
    typealias ReadResult = Result<[UInt8], HostError>
    static let link = ConnectionHandle(1)

    @Test(arguments: [(23, 23), (100, 100), (247, 247), (517, 517), (600, 517)] as [(UInt16, Int)])
    func centralExchangesMTUAtOnce(peer: UInt16, expected: Int) throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(1, role: .central)
        // Exchange MTU Request offering 517 (0x0205).
        #expect(harness.controller.att(on: Self.link) == [[0x02, 0x05, 0x02]])
        #expect(harness.events.contains { if case .connected(let info) = $0 { info.role == .central } else { false } })

        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x03] + le16(peer))
        let changes = harness.events.compactMap { event -> Int? in
            if case .mtuChanged(Self.link, let mtu) = event { return mtu }
            return nil
        }
        #expect(changes == [expected] || (expected == 23 && changes.isEmpty))
        #expect(harness.host.mtu(on: Self.link) == expected)
    }

    @Test func peripheralLinkDoesNotStartAnExchange() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(2, role: .peripheral)
        #expect(harness.controller.att(on: ConnectionHandle(2)).isEmpty)
        #expect(harness.host.mtu(on: ConnectionHandle(2)) == 23)
    }

    @Test func oneOutstandingRequestAtATime() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)

        let first = Outcome<ReadResult>()
        let second = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: first.handler)
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0020), completion: second.handler)
        #expect(harness.controller.att(on: Self.link) == [[0x0A, 0x10, 0x00]])

        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x0B, 0x01, 0x02])
        #expect(try first.value?.get() == [0x01, 0x02])
        #expect(second.value == nil)
        #expect(harness.controller.att(on: Self.link) == [[0x0A, 0x10, 0x00], [0x0A, 0x20, 0x00]])

        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x0B, 0x03])
        #expect(try second.value?.get() == [0x03])
    }

    @Test func requestsMadeDuringTheMTUExchangeWaitForIt() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(1, role: .central)
        let read = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: read.handler)
        harness.completed(1, 1)
        #expect(harness.controller.att(on: Self.link) == [[0x02, 0x05, 0x02]])
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x03] + le16(185))
        #expect(harness.controller.att(on: Self.link) == [[0x02, 0x05, 0x02], [0x0A, 0x10, 0x00]])
    }

    @Test func errorResponseFailsOnlyThatRequest() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)
        let read = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: read.handler)
        // Error Response: request opcode 0x0A, handle 0x0010, Read Not Permitted (0x02).
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x01, 0x0A, 0x10, 0x00, 0x02])
        #expect(read.value.flatMap(errorCode) == .att(.readNotPermitted))
        #expect(harness.host.links.count == 1)
        #expect(!harness.controller.opcodes.contains(.disconnect))
    }

    @Test func transactionTimeoutFailsPendingAndQueuedOperationsAndDropsTheLink() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)

        let first = Outcome<ReadResult>()
        let second = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: first.handler)
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0020), completion: second.handler)

        harness.scheduler.advance(by: .seconds(30) - .milliseconds(1))
        #expect(first.value == nil && second.value == nil)
        #expect(!harness.controller.opcodes.contains(.disconnect))

        harness.scheduler.advance(by: .milliseconds(1))
        #expect(first.value.flatMap(errorCode) == .transactionTimeout)
        #expect(second.value.flatMap(errorCode) == .transactionTimeout)
        // No ATT PDU may be sent on the bearer any more (Vol 3, Part F, 3.3.3): the host drops the link.
        let disconnect = try HCIDisconnect(packet: try #require(harness.controller.commands.last))
        #expect(disconnect.handle == Self.link)
        #expect(harness.controller.att(on: Self.link) == [[0x0A, 0x10, 0x00]])

        // Later requests on the closed bearer fail at once.
        let late = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0030), completion: late.handler)
        #expect(late.value != nil)
        #expect((try? late.value?.get()) == nil)
        #expect(harness.controller.att(on: Self.link).count == 1)
    }

    @Test func transactionTimeoutComesFromTheConfiguration() throws {
        let harness = HostHarness { $0.attTransactionTimeout = .seconds(5) }
        try harness.started()
        harness.connectCentral(1)
        let read = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: read.handler)
        harness.scheduler.advance(by: .seconds(5) - .milliseconds(1))
        #expect(read.value == nil)
        harness.scheduler.advance(by: .milliseconds(1))
        #expect(read.value.flatMap(errorCode) == .transactionTimeout)
    }

    @Test func answeredRequestCancelsItsTimer() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)
        let read = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: read.handler)
        harness.scheduler.advance(by: .seconds(20))
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x0B, 0x01])
        harness.scheduler.advance(by: .seconds(60))
        #expect(try read.value?.get() == [0x01])
        #expect(!harness.controller.opcodes.contains(.disconnect))
        #expect(harness.host.links.count == 1)
    }

    @Test func notificationsAndIndicationsAreDelivered() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)

        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x1B, 0x21, 0x00, 0x01])  // notification
        #expect(harness.controller.att(on: Self.link).isEmpty)  // never confirmed
        harness.controller.deliverL2CAP(handle: Self.link, channel: .att, [0x1D, 0x21, 0x00, 0xAA, 0xBB])  // indication
        #expect(harness.controller.att(on: Self.link) == [[0x1E]])  // Handle Value Confirmation

        let updates = harness.events.compactMap { event -> ([UInt8], Bool)? in
            if case .valueUpdated(Self.link, AttributeHandle(0x0021), let value, let isIndication) = event {
                return (value, isIndication)
            }
            return nil
        }
        #expect(updates.map(\.0) == [[0x01], [0xAA, 0xBB]])
        #expect(updates.map(\.1) == [false, true])
    }

    @Test func disconnectionFailsPendingOperationsBeforeDisconnectedIsEmitted() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)

        for attribute: UInt16 in [0x0010, 0x0020] {
            harness.host.read(on: Self.link, attribute: AttributeHandle(attribute)) { [log = harness.log] result in
                log.note("read \(attribute): \(errorCode(result).map { "\($0)" } ?? "ok")")
            }
        }
        harness.disconnected(1, reason: .connectionTimeout)

        let trace = harness.log.entries.map { entry -> String in
            switch entry {
            case .note(let text): return text
            case .event(.disconnected(let handle, let reason)):
                return "disconnected \(handle.rawValue) \(reason.rawValue)"
            case .event(let other): return "\(other)"
            }
        }
        #expect(trace == ["read 16: disconnected", "read 32: disconnected", "disconnected 1 8"])
        #expect(harness.host.links.isEmpty)

        // Operations on the gone link fail at once.
        let late = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: late.handler)
        #expect(late.value.flatMap(errorCode) != nil)
    }

    @Test func transportClosingFailsEverything() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)

        let read = Outcome<ReadResult>()
        harness.host.read(on: Self.link, attribute: AttributeHandle(0x0010), completion: read.handler)
        harness.controller.beSilent()
        let command = Outcome<Result<HCILERand.ReturnParameters, HostError>>()
        let queued = Outcome<Result<HCIReadRSSI.ReturnParameters, HostError>>()
        harness.host.send(HCILERand(), completion: command.handler)
        harness.host.send(HCIReadRSSI(handle: Self.link), completion: queued.handler)

        harness.controller.vanish(reason: "unplugged")
        #expect(read.value.flatMap(errorCode) == .transportClosed)
        #expect(command.value.flatMap(errorCode) == .transportClosed)
        #expect(queued.value.flatMap(errorCode) == .transportClosed)
        #expect(!harness.host.isOpen)
        let closes = harness.events.compactMap { event -> String?? in
            if case .transportClosed(let reason) = event { return .some(reason) }
            return nil
        }
        #expect(closes == [.some("unplugged")])

        // After that, everything fails at once.
        let late = Outcome<Result<HCILERand.ReturnParameters, HostError>>()
        harness.host.send(HCILERand(), completion: late.handler)
        #expect(late.value.flatMap(errorCode) == .transportClosed)
        #expect(harness.host.links.isEmpty)
    }
}
