import BLE
import BLEATT
import Foundation
import Testing

/// A hostile peripheral's answers: malformed, out of sequence, about nothing, with wrong or backward handles,
/// discoveries that would never end, an MTU exchange answered twice, values too long. Our central must not
/// hang or trap; each operation ends once, with its own error, within a bound of virtual time; and the app sees
/// what iOS shows. A response that breaks the protocol (malformed, unasked, not the one expected, longer than
/// ATT_MTU) makes the bearer unusable: our host fails what waits on it and drops the link (ARCHITECTURE.md,
/// `ATTBearer`); a response that is well formed but makes no sense fails only its procedure (`.unknown`, as
/// CoreBluetooth's `CBError.unknown`), and the link stays.
@Suite struct HostileResponseTests {
    typealias Peer = HostilePeripheral

    /// Reads the value characteristic (delegate style) and returns the one outcome, waiting at most `limit`.
    static func read(
        _ room: HostileRoom, _ peripheral: Peripheral, _ uuid: BluetoothUUID = Peer.value,
        within limit: Duration = .seconds(5)
    ) async throws -> (data: Data?, error: BluetoothError?) {
        let characteristic = try room.characteristic(uuid, on: peripheral)
        let mark = room.phone.events.count
        peripheral.readValue(for: characteristic)
        try await room.run(
            until: { room.since(mark).contains(where: \.isValueUpdate) }, within: limit, "the read's end")
        try await room.run(.seconds(1))
        let updates = room.since(mark).filter(\.isValueUpdate)
        #expect(updates.count == 1, "the read ended \(updates.count) times")
        guard case .didUpdateCharacteristicValue(_, let data, let error) = updates.first else { return (nil, nil) }
        return (data, error)
    }

    /// The app saw the link end (once), after everything else.
    static func expectDisconnected(_ room: HostileRoom, _ peripheral: Peripheral, since mark: Int = 0) {
        let events = room.since(mark)
        #expect(events.filter(\.isDisconnect).count == 1, "\(room.phone.lines)")
        #expect(events.last?.isDisconnect == true, "\(room.phone.lines)")
        #expect(peripheral.state == .disconnected)
    }

    // MARK: Malformed and out-of-sequence responses

