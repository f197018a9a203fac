import BLEATT
import BLECore
import NIOCore
import Testing

/// Arbitrary and mutated bytes into the ATT decoder and the bearer: each must return or throw, never trap,
/// and the bearer must stay usable (or be cleanly closed) afterwards.
@Suite struct ATTRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in next() } }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
    }

    /// The opcodes this stack knows, so random PDUs reach the field decoders and not only `.unknown`.
    static let knownOpcodes: [UInt8] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C,
        0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13, 0x16, 0x17, 0x18, 0x19, 0x1B,
        0x1D, 0x1E, 0x20, 0x21, 0x23, 0x52, 0xD2,
    ]

    /// A random PDU: half the time a known opcode, then 0...40 random parameter bytes.
    static func randomPDU(_ g: inout Generator) -> [UInt8] {
        let opcode = g.next() & 1 == 0 ? knownOpcodes[g.below(knownOpcodes.count)] : g.next()
        return [opcode] + g.bytes(g.below(41))
    }

    /// One golden PDU, damaged: a bit flipped, a byte replaced, cut short, or extended.
    static func mutatedGolden(_ g: inout Generator) -> [UInt8] {
        var bytes = goldens[g.below(goldens.count)].bytes
        switch g.below(4) {
        case 0:
            let i = g.below(bytes.count)
            bytes[i] ^= 1 << (g.next() % 8)
        case 1: bytes[g.below(bytes.count)] = g.next()
        case 2: bytes.removeLast(g.below(bytes.count) + 1)
        default: bytes += g.bytes(g.below(4) + 1)
        }
        return bytes
    }

    /// Whatever decodes must encode to something that decodes to the same PDU.
    static func checkRoundTrip(_ bytes: [UInt8]) {
        guard let pdu = try? ATTPDU(bytes: bytes) else { return }
        #expect(pdu.opcode.rawValue == bytes[0])
        #expect((try? ATTPDU(buffer: pdu.encoded())) == pdu, "\(bytes.hexString)")
    }

    // MARK: - Decoder

    @Test func randomBytesNeverTrap() {
        var g = Generator(seed: 0xA77)
        for _ in 0..<4000 {
            Self.checkRoundTrip(Self.randomPDU(&g))
        }
        #expect(throws: ATTError.self) { try ATTPDU(bytes: []) }
    }

    /// Every golden PDU with each bit flipped, cut at every length, and extended by 1...3 octets.
    @Test func systematicallyMutatedGoldensNeverTrap() {
        var g = Generator(seed: 0x60DE)
        for golden in goldens {
            let bytes = golden.bytes
            for index in bytes.indices {
                for bit in 0..<8 {
                    var flipped = bytes
                    flipped[index] ^= 1 << bit
                    Self.checkRoundTrip(flipped)
                }
            }
            for length in 0..<bytes.count {
                Self.checkRoundTrip(Array(bytes.prefix(length)))
            }
            for extra in 1...3 {
                Self.checkRoundTrip(bytes + g.bytes(extra))
            }
        }
    }

    @Test func randomlyMutatedGoldensNeverTrap() {
        var g = Generator(seed: 0xF11B)
        for _ in 0..<3000 {
            Self.checkRoundTrip(Self.mutatedGolden(&g))
        }
    }

    // MARK: - Bearer

    /// Feeds a bearer and keeps account of every transaction: each must complete exactly once.
    struct Driver {
        var bearer = ATTBearer()
        var completed: [ATTRequestID: Result<ATTPDU, ATTRequestFailure>] = [:]
        var indicationsCompleted: [ATTRequestID: ATTRequestFailure?] = [:]
        var closedBy: ATTError?
        var started: Set<ATTRequestID> = []
        var startedIndications: Set<ATTRequestID> = []

        @discardableResult
        mutating func apply(_ actions: [ATTBearer.Action]) -> [ATTBearer.Action] {
            for action in actions {
                switch action {
                case .complete(let id, let result):
                    #expect(completed[id] == nil, "\(id) completed twice")
                    #expect(started.contains(id))
                    completed[id] = result
                case .indicationComplete(let id, let failure):
                    #expect(indicationsCompleted[id] == nil, "indication \(id) completed twice")
                    #expect(startedIndications.contains(id))
                    indicationsCompleted[id] = .some(failure)
                case .closeBearer(let error):
                    #expect(closedBy == nil, "closed twice")
                    closedBy = error
                case .mtuChanged(let mtu):
                    #expect((ATTBearer.defaultMTU...bearer.localRxMTU).contains(mtu))
                case .send(let pdu):
                    // What the bearer sends itself (confirmations, error responses) is well formed.
                    #expect((try? ATTPDU(buffer: pdu)) != nil)
                case .startTimer, .cancelTimer, .request, .command, .notification, .indication:
                    break
                }
            }
            return actions
        }

        mutating func request(_ pdu: ATTPDU, id: UInt64) -> [ATTBearer.Action] {
            started.insert(ATTRequestID(id))
            return apply(bearer.sendRequest(pdu, id: ATTRequestID(id)))
        }

        mutating func indicate(_ value: [UInt8], id: UInt64) -> [ATTBearer.Action] {
            startedIndications.insert(ATTRequestID(id))
            return apply(bearer.sendIndication(.init(handle: AttributeHandle(8), value: value), id: ATTRequestID(id)))
        }

        mutating func received(_ bytes: [UInt8]) -> [ATTBearer.Action] {
            apply(bearer.received(ByteBuffer(bytes: bytes)))
        }
    }

    /// The states garbage arrives in: which transactions are pending when it comes.
    enum Setup: String, CaseIterable, CustomTestStringConvertible {
        case idle, outstandingRequest, queuedRequests, outstandingIndication, requestAndIndication, closed, disconnected
        var testDescription: String { rawValue }
    }

    static let read3 = ATTPDU.readRequest(.init(handle: AttributeHandle(3)))

    static func driver(_ setup: Setup) -> Driver {
        var driver = Driver()
        switch setup {
        case .idle: break
        case .outstandingRequest: _ = driver.request(read3, id: 1)
        case .queuedRequests:
            _ = driver.request(read3, id: 1)
            _ = driver.request(read3, id: 2)
        case .outstandingIndication: _ = driver.indicate([1], id: 1)
        case .requestAndIndication:
            _ = driver.request(read3, id: 1)
            _ = driver.indicate([1], id: 2)
        case .closed:
            _ = driver.request(read3, id: 1)
            _ = driver.apply(driver.bearer.timerFired(.transaction))
        case .disconnected:
            _ = driver.request(read3, id: 1)
            _ = driver.apply(driver.bearer.linkDisconnected())
        }
        return driver
    }

    @Test(arguments: Setup.allCases)
    func randomSDUsInEveryState(_ setup: Setup) {
        var g = Generator(seed: 0xBEA7 &+ UInt64(Setup.allCases.firstIndex(of: setup)!))
        for round in 0..<150 {
            var driver = Self.driver(setup)
            let wasOpen = driver.bearer.isOpen
            for _ in 0..<(1 + g.below(6)) {
                let sdu = g.next() & 1 == 0 ? Self.randomPDU(&g) : Self.mutatedGolden(&g)
                let actions = driver.received(sdu)
                if !wasOpen { #expect(actions.isEmpty) }
            }
            Self.checkStillWorks(&driver, round: round)
        }
    }

    /// After garbage: a closed bearer has failed everything and refuses more; an open one completes what is
    /// pending when given valid answers, then runs a fresh exchange.
    static func checkStillWorks(_ driver: inout Driver, round: Int) {
        let fresh: UInt64 = 1000
        guard driver.bearer.isOpen else {
            for id in driver.started { #expect(driver.completed[id] != nil, "round \(round): \(id) never completed") }
            for id in driver.startedIndications { #expect(driver.indicationsCompleted[id] != nil) }
            #expect(driver.received(ATTPDU.readResponse(.init(value: [])).bytes).isEmpty)
            let actions = driver.request(read3, id: fresh)
            #expect(driver.completed[ATTRequestID(fresh)].map { (try? $0.get()) == nil } == true)
            #expect(!actions.contains { if case .send = $0 { true } else { false } })
            return
        }
        #expect(driver.closedBy == nil)
        // Answer whatever requests are still pending, one at a time, in order.
        for id in driver.started.sorted(by: { $0.rawValue < $1.rawValue }) where driver.completed[id] == nil {
            _ = driver.received(ATTPDU.readResponse(.init(value: [0x42])).bytes)
            #expect(driver.completed[id] == .success(.readResponse(.init(value: [0x42]))), "round \(round)")
        }
        for id in driver.startedIndications where driver.indicationsCompleted[id] == nil {
            _ = driver.received(ATTPDU.handleValueConfirmation(.init()).bytes)
            #expect(driver.indicationsCompleted[id] == .some(nil), "round \(round)")
        }
        // A fresh request gets its answer.
        let read9 = ATTPDU.readRequest(.init(handle: AttributeHandle(9)))
        #expect(driver.request(read9, id: fresh).first == .send(read9.encoded()))
        _ = driver.received(ATTPDU.readResponse(.init(value: [7])).bytes)
        #expect(driver.completed[ATTRequestID(fresh)] == .success(.readResponse(.init(value: [7]))))
        // The server side still hands requests up.
        #expect(driver.received(read9.bytes) == [.request(read9)])
        #expect(driver.bearer.isOpen)
    }

    /// An SDU handed over as the bytes it arrived in gives the actions it gives as a buffer, whatever it holds,
    /// on open and closed bearers of several MTUs.
    @Test func receivingBytesInPlaceActsAsReceivingABuffer() {
        var g = Generator(seed: 0xB17E5)
        var notifications = 0
        for _ in 0..<20_000 {
            var bearer = ATTBearer()
            if g.below(100) < 50 {
                _ = bearer.received(
                    ByteBuffer(
                        bytes: ATTPDU.exchangeMTURequest(.init(clientRxMTU: UInt16(23 + g.below(100)))).encoded()
                            .readableBytesView))
            }
            if g.below(100) < 10 { _ = bearer.linkDisconnected() }
            var pdu = g.below(100) < 50 ? [0x1B] + g.bytes(g.below(130)) : Self.randomPDU(&g)
            if g.below(100) < 5 { pdu = [] }
            var copy = bearer
            let inPlace = bearer.received(bytes: ([0xEE] + pdu + [0xEE])[1..<(1 + pdu.count)])
            let buffered = copy.received(ByteBuffer(bytes: pdu))
            #expect(inPlace == buffered, "\(pdu.hexString)")
            if case .notification? = inPlace.first { notifications += 1 }
        }
        #expect(notifications > 1_000)
    }

    /// A stream of random SDUs into one long-lived bearer acting as server and client at once, with fresh
    /// requests and indications interleaved: no transaction is ever lost or completed twice.
    @Test func longRandomConversation() {
        var g = Generator(seed: 0xC0417)
        var driver = Driver()
        var nextID: UInt64 = 1
        for _ in 0..<1500 {
            switch g.below(10) {
            case 0:
                _ = driver.request(Self.read3, id: nextID)
                nextID += 1
            case 1:
                _ = driver.indicate(g.bytes(g.below(10)), id: nextID)
                nextID += 1
            case 2: _ = driver.apply(driver.bearer.timerFired(g.next() & 1 == 0 ? .transaction : .indication))
            case 3, 4: _ = driver.received(Self.mutatedGolden(&g))
            default: _ = driver.received(Self.randomPDU(&g))
            }
            if !driver.bearer.isOpen { driver = Driver() }
        }
    }
}
