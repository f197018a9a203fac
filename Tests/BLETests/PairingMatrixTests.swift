import BLECore
import BLEHCI
import BLEHost
import BLESMP
import BLEVirtualController
import Synchronization
import Testing

/// Every row of the pairing matrix between two SMP machines, a central's and a peripheral's, on a link that
/// delivers every command: roles (the central starting, or the peripheral's Security Request), Secure Connections
/// and legacy on either side, all 25 IO capability pairs, MITM asked by either side or neither, bonding on either
/// side or neither, each key distribution the fields allow, users who accept, reject, cancel, mistype or never
/// answer. Each row's outcome is `PairingMatrix.expected`, written from the spec's tables; both sides must reach
/// it (or both fail with the same reason, one finding it, the other told).
@Suite struct PairingMatrixTests {
    typealias Row = PairingMatrix.Row
    typealias Device = PairingMatrix.Device

    /// Features: every capability pair, SC on each side or not, MITM on each side or not, bonding on each side or
    /// not (1,600 rows).
    static var featureRows: [Row] {
        var rows: [Row] = []
        for central in PairingMatrix.capabilities {
            for peripheral in PairingMatrix.capabilities {
                for flags in 0..<64 {
                    func bit(_ n: Int) -> Bool { flags & (1 << n) != 0 }
                    rows.append(
                        Row(
                            central: Device(io: central, secure: !bit(0), mitm: bit(2), bonding: !bit(4)),
                            peripheral: Device(io: peripheral, secure: !bit(1), mitm: bit(3), bonding: !bit(5))))
                }
            }
        }
        return rows
    }

    /// Key distributions: each side sends and asks for each subset of {LTK, identity} or its default, in both
    /// versions, bonding or not.
    static var keyRows: [Row] {
        let choices: [KeyDistribution?] = [nil, [], [.encryptionKey], [.identityKey], [.encryptionKey, .identityKey]]
        var rows: [Row] = []
        for secure in [true, false] {
            for bonding in [(true, true), (true, false), (false, true)] {
                for a in choices {
                    for b in choices {
                        for c in choices {
                            for d in choices {
                                rows.append(
                                    Row(
                                        central: Device(
                                            io: .noInputNoOutput, secure: secure, bonding: bonding.0, sends: a, asks: b),
                                        peripheral: Device(
                                            io: .noInputNoOutput, secure: secure, bonding: bonding.1, sends: c, asks: d)
                                    ))
                            }
                        }
                    }
                }
            }
        }
        return rows
    }

    /// Users: on each side, each behaviour, for every capability pair with MITM (so every method is met), in
    /// both versions; and the peripheral's Security Request starting each of those pairings.
    static var userRows: [Row] {
        var rows: [Row] = []
        for central in PairingMatrix.capabilities {
            for peripheral in PairingMatrix.capabilities {
                for secure in [true, false] {
                    let c = Device(io: central, secure: secure, mitm: true)
                    let p = Device(io: peripheral, secure: secure, mitm: true)
                    for user in [PairingMatrix.User.rejects, .cancels, .mistypes, .silent] {
                        rows.append(Row(central: c, peripheral: p, centralUser: user))
                        rows.append(Row(central: c, peripheral: p, peripheralUser: user))
                    }
                    rows.append(Row(central: c, peripheral: p, start: .securityRequest))
                    rows.append(
                        Row(central: Device(io: central, secure: secure), peripheral: p, start: .securityRequest))
                }
            }
        }
        return rows
    }

    @Test func everyFeatureRow() { Self.check(Self.featureRows) }
    @Test func everyKeyDistributionRow() { Self.check(Self.keyRows) }
    @Test func everyUserRow() { Self.check(Self.userRows) }

    /// Runs each row and records, per row, where it departs from the expectation.
    static func check(_ rows: [Row], sourceLocation: SourceLocation = #_sourceLocation) {
        var failed = 0
        for row in rows {
            let expected = PairingMatrix.expected(row)
            var link = MachineLink(row)
            link.play()
            let problems = link.problems(against: expected)
            guard !problems.isEmpty else { continue }
            failed += 1
            // Every failing row is named, up to a screenful.
            if failed <= 20 {
                Issue.record(
                    "\(row)\n  expected \(expected)\n  \(problems.joined(separator: "\n  "))",
                    sourceLocation: sourceLocation)
            }
        }
        #expect(failed == 0, "\(failed) of \(rows.count) rows", sourceLocation: sourceLocation)
    }
}

