import BLECore
import BLEHCI
import BLEHost
import Testing

/// HCI command flow control (Core Spec 5.4, Vol 4, Part E, 4.4) and the habits of real controllers
/// (BLEHost.docc/Peers.md): commands never answered, status-only Command Complete, Command Status for a sync command.
@Suite struct CommandFlowTests {
    typealias RandResult = Result<HCILERand.ReturnParameters, HostError>

    @Test func onlyNumHCICommandPacketsInFlight() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.beSilent()

        let results = (0..<4).map { _ in Outcome<RandResult>() }
        for result in results { harness.host.send(HCILERand(), completion: result.handler) }
        // The last answer granted one credit: one command goes out, three wait.
        #expect(harness.controller.opcodes == [.leRand])

        // A completion granting three credits lets the other three go at once.
        harness.controller.deliver(
            .commandComplete(
                .init(
                    numHCICommandPackets: 3, completing: HCILERand.self,
                    returning: .init(randomNumber: 7))))
        #expect(results[0].value.flatMap { try? $0.get().randomNumber } == 7)
        #expect(harness.controller.opcodes.count == 4)
        #expect(results[1].value == nil)
    }

    @Test func zeroCreditsStopTheHostUntilANoOpGrantsMore() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.beSilent()

        let first = Outcome<RandResult>()
        let second = Outcome<Result<HCIReadRSSI.ReturnParameters, HostError>>()
        harness.host.send(HCILERand(), completion: first.handler)
        harness.host.send(HCIReadRSSI(handle: ConnectionHandle(1)), completion: second.handler)
        #expect(harness.controller.opcodes == [.leRand])

        harness.controller.deliver(
            .commandComplete(
                .init(
                    numHCICommandPackets: 0, completing: HCILERand.self,
                    returning: .init(randomNumber: 1))))
        #expect(first.value != nil)
        #expect(harness.controller.opcodes == [.leRand])  // Num_HCI_Command_Packets 0: the host waits

        // Command Complete with opcode 0x0000 only hands out credits (Vol 4, Part E, 7.7.14).
        harness.controller.deliver(.commandComplete(.init(numHCICommandPackets: 1, opcode: .nop, returnParameters: [])))
        #expect(harness.controller.opcodes == [.leRand, .readRSSI])
        #expect(second.value == nil)
    }

    @Test func commandStatusRestoresTheCredit() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.beSilent()

        let disconnect = Outcome<Result<Void, HostError>>()
        let rand = Outcome<RandResult>()
        harness.host.send(HCIDisconnect(handle: ConnectionHandle(3)), completion: disconnect.handler)
        harness.host.send(HCILERand(), completion: rand.handler)
        #expect(harness.controller.opcodes == [.disconnect])

        harness.controller.deliver(
            .commandStatus(.init(status: .success, numHCICommandPackets: 1, opcode: .disconnect)))
        #expect((try? disconnect.value?.get()) != nil)
        #expect(harness.controller.opcodes == [.disconnect, .leRand])
    }

    @Test func unansweredCommandTimesOutAndItsCreditIsReclaimed() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.answer(.readRSSI, with: .silent)  // as Bumble does with several commands

        let lost = Outcome<Result<HCIReadRSSI.ReturnParameters, HostError>>()
        let next = Outcome<RandResult>()
        harness.host.send(HCIReadRSSI(handle: ConnectionHandle(1)), completion: lost.handler)
        harness.host.send(HCILERand(), completion: next.handler)
        harness.controller.pump()
        #expect(harness.controller.opcodes == [.readRSSI])

        let timeout = harness.host.configuration.commandTimeout
        harness.scheduler.advance(by: timeout - .milliseconds(1))
        #expect(lost.value == nil)
        #expect(harness.controller.opcodes == [.readRSSI])

        harness.scheduler.advance(by: .milliseconds(1))
        #expect(lost.value.flatMap(errorCode) == .commandTimeout)
        // The credit came back; the host spends it first on asking whether the controller is alive (Read Local
        // Version Information, UnresponsiveControllerTests), then the queued command goes.
        #expect(harness.controller.opcodes == [.readRSSI, .readLocalVersionInformation])
        harness.controller.pump()
        #expect(harness.controller.opcodes == [.readRSSI, .readLocalVersionInformation, .leRand])
        #expect((try? next.value?.get()) != nil)
    }

    @Test func aLateAnswerDoesNotCompleteANewerCommandWithTheSameOpcode() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.beSilent()

        let lost = Outcome<RandResult>()
        harness.host.send(HCILERand(), completion: lost.handler)
        harness.scheduler.advance(by: harness.host.configuration.commandTimeout)
        #expect(lost.value.flatMap(errorCode) == .commandTimeout)

        let newer = Outcome<RandResult>()
        harness.host.send(HCILERand(), completion: newer.handler)
        // The first command's answer finally arrives: it belongs to the abandoned command.
        harness.controller.deliver(
            .commandComplete(
                .init(
                    numHCICommandPackets: 1, completing: HCILERand.self,
                    returning: .init(randomNumber: 1))))
        #expect(newer.value == nil)
        harness.controller.deliver(
            .commandComplete(
                .init(
                    numHCICommandPackets: 1, completing: HCILERand.self,
                    returning: .init(randomNumber: 2))))
        #expect(newer.value.flatMap { try? $0.get().randomNumber } == 2)
    }

    @Test func shortTimeoutFromConfiguration() throws {
        let harness = HostHarness { $0.commandTimeout = .milliseconds(250) }
        try harness.started()
        harness.controller.beSilent()
        let lost = Outcome<RandResult>()
        harness.host.send(HCILERand(), completion: lost.handler)
        harness.scheduler.advance(by: .milliseconds(249))
        #expect(lost.value == nil)
        harness.scheduler.advance(by: .milliseconds(1))
        #expect(lost.value.flatMap(errorCode) == .commandTimeout)
    }

    @Test func statusOnlyCommandCompleteWithAnErrorFailsTheCommand() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.beSilent()

        let result = Outcome<Result<HCIConnectionHandleReturn, HostError>>()
        harness.host.send(
            HCILESetDataLength(handle: ConnectionHandle(0x40), txOctets: 251, txTime: 2120),
            completion: result.handler)
        // Bumble's answer to LE Set Data Length, byte for byte: Command Complete, 1 credit, opcode 0x2022,
        // status 0x01 and no connection handle.
        harness.controller.deliver(
            .commandComplete(
                try .init(
                    packet: HCIEventPacket(
                        code: .commandComplete, parameters: [0x01, 0x22, 0x20, 0x01]))))
        #expect(result.value.flatMap(errorCode) == .hci(.unknownCommand))
        #expect(harness.host.isOpen)
    }

    @Test func successWithMissingReturnParametersIsAProtocolError() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.answer(.leRand, with: .complete([0x01, 0x02]))  // 2 of 8 bytes
        let result = Outcome<RandResult>()
        harness.host.send(HCILERand(), completion: result.handler)
        harness.controller.pump()
        #expect(result.value.flatMap(errorCode) == .protocolError)

        // The host goes on.
        harness.controller.answerByDefault()
        harness.controller.answer(.leRand, with: .complete(HCILERand.ReturnParameters(randomNumber: 9).bytes))
        let again = Outcome<RandResult>()
        harness.host.send(HCILERand(), completion: again.handler)
        harness.controller.pump()
        #expect(again.value.flatMap { try? $0.get().randomNumber } == 9)
    }

    @Test func commandStatusAnsweringASyncCommand() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.answer(.leRand, with: .status(.unknownCommand))
        let result = Outcome<RandResult>()
        let next = Outcome<Result<HCIReadRSSI.ReturnParameters, HostError>>()
        harness.host.send(HCILERand(), completion: result.handler)
        harness.host.send(HCIReadRSSI(handle: ConnectionHandle(1)), completion: next.handler)
        harness.controller.pump()
        #expect(result.value.flatMap(errorCode) == .hci(.unknownCommand))
        #expect(harness.controller.opcodes == [.leRand, .readRSSI])  // its credit came back
    }

    @Test func commandStatusErrorFailsAnAsyncCommand() throws {
        let harness = HostHarness()
        try harness.started()
        harness.controller.answer(.disconnect, with: .status(.unknownConnectionIdentifier))
        let result = Outcome<Result<Void, HostError>>()
        harness.host.send(HCIDisconnect(handle: ConnectionHandle(9)), completion: result.handler)
        harness.controller.pump()
        #expect(result.value.flatMap(errorCode) == .hci(.unknownConnectionIdentifier))
    }
}

/// The error code of a failed result (nil on success).
func errorCode<T>(_ result: Result<T, HostError>) -> HostError.Code? {
    if case .failure(let error) = result { return error.code }
    return nil
}
