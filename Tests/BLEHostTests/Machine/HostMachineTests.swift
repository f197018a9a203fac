import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Testing

/// The host machine alone: events in, actions out, with no transport, no scheduler and no driver.
@Suite struct HostMachineTests {
    static let link = ConnectionHandle(1)

    // MARK: Start-up and commands

    @Test func startUpSendsOneCommandAtATimeAndCompletesWithWhatTheControllerSaid() throws {
        var rig = MachineRig()
        rig.profile.leBufferLength = 27
        rig.profile.leBufferCount = 3
        let id = rig.request(.start)
        // Nothing but Reset until Reset is answered.
        #expect(rig.opcodes == [.reset])
        rig.answerCommands()
        #expect(
            Array(rig.opcodes.prefix(6)) == [
                .reset, .leSetScanEnable, .leSetAdvertisingEnable, .readLocalVersionInformation,
                .readLocalSupportedCommands, .readBDADDR,
            ])
        guard case .success(.controller(let info)) = rig.result(of: id) else {
            Issue.record("start-up: \(String(describing: rig.result(of: id)))")
            return
        }
        #expect(info.address == rig.profile.address)
        #expect(info.leBufferLength == 27 && info.leBufferCount == 3)
        #expect(rig.machine.info == info)
        #expect(rig.completions(of: id) == 1)
        // Every command timer was cancelled when its command was answered.
        #expect(rig.runningTimers.isEmpty)
    }

    @Test func startUpFailsWhenResetIsRefused() {
        var rig = MachineRig()
        let id = rig.request(.start)
        rig.answerNext(with: .completeFailure(.hardwareFailure))
        guard case .failure(let error) = rig.result(of: id) else {
            Issue.record("expected a failure, got \(String(describing: rig.result(of: id)))")
            return
        }
        #expect(error.code == .hci(.hardwareFailure))
        #expect(error.message.contains("initialisation failed"))
        #expect(rig.opcodes == [.reset])
    }

    @Test func aBusyControllerSaysSo() {
        var rig = MachineRig()
        let id = rig.request(.start)
        rig.answerNext(with: .completeFailure(.controllerBusy))
        guard case .failure(let error) = rig.result(of: id) else {
            Issue.record("expected a failure, got \(String(describing: rig.result(of: id)))")
            return
        }
        #expect(error.hciStatus == .controllerBusy)
        #expect(error.message.hasPrefix("the controller is busy (another host is using it)"))
    }

    @Test func advertisingDataLongerThanALegacyPDUIsRefusedBeforeAnythingIsSent() throws {
        var rig = MachineRig()
        try rig.started()
        for (data, scanResponse) in [
            ([UInt8](repeating: 0, count: 32), [UInt8]()), ([], [UInt8](repeating: 0, count: 40)),
        ] {
            let id = rig.request(.startAdvertising(AdvertisingParameters(), data: data, scanResponse: scanResponse))
            guard case .failure(let error) = rig.result(of: id) else {
                Issue.record("expected a refusal, got \(String(describing: rig.result(of: id)))")
                continue
            }
            #expect(error.code == .invalidParameters)
            #expect(error.message.contains("at most 31 octets"))
        }
        #expect(rig.sent.isEmpty)
    }

    @Test func commandsWaitForTheControllersCredit() throws {
        var rig = MachineRig()
        try rig.started()
        let first = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        let second = rig.request(.command(HCIReadBDADDR().packet))
        #expect(rig.opcodes == [.readRSSI])
        rig.answerNext()
        #expect(rig.opcodes == [.readRSSI, .readBDADDR])
        rig.answerNext()
        #expect(rig.completions(of: first) == 1 && rig.completions(of: second) == 1)
    }

    @Test func anUnansweredCommandTimesOutByTimerIdAndItsLateAnswerIsDiscarded() throws {
        var rig = MachineRig()
        try rig.started()
        let lost = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        let timer = try #require(rig.runningTimers.first)
        rig.fire(timer)
        guard case .failure(let error) = rig.result(of: lost) else {
            Issue.record("expected a timeout")
            return
        }
        #expect(error.code == .commandTimeout)
        // The credit came back; with nothing else in flight, the host spends it asking whether the controller is
        // alive (UnresponsiveControllerTests), and a new command with the same opcode waits for the next credit.
        let next = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        #expect(rig.opcodes == [.readRSSI, .readLocalVersionInformation])
        // The late answer to the lost command gives a credit back, but it must not complete the new one.
        rig.answerNext()
        #expect(rig.opcodes == [.readRSSI, .readLocalVersionInformation, .readRSSI])
        #expect(rig.result(of: next) == nil)
        #expect(rig.answerNext() == .readLocalVersionInformation)
        #expect(rig.result(of: next) == nil)
        rig.answerNext()
        #expect(rig.completions(of: next) == 1)
        #expect(rig.completions(of: lost) == 1)
    }

    @Test func aTimerThatFiresAfterItWasCancelledChangesNothing() throws {
        var rig = MachineRig()
        try rig.started()
        rig.request(.command(HCIReadBDADDR().packet))
        let timer = try #require(rig.runningTimers.first)
        rig.answerNext()
        #expect(rig.actions.contains { if case .cancelTimer(timer) = $0 { true } else { false } })
        let before = rig.actions.count
        rig.fire(timer)
        rig.fire(HostTimerID(rawValue: 9_999))
        #expect(rig.actions.count == before)
    }

    // MARK: Links and GATT

    @Test func aCentralLinkOffersItsMTUAtOnceAndAReadCompletesWithTheValue() throws {
        var rig = MachineRig()
        rig.profile.leBufferLength = 251
        try rig.started()
        rig.connect(1, role: .central)
        #expect(rig.events.first == .connected(rig.machine.linkInfos[0]))
        // Exchange MTU Request offering 517, with its transaction timer.
        #expect(rig.att(on: Self.link) == [[0x02, 0x05, 0x02]])
        #expect(rig.runningTimers.count >= 1)
        rig.feedACL(Self.link, channel: 0x0004, [0x03, 0x00, 0x01])  // Exchange MTU Response: 256
        #expect(rig.events.contains(.mtuChanged(Self.link, mtu: 256)))

        let read = rig.request(.gatt(.read(AttributeHandle(0x0003)), on: Self.link))
        #expect(rig.att(on: Self.link).last == [0x0A, 0x03, 0x00])  // Read Request, handle 3
        rig.feedACL(Self.link, channel: 0x0004, [0x0B, 0x2A, 0x2B])  // Read Response
        #expect(rig.result(of: read) == .success(.gatt(.value([0x2A, 0x2B]))))
        // The ATT transaction timer stopped with the response.
        let attTimers = rig.actions.compactMap { if case .startTimer(let id, .seconds(30)) = $0 { id } else { nil } }
        #expect(attTimers.allSatisfy { !rig.runningTimers.contains($0) })
    }

    /// A controller that reports a new connection on a live link's handle lost that link without a Disconnection
    /// Complete: the old link ends (its read fails, the apps hear of it) before the new one is announced.
    @Test func aConnectionOnAHandleInUseEndsTheLinkThatHadIt() throws {
        var rig = MachineRig()
        rig.profile.leBufferLength = 251
        try rig.started()
        rig.connect(1, role: .central)
        rig.feedACL(Self.link, channel: 0x0004, [0x03, 0x00, 0x01])  // Exchange MTU Response: 256
        let read = rig.request(.gatt(.read(AttributeHandle(0x0003)), on: Self.link))
        #expect(rig.result(of: read) == nil)
        let before = rig.events.count
        rig.connect(1, role: .peripheral)
        guard case .failure(let error) = rig.result(of: read) else {
            Issue.record("the read on the lost link did not fail")
            return
        }
        #expect(error.code == .disconnected)
        let after = Array(rig.events.dropFirst(before))
        #expect(after.first == .disconnected(Self.link, reason: .unspecifiedError))
        #expect(after.contains { if case .connected(let info) = $0 { info.role == .peripheral } else { false } })
        #expect(rig.machine.linkInfos.count == 1 && rig.machine.linkInfos[0].role == .peripheral)
        #expect(rig.machine.counters.reusedConnectionHandles == 1)
    }

    @Test func aReadOnNoLinkFailsAtOnce() throws {
        var rig = MachineRig()
        try rig.started()
        let read = rig.request(.gatt(.read(AttributeHandle(0x0003)), on: ConnectionHandle(9)))
        guard case .failure(let error) = rig.result(of: read) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == .invalidState)
        #expect(rig.sent.isEmpty)
    }

    @Test func aLinkThatGoesDownFailsItsOperationsBeforeItIsReportedDown() throws {
        var rig = MachineRig()
        try rig.started()
        rig.connect(1, role: .central)
        rig.answerCommands()
        let read = rig.request(.gatt(.read(AttributeHandle(0x0003)), on: Self.link))
        rig.feed(.disconnectionComplete(.init(handle: Self.link, reason: .connectionTimeout)))
        let failed = rig.actions.firstIndex {
            if case .complete(read, .failure(let error)) = $0 { error.code == .disconnected } else { false }
        }
        let down = rig.actions.firstIndex { $0 == .emit(.disconnected(Self.link, reason: .connectionTimeout)) }
        #expect(failed != nil && down != nil && failed! < down!)
        #expect(rig.completions(of: read) == 1)
        #expect(rig.machine.linkInfos.isEmpty)
        // The link's timers were cancelled with it.
        #expect(rig.runningTimers.isEmpty)
    }

    @Test func fragmentsWaitForControllerBuffersAndTakeTurnsBetweenLinks() throws {
        var rig = MachineRig()
        rig.profile.leBufferLength = 27
        rig.profile.leBufferCount = 2
        try rig.started()
        for handle in [1, 2] as [UInt16] {
            rig.connect(handle, role: .central)
            rig.feedACL(ConnectionHandle(handle), channel: 0x0004, [0x03, 0x05, 0x02])  // Exchange MTU Response: 517
        }
        rig.answerCommands()
        rig.forget()
        // Both buffers hold the MTU requests. Two writes, one per link, each a 67-byte B-frame cut into three
        // fragments of at most 27 bytes, wait for them.
        let value = [UInt8](repeating: 0xAB, count: 60)
        for handle in [1, 2] as [UInt16] {
            rig.request(.gatt(.write(AttributeHandle(0x0010), value: value), on: ConnectionHandle(handle)))
        }
        #expect(rig.acl.isEmpty)
        let both = [1, 2].map { handle in
            HCIEvent.NumberOfCompletedPackets.Entry(handle: ConnectionHandle(handle), numCompletedPackets: 1)
        }
        // Two buffers free at a time: one fragment per link, taking turns.
        rig.feed(.numberOfCompletedPackets(.init(entries: both)))
        #expect(rig.acl.map(\.handle) == [1, 2].map { ConnectionHandle($0) })
        rig.feed(.numberOfCompletedPackets(.init(entries: both)))
        #expect(rig.acl.map(\.handle) == [1, 2, 1, 2].map { ConnectionHandle($0) })
        rig.feed(.numberOfCompletedPackets(.init(entries: both)))
        #expect(rig.acl.count == 6)
        #expect(rig.acl.allSatisfy { $0.data.count <= 27 })
        #expect(rig.acl.reduce(0) { $0 + $1.data.count } == 2 * (4 + 3 + 60))
    }

    @Test func aNotificationToASubscriberIsRefusedWhenItsQueueIsFullAndReadyFollows() throws {
        var rig = MachineRig { $0.notificationQueueDepth = 1 }
        rig.profile.leBufferCount = 1
        try rig.started()
        let definition = GATTServiceDefinition(
            uuid: BluetoothUUID(UInt16(0x180D)),
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: BluetoothUUID(UInt16(0x2A37)), properties: [.notify], permissions: [.readable], value: [])
            ])
        let (published, _) = rig.machine.addService(definition)
        let value = try published.get().characteristicValueHandles[0]
        rig.connect(1, role: .peripheral)
        // The central enables notifications: Write Request to the CCCD (the handle after the value).
        rig.feedACL(Self.link, channel: 0x0004, [0x12] + le16(value.rawValue + 1) + [0x01, 0x00])
        rig.feed(.numberOfCompletedPackets(.init(entries: [.init(handle: Self.link, numCompletedPackets: 1)])))
        #expect(rig.events.contains(.subscriptionChanged(Self.link, attribute: value, notify: true, indicate: false)))

        let (first, firstActions) = rig.machine.notify(attribute: value, value: [1], to: nil)
        rig.record(firstActions)
        let (second, secondActions) = rig.machine.notify(attribute: value, value: [2], to: nil)
        rig.record(secondActions)
        let (third, thirdActions) = rig.machine.notify(attribute: value, value: [3], to: nil)
        rig.record(thirdActions)
        #expect(first && second && !third)
        #expect(!rig.events.contains(.readyToNotify))
        rig.feed(.numberOfCompletedPackets(.init(entries: [.init(handle: Self.link, numCompletedPackets: 1)])))
        #expect(rig.events.contains(.readyToNotify))
    }

    @Test func aWriteCommandIsDeliveredWhenTheControllerReportsItsLastPacketCompleted() throws {
        var rig = MachineRig()
        rig.profile.leBufferLength = 27
        rig.profile.leBufferCount = 4
        try rig.started()
        rig.connect(1, role: .central)
        rig.feedACL(Self.link, channel: 0x0004, [0x03, 0x05, 0x02])  // Exchange MTU Response: 517
        rig.answerCommands()
        rig.feed(.numberOfCompletedPackets(.init(entries: [.init(handle: Self.link, numCompletedPackets: 1)])))
        rig.forget()
        // 40 bytes: a 47-byte B-frame, two fragments.
        let delivery = HostOperationID(rawValue: 900)
        let (accepted, actions) = rig.machine.writeWithoutResponse(
            on: Self.link, attribute: AttributeHandle(0x0010), value: [UInt8](repeating: 1, count: 40),
            delivery: delivery)
        rig.record(actions)
        #expect(accepted)
        #expect(rig.acl.count == 2)
        #expect(rig.result(of: delivery) == nil)
        // The first fragment completed: not yet.
        rig.feed(.numberOfCompletedPackets(.init(entries: [.init(handle: Self.link, numCompletedPackets: 1)])))
        #expect(rig.result(of: delivery) == nil)
        rig.feed(.numberOfCompletedPackets(.init(entries: [.init(handle: Self.link, numCompletedPackets: 1)])))
        #expect(rig.result(of: delivery) == .success(.done))

        // One the link loses before the controller reports it fails, once.
        let lost = HostOperationID(rawValue: 901)
        let (again, more) = rig.machine.writeWithoutResponse(
            on: Self.link, attribute: AttributeHandle(0x0010), value: [2], delivery: lost)
        rig.record(more)
        #expect(again)
        rig.feed(.disconnectionComplete(.init(handle: Self.link, reason: .connectionTimeout)))
        #expect(rig.completions(of: lost) == 1)
        #expect(
            rig.result(of: lost).map { if case .failure(let e) = $0 { e.code == .disconnected } else { false } } == true
        )
    }

    @Test func aNotificationToTwoCentralsIsDeliveredWhenBothPacketsAreCompleted() throws {
        var rig = MachineRig()
        rig.profile.leBufferCount = 8
        try rig.started()
        let definition = GATTServiceDefinition(
            uuid: BluetoothUUID(UInt16(0x180D)),
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: BluetoothUUID(UInt16(0x2A37)), properties: [.notify, .indicate], permissions: [.readable],
                    value: [])
            ])
        let (published, _) = rig.machine.addService(definition)
        let value = try published.get().characteristicValueHandles[0]
        // Central 1 subscribes to notifications, central 2 to indications.
        for (handle, configuration) in [(UInt16(1), UInt8(0x01)), (2, 0x02)] {
            rig.connect(handle, role: .peripheral)
            rig.feedACL(
                ConnectionHandle(handle), channel: 0x0004, [0x12] + le16(value.rawValue + 1) + [configuration, 0])
        }
        rig.answerCommands()
        rig.forget()
        let delivery = HostOperationID(rawValue: 700)
        let (sent, actions) = rig.machine.notify(attribute: value, value: [9], to: nil, delivery: delivery)
        rig.record(actions)
        #expect(sent)
        // The notification's packet completed: the indication is still unconfirmed.
        rig.feed(
            .numberOfCompletedPackets(.init(entries: [.init(handle: ConnectionHandle(1), numCompletedPackets: 2)])))
        #expect(rig.result(of: delivery) == nil)
        rig.feedACL(ConnectionHandle(2), channel: 0x0004, [0x1E])  // Handle Value Confirmation
        #expect(rig.result(of: delivery) == .success(.done))
        #expect(rig.completions(of: delivery) == 1)

        // A value whose indication's link goes down before the confirmation fails, once.
        let lost = HostOperationID(rawValue: 701)
        let (again, more) = rig.machine.notify(attribute: value, value: [10], to: nil, delivery: lost)
        rig.record(more)
        #expect(again)
        rig.feed(.disconnectionComplete(.init(handle: ConnectionHandle(2), reason: .connectionTimeout)))
        #expect(rig.completions(of: lost) == 1)
        #expect(rig.result(of: lost).map { if case .failure = $0 { true } else { false } } == true)
    }

    @Test func aResponseCompletesWhenHandedToTheBearerAndAnUnknownOneFails() throws {
        var rig = MachineRig()
        try rig.started()
        let definition = GATTServiceDefinition(
            uuid: BluetoothUUID(UInt16(0x180F)),
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: BluetoothUUID(UInt16(0x2A19)), properties: [.read], permissions: [.readable], value: nil)
            ])
        let (published, _) = rig.machine.addService(definition)
        let value = try published.get().characteristicValueHandles[0]
        rig.connect(1, role: .peripheral)
        rig.feedACL(Self.link, channel: 0x0004, [0x0A] + le16(value.rawValue))  // Read Request
        let request = try #require(
            rig.events.compactMap { if case .serverRead(let id, _, _, _) = $0 { id } else { nil } }.first)
        let answered = HostOperationID(rawValue: 800)
        rig.record(rig.machine.respond(to: request, result: .success, value: [88], id: answered))
        #expect(rig.result(of: answered) == .success(.done))
        #expect(rig.att(on: Self.link).last == [0x0B, 88])
        let again = HostOperationID(rawValue: 801)
        rig.record(rig.machine.respond(to: request, result: .success, value: [88], id: again))
        #expect(rig.result(of: again).map { if case .failure = $0 { true } else { false } } == true)
    }

    // MARK: Nothing dropped in silence

    @Test func aMalformedEventIsLoggedAndCounted() throws {
        var rig = MachineRig()
        try rig.started()
        // Command Complete with one byte of parameters: too short to decode.
        rig.record(rig.machine.received(.event(HCIEventPacket(code: .commandComplete, parameters: [0x01]))))
        #expect(rig.machine.counters.malformedEvents == 1)
        let logged = rig.actions.compactMap { if case .log(let entry) = $0 { entry } else { nil } }
        #expect(logged.count == 1)
        #expect(logged.first?.level == .warning)
        #expect(logged.first?.message.contains("malformed HCI event") == true)
    }

    @Test func aLateAnswerAndDataForNoLinkAreLoggedAndCounted() throws {
        var rig = MachineRig()
        try rig.started()
        rig.request(.command(HCIReadBDADDR().packet))
        let timer = try #require(rig.runningTimers.first)
        rig.fire(timer)
        #expect(rig.machine.counters.commandTimeouts == 1)
        rig.answerNext()  // the late answer
        #expect(rig.machine.counters.unexpectedCommandAnswers == 1)
        rig.feedACL(ConnectionHandle(0x0042), channel: 0x0004, [0x0A, 0x03, 0x00])
        #expect(rig.machine.counters.droppedACLPackets == 1)
        let logged = rig.actions.compactMap { if case .log(let entry) = $0 { entry } else { nil } }
        #expect(logged.map(\.level) == [.warning, .notice, .notice])
        #expect(logged.last?.connection == ConnectionHandle(0x0042))
    }

    @Test func aWriteCommandOurServerRefusesIsLoggedAndCounted() throws {
        var rig = MachineRig()
        try rig.started()
        rig.connect(1, role: .peripheral)
        // A Write Command to the GAP Device Name, which is read-only.
        rig.feedACL(Self.link, channel: 0x0004, [0x52, 0x03, 0x00, 0x41])
        #expect(rig.machine.counters.refusedWriteCommands == 1)
        let logged = rig.actions.compactMap { if case .log(let entry) = $0 { entry } else { nil } }
        #expect(logged.contains { $0.connection == Self.link && $0.message.contains("Write Command") })
    }

    // MARK: Scanning

    @Test func aScanStoppedAtOnceLeavesOnlyTheParametersOnTheWireAndNoReportsPassUp() throws {
        var rig = MachineRig()
        try rig.started()
        let start = rig.request(.startScan(ScanParameters()))
        let stop = rig.request(.stopScan)
        rig.answerCommands()
        #expect(rig.opcodes == [.leSetScanParameters])
        #expect(
            rig.result(of: start).map { if case .failure(let e) = $0 { e.code == .cancelled } else { false } } == true)
        #expect(rig.result(of: stop) == .success(.done))
        rig.feed(
            .advertisingReport(
                .init(reports: [
                    .init(
                        eventType: .advInd, address: HostHarness.peerAddress, data: [0x02, 0x01, 0x06], rssi: -40)
                ])))
        #expect(!rig.events.contains { if case .advertisingReport = $0 { true } else { false } })
    }

    @Test func aScanPassesReportsUpUntilItIsStopped() throws {
        var rig = MachineRig()
        try rig.started()
        let start = rig.request(.startScan(ScanParameters()))
        rig.answerCommands()
        #expect(rig.opcodes == [.leSetScanParameters, .leSetScanEnable])
        #expect(rig.result(of: start) == .success(.done))
        let report = HCILEMetaEvent.advertisingReport(
            .init(reports: [
                .init(eventType: .advInd, address: HostHarness.peerAddress, data: [0x02, 0x01, 0x06], rssi: -40)
            ]))
        rig.feed(report)
        #expect(rig.events.count == 1)
        rig.request(.stopScan)
        rig.feed(report)
        #expect(rig.events.count == 1)
    }

    // MARK: The transport closing

    @Test func theTransportClosingFailsEverythingPendingThenRefusesEveryRequest() throws {
        var rig = MachineRig()
        try rig.started()
        rig.connect(1, role: .central)
        let read = rig.request(.gatt(.read(AttributeHandle(0x0003)), on: Self.link))
        let command = rig.request(.command(HCIReadBDADDR().packet))
        let scan = rig.request(.startScan(ScanParameters()))
        rig.close(reason: "unplugged")
        for id in [read, command, scan] {
            #expect(rig.completions(of: id) == 1)
            guard case .failure(let error) = rig.result(of: id) else {
                Issue.record("\(id) did not fail")
                continue
            }
            #expect(error.code == .transportClosed)
        }
        #expect(rig.events.last == .transportClosed("unplugged"))
        #expect(!rig.events.contains { if case .disconnected = $0 { true } else { false } })
        #expect(rig.runningTimers.isEmpty)

        rig.forget()
        let late = rig.request(.startAdvertising(AdvertisingParameters(), data: [], scanResponse: []))
        #expect(rig.sent.isEmpty)
        #expect(
            rig.result(of: late).map { if case .failure(let e) = $0 { e.code == .transportClosed } else { false } }
                == true)
        rig.close(reason: "again")
        #expect(rig.events.isEmpty)
    }
}