/// Two pairing machines on a link that delivers every command at once, with the rows' users; the link is
/// encrypted with the key the central asks for when the peripheral holds the same one.
struct MachineLink {
    typealias Role = SMPPairing.Role
    let row: PairingMatrix.Row
    var machines: [Role: SMPPairing]
    var shown: [Role: UInt32] = [:]
    var waitingToType: Set<Role> = []
    var results: [Role: SMPPairing.Result] = [:]
    var failures: [Role: SMPPairing.Failure] = [:]
    var timers: Set<Role> = []
    var peripheralKey: [UInt8]?
    var encryptedWith: [UInt8]?
    var securityRequested = false
    /// Pairing Failed commands each side sent.
    var pairingFailedSent: [Role: Int] = [:]

    init(_ row: PairingMatrix.Row) {
        self.row = row
        func configuration(_ device: PairingMatrix.Device, _ role: Role) -> SMPPairing.Configuration {
            var c = SMPPairing.Configuration(
                ioCapability: device.io,
                privateKey: [UInt8](repeating: role == .initiator ? 0x11 : 0x22, count: 31) + [0x2A],
                identity: PairingMatrix.identity(role))
            c.secureConnections = device.secure
            c.mitm = device.mitm
            c.bonding = device.bonding
            c.distributedKeys = device.sends
            c.requestedKeys = device.asks
            return c
        }
        let central = BluetoothAddress(bytes: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x55], type: .randomDevice)
        let peripheral = BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x0A, 0x12, 0x34])
        machines = [
            .initiator: SMPPairing(
                role: .initiator, configuration: configuration(row.central, .initiator), initiatorAddress: central,
                responderAddress: peripheral, random: SMPRandom(seed: [UInt8](repeating: 1, count: 16))),
            .responder: SMPPairing(
                role: .responder, configuration: configuration(row.peripheral, .responder),
                initiatorAddress: central, responderAddress: peripheral,
                random: SMPRandom(seed: [UInt8](repeating: 2, count: 16))),
        ]
    }

    func user(_ role: Role) -> PairingMatrix.User { role == .initiator ? row.centralUser : row.peripheralUser }

    /// Starts as the row says, runs to quiet, and lets the 30 s timers of a pairing left waiting run out.
    mutating func play() {
        switch row.start {
        case .central:
            run(.start, at: .initiator)
        case .securityRequest:
            run(.start, at: .responder)
            // The central's host answers a Security Request by pairing.
            if securityRequested { run(.start, at: .initiator) }
        }
        for role in [Role.initiator, .responder] where timers.contains(role) {
            timers.remove(role)
            run(.timerExpired, at: role)
        }
    }

    mutating func run(_ first: SMPPairing.Event, at role: Role) {
        var queue: [(Role, SMPPairing.Event)] = [(role, first)]
        var steps = 0
        while !queue.isEmpty, steps < 10_000 {
            steps += 1
            let (target, event) = queue.removeFirst()
            for action in machines[target]!.handle(event) { queue += perform(action, by: target) }
        }
    }

    private mutating func perform(_ action: SMPPairing.Action, by role: Role) -> [(Role, SMPPairing.Event)] {
        let other: Role = role == .initiator ? .responder : .initiator
        switch action {
        case .send(let pdu):
            if case .pairingFailed = pdu { pairingFailedSent[role, default: 0] += 1 }
            return [(other, .received(pdu))]
        case .startTimer: timers.insert(role)
        case .stopTimer: timers.remove(role)
        case .displayPasskey(let value):
            shown[role] = value
            if waitingToType.remove(other) != nil {
                return [(other, .passkeyEntered(PairingMatrix.typed(value, by: user(other))))]
            }
        case .requestPasskey:
            switch user(role) {
            case .silent: break
            case .rejects, .cancels: return [(role, .passkeyEntered(nil))]
            case .accepts, .mistypes:
                if let value = shown[other] {
                    return [(role, .passkeyEntered(PairingMatrix.typed(value, by: user(role))))]
                }
                if machines[other]!.configuration.ioCapability == .keyboardOnly
                    && machines[role]!.configuration.ioCapability == .keyboardOnly
                {
                    // Both input: the users agreed on a number beforehand.
                    return [(role, .passkeyEntered(PairingMatrix.typed(PairingMatrix.agreedPasskey, by: user(role))))]
                }
                waitingToType.insert(role)
            }
        case .confirm:
            switch user(role) {
            case .silent: break
            case .rejects, .cancels: return [(role, .confirmed(false))]
            case .accepts, .mistypes: return [(role, .confirmed(true))]
            }
        case .encrypt(let key):
            guard let answer = peripheralKey else { return [(.initiator, .encryptionChanged(status: 0x06))] }
            let status: UInt8 = answer == key.key ? 0x00 : 0x3D
            if status == 0 { encryptedWith = answer }
            return [(.initiator, .encryptionChanged(status: status)), (.responder, .encryptionChanged(status: status))]
        case .provideKeyForEncryption(let key):
            peripheralKey = key
        case .securityRequested:
            securityRequested = true
        case .ignored:
            break
        case .completed(let result):
            results[role] = result
        case .failed(let failure):
            failures[role] = failure
        }
        return []
    }

    /// Where the link's end departs from `expected`, in words.
    func problems(against expected: PairingMatrix.Outcome) -> [String] {
        var problems: [String] = []
        func check(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { problems.append(what()) } }
        switch expected {
        case .paired(let want):
            guard let central = results[.initiator], let peripheral = results[.responder] else {
                return ["did not pair: central \(outcome(.initiator)), peripheral \(outcome(.responder))"]
            }
            for (side, result) in [("central", central), ("peripheral", peripheral)] {
                check(result.method == want.method, "the \(side)'s method is \(result.method)")
                check(result.secureConnections == want.secure, "the \(side)'s SC is \(result.secureConnections)")
                check(
                    result.authenticated == want.authenticated, "the \(side)'s authenticated is \(result.authenticated)"
                )
                check(result.bonded == want.bonded, "the \(side)'s bonded is \(result.bonded)")
                check(result.keySize == 16, "the \(side)'s key size is \(result.keySize)")
            }
            check(encryptedWith != nil, "the link was not encrypted")
            check(
                (central.peerIdentity != nil) == want.responderKeys.contains(.identityKey),
                "the central's peer identity: \(String(describing: central.peerIdentity))")
            check(
                (peripheral.peerIdentity != nil) == want.initiatorKeys.contains(.identityKey),
                "the peripheral's peer identity: \(String(describing: peripheral.peerIdentity))")
            if let identity = central.peerIdentity {
                check(identity == PairingMatrix.identity(.responder), "a wrong IRK")
            }
            if let identity = peripheral.peerIdentity {
                check(identity == PairingMatrix.identity(.initiator), "a wrong IRK")
            }
            if !want.secure {
                // The LTK the peripheral distributed (with its EDIV and Rand) is the one it answers with later.
                check(
                    (central.peerLongTermKey != nil) == want.responderKeys.contains(.encryptionKey),
                    "the central's LTK: \(String(describing: central.peerLongTermKey))")
                if want.responderKeys.contains(.encryptionKey) {
                    check(central.peerLongTermKey == peripheral.localLongTermKey, "the legacy LTKs differ")
                }
                check(
                    (peripheral.peerLongTermKey != nil) == want.initiatorKeys.contains(.encryptionKey),
                    "the peripheral's LTK from the central: \(String(describing: peripheral.peerLongTermKey))")
            } else {
                check(central.peerLongTermKey == peripheral.localLongTermKey, "the derived LTKs differ")
            }
            check(pairingFailedSent.isEmpty, "Pairing Failed was sent: \(pairingFailedSent)")
        case .failed(let reason, let finder):
            let hearer: Role = finder == .initiator ? .responder : .initiator
            check(failures[finder] == .local(reason), "the \(finder) ended \(outcome(finder))")
            check(failures[hearer] == .remote(reason), "the \(hearer) ended \(outcome(hearer))")
            check(
                pairingFailedSent[finder] == 1 && pairingFailedSent[hearer] == nil,
                "Pairing Failed: \(pairingFailedSent)")
            check(encryptedWith == nil, "the link was encrypted")
        case .timeout:
            check(
                failures[.initiator] == .timeout && failures[.responder] == .timeout,
                "central \(outcome(.initiator)), peripheral \(outcome(.responder))")
            check(pairingFailedSent.isEmpty, "Pairing Failed was sent: \(pairingFailedSent)")
        }
        check(timers.isEmpty, "timers still running: \(timers)")
        return problems
    }

    func outcome(_ role: Role) -> String {
        if let result = results[role] { return "paired (\(result.method))" }
        if let failure = failures[role] { return "\(failure)" }
        return "still pairing"
    }
}

