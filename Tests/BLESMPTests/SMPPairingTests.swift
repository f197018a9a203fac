import BLECore
import Synchronization
import Testing

@testable import BLESMP

/// Two pairing machines talking to each other through a pretend link, as a central and a peripheral would,
/// with scripted users: every method in both versions, the keys each side ends with, and every way a pairing
/// fails (Core Spec 5.4, Vol 3, Part H, 2.3 and 3.5–3.6).
@Suite struct SMPPairingTests {
    static let centralAddress = BluetoothAddress(bytes: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x55], type: .randomDevice)
    static let peripheralAddress = BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x0A, 0x12, 0x34])

    static func random(_ seed: UInt8) -> SMPRandom { SMPRandom(seed: [UInt8](repeating: seed, count: 16)) }

    /// What a scripted user does when asked.
    struct User {
        /// The answer to a Just Works or Numeric Comparison prompt.
        var accepts = true
        /// What the user types when asked for a passkey: the one shown on the other device, unless set.
        var typed: UInt32?? = nil
    }

    /// One side: its machine, what it was shown and what it ended with.
    struct Side {
        var machine: SMPPairing
        var user: User
        var shown: UInt32?
        var compared: UInt32?
        var result: SMPPairing.Result?
        var failure: SMPPairing.Failure?
        var keyForEncryption: [UInt8]?
        var timerRunning = false
        var waitingForPasskey = false
        var sent: [SMPPDU] = []
    }

    /// Both sides and the link between them.
    struct Link {
        var central: Side
        var peripheral: Side
        var encryptedWith: [UInt8]?
        /// Changes what the peripheral sends, to play a peer that misbehaves.
        var tamper: (@Sendable (SMPPDU) -> SMPPDU)?

        init(
            central: SMPPairing.Configuration, peripheral: SMPPairing.Configuration, centralUser: User = User(),
            peripheralUser: User = User(), seed: UInt64 = 1
        ) {
            self.central = Side(
                machine: SMPPairing(
                    role: .initiator, configuration: central, initiatorAddress: SMPPairingTests.centralAddress,
                    responderAddress: SMPPairingTests.peripheralAddress,
                    random: SMPPairingTests.random(UInt8(truncatingIfNeeded: seed))),
                user: centralUser)
            self.peripheral = Side(
                machine: SMPPairing(
                    role: .responder, configuration: peripheral, initiatorAddress: SMPPairingTests.centralAddress,
                    responderAddress: SMPPairingTests.peripheralAddress,
                    random: SMPPairingTests.random(UInt8(truncatingIfNeeded: seed &+ 100))),
                user: peripheralUser)
        }

        /// Runs events to the end: each command sent is delivered to the other side, prompts answered by the
        /// scripted users, and an encryption request met by the peripheral's key (a mismatch fails it as a
        /// controller would, with MIC failure 0x3D).
        mutating func run(_ first: SMPPairing.Event, at role: SMPPairing.Role = .initiator) {
            var queue: [(SMPPairing.Role, SMPPairing.Event)] = [(role, first)]
            var steps = 0
            while !queue.isEmpty, steps < 10_000 {
                steps += 1
                let (target, event) = queue.removeFirst()
                let actions =
                    target == .initiator ? central.machine.handle(event) : peripheral.machine.handle(event)
                for action in actions {
                    queue += perform(action, by: target)
                }
            }
        }

        private mutating func perform(_ action: SMPPairing.Action, by role: SMPPairing.Role)
            -> [(SMPPairing.Role, SMPPairing.Event)]
        {
            let other: SMPPairing.Role = role == .initiator ? .responder : .initiator
            func side(_ body: (inout Side) -> Void) {
                if role == .initiator { body(&central) } else { body(&peripheral) }
            }
            switch action {
            case .send(let pdu):
                side { $0.sent.append(pdu) }
                let delivered = role == .responder ? tamper?(pdu) ?? pdu : pdu
                return [(other, .received(delivered))]
            case .startTimer:
                side { $0.timerRunning = true }
            case .stopTimer:
                side { $0.timerRunning = false }
            case .displayPasskey(let value):
                side { $0.shown = value }
                // A user waiting to read it types it now.
                let waiting = role == .initiator ? peripheral.waitingForPasskey : central.waitingForPasskey
                if waiting {
                    if role == .initiator {
                        peripheral.waitingForPasskey = false
                    } else {
                        central.waitingForPasskey = false
                    }
                    return [(other, .passkeyEntered(value))]
                }
            case .requestPasskey:
                // The user types what they were told to, or reads the other device's screen once it shows a
                // passkey (both input: the same number, agreed beforehand).
                let me = role == .initiator ? central : peripheral
                let shown = role == .initiator ? peripheral.shown : central.shown
                if let typed = me.user.typed { return [(role, .passkeyEntered(typed))] }
                if let shown { return [(role, .passkeyEntered(shown))] }
                let otherDisplays = (role == .initiator ? peripheral : central).machine.configuration.ioCapability
                if otherDisplays == .keyboardOnly { return [(role, .passkeyEntered(123_456))] }
                side { $0.waitingForPasskey = true }
            case .confirm(let value):
                side { $0.compared = value }
                return [(role, .confirmed((role == .initiator ? central : peripheral).user.accepts))]
            case .encrypt(let key):
                guard let answer = peripheral.keyForEncryption else {
                    return [(.initiator, .encryptionChanged(status: 0x06))]
                }
                let status: UInt8 = answer == key.key ? 0x00 : 0x3D
                if status == 0 { encryptedWith = answer }
                return [
                    (.initiator, .encryptionChanged(status: status)), (.responder, .encryptionChanged(status: status)),
                ]
            case .provideKeyForEncryption(let key):
                peripheral.keyForEncryption = key
            case .securityRequested, .ignored:
                break
            case .completed(let result):
                side { $0.result = result }
            case .failed(let failure):
                side { $0.failure = failure }
            }
            return []
        }
    }

    static func configuration(
        _ io: IOCapability, mitm: Bool = false, secure: Bool = true, identityByte: UInt8? = nil, key: UInt8 = 1
    ) -> SMPPairing.Configuration {
        var c = SMPPairing.Configuration(
            ioCapability: io, privateKey: [UInt8](repeating: key, count: 31) + [0x2A],
            identity: identityByte.map {
                SMPPairing.Identity(
                    resolvingKey: [UInt8](repeating: $0, count: 16),
                    address: BluetoothAddress(bytes: [0xC0 | $0, 1, 2, 3, 4, 5], type: .randomDevice))
            })
        c.mitm = mitm
        c.secureConnections = secure
        return c
    }
}

