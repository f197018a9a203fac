import BLECore
import BLEHCI
import Testing

@testable import BLEHost

/// A controller that stops answering commands: one unanswered command fails alone when the controller answers
/// the probe that follows (some controllers ignore commands they do not support); two in a row, and the host
/// resets the controller; a restart that is not answered is tried again with a growing wait, until it is, or
/// the transport closes.
@Suite struct UnresponsiveControllerTests {
    static let link = ConnectionHandle(0x0040)

    /// Fires the last timer started and not cancelled or fired yet.
    static func fireLast(_ rig: inout MachineRig, fired: inout Set<HostTimerID>) throws {
        let timer = try #require(rig.runningTimers.last { !fired.contains($0) })
        fired.insert(timer)
        rig.fire(timer)
    }

    /// The delay of the last timer started.
    static func lastDelay(_ rig: MachineRig) -> Duration? {
        rig.actions.reversed().lazy.compactMap { if case .startTimer(_, let delay) = $0 { delay } else { nil } }.first
    }

    static func resetting(_ rig: MachineRig) -> [String] {
        rig.events.compactMap { if case .controllerResetting(let reason) = $0 { reason } else { nil } }
    }

    static func restarted(_ rig: MachineRig) -> [Result<ControllerInfo, HostError>] {
        rig.events.compactMap { if case .controllerRestarted(let result) = $0 { result } else { nil } }
    }

