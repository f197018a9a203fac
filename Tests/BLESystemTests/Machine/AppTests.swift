import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// The apps as the system machine knows them (`AppTable`, from their reports): their scans and advertisements
/// follow their lifecycle (IOSRules.md 1.2, 1.3, 2.3-2.5), advertising starts only in the foreground (2.11), a
/// suspended foreground-only app's requests are refused (3.2), and of two reports the later counts.
@Suite struct AppTests {
    static func report(
        _ lifecycle: AppLifecycleState, _ modes: Set<AppBackgroundMode> = [], revision: UInt64
    ) -> AppTable.App {
        AppTable.App(lifecycle: lifecycle, modes: modes, revision: revision)
    }

    @Test func aScanFollowsItsAppOutOfTheForegroundAndBack() {
        var m = ScanTests.machine()
        let a = SessionID(rawValue: 1)
        _ = m.opened(a, app: "one")
        let start = m.scanStarted(
            a, ScanRequest(services: [ScanTests.heartRate]), id: 1, mode: m.apps.scanMode(of: "one"))
        #expect(start.count == 1, "the controller scans: \(start)")
        // Out of the foreground without bluetooth-central: the app hears nothing (the controller scans on, with
        // the background parameters, as it does for every app out of the foreground).
        let off = m.appChanged("one", Self.report(.background, revision: 1))
        #expect(off == [.startScan(ScanTests.background)])
        #expect(m.scans.scanners[a]?.mode == .off)
        let report = ScanTests.report(1, services: [0x180D])
        var heard: [SystemAction] = []
        m.advertisingReport(report, into: &heard)
        #expect(ScanTests.discoveries(heard).isEmpty)
        // Back, then out again with the mode: the background parameters.
        let back = m.appChanged("one", Self.report(.foreground, [.bluetoothCentral], revision: 2))
        #expect(back.count == 1 && m.scans.scanners[a]?.mode == .foreground, "\(back)")
        let background = m.appChanged("one", Self.report(.suspended, [.bluetoothCentral], revision: 3))
        #expect(background == [.startScan(ScanTests.background)])
        #expect(m.scans.scanners[a]?.mode == .background)
    }

    @Test func anOlderReportChangesNothing() {
        var m = SystemMachine()
        _ = m.appChanged("one", Self.report(.suspended, revision: 2))
        let older = m.appChanged("one", Self.report(.foreground, revision: 1))
        #expect(older.isEmpty)
        #expect(m.apps["one"].lifecycle == .suspended)
        #expect(m.apps.scanMode(of: "one") == .off)
        // An app never reported is in the foreground, as an app starts.
        #expect(m.apps["two"].lifecycle == .foreground && m.apps.mayStartAdvertising("two"))
    }

    @Test func advertisingStartsOnlyInTheForegroundAndGoesOnInItsBackgroundForm() {
        var m = SystemMachine()
        #expect(m.apps.mayStartAdvertising("one"))
        _ = m.appChanged("one", Self.report(.background, [.bluetoothPeripheral], revision: 1))
        #expect(!m.apps.mayStartAdvertising("one"))
        #expect(m.apps.advertisingMode(of: "one") == .background)
        _ = m.appChanged("one", Self.report(.background, revision: 2))
        #expect(m.apps.advertisingMode(of: "one") == .off)
        _ = m.appChanged("one", Self.report(.foreground, revision: 3))
        #expect(m.apps.mayStartAdvertising("one") && m.apps.advertisingMode(of: "one") == .foreground)
    }

    /// `a` (app "one") owns 0x12 and 0x15, `b` (app "two") 0x22 (`ServiceTests.machine`).
    @Test func aSuspendedForegroundOnlyAppsRequestsAreRefusedAndAWakingOnesDelivered() {
        var m = ServiceTests.machine()
        _ = m.appChanged("one", Self.report(.suspended, revision: 1))
        _ = m.appChanged("two", Self.report(.suspended, [.bluetoothPeripheral], revision: 1))
        let request = ServiceTests.request
        let link = ServiceTests.link
        let readA = HostEvent.serverRead(request, link, attribute: AttributeHandle(0x12), offset: 0)
        #expect(ServiceTests.route(m, readA).1 == [.refuse(request, .unlikelyError)])
        let writeA = HostEvent.serverWrite(request, link, [ServiceTests.write(0x15)])
        #expect(ServiceTests.route(m, writeA).1 == [.refuse(request, .unlikelyError)])
        #expect(ServiceTests.route(m, .serverWrite(nil, link, [ServiceTests.write(0x15)])).1.isEmpty)
        // A subscription still reaches it (its characteristic's subscribers change whether it runs or not).
        let subscribed = HostEvent.subscriptionChanged(
            link, attribute: AttributeHandle(0x15), notify: true, indicate: false)
        #expect(ServiceTests.route(m, subscribed).1 == [.deliver(ServiceTests.a, .server(subscribed))])
        // The app with bluetooth-peripheral is woken by the request: it is delivered, and waits for its answer.
        let readB = HostEvent.serverRead(request, link, attribute: AttributeHandle(0x22), offset: 0)
        var n = m
        var actions: [SystemAction] = []
        _ = n.serverEvent(readB, into: &actions)
        #expect(actions == [.deliver(ServiceTests.b, .server(readB))])
        #expect(n.services.unanswered[request] != nil)
        // A write spanning both: the first owner cannot answer, so the request is refused; the other's part is
        // delivered without the request's id.
        let both = HostEvent.serverWrite(request, link, [ServiceTests.write(0x12), ServiceTests.write(0x22)])
        #expect(
            ServiceTests.route(m, both).1 == [
                .refuse(request, .unlikelyError),
                .deliver(ServiceTests.b, .server(.serverWrite(nil, link, [ServiceTests.write(0x22)]))),
            ])
    }
}