// MARK: - Over the air

/// A table of the matrix's rows between two hosts on the simulated radio: each row's pairing runs over the air
/// (SMP on L2CAP, the controllers' LL encryption) and both hosts must end as the row expects. The rows cover
/// every capability pair with MITM in both versions, MITM that cannot be met, bonding on either side or neither,
/// the key distributions BTstack's stock examples and Linux use, each user behaviour for each kind of method (a
/// silent one runs the 30 s timer out), and the peripheral's Security Request.
extension PairingMatrixTests {
    static var radioRows: [Row] {
        var rows: [Row] = []
        for central in PairingMatrix.capabilities {
            for peripheral in PairingMatrix.capabilities {
                for secure in [true, false] {
                    rows.append(
                        Row(
                            central: Device(io: central, secure: secure, mitm: true),
                            peripheral: Device(io: peripheral, secure: secure, mitm: true)))
                }
            }
        }
        for secure in [true, false] {
            // MITM asked by one side only, and impossible with a side that neither shows nor types.
            rows.append(
                Row(
                    central: Device(io: .noInputNoOutput, secure: secure, mitm: true),
                    peripheral: Device(io: .keyboardDisplay, secure: secure)))
            rows.append(
                Row(
                    central: Device(io: .keyboardDisplay, secure: secure),
                    peripheral: Device(io: .noInputNoOutput, secure: secure, mitm: true)))
            rows.append(
                Row(
                    central: Device(io: .keyboardOnly, secure: secure),
                    peripheral: Device(io: .displayOnly, secure: secure, mitm: true)))
            // Versions apart: one side without Secure Connections makes it legacy.
            rows.append(
                Row(
                    central: Device(io: .displayYesNo, secure: secure, mitm: true),
                    peripheral: Device(io: .displayYesNo, secure: !secure, mitm: true)))
            for bonding in [(true, true), (true, false), (false, true), (false, false)] {
                rows.append(
                    Row(
                        central: Device(io: .noInputNoOutput, secure: secure, bonding: bonding.0),
                        peripheral: Device(io: .noInputNoOutput, secure: secure, bonding: bonding.1)))
            }
            // BTstack's stock peripherals and centrals (No Bonding, the identity listed), a peripheral that lists
            // no keys, a central that asks only for the LTK.
            rows.append(
                Row(
                    central: Device(io: .keyboardDisplay, secure: secure),
                    peripheral: Device(
                        io: .noInputNoOutput, secure: secure, bonding: false, sends: [.identityKey],
                        asks: [.identityKey])))
            rows.append(
                Row(
                    central: Device(
                        io: .noInputNoOutput, secure: secure, bonding: false, sends: [.identityKey],
                        asks: [.identityKey]),
                    peripheral: Device(io: .noInputNoOutput, secure: secure)))
            rows.append(
                Row(
                    central: Device(io: .noInputNoOutput, secure: secure),
                    peripheral: Device(io: .noInputNoOutput, secure: secure, sends: [])))
            rows.append(
                Row(
                    central: Device(io: .noInputNoOutput, secure: secure, asks: [.encryptionKey]),
                    peripheral: Device(io: .noInputNoOutput, secure: secure)))
            // The Security Request, with and without MITM.
            rows.append(
                Row(
                    central: Device(io: .keyboardDisplay, secure: secure),
                    peripheral: Device(io: .displayOnly, secure: secure, mitm: true), start: .securityRequest))
            rows.append(
                Row(
                    central: Device(io: .noInputNoOutput, secure: secure),
                    peripheral: Device(io: .noInputNoOutput, secure: secure), start: .securityRequest))
        }
        // Each user behaviour on each side, for Just Works, Numeric Comparison and Passkey Entry.
        let methods: [(Device, Device)] = [
            (Device(io: .displayYesNo), Device(io: .displayYesNo)),
            (Device(io: .displayYesNo, mitm: true), Device(io: .displayYesNo, mitm: true)),
            (Device(io: .keyboardOnly, mitm: true), Device(io: .displayOnly, mitm: true)),
            (Device(io: .displayOnly, secure: false, mitm: true), Device(io: .keyboardOnly, secure: false, mitm: true)),
        ]
        for (central, peripheral) in methods {
            for user in [PairingMatrix.User.rejects, .cancels, .mistypes, .silent] {
                rows.append(Row(central: central, peripheral: peripheral, centralUser: user))
                rows.append(Row(central: central, peripheral: peripheral, peripheralUser: user))
            }
        }
        return rows
    }