    @Test func aCommandALiveControllerIgnoresFailsAloneAfterAnAnsweredProbe() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        for round in 1...3 {
            let lost = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
            rig.answerNext(with: .silent)  // as Bumble's controller does with Read RSSI
            try Self.fireLast(&rig, fired: &fired)
            guard case .failure(let error) = rig.result(of: lost) else {
                Issue.record("round \(round): the command did not fail")
                return
            }
            #expect(error.code == .commandTimeout)
            // Nothing else in flight tells whether the controller is alive: the host asks it.
            #expect(rig.opcodes.suffix(2) == [.readRSSI, .readLocalVersionInformation])
            #expect(rig.answerNext() == .readLocalVersionInformation)
        }
        #expect(Self.resetting(rig).isEmpty)
        #expect(rig.machine.counters.controllerResets == 0)
        #expect(rig.machine.counters.commandTimeouts == 3)
    }

    /// Two ignored commands queued one behind the other: each fails alone, since the probe goes first after each
    /// timeout and is answered.
    @Test func queuedCommandsALiveControllerIgnoresDoNotResetIt() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        let first = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        let second = rig.request(.command(HCIReadRSSI(handle: ConnectionHandle(0x0041)).packet))
        #expect(rig.answerNext(with: .silent) == .readRSSI)
        try Self.fireLast(&rig, fired: &fired)
        #expect(rig.completions(of: first) == 1)
        #expect(rig.answerNext() == .readLocalVersionInformation, "the probe goes before the queued command")
        #expect(rig.answerNext(with: .silent) == .readRSSI)
        try Self.fireLast(&rig, fired: &fired)
        #expect(rig.completions(of: second) == 1)
        #expect(rig.answerNext() == .readLocalVersionInformation)
        #expect(Self.resetting(rig).isEmpty)
        #expect(rig.opcodes == [.readRSSI, .readLocalVersionInformation, .readRSSI, .readLocalVersionInformation])
    }

    @Test func twoCommandsUnansweredInARowResetTheController() throws {
        var rig = MachineRig()
        try rig.started()
        rig.connect(0x40, role: .central)
        rig.answerCommands()
        rig.forget()
        var fired: Set<HostTimerID> = []
        let lost = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        rig.answerNext(with: .silent)
        try Self.fireLast(&rig, fired: &fired)
        rig.answerNext(with: .silent)  // the probe
        #expect(Self.resetting(rig).isEmpty)
        try Self.fireLast(&rig, fired: &fired)

        #expect(rig.completions(of: lost) == 1)
        #expect(
            Self.resetting(rig) == [
                "the controller stopped answering commands (HCI_Read_RSSI (0x1405) and "
                    + "HCI_Read_Local_Version_Information (0x1001) got no answer within 2.0 seconds) and is being reset"
            ])
        #expect(rig.machine.linkInfos.isEmpty, "the reset controller's links are gone")
        #expect(rig.machine.counters.controllerResets == 1)
        #expect(rig.opcodes.last == .reset)
        rig.answerCommands()
        #expect(Self.restarted(rig).count == 1)
        #expect((try? Self.restarted(rig).first?.get()) != nil)
        // Every timer ended: none left running after the restart.
        #expect(rig.runningTimers.allSatisfy(fired.contains))
    }

    @Test func aRestartNotAnsweredIsTriedAgainWithAGrowingWait() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        try Self.resetBySilence(&rig, fired: &fired)
        #expect(Self.resetting(rig).count == 1)

        var waits: [Duration] = []
        for _ in 0..<9 {
            // HCI_Reset goes unanswered: the restart fails; the host waits, then tries again.
            #expect(rig.answerNext(with: .silent) == .reset)
            try Self.fireLast(&rig, fired: &fired)
            waits.append(try #require(Self.lastDelay(rig)))
            try Self.fireLast(&rig, fired: &fired)
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 32, 32, 32].map { Duration.seconds($0) })
        let failures = Self.restarted(rig)
        #expect(failures.count == 9)
        #expect(failures.allSatisfy { if case .failure(let e) = $0 { e.code == .commandTimeout } else { false } })
        #expect(Self.resetting(rig).count == 1, "a restart is tried again, not a new reset")

        // The controller answers at last.
        rig.answerCommands()
        #expect((try? Self.restarted(rig).last?.get()) != nil)
        #expect(rig.runningTimers.allSatisfy(fired.contains))
        // It is trusted again: a single unanswered command later fails alone.
        rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        rig.answerNext(with: .silent)
        try Self.fireLast(&rig, fired: &fired)
        #expect(rig.answerNext() == .readLocalVersionInformation)
        #expect(Self.resetting(rig).count == 1)
    }

    @Test func theTransportClosingStopsTheTries() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        try Self.resetBySilence(&rig, fired: &fired)
        rig.answerNext(with: .silent)
        try Self.fireLast(&rig, fired: &fired)  // HCI_Reset's timeout: a retry is waiting
        #expect(rig.runningTimers.filter { !fired.contains($0) }.count == 1)
        rig.close(reason: "unplugged")
        #expect(rig.runningTimers.filter { !fired.contains($0) }.isEmpty, "the retry's timer is cancelled")
        #expect(rig.events.last == .transportClosed("unplugged"))
    }

    /// A Read RSSI goes unanswered, then the probe after it: the host resets the controller (its HCI_Reset is the
    /// last command sent, not yet answered).
    static func resetBySilence(_ rig: inout MachineRig, fired: inout Set<HostTimerID>) throws {
        rig.request(.command(HCIReadRSSI(handle: link).packet))
        rig.answerNext(with: .silent)
        try fireLast(&rig, fired: &fired)
        rig.answerNext(with: .silent)  // the probe
        try fireLast(&rig, fired: &fired)
    }

    /// Resets the controller after two unanswered commands and lets the restart's HCI_Reset go unanswered too:
    /// a retry then waits.
    static func failedRestart(_ rig: inout MachineRig, fired: inout Set<HostTimerID>) throws {
        try resetBySilence(&rig, fired: &fired)
        #expect(rig.answerNext(with: .silent) == .reset)
        try fireLast(&rig, fired: &fired)
        #expect(rig.runningTimers.filter { !fired.contains($0) }.count == 1, "a retry waits")
    }

    /// The scan machine sends again at once when its command fails: the probe still goes first.
    @Test func theProbeGoesBeforeWhatTheTimeoutsOwnerSendsNext() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        rig.request(.startScan(ScanParameters()))
        let first = try #require(rig.opcodes.last)
        rig.answerNext(with: .silent)
        try Self.fireLast(&rig, fired: &fired)
        let after = Array(rig.opcodes.drop { $0 != first }.dropFirst())
        #expect(after.first == .readLocalVersionInformation, "\(after)")
        // The probe unanswered too: two timeouts, and the controller is reset.
        rig.answerNext(with: .silent)
        try Self.fireLast(&rig, fired: &fired)
        #expect(Self.resetting(rig).count == 1)
    }

    /// An answer to a raw Read Local Version Information may still come late: the probe is another command, so
    /// that answer is not taken for the probe's.
    @Test func theProbeIsNotACommandWhoseLateAnswerIsAwaited() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        rig.request(.command(HCIReadLocalVersionInformation().packet))
        rig.answerNext(with: .silent)
        try Self.fireLast(&rig, fired: &fired)
        #expect(rig.opcodes.last == .readBDADDR)
        rig.answerNext()
        #expect(Self.resetting(rig).isEmpty)
    }

    /// While a restart waits to be tried again, a command that times out is not probed (the retry will tell), and
    /// its timeout does not reset the controller a second time.
    @Test func noProbeWhileARestartWaits() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        try Self.failedRestart(&rig, fired: &fired)
        let lost = rig.request(.command(HCIReadRSSI(handle: Self.link).packet))
        #expect(rig.answerNext(with: .silent) == .readRSSI)
        let timer = try #require(rig.runningTimers.last { !fired.contains($0) })
        fired.insert(timer)
        rig.fire(timer)
        #expect(rig.completions(of: lost) == 1)
        #expect(rig.opcodes.last == .readRSSI, "no probe")
        #expect(Self.resetting(rig).count == 1)
    }

    /// The application starts the controller while a restart waits: its start-up decides, and the waiting
    /// restart is dropped (it would reset a controller that works).
    @Test func aStartUpThatSucceedsEndsTheWaitingRestart() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        try Self.failedRestart(&rig, fired: &fired)
        let start = rig.request(.start)
        rig.answerCommands()
        #expect((try? rig.result(of: start)?.get()) != nil)
        #expect(rig.runningTimers.allSatisfy(fired.contains), "the restart's timer is cancelled")
    }

    /// A hardware error with data queued on two links: tearing the first down frees its controller buffers,
    /// and none of the second's packets goes to the controller that is about to be reset.
    @Test func noDataGoesToAFailedControllerWhileItsLinksAreTornDown() throws {
        var rig = MachineRig()
        rig.profile.leBufferLength = 27
        rig.profile.leBufferCount = 1
        try rig.started()
        for handle: UInt16 in [1, 2] {
            rig.connect(handle, role: .central)
            rig.feedACL(ConnectionHandle(handle), channel: 0x0004, [0x03, 0x05, 0x02])  // Exchange MTU Response
        }
        rig.answerCommands()
        // Link 1 holds the only buffer; link 2 has a Write Command queued behind it.
        for handle: UInt16 in [1, 2] {
            let (accepted, actions) = rig.machine.writeWithoutResponse(
                on: ConnectionHandle(handle), attribute: AttributeHandle(0x0010), value: [1], delivery: nil)
            rig.record(actions)
            #expect(accepted)
        }
        let sentBefore = rig.acl.count
        rig.feed(.hardwareError(.init(hardwareCode: 0x07)))
        #expect(rig.acl.count == sentBefore, "ACL data went to the failed controller")
        #expect(Self.resetting(rig).count == 1)
    }

    /// A hardware error while the host's own restart runs: the restart starts over, without a failed restart
    /// reported in between (managers would see the controller off for a moment).
    @Test func aHardwareErrorDuringTheRestartStartsItOverQuietly() throws {
        var rig = MachineRig()
        try rig.started()
        var fired: Set<HostTimerID> = []
        try Self.resetBySilence(&rig, fired: &fired)
        #expect(Self.resetting(rig).count == 1)
        rig.feed(.hardwareError(.init(hardwareCode: 0x07)))
        #expect(Self.resetting(rig).count == 2)
        #expect(Self.restarted(rig).isEmpty, "no failed restart between the two resets")
        rig.answerCommands()
        #expect(Self.restarted(rig).count == 1)
        #expect((try? Self.restarted(rig).first?.get()) != nil)
    }

    @Test func theStartUpsOwnTimeoutIsNotProbed() throws {
        var rig = MachineRig()
        let start = rig.request(.start)
        #expect(rig.answerNext(with: .silent) == .reset)
        let timer = try #require(rig.runningTimers.last)
        rig.fire(timer)
        guard case .failure(let error) = rig.result(of: start) else {
            Issue.record("the start-up did not fail")
            return
        }
        #expect(error.code == .commandTimeout)
        #expect(rig.opcodes == [.reset], "no probe, no reset of its own")
        #expect(Self.resetting(rig).isEmpty)
    }
}
