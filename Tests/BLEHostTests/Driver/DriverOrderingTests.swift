import BLECore
import BLEHCI
import BLEHost
import BLETransport
import Dispatch
import Synchronization
import Testing

/// The driver with a transport that delivers on threads of its own, as real controllers do (a NIO event loop,
/// the HCI user channel's reading queue), and requests made from many threads at once.
@Suite struct DriverOrderingTests {
    @Test func completionsAndEventsArriveOneAtATimeInTheOrderTheHostProducedThem() throws {
        let controller = ThreadedController()
        let scheduler = DispatchHostScheduler(label: "test.timers")
        let host = HostDriver(transport: controller, scheduler: scheduler)
        let log = CallbackLog()
        host.setEventHandler { event in
            log.enter()
            if case .advertisingReport(let report) = event {
                log.record(report: Int(report.data[0]) << 8 | Int(report.data[1]))
            }
            log.leave()
        }
        let started = DispatchSemaphore(value: 0)
        host.start { _ in started.signal() }
        #expect(started.wait(timeout: .now() + 10) == .success)
        let scanning = DispatchSemaphore(value: 0)
        host.startScan(ScanParameters()) { _ in scanning.signal() }
        #expect(scanning.wait(timeout: .now() + 10) == .success)

        // The controller streams numbered advertising reports from its radio thread while eight threads each
        // read the RSSI of 40 links (the handle names the request) and read a value on a link that is not up
        // (a request that fails inside the host, on the requesting thread).
        let reports = 400
        controller.streamReports(count: reports)
        let requests = 8 * 40
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<40 {
                let handle = ConnectionHandle(UInt16(thread * 40 + i))
                host.readRSSI(on: handle) { result in
                    log.enter()
                    if case .success = result { log.record(rssiOf: handle) }
                    log.leave()
                    done.signal()
                }
                host.read(on: ConnectionHandle(0x0EFF), attribute: AttributeHandle(3)) { _ in
                    log.enter()
                    log.leave()
                    done.signal()
                }
            }
        }
        for _ in 0..<(2 * requests) { #expect(done.wait(timeout: .now() + 10) == .success) }
        #expect(controller.waitForReports(timeout: 10))
        // The controller has handed every report over; the host reports them in its domain, after the work
        // already queued there: once work queued now has run, they have all been reported.
        let settled = DispatchSemaphore(value: 0)
        scheduler.execute { settled.signal() }
        #expect(settled.wait(timeout: .now() + 10) == .success)
        host.stopScan { _ in }

        // Never two callbacks at once: the driver performs one action at a time.
        #expect(log.overlaps == 0)
        // Reports in the order the controller sent them, none lost.
        #expect(log.reports == Array(0..<reports))
        // RSSI answers in the order the commands went on the wire (the controller answers in that order).
        #expect(log.rssi.count == requests)
        #expect(log.rssi == controller.rssiOrder)
        controller.close()
    }

    /// Issue 34: requests from eight application threads are stepped in call order, but what the host does with
    /// them (packets to the controller, completions, events) is done in the scheduler's serial domain, never on
    /// the threads that asked, nor on the controller's.
    @Test func theHostsWorkIsDoneInTheSchedulersDomainNotOnTheCallersThreads() throws {
        let controller = ThreadedController()
        let scheduler = DispatchHostScheduler(label: "test.domain")
        controller.checkDomain = { scheduler.isExecuting }
        let host = HostDriver(transport: controller, scheduler: scheduler)
        let outside = Mutex(0)
        host.setEventHandler { _ in if !scheduler.isExecuting { outside.withLock { $0 += 1 } } }
        let started = DispatchSemaphore(value: 0)
        host.start { _ in
            if !scheduler.isExecuting { outside.withLock { $0 += 1 } }
            started.signal()
        }
        #expect(started.wait(timeout: .now() + 10) == .success)
        let requests = 8 * 40
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for i in 0..<40 {
                host.readRSSI(on: ConnectionHandle(UInt16(thread * 40 + i))) { _ in
                    if !scheduler.isExecuting { outside.withLock { $0 += 1 } }
                    done.signal()
                }
            }
        }
        for _ in 0..<requests { #expect(done.wait(timeout: .now() + 10) == .success) }
        #expect(outside.withLock { $0 } == 0, "completions or events outside the domain")
        #expect(controller.sentOutsideDomain == 0, "packets sent outside the domain")
        #expect(controller.rssiOrder.count == requests)
        controller.close()
    }
}