    static func security(_ device: Device, seed: UInt8, role: SMPPairing.Role) -> HostSecurityConfiguration {
        var s = HostSecurityConfiguration(seed: [UInt8](repeating: seed, count: 16))
        s.ioCapability = device.io
        s.secureConnections = device.secure
        s.mitm = device.mitm
        s.bonding = device.bonding
        s.distributedKeys = device.sends
        s.requestedKeys = device.asks
        s.identity = PairingMatrix.identity(role)
        return s
    }

    @Test(arguments: radioRows)
    func overTheAir(_ row: Row) async throws {
        let expected = PairingMatrix.expected(row)
        let pair = HostPairingTests.Pair(
            central: Self.security(row.central, seed: 1, role: .initiator),
            peripheral: Self.security(row.peripheral, seed: 2, role: .responder),
            centralAnswersSecurityRequests: row.start == .securityRequest)
        pair.central.user.withLock { $0 = row.centralUser }
        pair.peripheral.user.withLock { $0 = row.peripheralUser }
        let (central, peripheral) = try await pair.connect()
        let request = Mutex<Result<SMPPairing.Result, HostError>?>(nil)
        switch row.start {
        case .central: pair.central.host.pair(on: central) { result in request.withLock { $0 = result } }
        case .securityRequest: pair.peripheral.host.pair(on: peripheral) { result in request.withLock { $0 = result } }
        }
        /// How a side's pairing ended, from what its host told the layer above.
        func end(_ side: HostPairingTests.Side) -> SideEnd? {
            side.events.withLock { events in
                for event in events.reversed() {
                    switch event {
                    case .pairingCompleted(_, let result): return .paired(result)
                    case .pairingFailed(_, let failure): return .failed(failure)
                    default: continue
                    }
                }
                return nil
            }
        }
        try await pair.run(
            until: { end(pair.central) != nil && end(pair.peripheral) != nil && request.withLock { $0 } != nil },
            limit: .seconds(40), "both ends of \(row)")
        let centralEnd = try #require(end(pair.central))
        let peripheralEnd = try #require(end(pair.peripheral))
        switch expected {
        case .paired(let want):
            guard case .paired(let c) = centralEnd, case .paired(let p) = peripheralEnd else {
                Issue.record("\(row): expected \(expected); central \(centralEnd), peripheral \(peripheralEnd)")
                return
            }
            for result in [c, p] {
                #expect(result.method == want.method, "\(row)")
                #expect(result.secureConnections == want.secure, "\(row)")
                #expect(result.authenticated == want.authenticated, "\(row)")
                #expect(result.bonded == want.bonded, "\(row)")
            }
            #expect((c.peerIdentity != nil) == want.responderKeys.contains(.identityKey), "\(row)")
            #expect((p.peerIdentity != nil) == want.initiatorKeys.contains(.identityKey), "\(row)")
            if !want.secure {
                #expect((c.peerLongTermKey != nil) == want.responderKeys.contains(.encryptionKey), "\(row)")
            }
            #expect(HostPairingTests.encrypted(pair.central) && HostPairingTests.encrypted(pair.peripheral), "\(row)")
            #expect(
                (try? request.withLock { $0 }?.get()) != nil,
                "the request: \(String(describing: request.withLock { $0 }))")
        case .failed(let reason, let finder):
            let (found, heard) = finder == .initiator ? (centralEnd, peripheralEnd) : (peripheralEnd, centralEnd)
            #expect(found.failureValue == .local(reason), "\(row): \(found)")
            #expect(heard.failureValue == .remote(reason), "\(row): \(heard)")
            #expect(request.withLock { $0 }?.error?.code == .pairingFailed, "\(row)")
        case .timeout:
            #expect(centralEnd.failureValue == .timeout && peripheralEnd.failureValue == .timeout, "\(row)")
        }
        // The link stays up, whatever the pairing did.
        #expect(!pair.central.host.links.isEmpty && !pair.peripheral.host.links.isEmpty, "\(row)")
    }
}

