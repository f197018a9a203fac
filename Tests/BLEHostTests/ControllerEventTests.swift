import BLECore
import BLEHCI
import BLEHost
import BLETransport
import Testing

/// Controller events the host answers on its own, and input it must survive without trapping.
@Suite struct ControllerEventTests {
    @Test func centralLinkAsksForTheLongestDataLengthWhenSupported() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(1, role: .central)
        let command = try #require(harness.controller.commands.first { $0.opcode == .leSetDataLength })
        let set = try HCILESetDataLength(packet: command)
        #expect(set.handle == ConnectionHandle(1))
        #expect(set.txOctets == 251)
        #expect(set.txTime == 2120)
    }

    @Test func noDataLengthRequestWhenUnsupported() throws {
        var profile = ControllerProfile()
        profile.supportedCommands = HCISupportedCommands(
            supporting: HCISupportedCommands.knownOpcodes.filter { $0 != .leSetDataLength })
        let harness = HostHarness(profile: profile)
        try harness.started()
        harness.connect(1, role: .central)
        #expect(!harness.controller.opcodes.contains(.leSetDataLength))
    }

    @Test func bumbleRefusingSetDataLengthLeavesTheLinkUsable() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.answer(.leSetDataLength, with: .completeFailure(.unknownCommand))  // status byte only
        harness.connectCentral(1)
        let read = Outcome<Result<[UInt8], HostError>>()
        harness.host.read(on: ConnectionHandle(1), attribute: AttributeHandle(3), completion: read.handler)
        harness.controller.deliverL2CAP(handle: ConnectionHandle(1), channel: .att, [0x0B, 0x42])
        #expect(try read.value?.get() == [0x42])
    }

    @Test func remoteConnectionParameterRequestIsAccepted() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(1, role: .central)
        harness.controller.clear()
        harness.controller.deliver(
            .remoteConnectionParameterRequest(
                .init(
                    handle: ConnectionHandle(1), intervalMin: 12, intervalMax: 24, maxLatency: 4, timeout: 400)))
        let command = try #require(harness.controller.commands.first)
        let reply = try HCILERemoteConnectionParameterRequestReply(packet: command)
        #expect(reply.handle == ConnectionHandle(1))
        #expect(reply.intervalMin == 12 && reply.intervalMax == 24 && reply.maxLatency == 4 && reply.timeout == 400)
    }

    @Test func longTermKeyRequestIsRefusedWithoutABond() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(2, role: .peripheral)
        harness.controller.clear()
        harness.controller.deliver(
            .longTermKeyRequest(.init(handle: ConnectionHandle(2), randomNumber: 0, encryptedDiversifier: 0)))
        let command = try #require(harness.controller.commands.first)
        #expect(try HCILELongTermKeyRequestNegativeReply(packet: command).handle == ConnectionHandle(2))
    }

    @Test func connectionUpdateCompleteUpdatesTheLink() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(1, role: .central)
        harness.controller.deliver(
            .connectionUpdateComplete(
                .init(
                    handle: ConnectionHandle(1), connectionInterval: 40, peripheralLatency: 2, supervisionTimeout: 300))
        )
        let link = try #require(harness.host.links.first)
        #expect(link.interval == 40 && link.latency == 2 && link.supervisionTimeout == 300)
    }

    @Test func malformedInputDoesNotTrap() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)
        let link = ConnectionHandle(1)

        // A Command Complete too short to carry an opcode, and a truncated Disconnection Complete.
        harness.controller.pipe.deliverToHost(.event(HCIEventPacket(code: .commandComplete, parameters: [0x01])))
        harness.controller.pipe.deliverToHost(
            .event(HCIEventPacket(code: .disconnectionComplete, parameters: [0x00, 0x01])))
        // A continuing fragment with no start, an L2CAP header cut short, an L2CAP length beyond the data
        // followed by a new start, an empty ATT PDU, a truncated signalling command.
        harness.controller.deliverACL(handle: link, boundary: .continuing, [0x01, 0x02])
        harness.controller.deliverACL(handle: link, boundary: .firstFlushable, [0x05])
        harness.controller.deliverACL(handle: link, boundary: .firstFlushable, [0xFF, 0x00, 0x04, 0x00, 0x0A])
        harness.controller.deliverL2CAP(handle: link, channel: .att, [])
        harness.controller.deliverL2CAP(handle: link, channel: .leSignaling, [0x12, 0x01, 0x08, 0x00, 0x06])
        harness.controller.pipe.deliverToHost(.other(type: 0x05, bytes: [1, 2, 3]))

        #expect(harness.host.isOpen)
        #expect(harness.host.links.count == 1)

        // The link still works: a read goes out and completes.
        harness.controller.clear()
        let read = Outcome<Result<[UInt8], HostError>>()
        harness.host.read(on: link, attribute: AttributeHandle(3), completion: read.handler)
        harness.completed(1, harness.controller.acl.count)
        harness.controller.deliverL2CAP(handle: link, channel: .att, [0x0B, 0x01])
        // The empty ATT PDU may have closed the bearer (a protocol violation); either way the host answered
        // the read, it did not hang.
        #expect(read.value != nil)
    }

    @Test func scanningStillOnFromAnotherHostIsStoppedAndStartedAgain() throws {
        let harness = HostHarness()
        try harness.started()
        let disallowedOnce = Outcome<Bool>()
        harness.controller.respond { command in
            // The first LE Set Scan Parameters is refused as while scanning; the rest answered by default.
            guard command.opcode == .leSetScanParameters, disallowedOnce.value == nil else { return nil }
            disallowedOnce.set(true)
            return .completeFailure(.commandDisallowed)
        }
        let started = Outcome<Result<Void, HostError>>()
        harness.host.startScan(ScanParameters(), completion: started.handler)
        harness.controller.pump()
        harness.controller.pump()
        harness.controller.pump()
        harness.controller.pump()
        #expect((try? started.value?.get()) != nil)
        let scanCommands = harness.controller.opcodes.suffix(4)
        #expect(
            Array(scanCommands) == [.leSetScanParameters, .leSetScanEnable, .leSetScanParameters, .leSetScanEnable])
        let last = try HCILESetScanEnable(packet: try #require(harness.controller.commands.last))
        #expect(last.enable)
    }

    @Test func extendedReportsOfLegacyPDUsAreReportedWhileScanning() throws {
        let harness = HostHarness()
        try harness.started()
        let started = Outcome<Result<Void, HostError>>()
        harness.host.startScan(ScanParameters(), completion: started.handler)
        for _ in 0..<3 { harness.controller.pump() }
        #expect((try? started.value?.get()) != nil)
        let peer = BluetoothAddress(string: "C0:11:22:33:44:55", type: .randomDevice)!
        harness.controller.deliver(
            .extendedAdvertisingReport(
                .init(reports: [
                    .init(eventType: [.legacy, .connectable, .scannable], address: peer, rssi: -40, data: [2, 1, 6]),
                    .init(
                        eventType: [.legacy, .scanResponse, .connectable, .scannable], address: peer, rssi: -41,
                        data: []),
                    .init(eventType: [.legacy], address: peer, rssi: 127, data: []),
                ])))
        let reports = harness.events.compactMap { event -> AdvertisingReport? in
            if case .advertisingReport(let r) = event { return r }
            return nil
        }
        #expect(reports.map(\.kind) == [.connectableUndirected, .scanResponse, .nonConnectableUndirected])
        #expect(reports.map(\.rssi) == [-40, -41, nil])
        #expect(reports[0].data == [2, 1, 6])
    }
}
