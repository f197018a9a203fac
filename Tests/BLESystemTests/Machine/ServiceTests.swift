import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLEHost
import Testing

@testable import BLESystem

/// Who answers for each service of the GATT server (`ServiceTable`, in the system machine): a client's request
/// reaches only the session that published the attribute it names, a request nobody answers for is refused at
/// once, and a session's services go with it.
@Suite struct ServiceTests {
    static let a = LinkTests.a
    static let b = LinkTests.b
    static let link = ConnectionHandle(9)
    static let request = GATTServerRequestID(rawValue: 5)

    /// `a` published a service at 0x10 (values 0x12, 0x15), `b` one at 0x20 (value 0x22).
    static func machine() -> SystemMachine {
        var m = LinkTests.machine()
        m.servicePublished(
            PublishedService(
                serviceHandle: AttributeHandle(0x10),
                characteristicValueHandles: [AttributeHandle(0x12), AttributeHandle(0x15)]), by: a)
        m.servicePublished(
            PublishedService(serviceHandle: AttributeHandle(0x20), characteristicValueHandles: [AttributeHandle(0x22)]),
            by: b)
        return m
    }

    static func route(_ m: SystemMachine, _ event: HostEvent) -> (Bool, [SystemAction]) {
        var m = m
        var actions: [SystemAction] = []
        let routed = m.serverEvent(event, into: &actions)
        return (routed, actions)
    }

    static func write(_ handle: UInt16) -> GATTWriteRequest {
        GATTWriteRequest(attribute: AttributeHandle(handle), offset: 0, value: [1])
    }

    @Test func aRequestReachesOnlyTheOwnerOfItsAttribute() {
        let m = Self.machine()
        let read = HostEvent.serverRead(Self.request, Self.link, attribute: AttributeHandle(0x22), offset: 0)
        let (routed, actions) = Self.route(m, read)
        #expect(routed)
        #expect(actions == [.deliver(Self.b, .server(read))])
        let subscribed = HostEvent.subscriptionChanged(
            Self.link, attribute: AttributeHandle(0x15), notify: true, indicate: false)
        let (_, told) = Self.route(m, subscribed)
        #expect(told == [.deliver(Self.a, .server(subscribed))])
    }

    @Test func aRequestNobodyAnswersForIsRefusedAtOnce() {
        let m = Self.machine()
        let read = HostEvent.serverRead(Self.request, Self.link, attribute: AttributeHandle(0x30), offset: 0)
        let (_, refused) = Self.route(m, read)
        #expect(refused == [.refuse(Self.request, .unlikelyError)])
        let (_, invalid) = Self.route(m, .serverWrite(Self.request, Self.link, [Self.write(0x31)]))
        #expect(invalid == [.refuse(Self.request, .invalidHandle)])
        // A write command has nobody to answer.
        let (routed, nothing) = Self.route(m, .serverWrite(nil, Self.link, [Self.write(0x31)]))
        #expect(routed)
        #expect(nothing == [])
    }