/// How one side's pairing ended, as its host reported it.
enum SideEnd: Sendable, CustomStringConvertible {
    case paired(SMPPairing.Result)
    case failed(SMPPairing.Failure)

    var failureValue: SMPPairing.Failure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }

    var description: String {
        switch self {
        case .paired(let result): "paired (\(result.method))"
        case .failed(let failure): "\(failure)"
        }
    }
}

/// A link that drops while a pairing is under way ends it on both sides: the request waiting for it fails with
/// the disconnection, neither side reports a pairing, and no 30 s timer is left running.
extension PairingMatrixTests {
    enum DropPhase: String, CaseIterable, Sendable {
        /// Phase 1: the central asks and drops the link before the answer.
        case features
        /// Phase 2: the central's user is asked for the passkey, and the central drops the link instead.
        case authentication
        /// Between phases 2 and 3: the peripheral leaves the central's range as it starts encrypting with the new
        /// key, so the central's encryption never completes and the link ends by its supervision timeout.
        case encryption
        /// Phase 3 (legacy, both bonding, started by the peripheral's Security Request): the central leaves the
        /// peripheral's range as its link is encrypted, with the keys still to cross; the peripheral's request
        /// fails when the link's supervision timeout ends it.
        case keyDistribution
    }

    @Test(arguments: DropPhase.allCases, [true, false])
    func aLinkThatDropsDuringEachPhaseEndsThePairing(_ phase: DropPhase, secure: Bool) async throws {
        let secure = secure && phase != .keyDistribution
        let start: PairingMatrix.Start = phase == .keyDistribution ? .securityRequest : .central
        let pair = HostPairingTests.Pair(
            central: Self.security(Device(io: .keyboardOnly, secure: secure, mitm: true), seed: 1, role: .initiator),
            peripheral: Self.security(
                Device(io: .displayOnly, secure: secure, mitm: true), seed: 2, role: .responder),
            centralAnswersSecurityRequests: start == .securityRequest)
        if phase == .authentication { pair.central.user.withLock { $0 = .silent } }
        let (central, peripheral) = try await pair.connect()
        /// The side that leaves range when it hears its link encrypted.
        func leavesOnEncryption(_ side: HostPairingTests.Side) {
            let radio = pair.radio
            let controller = side.controller
            side.onEvent.withLock {
                $0 = { event in
                    guard case .encryptionChanged(_, true, .success) = event else { return }
                    radio.move(controller, to: RadioPosition(x: 100_000, y: 0))
                }
            }
        }
        if phase == .encryption { leavesOnEncryption(pair.peripheral) }
        if phase == .keyDistribution { leavesOnEncryption(pair.central) }
        let request = Mutex<Result<SMPPairing.Result, HostError>?>(nil)
        if start == .central {
            pair.central.host.pair(on: central) { result in request.withLock { $0 = result } }
        } else {
            pair.peripheral.host.pair(on: peripheral) { result in request.withLock { $0 = result } }
        }
        switch phase {
        case .features:
            pair.central.host.disconnect(central, reason: .remoteUserTerminatedConnection)
        case .authentication:
            try await pair.run(
                until: {
                    pair.central.heardAny { if case .pairingPrompt(_, .enterPasskey) = $0 { true } else { false } }
                },
                "the passkey prompt")
            pair.central.host.disconnect(central, reason: .remoteUserTerminatedConnection)
        case .encryption, .keyDistribution:
            break
        }
        try await pair.run(
            until: {
                pair.central.host.links.isEmpty && pair.peripheral.host.links.isEmpty && request.withLock { $0 } != nil
            },
            "the disconnection")
        let error = try #require(request.withLock { $0 }?.error, "\(phase): the pair request succeeded")
        #expect(error.code == .disconnected, "\(phase): \(error)")
        for side in [pair.central, pair.peripheral] {
            #expect(!side.heardAny { if case .pairingCompleted = $0 { true } else { false } }, "\(phase)")
        }
        switch phase {
        case .encryption:
            #expect(HostPairingTests.encrypted(pair.peripheral) && !HostPairingTests.encrypted(pair.central))
        case .keyDistribution:
            #expect(HostPairingTests.encrypted(pair.central) && HostPairingTests.encrypted(pair.peripheral))
        case .features, .authentication:
            #expect(!HostPairingTests.encrypted(pair.central) && !HostPairingTests.encrypted(pair.peripheral))
        }
        // Nothing waits on the link any more: no 30 s timer runs on either side.
        try await pair.radio.run(for: .seconds(1))
        #expect(pair.central.host.runningTimerCount == 0, "\(phase)")
        #expect(pair.peripheral.host.runningTimerCount == 0, "\(phase)")
    }
}