    @Test func aTruncatedErrorResponseFailsTheReadAndDropsTheLink() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            .init(.att(.readRequest), [.att([0x01, 0x0A, 0x03])])
        ])
        let (data, error) = try await Self.read(room, peripheral)
        #expect(data == nil)
        #expect(error?.code == .unknown, "\(String(describing: error))")
        Self.expectDisconnected(room, peripheral)
    }

    @Test func aReadAnsweredWithAWriteResponseFailsTheReadAndDropsTheLink() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            .init(.att(.readRequest), [.att([0x13])])
        ])
        let (_, error) = try await Self.read(room, peripheral)
        #expect(error?.code == .unknown)
        Self.expectDisconnected(room, peripheral)
    }

    @Test func anErrorResponseNamingAnotherRequestFailsTheReadAndDropsTheLink() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            .init(.att(.readRequest), [.reply { Peer.error(.writeRequest, $0.handle!, .writeNotPermitted) }])
        ])
        let (_, error) = try await Self.read(room, peripheral)
        #expect(error?.code == .unknown)
        Self.expectDisconnected(room, peripheral)
    }

    @Test func aResponseToNothingDropsTheLinkAndLaterRequestsFailAtOnce() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        room.peer.perform([.att([0x0B, 0xDE, 0xAD])])  // a Read Response nobody asked for
        try await room.run(until: { peripheral.state == .disconnected }, within: .seconds(2), "the link's end")
        Self.expectDisconnected(room, peripheral)
        let (_, error) = try await Self.read(room, peripheral, within: .seconds(1))
        #expect(error?.code == .notConnected)
    }

    @Test func anUnknownATTErrorCodeReachesTheAppAsItsCodeAndTheLinkLives() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            .init(.att(.readRequest), times: 1, [.reply { Peer.error(.readRequest, $0.handle!, ATTErrorCode(0x80)) }])
        ])
        let (_, error) = try await Self.read(room, peripheral)
        #expect(error?.code == .att(ATTErrorCode(0x80)))
        #expect(peripheral.state == .connected)
        #expect(try await room.readsHonestly(peripheral))
    }

    @Test func unknownPDUsFromThePeerAreRefusedOrIgnoredAndTheLinkLives() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        // An unknown request (no command flag), an unknown command, a truncated request and a stray confirmation.
        room.peer.perform([.att([0x3E, 0x01, 0x02]), .att([0x7F, 0x00]), .att([0x0A, 0x01]), .att([0x1E])])
        try await room.run(.seconds(1))
        let errors = room.peer.received(.errorResponse).map(\.bytes)
        #expect(errors.contains([0x01, 0x3E, 0x00, 0x00, ATTErrorCode.requestNotSupported.rawValue]), "\(errors)")
        #expect(errors.contains([0x01, 0x0A, 0x00, 0x00, ATTErrorCode.invalidPDU.rawValue]), "\(errors)")
        #expect(errors.count == 2)
        #expect(room.phone.events.isEmpty)
        #expect(try await room.readsHonestly(peripheral))
    }

    // MARK: Wrong handles, ranges that go backwards or overlap

    /// The first page of services is honest; the next one lists a service before the handle asked from.
    @Test func aServiceListedBeforeTheSearchStartFailsDiscoveryAndTheLinkLives() async throws {
        let room = HostileRoom(script: [
            .init(
                .att(.readByGroupTypeRequest) { $0.handle != AttributeHandle(1) },
                [.reply { _ in Peer.services([(AttributeHandle(1), AttributeHandle(0xFFFF), 0x1800)]) }])
        ])
        let peripheral = try await room.connect(settle: false)
        peripheral.discoverServices(nil)
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "discovery's end")
        try await room.run(.seconds(1))
        let ends = room.phone.events.filter(\.isServiceDiscovery)
        #expect(ends.count == 1)
        #expect(ends.first?.error?.code == .unknown)
        #expect(peripheral.state == .connected)
    }

    @Test func overlappingServiceGroupsFailDiscovery() async throws {
        let room = HostileRoom(script: [
            .init(
                .att(.readByGroupTypeRequest),
                [
                    .reply { _ in
                        Peer.services([
                            (AttributeHandle(1), AttributeHandle(0x20), 0x1800),
                            (AttributeHandle(0x10), AttributeHandle(0x30), 0x180F),
                        ])
                    }
                ])
        ])
        let peripheral = try await room.connect(settle: false)
        peripheral.discoverServices(nil)
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "discovery's end")
        try await room.run(.seconds(1))
        let ends = room.phone.events.filter(\.isServiceDiscovery)
        #expect(ends.count == 1)
        #expect(ends.first?.error?.code == .unknown, "\(room.phone.lines)")
        #expect(peripheral.services?.isEmpty ?? true)
        #expect(peripheral.state == .connected)
    }

    @Test func aServiceThatEndsBeforeItStartsFailsDiscovery() async throws {
        let room = HostileRoom(script: [
            .init(
                .att(.readByGroupTypeRequest),
                [.reply { _ in Peer.services([(AttributeHandle(0x30), AttributeHandle(0x20), 0x1800)]) }])
        ])
        let peripheral = try await room.connect(settle: false)
        peripheral.discoverServices(nil)
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "discovery's end")
        #expect(room.phone.events.filter(\.isServiceDiscovery).first?.error?.code == .unknown)
        #expect(peripheral.state == .connected)
    }

    /// A characteristic declaration before the handle the search started from, on the second page.
    @Test func aCharacteristicListedBeforeTheSearchStartFailsCharacteristicDiscovery() async throws {
        let room = HostileRoom()
        let first = room.handles.service.lowerBound
        room.peer.setScript([
            .init(
                .att(.readByTypeRequest) { $0.searchedType == .characteristicDeclaration && $0.handle! > first },
                [.reply { _ in Peer.characteristics([(first, 0x02, first.advanced(by: 1), 0x2A00)]) }])
        ])
        let peripheral = try await room.connect()
        peripheral.discoverServices([Peer.service])
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "services")
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics(nil, for: service)
        try await room.run(until: { room.phone.events.contains(where: \.isCharacteristicDiscovery) }, "the end")
        try await room.run(.seconds(1))
        let ends = room.phone.events.filter(\.isCharacteristicDiscovery)
        #expect(ends.count == 1)
        #expect(ends.first?.error?.code == .unknown, "\(room.phone.lines)")
        #expect(peripheral.state == .connected)
    }

    /// A characteristic whose value handle lies outside its service (here, on the GAP service's Device Name):
    /// a read of it would reach another attribute.
    @Test func aCharacteristicValueHandleOutsideItsServiceFailsDiscovery() async throws {
        let room = HostileRoom()
        let first = room.handles.service.lowerBound
        room.peer.setScript([
            .init(
                .att(.readByTypeRequest) { $0.searchedType == .characteristicDeclaration && $0.handle! == first },
                [.reply { _ in Peer.characteristics([(first.advanced(by: 1), 0x02, AttributeHandle(3), 0x2A00)]) }])
        ])
        let peripheral = try await room.connect()
        peripheral.discoverServices([Peer.service])
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "services")
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics(nil, for: service)
        try await room.run(until: { room.phone.events.contains(where: \.isCharacteristicDiscovery) }, "the end")
        let end = room.phone.events.first(where: \.isCharacteristicDiscovery)
        #expect(end?.error?.code == .unknown, "\(room.phone.lines)")
        #expect(service.characteristics?.isEmpty ?? true)
        #expect(peripheral.state == .connected)
    }

    @Test func aDescriptorListedBeforeTheSearchStartFailsDescriptorDiscovery() async throws {
        let room = HostileRoom()
        let described = room.handles.described
        room.peer.setScript([
            .init(
                .att(.findInformationRequest) { $0.handle! > described },
                [.reply { _ in Peer.information([(described, 0x2901)]) }])
        ])
        let peripheral = try await room.connect()
        peripheral.discoverServices([Peer.service])
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "services")
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics(nil, for: service)
        try await room.run(until: { room.phone.events.contains(where: \.isCharacteristicDiscovery) }, "characteristics")
        peripheral.discoverDescriptors(for: try room.characteristic(Peer.described, on: peripheral))
        try await room.run(until: { room.phone.events.contains(where: \.isDescriptorDiscovery) }, "the end")
        #expect(room.phone.events.first(where: \.isDescriptorDiscovery)?.error?.code == .unknown)
        #expect(peripheral.state == .connected)
    }

    /// The Database Hash read (at every link's start) answered with a handle outside the range and a value that
    /// is no hash: the system trusts no cache, and the app's discovery goes on.
    @Test func aDatabaseHashAnsweredWithJunkDoesNotStopDiscovery() async throws {
        let room = HostileRoom(script: [
            .init(.search(.readByTypeRequest, for: .databaseHash), [.att([0x09, 0x05, 0x00, 0x00, 1, 2, 3])])
        ])
        let peripheral = try await room.connect(settle: false)
        peripheral.discoverServices(nil)
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "discovery's end")
        #expect(room.phone.events.first(where: \.isServiceDiscovery)?.error == nil)
        #expect(peripheral.services?.contains { $0.uuid == Peer.service } == true)
    }

    // MARK: Discoveries that would never end

    /// Every page after the first names again the group that ended the page before: a search that would go
    /// round for ever ends at the first repeat.
    @Test func aServiceDiscoveryThatRepeatsItsLastGroupForEverEnds() async throws {
        let room = HostileRoom(script: [
            .init(
                .att(.readByGroupTypeRequest),
                [
                    .reply { request in
                        let start = request.handle!.rawValue
                        let first = AttributeHandle(start <= 1 ? 1 : start - 1)
                        return Peer.services([(first, first, 0x180F)])
                    }
                ])
        ])
        let peripheral = try await room.connect(settle: false)
        peripheral.discoverServices(nil)
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "discovery's end")
        try await room.run(.seconds(1))
        #expect(room.phone.events.filter(\.isServiceDiscovery).map { $0.error?.code } == [.unknown])
        #expect(room.peer.received(.readByGroupTypeRequest).count <= 4)
        #expect(peripheral.state == .connected)
    }

    /// The endless Read By Type chain: each page of characteristics names one at a handle no later than the
    /// page before's.
    @Test func aCharacteristicDiscoveryThatNeverMovesOnEnds() async throws {
        let room = HostileRoom()
        let first = room.handles.service.lowerBound
        room.peer.setScript([
            .init(
                .att(.readByTypeRequest) { $0.searchedType == .characteristicDeclaration && $0.handle! >= first },
                [
                    .reply { request in
                        let at = request.handle!.advanced(by: -1)
                        return Peer.characteristics([(at, 0x02, at.advanced(by: 1), 0x2A00)])
                    }
                ])
        ])
        let peripheral = try await room.connect()
        peripheral.discoverServices([Peer.service])
        try await room.run(until: { room.phone.events.contains(where: \.isServiceDiscovery) }, "services")
        let service = try #require(peripheral.services?.first)
        peripheral.discoverCharacteristics(nil, for: service)
        try await room.run(until: { room.phone.events.contains(where: \.isCharacteristicDiscovery) }, "the end")
        #expect(room.phone.events.first(where: \.isCharacteristicDiscovery)?.error?.code == .unknown)
        #expect(peripheral.state == .connected)
    }

    /// A search that does move on, one handle per page, up to 0xFFFF: long (a page per handle, here the last
    /// 256, in each of the system's and the app's discoveries), but it ends, and its result is what the peer
    /// said. (From 0x0001 it would take 65,535 pages, two hours of virtual time.)
    @Test func aServiceDiscoveryThatCreepsOneHandleAtATimeEndsAt0xFFFF() async throws {
        let room = HostileRoom(script: [
            .init(
                .att(.readByGroupTypeRequest) { $0.handle!.rawValue > 1 },
                [
                    .reply {
                        let start = $0.handle!
                        let end = start.rawValue < 0xFF00 ? AttributeHandle(0xFEFF) : start
                        return Peer.services([(start, end, 0x180F)])
                    }
                ])
        ])
        let peripheral = try await room.connect(settle: false)
        let start = room.radio.now
        peripheral.discoverServices(nil)
        try await room.run(
            until: { room.phone.events.contains(where: \.isServiceDiscovery) }, within: .seconds(120),
            "discovery's end")
        #expect(room.phone.events.first(where: \.isServiceDiscovery)?.error == nil)
        #expect(peripheral.services?.count == 2 + 1 + 256)  // GAP and GATT, one group to 0xFEFF, then one per handle
        #expect(peripheral.services?.last?.handleRange == 0xFFFF...0xFFFF)
        #expect(peripheral.state == .connected)
        #expect(room.radio.now - start < .seconds(60))
    }

    // MARK: The MTU

    /// The peer answers our Exchange MTU Request twice: the second answer answers nothing.
    @Test func anMTUExchangeAnsweredTwiceDropsTheLinkAndFailsWhatWaited() async throws {
        let room = HostileRoom(script: [.init(.att(.exchangeMTURequest), [.honest, .honest])])
        let peripheral = try await room.connect(settle: false)
        peripheral.discoverServices(nil)
        try await room.run(until: { peripheral.state == .disconnected }, within: .seconds(5), "the link's end")
        try await room.run(.seconds(1))
        #expect(room.phone.events.filter(\.isServiceDiscovery).count == 1, "\(room.phone.lines)")
        #expect(room.phone.events.first(where: \.isServiceDiscovery)?.error != nil)
        Self.expectDisconnected(room, peripheral)
    }

    @Test func anMTUBelow23IsTakenAs23() async throws {
        let room = HostileRoom(script: [.init(.att(.exchangeMTURequest), [.att([0x03, 0x05, 0x00])])])
        let peripheral = try await room.connect()
        _ = try await room.discover(peripheral)
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == 20)
        let (data, error) = try await Self.read(room, peripheral, Peer.long)
        #expect(error == nil)
        #expect(data.map(Array.init) == Peer.longValue)
    }

    @Test func anMTUAboveWhatWeOfferIsCappedAtOurs() async throws {
        let room = HostileRoom(script: [.init(.att(.exchangeMTURequest), [.att([0x03, 0xFF, 0xFF])])])
        let peripheral = try await room.connect()
        _ = try await room.discover(peripheral)
        let mtu = try #require(peripheral.link?.attMTU)
        #expect(mtu <= 517 && mtu > 23)
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == min(512, mtu - 3))
        #expect(try await room.readsHonestly(peripheral))
    }

    /// The peer, as a client, asks to exchange the MTU three times (a client may once): our server answers each
    /// (a server must). The first says the peer receives only 23 octets, and is respected; the later ones, which
    /// would raise it again, are ignored.
    @Test func thePeersRepeatedMTURequestsAreAnsweredAndOnlyTheFirstCounts() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [])
        #expect(peripheral.link?.attMTU == 247)
        room.peer.perform([.att([0x02, 0x17, 0x00]), .att([0x02, 0x00, 0x02]), .att([0x02, 0x40, 0x00])])
        try await room.run(.seconds(1))
        #expect(room.peer.received(.exchangeMTUResponse).count == 3)
        #expect(peripheral.link?.attMTU == 23)
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == 20)
        #expect(try await room.readsHonestly(peripheral))
    }

    // MARK: Values too long

    @Test func aReadResponseLongerThanTheMTUFailsTheReadAndDropsTheLink() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(script: [
            .init(.att(.readRequest), [.att([0x0B] + [UInt8](repeating: 0xAB, count: 400))])
        ])
        let (data, error) = try await Self.read(room, peripheral)
        #expect(data == nil)
        #expect(error?.code == .unknown)
        Self.expectDisconnected(room, peripheral)
    }

    /// Every Read Blob is answered with a full part: a value that would grow past 512 octets, the longest there
    /// is (Core Spec Vol 3 Part F 3.2.9). The read ends with Invalid Attribute Value Length (`CBATTError`'s
    /// `invalidAttributeValueLength`, as for a write too long), after at most 512 octets' worth of requests.
    @Test func aReadBlobChainPast512OctetsFailsWithInvalidAttributeValueLength() async throws {
        let (room, peripheral) = try await HostileRoom.discovered(
            mtu: 23,
            script: [
                .init(.att(.readRequest), [.att([0x0B] + [UInt8](repeating: 0x11, count: 22))]),
                .init(.att(.readBlobRequest), [.att([0x0D] + [UInt8](repeating: 0x22, count: 22))]),
            ])
        let (data, error) = try await Self.read(room, peripheral, within: .seconds(30))
        #expect(error?.code == .att(.invalidAttributeValueLength), "\(String(describing: error))")
        #expect(data == nil)
        #expect(room.peer.received(.readBlobRequest).count <= 512 / 22)
        #expect(peripheral.state == .connected)
    }
}