    @Test func aQueuedWriteAcrossTwoServicesIsSplitByOwnerAndTheFirstPartAnswers() {
        let m = Self.machine()
        let writes = [Self.write(0x22), Self.write(0x12), Self.write(0x15), Self.write(0x40)]
        let (_, actions) = Self.route(m, .serverWrite(Self.request, Self.link, writes))
        #expect(
            actions == [
                .deliver(Self.b, .server(.serverWrite(Self.request, Self.link, [Self.write(0x22)]))),
                .deliver(Self.a, .server(.serverWrite(nil, Self.link, [Self.write(0x12), Self.write(0x15)]))),
            ])
    }

    @Test func otherEventsGoToEveryone() {
        let (routed, actions) = Self.route(Self.machine(), .readyToNotify)
        #expect(!routed)
        #expect(actions == [])
    }

    @Test func onlyItsOwnerRemovesAService() {
        var m = Self.machine()
        let byOther = m.serviceRemoved(at: AttributeHandle(0x10), by: Self.b)
        #expect(!byOther)
        let byOwner = m.serviceRemoved(at: AttributeHandle(0x10), by: Self.a)
        #expect(byOwner)
        #expect(m.services.owner(of: AttributeHandle(0x12)) == nil)
        #expect(m.services.owner(of: AttributeHandle(0x22)) == Self.b)
    }

    /// IOSRules.md 6.1: what a manager published goes with it, and with its app, unless the system keeps the
    /// manager for the app's restoration.
    @Test func aSessionsServicesGoWithItOrItsAppUnlessKept() {
        var m = Self.machine()
        let closed = m.closed(Self.a)
        #expect(closed == [.removeService(AttributeHandle(0x10))])
        var kept = Self.machine()
        let terminated = kept.appTerminated("two", keeping: [Self.b])
        #expect(terminated == [])
        #expect(kept.services.owner(of: AttributeHandle(0x22)) == Self.b)
        let gone = kept.appTerminated("one", keeping: [])
        #expect(gone == [.deliver(Self.a, .appTerminated), .removeService(AttributeHandle(0x10))])
    }

    @Test func aRestoredSessionAnswersForTheKeptOnesServices() {
        var m = Self.machine()
        let restored = SessionID(rawValue: 3)
        m.servicesTransferred(from: Self.b, to: restored)
        let read = HostEvent.serverRead(Self.request, Self.link, attribute: AttributeHandle(0x22), offset: 0)
        let (_, actions) = Self.route(m, read)
        #expect(actions == [.deliver(restored, .server(read))])
        let byOld = m.serviceRemoved(at: AttributeHandle(0x20), by: Self.b)
        #expect(!byOld)
    }

    /// A request is answered once, by the session it was routed to; a session that goes, or whose app ends (kept
    /// for restoration or not), has the requests it never answered refused; a restored session answers those
    /// that reached the kept one after.
    @Test func aRequestIsAnsweredOnceByItsSessionOrRefusedWhenItGoes() {
        var m = Self.machine()
        let read = HostEvent.serverRead(Self.request, Self.link, attribute: AttributeHandle(0x22), offset: 0)
        var actions: [SystemAction] = []
        _ = m.serverEvent(read, into: &actions)
        let byA = m.serverRequestAnswered(Self.request, by: Self.a)
        let byB = m.serverRequestAnswered(Self.request, by: Self.b)
        let again = m.serverRequestAnswered(Self.request, by: Self.b)
        #expect(!byA)  // not a's
        #expect(byB)
        #expect(!again)  // once

        let second = GATTServerRequestID(rawValue: 6)
        _ = m.serverEvent(.serverWrite(second, Self.link, [Self.write(0x12)]), into: &actions)
        let closed = m.closed(Self.a)
        #expect(closed == [.removeService(AttributeHandle(0x10)), .refuse(second, .unlikelyError)])
        let undelivered = m.serverRequestUndelivered(second)
        #expect(!undelivered)  // refused already

        var kept = Self.machine()
        _ = kept.serverEvent(read, into: &actions)
        let terminated = kept.appTerminated("two", keeping: [Self.b])
        #expect(terminated == [.refuse(Self.request, .unlikelyError)])
        let late = GATTServerRequestID(rawValue: 7)
        _ = kept.serverEvent(
            .serverRead(late, Self.link, attribute: AttributeHandle(0x22), offset: 0), into: &actions)
        let restored = SessionID(rawValue: 3)
        kept.servicesTransferred(from: Self.b, to: restored)
        let byRestored = kept.serverRequestAnswered(late, by: restored)
        #expect(byRestored)
    }

    /// The rest of the rule: a session of an app that ends, not kept, has its requests refused with it; a write
    /// spanning two apps' services is answered by the first owner only; a request whose link went is forgotten
    /// (the host forgot it: nothing to refuse); one that reached no session is refused once.
    @Test func requestsOfAnEndedAppASplitWriteALostLinkAndAnUndeliveredOne() {
        var m = Self.machine()
        var actions: [SystemAction] = []
        _ = m.serverEvent(
            .serverRead(Self.request, Self.link, attribute: AttributeHandle(0x12), offset: 0), into: &actions)
        let ended = m.appTerminated("one", keeping: [])
        #expect(ended.first == .refuse(Self.request, .unlikelyError))

        var n = Self.machine()
        let split = GATTServerRequestID(rawValue: 8)
        _ = n.serverEvent(.serverWrite(split, Self.link, [Self.write(0x22), Self.write(0x12)]), into: &actions)
        let byA = n.serverRequestAnswered(split, by: Self.a)
        let byB = n.serverRequestAnswered(split, by: Self.b)
        #expect(!byA)  // a's part carries no id
        #expect(byB)

        let lost = GATTServerRequestID(rawValue: 9)
        _ = n.serverEvent(.serverRead(lost, Self.link, attribute: AttributeHandle(0x22), offset: 0), into: &actions)
        _ = n.linkDisconnected(Self.link, reason: .connectionTimeout)
        #expect(n.closed(Self.b) == [.removeService(AttributeHandle(0x20))])

        let orphan = GATTServerRequestID(rawValue: 10)
        _ = n.serverEvent(.serverRead(orphan, Self.link, attribute: AttributeHandle(0x12), offset: 0), into: &actions)
        let first = n.serverRequestUndelivered(orphan)
        let second = n.serverRequestUndelivered(orphan)
        #expect(first)
        #expect(!second)
    }
}