extension SMPPairingTests {
    /// Both sides end with the same result and keys that match across: the key the central encrypts with is
    /// the one the peripheral answers with.
    static func expectPaired(
        _ link: Link, method: PairingMethod, secure: Bool, sourceLocation: SourceLocation = #_sourceLocation
    )
        throws -> (SMPPairing.Result, SMPPairing.Result)
    {
        #expect(link.central.failure == nil, sourceLocation: sourceLocation)
        #expect(link.peripheral.failure == nil, sourceLocation: sourceLocation)
        let central = try #require(link.central.result, sourceLocation: sourceLocation)
        let peripheral = try #require(link.peripheral.result, sourceLocation: sourceLocation)
        #expect(central.method == method, sourceLocation: sourceLocation)
        #expect(peripheral.method == method, sourceLocation: sourceLocation)
        #expect(
            central.secureConnections == secure && peripheral.secureConnections == secure,
            sourceLocation: sourceLocation)
        #expect(central.authenticated == method.isAuthenticated, sourceLocation: sourceLocation)
        #expect(link.encryptedWith != nil, sourceLocation: sourceLocation)
        #expect(!link.central.timerRunning && !link.peripheral.timerRunning, sourceLocation: sourceLocation)
        // The bond's keys meet: what the central keeps to encrypt with is what the peripheral keeps to answer.
        #expect(central.peerLongTermKey != nil, sourceLocation: sourceLocation)
        #expect(central.peerLongTermKey == peripheral.localLongTermKey, sourceLocation: sourceLocation)
        return (central, peripheral)
    }

    @Test func secureConnectionsJustWorksBondsWithTheSameKeyOnBothSides() throws {
        var link = Link(
            central: Self.configuration(.noInputNoOutput, identityByte: 0x0C),
            peripheral: Self.configuration(.noInputNoOutput, identityByte: 0x0D, key: 2))
        link.run(.start)
        let (central, peripheral) = try Self.expectPaired(link, method: .justWorks, secure: true)
        // The derived LTK encrypted the link, and the identities crossed.
        #expect(link.encryptedWith == central.peerLongTermKey?.key)
        #expect(central.peerLongTermKey?.ediv == 0 && central.peerLongTermKey?.rand == 0)
        #expect(central.peerIdentity?.resolvingKey == [UInt8](repeating: 0x0D, count: 16))
        #expect(peripheral.peerIdentity?.resolvingKey == [UInt8](repeating: 0x0C, count: 16))
        #expect(peripheral.peerIdentity?.address.string == "CC:01:02:03:04:05")
        // Just Works was offered to both users.
        #expect(link.central.compared == nil && link.peripheral.compared == nil)
        // No Encryption Information in Secure Connections: the LTK is derived, not sent.
        #expect(!link.peripheral.sent.contains { if case .encryptionInformation = $0 { true } else { false } })
    }

    @Test func numericComparisonShowsTheSameValueOnBothSides() throws {
        var link = Link(
            central: Self.configuration(.displayYesNo, mitm: true),
            peripheral: Self.configuration(.displayYesNo, mitm: true, key: 2))
        link.run(.start)
        _ = try Self.expectPaired(link, method: .numericComparison, secure: true)
        let shown = try #require(link.central.compared)
        #expect(shown < 1_000_000)
        #expect(link.peripheral.compared == shown)
    }

    @Test(arguments: [SMPPairing.Role.initiator, .responder])
    func numericComparisonRejectedByEitherUserFails(rejecting: SMPPairing.Role) {
        var reject = User()
        reject.accepts = false
        var link = Link(
            central: Self.configuration(.displayYesNo, mitm: true),
            peripheral: Self.configuration(.displayYesNo, mitm: true, key: 2),
            centralUser: rejecting == .initiator ? reject : User(),
            peripheralUser: rejecting == .responder ? reject : User())
        link.run(.start)
        let (rejecter, other) =
            rejecting == .initiator ? (link.central, link.peripheral) : (link.peripheral, link.central)
        #expect(rejecter.failure == .local(.numericComparisonFailed))
        #expect(other.failure == .remote(.numericComparisonFailed))
        #expect(link.encryptedWith == nil)
    }

    @Test(arguments: [
        (IOCapability.keyboardOnly, IOCapability.displayOnly), (.displayOnly, .keyboardOnly),
        (.keyboardOnly, .keyboardOnly), (.keyboardDisplay, .keyboardOnly),
    ])
    func secureConnectionsPasskeyEntryAuthenticates(central: IOCapability, peripheral: IOCapability) throws {
        var link = Link(
            central: Self.configuration(central, mitm: true),
            peripheral: Self.configuration(peripheral, mitm: true, key: 2))
        link.run(.start)
        let (result, _) = try Self.expectPaired(
            link,
            method: PairingMethod.forCapabilities(initiator: central, responder: peripheral, secureConnections: true),
            secure: true)
        #expect(result.authenticated)
        // Twenty rounds: twenty confirms and twenty randoms from each side.
        #expect(link.central.sent.filter { if case .pairingConfirm = $0 { true } else { false } }.count == 20)
        #expect(link.peripheral.sent.filter { if case .pairingRandom = $0 { true } else { false } }.count == 20)
    }

    @Test func aWrongPasskeyFailsTheConfirmCheck() {
        var wrong = User()
        wrong.typed = .some(111_111)
        for secure in [true, false] {
            var link = Link(
                central: Self.configuration(.keyboardOnly, mitm: true, secure: secure),
                peripheral: Self.configuration(.displayOnly, mitm: true, secure: secure, key: 2), centralUser: wrong)
            link.run(.start)
            #expect(link.peripheral.failure == .local(.confirmValueFailed), "secure: \(secure)")
            #expect(link.central.failure == .remote(.confirmValueFailed), "secure: \(secure)")
        }
    }

    @Test func aCancelledPasskeyEntryFails() {
        var cancels = User()
        cancels.typed = .some(nil)
        var link = Link(
            central: Self.configuration(.keyboardOnly, mitm: true),
            peripheral: Self.configuration(.displayOnly, mitm: true, key: 2), centralUser: cancels)
        link.run(.start)
        #expect(link.central.failure == .local(.passkeyEntryFailed))
        #expect(link.peripheral.failure == .remote(.passkeyEntryFailed))
    }

    @Test func legacyJustWorksDistributesTheLongTermKeyWithItsIdentifiers() throws {
        var link = Link(
            central: Self.configuration(.noInputNoOutput, secure: false, identityByte: 0x0C),
            peripheral: Self.configuration(.noInputNoOutput, identityByte: 0x0D, key: 2))
        link.run(.start)
        let (central, peripheral) = try Self.expectPaired(link, method: .justWorks, secure: false)
        // The link was first encrypted with the STK; the distributed LTK (with its EDIV and Rand) is another key.
        #expect(link.encryptedWith != central.peerLongTermKey?.key)
        #expect(central.peerLongTermKey?.key.count == 16)
        // Each side distributed its own LTK: the central's is the one the peripheral keeps as its peer's.
        #expect(peripheral.peerLongTermKey == central.localLongTermKey)
        #expect(central.peerIdentity?.address.string == "CD:01:02:03:04:05")
    }

    @Test func legacyPasskeyEntryAuthenticates() throws {
        var link = Link(
            central: Self.configuration(.keyboardOnly, mitm: true, secure: false),
            peripheral: Self.configuration(.displayOnly, mitm: true, secure: false, key: 2))
        link.run(.start)
        let (result, _) = try Self.expectPaired(
            link, method: .passkeyEntry(.responderDisplaysInitiatorInputs), secure: false)
        #expect(result.authenticated)
        #expect(link.peripheral.shown != nil)
    }

    @Test func mitmThatCannotBeGivenFailsWithAuthenticationRequirements() {
        var link = Link(
            central: Self.configuration(.keyboardDisplay, mitm: true),
            peripheral: Self.configuration(.noInputNoOutput, key: 2))
        link.run(.start)
        #expect(link.central.failure == .local(.authenticationRequirements))
        #expect(link.peripheral.failure == .remote(.authenticationRequirements))
    }

    @Test func aKeyTooShortFailsWithEncryptionKeySize() {
        var small = Self.configuration(.noInputNoOutput, key: 2)
        small.maximumKeySize = 7
        var central = Self.configuration(.noInputNoOutput)
        central.minimumKeySize = 16
        var link = Link(central: central, peripheral: small)
        link.run(.start)
        #expect(link.central.failure == .local(.encryptionKeySize))
    }

    @Test func aShortKeyIsMaskedToItsSize() throws {
        var small = Self.configuration(.noInputNoOutput, key: 2)
        small.maximumKeySize = 10
        var link = Link(central: Self.configuration(.noInputNoOutput), peripheral: small)
        link.run(.start)
        let (result, _) = try Self.expectPaired(link, method: .justWorks, secure: true)
        #expect(result.keySize == 10)
        let key = try #require(result.peerLongTermKey?.key)
        #expect(key.suffix(6) == [0, 0, 0, 0, 0, 0])
        #expect(key.prefix(10).contains { $0 != 0 })
    }

    @Test func secureConnectionsOnlyRefusesALegacyPeer() {
        var strict = Self.configuration(.noInputNoOutput, key: 2)
        strict.secureConnectionsOnly = true
        var link = Link(central: Self.configuration(.noInputNoOutput, secure: false), peripheral: strict)
        link.run(.start)
        #expect(link.peripheral.failure == .local(.authenticationRequirements))
    }

    @Test func aPeerWithOurOOBDataIsRefused() {
        var peripheral = SMPPairing(
            role: .responder, configuration: Self.configuration(.noInputNoOutput, key: 2),
            initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress, random: Self.random(9))
        let request = PairingFeatures(
            ioCapability: .noInputNoOutput, oobDataPresent: true, authentication: [.bonding, .secureConnections],
            initiatorKeys: [.encryptionKey], responderKeys: [.encryptionKey])
        let actions = peripheral.handle(.received(.pairingRequest(request)))
        #expect(actions.contains(.send(.pairingFailed(.oobNotAvailable))))
        #expect(actions.contains(.failed(.local(.oobNotAvailable))))
    }

    @Test func reservedRequestValuesAreInvalidParameters() {
        for request in [
            PairingFeatures(
                ioCapability: IOCapability(rawValue: 7), authentication: [], initiatorKeys: [], responderKeys: []),
            PairingFeatures(
                ioCapability: .displayOnly, authentication: [], maximumKeySize: 17, initiatorKeys: [], responderKeys: []
            ),
            PairingFeatures(
                ioCapability: .displayOnly, authentication: AuthenticationRequirements(rawValue: 0x02),
                initiatorKeys: [],
                responderKeys: []),
        ] {
            var peripheral = SMPPairing(
                role: .responder, configuration: Self.configuration(.noInputNoOutput),
                initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress, random: Self.random(9))
            #expect(
                peripheral.handle(.received(.pairingRequest(request))).contains(
                    .send(.pairingFailed(.invalidParameters))))
        }
    }

    @Test func aPublicKeyOffTheCurveOrOurOwnIsRefused() {
        for reflected in [false, true] {
            var peripheral = SMPPairing(
                role: .responder, configuration: Self.configuration(.noInputNoOutput, key: 2),
                initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress,
                random: Self.random(7))
            let request = PairingFeatures(
                ioCapability: .noInputNoOutput, authentication: [.bonding, .secureConnections],
                initiatorKeys: [.encryptionKey], responderKeys: [.encryptionKey])
            _ = peripheral.handle(.received(.pairingRequest(request)))
            let own = SMPKeyPair(privateKey: Self.configuration(.noInputNoOutput, key: 2).privateKey)!
            let (x, y) =
                reflected
                ? (own.publicKey.x, own.publicKey.y)
                : ([UInt8](repeating: 1, count: 32), [UInt8](repeating: 2, count: 32))
            let actions = peripheral.handle(.received(.pairingPublicKey(x: x, y: y)))
            #expect(actions.contains(.send(.pairingFailed(.dhKeyCheckFailed))), "reflected: \(reflected)")
        }
    }

    @Test func theTimerEndsThePairingAndNothingIsHeardAfter() {
        var central = SMPPairing(
            role: .initiator, configuration: Self.configuration(.noInputNoOutput),
            initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress,
            random: Self.random(7))
        let started = central.handle(.start)
        #expect(started.contains(.startTimer))
        #expect(central.handle(.timerExpired) == [.failed(.timeout)])
        // No command is sent or handled on this link again, not even Pairing Failed: each is only logged.
        #expect(
            central.handle(.received(.pairingFailed(.unspecifiedReason)))
                == [.ignored(.pairingFailed(.unspecifiedReason))])
        #expect(central.handle(.received(.securityRequest([.bonding]))) == [.ignored(.securityRequest([.bonding]))])
        // Asked to pair again on the same link, it fails at once and sends nothing.
        #expect(central.handle(.start) == [.failed(.timeout)])
    }

    /// Fuzz finding (smp-pairing): a peripheral whose pairing timed out sent a Security Request when asked to
    /// pair again on the same link, though no SMP command may follow a timeout (Vol 3 Part H 3.4). Both roles
    /// now fail a start at once.
    @Test func aStartAfterATimeoutSendsNothing() throws {
        var peripheral = SMPPairing(
            role: .responder, configuration: Self.configuration(.displayYesNo), initiatorAddress: Self.centralAddress,
            responderAddress: Self.peripheralAddress, random: Self.random(3))
        // The Pairing Request the fuzzer's central sent: DisplayOnly, no OOB, bonding and SC, 16 octets; it
        // offers its LTK and asks for the peripheral's LTK and IRK.
        let request = try SMPPDU(decoding: [0x01, 0x00, 0x00, 0x09, 0x10, 0x01, 0x03])
        #expect(peripheral.handle(.received(request)).contains { if case .send = $0 { true } else { false } })
        #expect(peripheral.handle(.timerExpired) == [.failed(.timeout)])
        #expect(peripheral.handle(.start) == [.failed(.timeout)])

        var central = SMPPairing(
            role: .initiator, configuration: Self.configuration(.noInputNoOutput),
            initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress, random: Self.random(4))
        _ = central.handle(.start)
        #expect(central.handle(.timerExpired) == [.failed(.timeout)])
        #expect(central.handle(.start) == [.failed(.timeout)])
    }

    @Test func anUnknownCommandIsNotSupportedAndAnUnexpectedOneUnspecified() {
        var peripheral = SMPPairing(
            role: .responder, configuration: Self.configuration(.noInputNoOutput),
            initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress, random: Self.random(9))
        #expect(
            peripheral.handle(.received(.unknown(code: 0x20, data: []))).first
                == .send(.pairingFailed(.commandNotSupported)))
        var other = SMPPairing(
            role: .responder, configuration: Self.configuration(.noInputNoOutput),
            initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress, random: Self.random(9))
        // Outside any pairing an unexpected command is not answered: Pairing Failed aborts a pairing under way.
        let stray = SMPPDU.pairingRandom([UInt8](repeating: 0, count: 16))
        #expect(other.handle(.received(stray)) == [.ignored(stray)])
        // During one it fails the pairing with Unspecified Reason.
        var central = SMPPairing(
            role: .initiator, configuration: Self.configuration(.noInputNoOutput),
            initiatorAddress: Self.centralAddress, responderAddress: Self.peripheralAddress, random: Self.random(9))
        _ = central.handle(.start)
        #expect(
            central.handle(.received(stray))
                == [.send(.pairingFailed(.unspecifiedReason)), .stopTimer, .failed(.local(.unspecifiedReason))])
    }

    @Test func aSecurityRequestReachesTheCentralsHost() {
        var link = Link(
            central: Self.configuration(.noInputNoOutput), peripheral: Self.configuration(.noInputNoOutput, key: 2))
        let asked: AuthenticationRequirements = [.bonding, .secureConnections]
        #expect(link.peripheral.machine.handle(.start) == [.send(.securityRequest(asked))])
        #expect(link.central.machine.handle(.received(.securityRequest(asked))) == [.securityRequested(asked)])
        // The host answers by pairing: the peripheral, having asked, takes the Pairing Request.
        link.run(.start)
        #expect(link.central.result != nil && link.peripheral.result != nil)
    }

    @Test func aSigningKeySentAnywayFailsTheDistribution() {
        // Legacy pairing, where the peripheral distributes its LTK: it sends a CSRK, never agreed, instead.
        var link = Link(
            central: Self.configuration(.noInputNoOutput, secure: false),
            peripheral: Self.configuration(.noInputNoOutput, key: 2))
        link.tamper = { pdu in
            if case .encryptionInformation(let key) = pdu { return .signingInformation(signatureKey: key) }
            return pdu
        }
        link.run(.start)
        #expect(link.central.failure == .local(.unspecifiedReason))
        #expect(link.peripheral.failure == .remote(.unspecifiedReason))
        #expect(link.central.result == nil)
    }

    @Test func theRandomSourceRepeatsWithItsSeedAndDiffersAcrossSeeds() {
        var a = Self.random(1)
        var b = Self.random(1)
        var c = Self.random(2)
        let first = a.next(5) + a.next(27)
        #expect(first == b.next(32))
        #expect(first != c.next(32))
        #expect(Set(first).count > 16)
        // A longer seed is folded in, not cut: two seeds that share their first 16 octets differ.
        var long1 = SMPRandom(seed: [UInt8](repeating: 1, count: 16) + [1])
        var long2 = SMPRandom(seed: [UInt8](repeating: 1, count: 16) + [2])
        #expect(long1.next(16) != long2.next(16))
    }

    @Test(arguments: [
        (IOCapability.displayOnly, IOCapability.displayOnly, false, PairingMethod.justWorks),
        (.keyboardOnly, .displayOnly, false, .passkeyEntry(.responderDisplaysInitiatorInputs)),
        (.displayOnly, .keyboardOnly, false, .passkeyEntry(.initiatorDisplaysResponderInputs)),
        (.keyboardOnly, .keyboardOnly, false, .passkeyEntry(.bothInput)),
        (.displayYesNo, .displayYesNo, false, .justWorks),
        (.displayYesNo, .displayYesNo, true, .numericComparison),
        (.keyboardDisplay, .keyboardDisplay, false, .passkeyEntry(.initiatorDisplaysResponderInputs)),
        (.keyboardDisplay, .keyboardDisplay, true, .numericComparison),
        (.keyboardDisplay, .displayYesNo, true, .numericComparison),
        (.keyboardDisplay, .displayYesNo, false, .passkeyEntry(.responderDisplaysInitiatorInputs)),
        (.noInputNoOutput, .keyboardDisplay, true, .justWorks),
        (.keyboardOnly, .keyboardDisplay, true, .passkeyEntry(.responderDisplaysInitiatorInputs)),
    ])
    func theMethodFollowsTheSpecsTable(
        initiator: IOCapability, responder: IOCapability, secure: Bool, method: PairingMethod
    ) {
        #expect(
            PairingMethod.forCapabilities(initiator: initiator, responder: responder, secureConnections: secure)
                == method)
    }

    // MARK: Key distribution follows the fields, not bonding (Vol 3 Part H 3.5.1-3.5.2, 3.6.1)

    static func configuration(
        _ io: IOCapability = .noInputNoOutput, secure: Bool = true, bonding: Bool, identityByte: UInt8?,
        distributes: KeyDistribution? = nil, requests: KeyDistribution? = nil, key: UInt8 = 1
    ) -> SMPPairing.Configuration {
        var c = configuration(io, secure: secure, identityByte: identityByte, key: key)
        c.bonding = bonding
        c.distributedKeys = distributes
        c.requestedKeys = requests
        return c
    }

    /// BTstack's stock peripherals: No Bonding, and the IRK listed all the same. The central takes the keys the
    /// response named (and keeps none); nobody sends Pairing Failed.
    @Test(arguments: [true, false])
    func aPeripheralThatDoesNotBondSendsTheKeysItListed(secure: Bool) throws {
        var link = Link(
            central: Self.configuration(secure: secure, bonding: true, identityByte: 0x0C),
            peripheral: Self.configuration(
                secure: secure, bonding: false, identityByte: 0x0D, distributes: [.encryptionKey, .identityKey],
                key: 2))
        link.run(.start)
        let central = try #require(link.central.result)
        let peripheral = try #require(link.peripheral.result)
        #expect(!central.bonded && !peripheral.bonded)
        #expect(central.peerIdentity?.resolvingKey == [UInt8](repeating: 0x0D, count: 16))
        // The peripheral asked for nothing, so the central sent nothing after encryption.
        #expect(peripheral.peerIdentity == nil)
        #expect(!link.central.sent.contains { if case .identityInformation = $0 { true } else { false } })
        // Legacy: the LTK it listed came with its EDIV and Rand, and is the one it answers with.
        if !secure {
            #expect(central.peerLongTermKey != nil)
            #expect(central.peerLongTermKey == peripheral.localLongTermKey)
        }
        for side in [link.central, link.peripheral] {
            #expect(!side.sent.contains { if case .pairingFailed = $0 { true } else { false } })
            #expect(!side.timerRunning)
        }
    }

    /// BTstack's stock centrals: No Bonding, with the IRK asked for and offered. A bonding peripheral sends what
    /// its response promised, and takes the central's.
    @Test(arguments: [true, false])
    func aCentralThatDoesNotBondGetsTheKeysItAskedFor(secure: Bool) throws {
        var link = Link(
            central: Self.configuration(
                secure: secure, bonding: false, identityByte: 0x0C, distributes: [.identityKey],
                requests: [.identityKey]),
            peripheral: Self.configuration(secure: secure, bonding: true, identityByte: 0x0D, key: 2))
        link.run(.start)
        let central = try #require(link.central.result)
        let peripheral = try #require(link.peripheral.result)
        #expect(!central.bonded && !peripheral.bonded)
        #expect(central.peerIdentity?.address.string == "CD:01:02:03:04:05")
        #expect(peripheral.peerIdentity?.resolvingKey == [UInt8](repeating: 0x0C, count: 16))
        // Only the identity was agreed: no legacy LTK went either way.
        #expect(!link.peripheral.sent.contains { if case .encryptionInformation = $0 { true } else { false } })
        #expect(!link.central.timerRunning && !link.peripheral.timerRunning)
    }

    /// Exactly the agreed keys: a bonding peripheral that lists none sends none, and its central, which asked
    /// for them, completes without them.
    @Test func aBondingPeripheralThatListsNoKeysSendsNone() throws {
        var link = Link(
            central: Self.configuration(secure: false, bonding: true, identityByte: 0x0C),
            peripheral: Self.configuration(secure: false, bonding: true, identityByte: 0x0D, distributes: [], key: 2))
        link.run(.start)
        let central = try #require(link.central.result)
        let peripheral = try #require(link.peripheral.result)
        #expect(central.bonded && peripheral.bonded)
        #expect(central.peerLongTermKey == nil && central.peerIdentity == nil)
        // The central's own keys went as asked.
        #expect(peripheral.peerIdentity?.resolvingKey == [UInt8](repeating: 0x0C, count: 16))
        #expect(link.peripheral.sent.count { if case .identityInformation = $0 { true } else { false } } == 0)
    }

    /// After a pairing ends, a command that belonged to it is not answered with Pairing Failed.
    @Test func aCommandAfterThePairingEndedIsIgnored() throws {
        var link = Link(
            central: Self.configuration(.noInputNoOutput, identityByte: 0x0C),
            peripheral: Self.configuration(.noInputNoOutput, identityByte: 0x0D, key: 2))
        link.run(.start)
        _ = try #require(link.central.result)
        let late = SMPPDU.identityInformation(identityResolvingKey: [UInt8](repeating: 7, count: 16))
        #expect(link.central.machine.handle(.received(late)) == [.ignored(late)])
        #expect(link.peripheral.machine.handle(.received(late)) == [.ignored(late)])
        // A new pairing is still heard.
        #expect(
            link.central.machine.handle(.start).first.map {
                if case .send(.pairingRequest) = $0 { true } else { false }
            } == true)
    }
}