/// Records callbacks, and counts any that ran while another was running.
final class CallbackLog: Sendable {
    private struct State {
        var inside = 0
        var overlaps = 0
        var reports: [Int] = []
        var rssi: [ConnectionHandle] = []
    }
    private let state = Mutex(State())

    func enter() {
        state.withLock {
            if $0.inside > 0 { $0.overlaps += 1 }
            $0.inside += 1
        }
        // Give another thread a chance to overlap, were the driver to let it.
        for _ in 0..<200 { _ = state.withLock { $0.inside } }
    }

    func leave() { state.withLock { $0.inside -= 1 } }
    func record(report: Int) { state.withLock { $0.reports.append(report) } }
    func record(rssiOf handle: ConnectionHandle) { state.withLock { $0.rssi.append(handle) } }
    var overlaps: Int { state.withLock { $0.overlaps } }
    var reports: [Int] { state.withLock { $0.reports } }
    var rssi: [ConnectionHandle] { state.withLock { $0.rssi } }
}

/// A controller on threads of its own: commands are answered on its command queue, in the order they arrived,
/// four at a time; advertising reports come from a second thread.
final class ThreadedController: HCITransport {
    private struct State {
        var receiver: (@Sendable (HCITransportEvent) -> Void)?
        var rssiOrder: [ConnectionHandle] = []
        var closed = false
        var checkDomain: (@Sendable () -> Bool)?
        var sentOutsideDomain = 0
    }
    private let state = Mutex(State())
    private let commands = DispatchQueue(label: "test.controller.commands")
    private let radio = DispatchQueue(label: "test.controller.radio")
    private let reportsDone = DispatchSemaphore(value: 0)
    private let profile = ControllerProfile()

    func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        state.withLock { $0.receiver = receiver }
    }

    /// Whether the host's serial domain is the calling thread's, asked at each packet the host sends.
    var checkDomain: (@Sendable () -> Bool)? {
        get { state.withLock { $0.checkDomain } }
        set { state.withLock { $0.checkDomain = newValue } }
    }

    /// Packets the host sent from outside its domain.
    var sentOutsideDomain: Int { state.withLock { $0.sentOutsideDomain } }

    func send(_ packet: HCIPacket) {
        if let check = checkDomain, !check() { state.withLock { $0.sentOutsideDomain += 1 } }
        guard case .command(let command) = packet else { return }
        let closed = state.withLock { state -> Bool in
            if let rssi = try? decodeCommand(command) as? HCIReadRSSI { state.rssiOrder.append(rssi.handle) }
            return state.closed
        }
        guard !closed else { return }
        commands.async { self.answer(command) }
    }

    func close() {
        let receiver = state.withLock { state -> (@Sendable (HCITransportEvent) -> Void)? in
            defer { state.closed = true }
            return state.closed ? nil : state.receiver
        }
        receiver?(.closed(reason: nil))
    }

    var rssiOrder: [ConnectionHandle] { state.withLock { $0.rssiOrder } }

    func streamReports(count: Int) {
        radio.async {
            for n in 0..<count {
                let report = HCILEMetaEvent.AdvertisingReport.Report(
                    eventType: .advNonconnInd, address: HostHarness.peerAddress,
                    data: [UInt8(n >> 8), UInt8(n & 0xFF)], rssi: -50)
                self.deliver(.leMeta(.advertisingReport(.init(reports: [report]))))
            }
            self.reportsDone.signal()
        }
    }

    func waitForReports(timeout seconds: Int) -> Bool {
        reportsDone.wait(timeout: .now() + .seconds(seconds)) == .success
    }

    private func deliver(_ event: HCIEvent) {
        state.withLock { $0.closed ? nil : $0.receiver }?(.packet(.event(event.packet)))
    }

    private func answer(_ command: HCICommandPacket) {
        let bytes: [UInt8]
        if command.opcode == .readRSSI {
            bytes = Array(command.parameters.prefix(2)) + [UInt8(bitPattern: -42)]
        } else {
            guard case .complete(let returned) = ScriptedController.defaultAnswer(command, profile) else {
                deliver(.commandStatus(.init(status: .success, numHCICommandPackets: 4, opcode: command.opcode)))
                return
            }
            bytes = returned
        }
        deliver(.commandComplete(.init(numHCICommandPackets: 4, opcode: command.opcode, returnParameters: [0] + bytes)))
    }
}
