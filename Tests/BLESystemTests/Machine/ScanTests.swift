import BLECore
import BLEHost
import Testing

@testable import BLESystem

/// The scans of every manager as one controller scan (`ScanUnion`, in the system machine): one controller scan
/// for all, each manager told only what its request matches, coalesced per manager, the background rules of
/// IOSRules.md 1.1, 1.2, 1.5, 1.6, scan responses merged once, memory bounded, and every scan ending together
/// when the controller stops.
@Suite struct ScanTests {
    static let background = ScanParameters(active: true, interval: 0x0800, window: 0x0012, filterDuplicates: false)
    static let heartRate = BluetoothUUID(UInt16(0x180D))
    static let battery = BluetoothUUID(UInt16(0x180F))

    static func machine(active: Bool = true) -> SystemMachine {
        SystemMachine(scans: ScanUnion(backgroundParameters: background, active: active))
    }

    static func address(_ n: Int) -> BluetoothAddress {
        BluetoothAddress(bytes: [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), 0, 0, 0, 0xC0], type: .randomDevice)
    }

    /// An advertisement listing `services` (16-bit), with `extra` octets of manufacturer data.
    static func report(
        _ n: Int, kind: AdvertisingReport.Kind = .nonConnectableUndirected, services: [UInt16] = [], extra: UInt8 = 0
    ) -> AdvertisingReport {
        var data: [UInt8] = [2, 0x01, 0x06]
        if !services.isEmpty {
            data += [UInt8(1 + 2 * services.count), 0x03] + services.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        }
        data += [3, 0xFF, 0x4C, extra]
        return AdvertisingReport(kind: kind, address: address(n), rssi: -50, data: data)
    }

    static func discoveries(_ actions: [SystemAction]) -> [(SessionID, BluetoothAddress, UInt64)] {
        actions.compactMap { action in
            guard case .deliver(let session, .discovered(let discovery, let scan)) = action else { return nil }
            return (session, discovery.address, scan)
        }
    }

    static var foreground: ScanParameters {
        var p = ScanUnion.parameters
        p.active = true
        return p
    }

    @Test func oneControllerScanServesEveryManagerAndStopsWithTheLast() {
        var m = Self.machine()
        let a = SessionID(rawValue: 1)
        let b = SessionID(rawValue: 2)
        let r1 = m.scanStarted(a, ScanRequest(services: nil), id: 10, mode: .foreground)
        #expect(r1 == [.startScan(Self.foreground)])
        let r2 = m.scanStarted(b, ScanRequest(services: nil), id: 20, mode: .foreground)
        #expect(r2 == [])
        var actions: [SystemAction] = []
        m.advertisingReport(Self.report(1), into: &actions)
        #expect(Self.discoveries(actions).map { [$0.0.rawValue, $0.2] } == [[1, 10], [2, 20]])
        let r3 = m.scanStopped(a)
        #expect(r3 == [])
        let r4 = m.scanStopped(a)
        #expect(r4 == [])
        let r5 = m.scanStopped(b)
        #expect(r5 == [.stopScan])
    }

    @Test func eachManagerHearsWhatItsRequestMatchesOnceUntilItChanges() {
        var m = Self.machine()
        let hr = SessionID(rawValue: 1)
        let all = SessionID(rawValue: 2)
        let dup = SessionID(rawValue: 3)
        _ = m.scanStarted(hr, ScanRequest(services: [Self.heartRate]), id: 1, mode: .foreground)
        _ = m.scanStarted(all, ScanRequest(services: nil), id: 2, mode: .foreground)
        _ = m.scanStarted(dup, ScanRequest(services: nil, allowDuplicates: true), id: 3, mode: .foreground)
        var actions: [SystemAction] = []
        m.advertisingReport(Self.report(1, services: [0x180D]), into: &actions)
        m.advertisingReport(Self.report(2, services: [0x180F]), into: &actions)
        m.advertisingReport(Self.report(1, services: [0x180D]), into: &actions)  // the same again
        m.advertisingReport(Self.report(1, services: [0x180D], extra: 1), into: &actions)  // changed
        let told = Self.discoveries(actions).map { "\($0.0.rawValue):\($0.1.bytes[0])" }
        #expect(told == ["1:1", "2:1", "3:1", "2:2", "3:2", "3:1", "1:1", "2:1", "3:1"])
    }

    /// An iOS app advertising in the background lists its services only as bits of Apple's overflow area
    /// (IOSRules.md 2.8): a scan for one of them finds it and is told the services of its own request whose bits
    /// are set; a scan for every device still hears it, with none (it cannot read the bits).
    @Test func theOverflowAreaIsReadForEachScanWithItsOwnServices() {
        var m = Self.machine()
        let hr = SessionID(rawValue: 1)
        let both = SessionID(rawValue: 2)
        let all = SessionID(rawValue: 3)
        _ = m.scanStarted(hr, ScanRequest(services: [Self.heartRate]), id: 1, mode: .foreground)
        _ = m.scanStarted(both, ScanRequest(services: [Self.battery, Self.heartRate]), id: 2, mode: .foreground)
        _ = m.scanStarted(all, ScanRequest(services: nil), id: 3, mode: .foreground)
        let overflow = AppleOverflowArea.manufacturerData(for: [Self.heartRate, Self.battery]).bytes
        let data: [UInt8] = [2, 0x01, 0x06, UInt8(overflow.count + 1), 0xFF] + overflow
        var actions: [SystemAction] = []
        m.advertisingReport(
            AdvertisingReport(kind: .nonConnectableUndirected, address: Self.address(1), rssi: -50, data: data),
            into: &actions)
        let told = actions.compactMap { action -> (SessionID, [BluetoothUUID])? in
            guard case .deliver(let session, .discovered(let discovery, _)) = action else { return nil }
            return (session, discovery.overflowServices)
        }
        #expect(told.map(\.0) == [hr, both, all])
        #expect(told.map(\.1) == [[Self.heartRate], [Self.battery, Self.heartRate], []])
    }

    @Test func outOfTheForegroundAScanNeedsServicesHearsEachDeviceOnceAndTheControllerSlowsDown() {
        var m = Self.machine()
        let listed = SessionID(rawValue: 1)
        let any = SessionID(rawValue: 2)
        let off = SessionID(rawValue: 3)
        _ = m.scanStarted(
            listed, ScanRequest(services: [Self.heartRate], allowDuplicates: true), id: 1, mode: .foreground)
        _ = m.scanStarted(any, ScanRequest(services: nil), id: 2, mode: .foreground)
        _ = m.scanStarted(off, ScanRequest(services: nil), id: 3, mode: .foreground)
        // Every app leaves the foreground: the controller takes the background parameters (IOSRules.md 1.2).
        #expect(
            m.scanModesChanged([listed: .background, any: .background, off: .off]) == [.startScan(Self.background)])
        var actions: [SystemAction] = []
        for _ in 0..<3 { m.advertisingReport(Self.report(1, services: [0x180D]), into: &actions) }
        // Only the scan with services hears it, once (1.1, 1.5, 1.6); the foreground-only app hears nothing.
        #expect(Self.discoveries(actions).map { $0.0 } == [listed])
        let r6 = m.scanModesChanged([any: .foreground])
        #expect(r6 == [.startScan(Self.foreground)])
    }

    @Test func aScannableAdvertisementWaitsForItsScanResponse() {
        var m = Self.machine()
        let a = SessionID(rawValue: 1)
        _ = m.scanStarted(a, ScanRequest(services: nil, allowDuplicates: true), id: 1, mode: .foreground)
        var actions: [SystemAction] = []
        m.advertisingReport(Self.report(1, kind: .scannableUndirected), into: &actions)
        // Held, and a wait for its response started.
        #expect(actions == [.startTimer(.scanResponseWait(1), after: ScanUnion.scanResponseWait)])
        actions = []
        m.advertisingReport(
            AdvertisingReport(
                kind: .scanResponse, address: Self.address(1), rssi: -60, data: [4, 0x09, 0x41, 0x42, 0x43]),
            into: &actions)
        guard case .deliver(_, .discovered(let merged, _)) = actions.first else {
            Issue.record("no discovery: \(actions)")
            return
        }
        #expect(merged.scanResponse == [4, 0x09, 0x41, 0x42, 0x43])
        #expect(merged.data.localName == "ABC")
        // A lost scan response: the next advertisement lets the held one go, with the last response known.
        actions = []
        m.advertisingReport(Self.report(1, kind: .scannableUndirected), into: &actions)
        m.advertisingReport(Self.report(1, kind: .scannableUndirected), into: &actions)
        #expect(actions.count == 1)
    }

    /// A device that advertised once and stopped (or whose response is lost and that does not advertise again)
    /// is reported without its response when the wait ends, not never; one held after the wait began waits for
    /// the next wait.
    @Test func aScannableAdvertisementWhoseResponseNeverComesIsReportedWhenTheWaitEnds() {
        var m = Self.machine()
        let a = SessionID(rawValue: 1)
        _ = m.scanStarted(a, ScanRequest(services: nil), id: 1, mode: .foreground)
        var actions: [SystemAction] = []
        m.advertisingReport(Self.report(1, kind: .scannableUndirected), into: &actions)
        m.advertisingReport(Self.report(2, kind: .scannableUndirected), into: &actions)
        #expect(actions == [.startTimer(.scanResponseWait(1), after: ScanUnion.scanResponseWait)])
        // Device 2's response comes; device 3 is heard after the wait began.
        actions = []
        m.advertisingReport(
            AdvertisingReport(kind: .scanResponse, address: Self.address(2), rssi: -60, data: [2, 0x09, 0x42]),
            into: &actions)
        m.advertisingReport(Self.report(3, kind: .scannableUndirected), into: &actions)
        #expect(Self.discoveries(actions).map(\.1) == [Self.address(2)])
        // A wait that is not the one under way does nothing.
        #expect(m.timerFired(.scanResponseWait(7)).isEmpty)
        // The wait ends: device 1, without a response; device 3 waits for the next one.
        let ended = m.timerFired(.scanResponseWait(1))
        #expect(Self.discoveries(ended).map(\.1) == [Self.address(1)])
        #expect(ended.last == .startTimer(.scanResponseWait(2), after: ScanUnion.scanResponseWait))
        guard case .deliver(_, .discovered(let alone, _))? = ended.first else {
            Issue.record("no discovery: \(ended)")
            return
        }
        #expect(alone.scanResponse == nil)
        #expect(m.scans.heldCount == 1)
        let next = m.timerFired(.scanResponseWait(2))
        #expect(Self.discoveries(next).map(\.1) == [Self.address(3)])
        #expect(m.scans.heldCount == 0)
        #expect(!next.contains { if case .startTimer = $0 { true } else { false } }, "nothing held: no wait")
        // A wait that ended does nothing when it fires again.
        #expect(m.timerFired(.scanResponseWait(1)).isEmpty)
        // A stopped scan lets what it held go with it: nothing is reported when its wait ends, and a scan started
        // again waits afresh.
        actions = []
        m.advertisingReport(Self.report(4, kind: .scannableUndirected), into: &actions)
        _ = m.scanStopped(a)
        _ = m.scanStarted(a, ScanRequest(services: nil), id: 2, mode: .foreground)
        actions = []
        m.advertisingReport(Self.report(5, kind: .scannableUndirected), into: &actions)
        #expect(actions == [.startTimer(.scanResponseWait(4), after: ScanUnion.scanResponseWait)])
        #expect(m.timerFired(.scanResponseWait(3)).isEmpty)
        #expect(Self.discoveries(m.timerFired(.scanResponseWait(4))).map(\.1) == [Self.address(5)])
    }

    /// A device whose response came once and is lost the next time is reported at the wait's end with the
    /// response it gave before; a passive scan, which asks for no response, holds nothing.
    @Test func theWaitsEndReportsTheLastResponseKnownAndAPassiveScanHoldsNothing() {
        var m = Self.machine()
        let a = SessionID(rawValue: 1)
        _ = m.scanStarted(a, ScanRequest(services: nil, allowDuplicates: true), id: 1, mode: .foreground)
        var actions: [SystemAction] = []
        let response = AdvertisingReport(
            kind: .scanResponse, address: Self.address(1), rssi: -60, data: [2, 0x09, 0x41])
        m.advertisingReport(Self.report(1, kind: .scannableUndirected), into: &actions)
        m.advertisingReport(response, into: &actions)
        m.advertisingReport(Self.report(1, kind: .scannableUndirected, extra: 1), into: &actions)
        // Held after the first wait began: reported when the next one ends.
        #expect(Self.discoveries(m.timerFired(.scanResponseWait(1))).isEmpty)
        let ended = m.timerFired(.scanResponseWait(2))
        guard case .deliver(_, .discovered(let late, _))? = ended.first else {
            Issue.record("no discovery: \(ended)")
            return
        }
        #expect(late.scanResponse == [2, 0x09, 0x41])
        #expect(late.data.localName == "A")

        var passive = Self.machine(active: false)
        _ = passive.scanStarted(a, ScanRequest(services: nil), id: 1, mode: .foreground)
        actions = []
        passive.advertisingReport(Self.report(2, kind: .scannableUndirected), into: &actions)
        passive.advertisingReport(Self.report(3, kind: .connectableUndirected), into: &actions)
        #expect(Self.discoveries(actions).map(\.1) == [Self.address(2), Self.address(3)])
        #expect(passive.scans.heldCount == 0)
    }

    @Test func theControllerStoppingEndsEveryScanInTheOrderTheyStarted() {
        var m = Self.machine()
        _ = m.scanStarted(SessionID(rawValue: 2), ScanRequest(services: nil), id: 7, mode: .foreground)
        _ = m.scanStarted(SessionID(rawValue: 1), ScanRequest(services: nil), id: 9, mode: .foreground)
        #expect(
            m.scanFailed() == [
                .deliver(SessionID(rawValue: 2), .scanEnded(7, refused: nil)),
                .deliver(SessionID(rawValue: 1), .scanEnded(9, refused: nil)),
            ])
        let r7 = m.scanStopped(SessionID(rawValue: 1))
        #expect(r7 == [])
        // The next scan starts the controller again.
        #expect(
            m.scanStarted(SessionID(rawValue: 1), ScanRequest(services: nil), id: 10, mode: .foreground) == [
                .startScan(Self.foreground)
            ])
    }

    @Test func aRestoredManagerTakesTheScanOverAndAClosedOneLetsItGo() {
        var m = Self.machine()
        let kept = SessionID(rawValue: 1)
        let restored = SessionID(rawValue: 2)
        _ = m.scanStarted(kept, ScanRequest(services: [Self.heartRate]), id: 1, mode: .background)
        let r8 = m.scanTransferred(from: kept, to: restored, id: 5)
        #expect(r8)
        let r9 = m.scanTransferred(from: kept, to: restored, id: 6)
        #expect(!r9)
        var actions: [SystemAction] = []
        m.advertisingReport(Self.report(1, services: [0x180D]), into: &actions)
        #expect(Self.discoveries(actions).map { [$0.0.rawValue, $0.2] } == [[2, 5]])
        let r10 = m.scans.request(of: restored)?.services
        #expect(r10 == [Self.heartRate])
        let r11 = m.closed(restored)
        #expect(r11 == [.stopScan])
    }

    @Test func aTerminatedAppsScanEndsWithItAndTheSwitchOffStopsTheController() {
        var m = Self.machine()
        let a = SessionID(rawValue: 1)
        let b = SessionID(rawValue: 2)
        _ = m.opened(a, app: "one")
        _ = m.opened(b, app: "two")
        _ = m.scanStarted(a, ScanRequest(services: nil), id: 1, mode: .foreground)
        let terminated = m.appTerminated("one", keeping: [])
        #expect(terminated == [.deliver(a, .appTerminated), .stopScan])
        _ = m.scanStarted(b, ScanRequest(services: nil), id: 2, mode: .foreground)
        let off = m.scansSwitchedOff()
        #expect(off == [.deliver(b, .scanEnded(2, refused: nil)), .stopScan])
        let again = m.scansSwitchedOff()
        #expect(again == [])
    }

    @Test func aPassiveSystemScansPassively() {
        var m = Self.machine(active: false)
        var expected = ScanUnion.parameters
        expected.active = false
        let r12 = m.scanStarted(SessionID(rawValue: 1), ScanRequest(services: nil), id: 1, mode: .foreground)
        #expect(r12 == [.startScan(expected)])
    }

    @Test func memoryStaysBoundedInARoomOfRotatingAddresses() {
        var m = Self.machine()
        _ = m.scanStarted(SessionID(rawValue: 1), ScanRequest(services: nil), id: 1, mode: .foreground)
        var actions: [SystemAction] = []
        for n in 0..<5_000 {
            m.advertisingReport(Self.report(n, kind: .scannableUndirected), into: &actions)
            m.advertisingReport(Self.report(n + 20_000), into: &actions)
        }
        let r13 = m.scans.remembered(by: SessionID(rawValue: 1)) <= ScanUnion.memoryLimit
        #expect(r13)
        let r14 = m.scans.heldCount <= ScanUnion.memoryLimit
        #expect(r14)
    }

    /// Every sequence of five of ten inputs (two managers starting in each mode, stopping, moving, closing, an
    /// app terminated, the controller failing): after each step the controller, as the actions left it, scans exactly while some
    /// manager does, with the parameters their modes call for.
    @Test func everySequenceLeavesTheControllerScanningAsTheManagersWant() {
        enum Input: CaseIterable {
            case startA, startBackgroundB, stopA, stopB, aAway, aBack, bOff, failed, closeA, terminateA
        }
        let a = SessionID(rawValue: 1)
        let b = SessionID(rawValue: 2)
        struct Node {
            var machine: SystemMachine = {
                var m = ScanTests.machine()
                _ = m.opened(SessionID(rawValue: 1), app: "one")
                _ = m.opened(SessionID(rawValue: 2), app: "two")
                return m
            }()
            var controller: ScanParameters?
            /// Whether `a` is attached (the driver asks nothing for a detached manager).
            var aLive = true
        }
        let (visited, failures) = walkEverySequence(from: Node(), depth: 5) { (n: inout Node, input: Input) in
            let actions: [SystemAction]
            switch input {
            case .startA:
                guard n.aLive else { return nil }
                actions = n.machine.scanStarted(a, ScanRequest(services: nil), id: 1, mode: .foreground)
            case .startBackgroundB:
                actions = n.machine.scanStarted(b, ScanRequest(services: [Self.heartRate]), id: 2, mode: .background)
            case .stopA: actions = n.machine.scanStopped(a)
            case .stopB: actions = n.machine.scanStopped(b)
            case .aAway: actions = n.machine.scanModesChanged([a: .background])
            case .aBack: actions = n.machine.scanModesChanged([a: .foreground])
            case .bOff: actions = n.machine.scanModesChanged([b: .off])
            case .failed:
                actions = n.machine.scanFailed()
                n.controller = nil
            case .closeA:
                actions = n.machine.closed(a)
                n.aLive = false
            case .terminateA:
                actions = n.machine.appTerminated("one", keeping: [])
                n.aLive = false
            }
            for action in actions {
                switch action {
                case .startScan(let p): n.controller = p
                case .stopScan: n.controller = nil
                default: break
                }
            }
            var failures: [String] = []
            let scanners = n.machine.scans.scanners
            if !n.aLive && scanners[a] != nil { failures.append("a detached manager still scans") }
            let wanted: ScanParameters? =
                scanners.isEmpty
                ? nil : scanners.values.contains { $0.mode == .foreground } ? Self.foreground : Self.background
            if n.controller != wanted {
                failures.append(
                    "the controller \(String(describing: n.controller)), wanted \(String(describing: wanted))")
            }
            return failures
        }
        #expect(visited > 50_000)
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
    }
}
