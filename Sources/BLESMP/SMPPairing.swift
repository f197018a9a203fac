import BLECore

/// One link's pairing, as a pure machine: events in (commands from the peer, the user's answers, the link's
/// encryption, the timer), actions out (commands to send, prompts, encryption to start, the outcome). It runs
/// LE legacy pairing and LE Secure Connections, with Just Works, Passkey Entry and Numeric Comparison, in either
/// role, then the key distribution.
///
/// Not supported, and refused with the reason the spec gives: OOB data (a peer that says it has ours is
/// answered with OOB Not Available; the stack never has the peer's), and the signing key (CSRK: never offered,
/// not asked for, and a Signing Information the peer sends anyway fails the pairing with Unspecified Reason).
///
/// Random values come from `random` (seeded by the caller, so a run can repeat), and the Secure Connections key
/// pair from the 32 octets of `Configuration.privateKey`.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 2.3 (pairing), 3.3 (the 30 s timer), 3.5–3.6 (the commands).
public struct SMPPairing: Sendable {
    public enum Role: Sendable, Hashable {
        /// The central.
        case initiator
        /// The peripheral.
        case responder
    }

    public struct Configuration: Sendable {
        public var ioCapability: IOCapability
        /// Keys are kept (Bonding_Flags 0b01).
        public var bonding = true
        /// MITM protection is asked for; pairing that cannot give it fails with Authentication Requirements.
        public var mitm = false
        public var secureConnections = true
        /// Legacy pairing is refused (Authentication Requirements).
        public var secureConnectionsOnly = false
        public var maximumKeySize: UInt8 = 16
        /// The smallest key size accepted (7 is the spec's floor).
        public var minimumKeySize: UInt8 = 7
        /// The identity this device distributes when asked (IRK and identity address), if it has one.
        public var identity: Identity?
        /// The keys this device lists as its own to send. nil, the default: its LTK (used by legacy pairing)
        /// and its identity when it has one, if it bonds; none if it does not. The CSRK and the link key are
        /// never sent (left out of the set), nor an identity this device does not have.
        public var distributedKeys: KeyDistribution?
        /// The keys this device asks of the peer. nil, the default: the LTK and the identity if it bonds, none
        /// if it does not. The CSRK and the link key are never asked for (left out of the set).
        public var requestedKeys: KeyDistribution?
        /// 32 random octets, the Secure Connections private key (the caller draws them: this layer draws none).
        public var privateKey: [UInt8]

        public init(ioCapability: IOCapability, privateKey: [UInt8], identity: Identity? = nil) {
            self.ioCapability = ioCapability
            self.privateKey = privateKey
            self.identity = identity
        }
    }

    /// An Identity Resolving Key and the identity address it goes with.
    public struct Identity: Sendable, Hashable {
        /// 16 octets, as Identity Information carries them (least significant first).
        public var resolvingKey: [UInt8]
        public var address: BluetoothAddress

        public init(resolvingKey: [UInt8], address: BluetoothAddress) {
            self.resolvingKey = resolvingKey
            self.address = address
        }
    }

    /// A Long Term Key with what identifies it: EDIV and Rand in legacy pairing, zero in Secure Connections.
    public struct LongTermKey: Sendable, Hashable {
        /// 16 octets, least significant first, already masked to the negotiated key size.
        public var key: [UInt8]
        public var ediv: UInt16
        public var rand: UInt64

        public init(key: [UInt8], ediv: UInt16 = 0, rand: UInt64 = 0) {
            self.key = key
            self.ediv = ediv
            self.rand = rand
        }
    }

    /// What a finished pairing gives.
    public struct Result: Sendable, Hashable {
        public var method: PairingMethod
        public var secureConnections: Bool
        /// Whether the keys are authenticated (MITM protection).
        public var authenticated: Bool
        public var keySize: UInt8
        /// Whether both sides asked to bond: the keys are to be stored. Without it the keys below were still
        /// exchanged as agreed, and serve this link only.
        public var bonded: Bool
        /// The key that encrypts this link from now on when this device is central: Secure Connections' LTK
        /// (both roles), or the LTK the peripheral distributed in legacy pairing.
        public var peerLongTermKey: LongTermKey?
        /// The key this device answers the peer's encryption with when it is the peripheral: Secure Connections'
        /// LTK, or the legacy LTK this device distributed.
        public var localLongTermKey: LongTermKey?
        public var peerIdentity: Identity?
    }

    /// Why pairing ended without a result.
    public enum Failure: Sendable, Hashable, CustomStringConvertible {
        /// This device sent Pairing Failed with this reason.
        case local(SMPFailureReason)
        /// The peer sent Pairing Failed.
        case remote(SMPFailureReason)
        /// 30 s passed without the next command (Vol 3 Part H 3.4): no SMP command may follow on this link.
        case timeout
        /// Encrypting the link with the new key failed (the controller's status).
        case encryption(UInt8)

        public var description: String {
            switch self {
            case .local(let reason): "pairing failed here (\(reason))"
            case .remote(let reason): "the peer failed the pairing (\(reason))"
            case .timeout: "pairing timed out (30 s without an answer)"
            case .encryption(let status): "encrypting the link failed (status 0x\(String(status, radix: 16)))"
            }
        }
    }

    public enum Event: Sendable, Hashable {
        /// The central starts pairing (Pairing Request); the peripheral asks for it (Security Request). After a
        /// timeout on this link it fails at once with `.timeout` and sends nothing.
        case start
        case received(SMPPDU)
        /// The passkey typed by the user, or nil when they cancelled.
        case passkeyEntered(UInt32?)
        /// The user's answer to `confirm(_:)`.
        case confirmed(Bool)
        /// The link's encryption finished (Encryption Change): 0 is success.
        case encryptionChanged(status: UInt8)
        /// The 30 s Security Manager timer expired.
        case timerExpired
    }

    public enum Action: Sendable, Hashable {
        case send(SMPPDU)
        /// (Re)start the 30 s timer (each command sent restarts it).
        case startTimer
        case stopTimer
        /// Show this passkey to the user (six digits, leading zeros kept).
        case displayPasskey(UInt32)
        /// Ask the user to type the passkey the peer shows; answered with `.passkeyEntered`.
        case requestPasskey
        /// Ask the user to accept the pairing: Just Works (no value) or Numeric Comparison (the value both
        /// devices show); answered with `.confirmed`.
        case confirm(numericValue: UInt32?)
        /// The central encrypts the link with this key (LE Enable Encryption).
        case encrypt(LongTermKey)
        /// The peripheral answers the controller's next LTK request (EDIV 0, Rand 0) with this key.
        case provideKeyForEncryption([UInt8])
        /// A peripheral's Security Request reached a central that is not pairing: the host decides whether to
        /// encrypt with a bond or to pair.
        case securityRequested(AuthenticationRequirements)
        /// A command that belongs to no pairing under way (one after the pairing ended, or before any began):
        /// it is not answered, since Pairing Failed aborts a pairing in progress (Vol 3 Part H 3.5.5); the
        /// host logs it.
        case ignored(SMPPDU)
        case completed(Result)
        case failed(Failure)
    }

    // MARK: State

    public let role: Role
    public private(set) var configuration: Configuration
    /// The addresses the link was made with, and their types (c1, f5 and f6 take them).
    let initiatorAddress: BluetoothAddress
    let responderAddress: BluetoothAddress
    private var random: SMPRandom

    enum Phase: Sendable, Hashable {
        case idle
        /// The peripheral sent a Security Request.
        case securityRequested
        /// The central sent its Pairing Request.
        case featuresSent
        case legacy(LegacyStep)
        case secure(SecureStep)
        /// The link is being encrypted with the new key.
        case encrypting
        case distributing
        case done
        case failed
    }

    enum LegacyStep: Sendable, Hashable {
        /// Both confirms are exchanged through the randoms.
        case confirming
    }

    enum SecureStep: Sendable, Hashable {
        case publicKeys
        case authentication
        case dhKeyCheck
    }

    private(set) var phase: Phase = .idle
    /// After a timeout no SMP command is sent or handled on the link again (Vol 3 Part H 3.4).
    private var timedOut = false
    private var preq: [UInt8] = []
    private var pres: [UInt8] = []
    private var local: PairingFeatures?
    private var peer: PairingFeatures?
    private(set) var method: PairingMethod = .justWorks
    private var secure = false
    private var keySize: UInt8 = 16

    // Legacy.
    private var temporaryKey: [UInt8]?
    private var localRandom: [UInt8] = []
    private var peerConfirm: [UInt8]?
    private var peerRandom: [UInt8]?
    private var sentConfirm = false

    // Secure Connections.
    private var keyPair: SMPKeyPair?
    private var peerPublicKey: (x: [UInt8], y: [UInt8])?
    private var dhKey: [UInt8]?
    private var passkey: UInt32?
    /// The Passkey Entry round (0...19), one bit of the passkey each.
    private var round = 0
    private var userAccepted = false
    private var peerCheck: [UInt8]?
    private var macKey: [UInt8] = []
    private var derivedKey: [UInt8] = []

    // Distribution.
    private var result: Result?
    private var keysExpected = KeyDistribution()
    private var peerLTK: [UInt8]?

    public init(
        role: Role, configuration: Configuration, initiatorAddress: BluetoothAddress,
        responderAddress: BluetoothAddress, random: SMPRandom
    ) {
        self.role = role
        self.configuration = configuration
        self.initiatorAddress = initiatorAddress
        self.responderAddress = responderAddress
        self.random = random
    }

    /// Whether a pairing is under way (a command from the peer is expected or a prompt is open).
    public var isPairing: Bool {
        switch phase {
        case .idle, .securityRequested, .done, .failed: false
        default: true
        }
    }

    // MARK: Events

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .start: return start()
        case .received(let pdu): return received(pdu)
        case .passkeyEntered(let value): return passkeyEntered(value)
        case .confirmed(let accepted): return confirmed(accepted)
        case .encryptionChanged(let status): return encryptionChanged(status)
        case .timerExpired:
            guard isPairing else { return [] }
            phase = .failed
            timedOut = true
            return [.failed(.timeout)]
        }
    }

    private var localFeatures: PairingFeatures {
        var auth: AuthenticationRequirements = []
        if configuration.bonding { auth.insert(.bonding) }
        if configuration.mitm { auth.insert(.mitm) }
        if configuration.secureConnections { auth.insert(.secureConnections) }
        // Keys asked for and offered: the LTK (legacy) and the identity when there is one; never the CSRK.
        let supported: KeyDistribution = [.encryptionKey, .identityKey]
        var offered = (configuration.distributedKeys ?? (configuration.bonding ? supported : []))
            .intersection(supported)
        if configuration.identity == nil { offered.remove(.identityKey) }
        let wanted = (configuration.requestedKeys ?? (configuration.bonding ? supported : [])).intersection(supported)
        return PairingFeatures(
            ioCapability: configuration.ioCapability, authentication: auth,
            maximumKeySize: configuration.maximumKeySize,
            initiatorKeys: role == .initiator ? offered : wanted,
            responderKeys: role == .initiator ? wanted : offered)
    }

    private mutating func start() -> [Action] {
        // After a timeout no command may be sent on this link: a new pairing needs a new link (Vol 3 Part H 3.4).
        if timedOut { return [.failed(.timeout)] }
        switch (role, phase) {
        case (.initiator, .idle), (.initiator, .done), (.initiator, .failed):
            reset()
            let features = localFeatures
            local = features
            preq = SMPPDU.pairingRequest(features).encoded
            phase = .featuresSent
            return sending(.pairingRequest(features))
        case (.responder, .idle), (.responder, .done), (.responder, .failed):
            phase = .securityRequested
            return [.send(.securityRequest(localFeatures.authentication))]
        default:
            return []
        }
    }

    private mutating func reset() {
        temporaryKey = nil
        peerConfirm = nil
        peerRandom = nil
        sentConfirm = false
        peerPublicKey = nil
        dhKey = nil
        passkey = nil
        round = 0
        userAccepted = false
        peerCheck = nil
        result = nil
        peerLTK = nil
        peerIRK = nil
        keysExpected = []
        sentRandom = false
        sentCheck = false
        sentOwnKeys = false
        derivedKey = []
        macKey = []
        nonces = ([], [])
        localRandom = []
        keyPair = nil
    }

    private mutating func received(_ pdu: SMPPDU) -> [Action] {
        // After a timeout nothing more is handled on the link (Vol 3 Part H 3.4).
        if timedOut { return [.ignored(pdu)] }
        // After a failure only a new pairing is heard.
        if phase == .failed {
            switch pdu {
            case .pairingRequest, .securityRequest: break
            default: return [.ignored(pdu)]
            }
        }
        switch pdu {
        case .pairingFailed(let reason):
            guard isPairing || phase == .securityRequested else { return [.ignored(pdu)] }
            phase = .failed
            return [.stopTimer, .failed(.remote(reason))]
        case .securityRequest(let auth):
            // Only a central acts on it, and only when not already pairing (Vol 3 Part H 2.4.6).
            guard role == .initiator, !isPairing else { return [.ignored(pdu)] }
            return [.securityRequested(auth)]
        case .pairingRequest(let features):
            return pairingRequest(features)
        case .pairingResponse(let features):
            return pairingResponse(features)
        case .unknown:
            return fail(.commandNotSupported)
        default:
            break
        }
        switch phase {
        case .legacy: return legacy(pdu)
        case .secure: return secureConnections(pdu)
        case .distributing: return distribution(pdu)
        case .featuresSent, .encrypting:
            // A pairing is under way and this is not its next command.
            return fail(.unspecifiedReason)
        case .idle, .securityRequested, .done, .failed:
            return [.ignored(pdu)]
        }
    }

    // MARK: Phase 1: features

    private mutating func pairingRequest(_ features: PairingFeatures) -> [Action] {
        guard role == .responder else { return fail(.commandNotSupported) }
        guard !isPairing else { return fail(.unspecifiedReason) }
        reset()
        peer = features
        preq = SMPPDU.pairingRequest(features).encoded
        if let refusal = refusal(of: features) { return fail(refusal) }
        var response = localFeatures
        // The responder distributes and asks only what the initiator offered and asked (never the CSRK).
        response.initiatorKeys = response.initiatorKeys.intersection(features.initiatorKeys)
        response.responderKeys = response.responderKeys.intersection(features.responderKeys)
        local = response
        pres = SMPPDU.pairingResponse(response).encoded
        if let refusal = negotiate(initiator: features, responder: response) { return fail(refusal) }
        var actions = sending(.pairingResponse(response))
        actions += begin()
        return actions
    }

    private mutating func pairingResponse(_ features: PairingFeatures) -> [Action] {
        guard role == .initiator, phase == .featuresSent, let request = local else {
            return isPairing ? fail(.unspecifiedReason) : [.ignored(.pairingResponse(features))]
        }
        peer = features
        pres = SMPPDU.pairingResponse(features).encoded
        if let refusal = refusal(of: features) { return fail(refusal) }
        // The responder may not distribute or ask for more than the request named.
        guard features.initiatorKeys.isSubset(of: request.initiatorKeys),
            features.responderKeys.isSubset(of: request.responderKeys)
        else { return fail(.invalidParameters) }
        if let refusal = negotiate(initiator: request, responder: features) { return fail(refusal) }
        return [.startTimer] + begin()
    }

    /// Field values a pairing cannot start with.
    private func refusal(of features: PairingFeatures) -> SMPFailureReason? {
        guard features.ioCapability.isValid, features.authentication.rawValue & 0x03 != 0x02,
            features.authentication.rawValue & 0x03 != 0x03
        else { return .invalidParameters }
        guard (7...16).contains(features.maximumKeySize) else { return .invalidParameters }
        return nil
    }

    /// Chooses the method and the key size, or says why pairing cannot go on.
    private mutating func negotiate(initiator: PairingFeatures, responder: PairingFeatures) -> SMPFailureReason? {
        keySize = min(initiator.maximumKeySize, responder.maximumKeySize)
        guard keySize >= configuration.minimumKeySize else { return .encryptionKeySize }
        secure =
            initiator.authentication.contains(.secureConnections)
            && responder.authentication.contains(.secureConnections)
        if configuration.secureConnectionsOnly && !secure { return .authenticationRequirements }
        // OOB data: Secure Connections uses it when either side has the other's, legacy when both do; this
        // stack never has the peer's, so a peer that says it has ours asks for what cannot be given.
        let peerHasOOB = (role == .initiator ? responder : initiator).oobDataPresent
        if peerHasOOB && secure { return .oobNotAvailable }
        method = PairingMethod.select(initiator: initiator, responder: responder)
        if configuration.mitm && !method.isAuthenticated { return .authenticationRequirements }
        // The Pairing Response's fields are the agreement: they name the keys each side sends, whether or not
        // either bonds (bonding decides only whether the keys are kept; Vol 3 Part H 3.5.1-3.5.2, 3.6.1).
        keysExpected = role == .initiator ? responder.responderKeys : responder.initiatorKeys
        // Secure Connections derives the LTK on both sides, so EncKey is ignored (Vol 3 Part H 3.6.1).
        if secure { keysExpected.remove(.encryptionKey) }
        return nil
    }

    /// After the features: Just Works is accepted by the user first; the passkey is shown or asked for.
    private mutating func begin() -> [Action] {
        if secure {
            phase = .secure(.publicKeys)
            var actions: [Action] = []
            keyPair = SMPKeyPair(privateKey: configuration.privateKey)
            guard keyPair != nil else { return fail(.unspecifiedReason) }
            if role == .initiator, let keyPair {
                actions += sending(.pairingPublicKey(x: keyPair.publicKey.x, y: keyPair.publicKey.y))
            }
            actions += passkeyPrompt()
            return actions
        }
        switch method {
        case .justWorks:
            temporaryKey = [UInt8](repeating: 0, count: 16)
            phase = .legacy(.confirming)
            return [.confirm(numericValue: nil)]
        case .passkeyEntry, .numericComparison:
            phase = .legacy(.confirming)
            return passkeyPrompt()
        }
    }

    /// Passkey Entry: this side shows a fresh passkey or asks for the one the peer shows.
    private mutating func passkeyPrompt() -> [Action] {
        guard case .passkeyEntry(let roles) = method else { return [] }
        let displays: Bool
        switch roles {
        case .bothInput: displays = false
        case .initiatorDisplaysResponderInputs: displays = role == .initiator
        case .responderDisplaysInitiatorInputs: displays = role == .responder
        }
        guard displays else { return [.requestPasskey] }
        let octets = random.next(4)
        let value = octets.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
        return [.displayPasskey(value)] + passkeyKnown(value)
    }

    private mutating func passkeyEntered(_ value: UInt32?) -> [Action] {
        guard isPairing, case .passkeyEntry = method, passkey == nil, temporaryKey == nil else { return [] }
        guard let value, value <= 999_999 else { return fail(.passkeyEntryFailed) }
        return passkeyKnown(value)
    }

    private mutating func passkeyKnown(_ value: UInt32) -> [Action] {
        if secure {
            passkey = value
            return secureProgress()
        }
        temporaryKey = Self.littleEndian128(UInt64(value))
        return legacyProgress()
    }

    private mutating func confirmed(_ accepted: Bool) -> [Action] {
        guard isPairing, !userAccepted else { return [] }
        guard accepted else {
            return fail(method == .numericComparison ? .numericComparisonFailed : .passkeyEntryFailed)
        }
        userAccepted = true
        return secure ? secureProgress() : legacyProgress()
    }

    // MARK: Phase 2, legacy

    private mutating func legacy(_ pdu: SMPPDU) -> [Action] {
        switch pdu {
        case .pairingConfirm(let value) where peerConfirm == nil:
            peerConfirm = value
        case .pairingRandom(let value) where peerConfirm != nil && peerRandom == nil:
            peerRandom = value
        default:
            return fail(.unspecifiedReason)
        }
        return legacyProgress()
    }

    /// Sends what the legacy exchange allows now: the initiator's confirm once the TK is known, the responder's
    /// after the initiator's, the randoms in turn, each checked against its confirm.
    private mutating func legacyProgress() -> [Action] {
        guard case .legacy = phase, let tk = temporaryKey else { return [] }
        if method == .justWorks && !userAccepted { return [] }
        var actions: [Action] = []
        if !sentConfirm && (role == .initiator || peerConfirm != nil) {
            localRandom = random.next(16)
            sentConfirm = true
            actions += sending(.pairingConfirm(legacyConfirm(tk: tk, random: localRandom)))
        }
        // The initiator reveals its random once the responder's confirm is in.
        if role == .initiator, sentConfirm, peerConfirm != nil, !sentRandom {
            sentRandom = true
            actions += sending(.pairingRandom(localRandom))
        }
        guard let peerRandom, let peerConfirm else { return actions }
        guard legacyConfirm(tk: tk, random: peerRandom) == peerConfirm else {
            return actions + fail(.confirmValueFailed)
        }
        if role == .responder && !sentRandom {
            sentRandom = true
            actions += sending(.pairingRandom(localRandom))
        }
        // STK = s1(TK, Srand, Mrand) (Vol 3 Part H 2.3.5.5).
        let (srand, mrand) = role == .initiator ? (peerRandom, localRandom) : (localRandom, peerRandom)
        let stk = masked(SMPCrypto.s1(tk: tk, r1: srand, r2: mrand))
        phase = .encrypting
        return actions + [role == .initiator ? .encrypt(LongTermKey(key: stk)) : .provideKeyForEncryption(stk)]
    }

    private var sentRandom = false

    /// Mconfirm or Sconfirm = c1(TK, rand, preq, pres, iat, ia, rat, ra) (Vol 3 Part H 2.2.3).
    private func legacyConfirm(tk: [UInt8], random: [UInt8]) -> [UInt8] {
        SMPCrypto.c1(
            tk: tk, random: random, preq: preq, pres: pres, initiatorAddress: initiatorAddress,
            responderAddress: responderAddress)
    }

    // MARK: Phase 2, Secure Connections

    private mutating func secureConnections(_ pdu: SMPPDU) -> [Action] {
        guard case .secure(let step) = phase else { return fail(.unspecifiedReason) }
        switch (step, pdu) {
        case (.publicKeys, .pairingPublicKey(let x, let y)) where peerPublicKey == nil:
            guard let keyPair else { return fail(.unspecifiedReason) }
            // A point off the curve, or our own key sent back (a reflection), is refused (Vol 3 Part H
            // 2.3.5.6.1).
            guard x != keyPair.publicKey.x || y != keyPair.publicKey.y, let key = SMPPublicKey(x: x, y: y),
                let shared = keyPair.dhKey(with: key)
            else {
                return fail(.dhKeyCheckFailed)
            }
            peerPublicKey = (x, y)
            dhKey = shared
            var actions: [Action] = []
            if role == .responder {
                actions += sending(.pairingPublicKey(x: keyPair.publicKey.x, y: keyPair.publicKey.y))
            }
            phase = .secure(.authentication)
            localRandom = []
            return actions + secureProgress()
        case (.authentication, .pairingConfirm(let value)) where peerConfirm == nil:
            peerConfirm = value
        case (.authentication, .pairingRandom(let value)) where peerRandom == nil:
            peerRandom = value
        case (.dhKeyCheck, .pairingDHKeyCheck(let value)) where peerCheck == nil:
            peerCheck = value
        case (_, .keypressNotification):
            return []
        default:
            return fail(.unspecifiedReason)
        }
        return secureProgress()
    }

    /// Sends what the Secure Connections exchange allows now, and checks what came.
    private mutating func secureProgress() -> [Action] {
        guard case .secure(let step) = phase, let keyPair, let peerKey = peerPublicKey else { return [] }
        switch step {
        case .publicKeys:
            return []
        case .authentication:
            return secureAuthentication(keyPair: keyPair, peerKey: peerKey)
        case .dhKeyCheck:
            return secureCheck(keyPair: keyPair, peerKey: peerKey)
        }
    }

    /// Authentication stage 1 (Vol 3 Part H 2.3.5.6.2–2.3.5.6.3): one commitment and nonce exchange, or twenty
    /// in Passkey Entry, one bit of the passkey each.
    private mutating func secureAuthentication(keyPair: SMPKeyPair, peerKey: (x: [UInt8], y: [UInt8])) -> [Action] {
        var actions: [Action] = []
        let passkeyRound: Bool
        let bit: UInt8
        if case .passkeyEntry = method {
            guard let passkey else { return [] }
            passkeyRound = true
            bit = 0x80 | UInt8((passkey >> UInt32(round)) & 1)
        } else {
            passkeyRound = false
            bit = 0
        }
        let (pka, pkb) = role == .initiator ? (keyPair.publicKey.x, peerKey.x) : (peerKey.x, keyPair.publicKey.x)
        if localRandom.isEmpty { localRandom = random.next(16) }
        // Who commits: both in Passkey Entry (the initiator first); only the responder otherwise.
        let commits = passkeyRound || role == .responder
        if commits && !sentConfirm && (role == .initiator || peerConfirm != nil || !passkeyRound) {
            sentConfirm = true
            let confirm = SMPCrypto.f4(
                u: keyPair.publicKey.x, v: role == .initiator ? pkb : pka, x: localRandom, z: bit)
            actions += sending(.pairingConfirm(confirm))
        }
        // The initiator's nonce goes once the responder has committed; the responder's after the initiator's.
        if role == .initiator && !sentRandom && peerConfirm != nil && (sentConfirm || !passkeyRound) {
            sentRandom = true
            actions += sending(.pairingRandom(localRandom))
        }
        guard let peerRandom else { return actions }
        // The peer's commitment is checked against its nonce where it committed.
        if passkeyRound || role == .initiator {
            guard let peerConfirm else { return actions + fail(.unspecifiedReason) }
            let expected = SMPCrypto.f4(
                u: role == .initiator ? pkb : pka, v: keyPair.publicKey.x, x: peerRandom, z: bit)
            guard expected == peerConfirm else { return actions + fail(.confirmValueFailed) }
        }
        if role == .responder && !sentRandom {
            sentRandom = true
            actions += sending(.pairingRandom(localRandom))
        }
        let (na, nb) = role == .initiator ? (localRandom, peerRandom) : (peerRandom, localRandom)
        if passkeyRound && round < 19 {
            round += 1
            self.localRandom = []
            self.peerConfirm = nil
            self.peerRandom = nil
            sentConfirm = false
            sentRandom = false
            return actions + secureAuthentication(keyPair: keyPair, peerKey: peerKey)
        }
        nonces = (na, nb)
        phase = .secure(.dhKeyCheck)
        switch method {
        case .numericComparison:
            let value = SMPCrypto.g2(u: pka, v: pkb, x: na, y: nb) % 1_000_000
            return actions + [.confirm(numericValue: value)]
        case .justWorks:
            return actions + [.confirm(numericValue: nil)]
        case .passkeyEntry:
            userAccepted = true
            return actions + secureProgress()
        }
    }

    private var nonces: (na: [UInt8], nb: [UInt8]) = ([], [])

    /// Authentication stage 2 (Vol 3 Part H 2.3.5.6.5): the keys from the DHKey, then each side's check.
    private mutating func secureCheck(keyPair: SMPKeyPair, peerKey: (x: [UInt8], y: [UInt8])) -> [Action] {
        guard userAccepted, let dhKey else { return [] }
        let a = initiatorAddress
        let b = responderAddress
        let (na, nb) = nonces
        if derivedKey.isEmpty {
            let keys = SMPCrypto.f5(w: dhKey, n1: na, n2: nb, a1: a, a2: b)
            macKey = keys.macKey
            derivedKey = masked(keys.longTermKey)
        }
        // ra and rb: the passkey in Passkey Entry, zero otherwise (the OOB case never arises).
        let r = passkey.map { Self.littleEndian128(UInt64($0)) } ?? [UInt8](repeating: 0, count: 16)
        guard let initiatorFeatures = role == .initiator ? local : peer,
            let responderFeatures = role == .initiator ? peer : local
        else { return fail(.unspecifiedReason) }
        let ioA = SMPCrypto.IOCap(initiatorFeatures)
        let ioB = SMPCrypto.IOCap(responderFeatures)
        let ea = SMPCrypto.f6(w: macKey, n1: na, n2: nb, r: r, ioCap: ioA, a1: a, a2: b)
        let eb = SMPCrypto.f6(w: macKey, n1: nb, n2: na, r: r, ioCap: ioB, a1: b, a2: a)
        var actions: [Action] = []
        if role == .initiator {
            if !sentCheck {
                sentCheck = true
                actions += sending(.pairingDHKeyCheck(ea))
            }
            guard let peerCheck else { return actions }
            guard peerCheck == eb else { return actions + fail(.dhKeyCheckFailed) }
            phase = .encrypting
            return actions + [.encrypt(LongTermKey(key: derivedKey))]
        }
        guard let peerCheck else { return actions }
        guard peerCheck == ea else { return fail(.dhKeyCheckFailed) }
        phase = .encrypting
        return sending(.pairingDHKeyCheck(eb)) + [.provideKeyForEncryption(derivedKey)]
    }

    private var sentCheck = false

    // MARK: Phase 3: the link is encrypted, the keys are distributed

    private mutating func encryptionChanged(_ status: UInt8) -> [Action] {
        guard phase == .encrypting else { return [] }
        guard status == 0 else {
            phase = .failed
            return [.stopTimer, .failed(.encryption(status))]
        }
        result = Result(
            method: method, secureConnections: secure, authenticated: method.isAuthenticated, keySize: keySize,
            bonded: bothBonding,
            peerLongTermKey: secure ? LongTermKey(key: derivedKey) : nil,
            localLongTermKey: secure ? LongTermKey(key: derivedKey) : nil, peerIdentity: nil)
        phase = .distributing
        // The responder distributes first; the initiator after it has everything it expects.
        return role == .responder ? distributeOwnKeys() + finishIfComplete() : finishIfComplete()
    }

    private var bothBonding: Bool {
        guard let local, let peer else { return false }
        return local.authentication.contains(.bonding) && peer.authentication.contains(.bonding)
    }

    private var sentOwnKeys = false

    /// This side's keys, as the Pairing Response agreed, bonding or not: the legacy LTK with its EDIV and Rand,
    /// and the identity. A peer that does not bond may still use them for this link (its identity resolves our
    /// private address while the link lasts); it keeps none.
    private mutating func distributeOwnKeys() -> [Action] {
        guard !sentOwnKeys, let local, let peer else { return [] }
        sentOwnKeys = true
        let agreed =
            role == .initiator
            ? local.initiatorKeys.intersection(peer.initiatorKeys)
            : local.responderKeys.intersection(peer.responderKeys)
        var actions: [Action] = []
        if agreed.contains(.encryptionKey) && !secure {
            let ltk = masked(random.next(16))
            let ediv = random.next(2).reduce(UInt16(0)) { $0 << 8 | UInt16($1) }
            let rand = random.next(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            result?.localLongTermKey = LongTermKey(key: ltk, ediv: ediv, rand: rand)
            actions += sending(.encryptionInformation(longTermKey: ltk))
            actions += sending(.centralIdentification(ediv: ediv, rand: rand))
        }
        if agreed.contains(.identityKey), let identity = configuration.identity {
            actions += sending(.identityInformation(identityResolvingKey: identity.resolvingKey))
            actions += sending(.identityAddressInformation(identity.address))
        }
        return actions
    }

    private mutating func distribution(_ pdu: SMPPDU) -> [Action] {
        // The initiator receives first, then sends; the responder has sent and now receives.
        switch pdu {
        case .encryptionInformation(let key) where keysExpected.contains(.encryptionKey) && peerLTK == nil:
            peerLTK = key
        case .centralIdentification(let ediv, let rand) where keysExpected.contains(.encryptionKey):
            guard let key = peerLTK else { return fail(.unspecifiedReason) }
            result?.peerLongTermKey = LongTermKey(key: key, ediv: ediv, rand: rand)
            keysExpected.remove(.encryptionKey)
        case .identityInformation(let irk) where keysExpected.contains(.identityKey) && peerIRK == nil:
            peerIRK = irk
        case .identityAddressInformation(let address) where keysExpected.contains(.identityKey):
            guard let irk = peerIRK else { return fail(.unspecifiedReason) }
            result?.peerIdentity = Identity(resolvingKey: irk, address: address)
            keysExpected.remove(.identityKey)
        default:
            // The CSRK among them: never asked for.
            return fail(.unspecifiedReason)
        }
        return finishIfComplete()
    }

    private var peerIRK: [UInt8]?

    private mutating func finishIfComplete() -> [Action] {
        guard phase == .distributing else { return [] }
        var actions: [Action] = []
        if role == .initiator && keysExpected.isEmpty { actions += distributeOwnKeys() }
        guard keysExpected.isEmpty, sentOwnKeys, let result else { return actions }
        phase = .done
        return actions + [.stopTimer, .completed(result)]
    }

    // MARK: Helpers

    /// Sends a command, restarting the 30 s timer.
    private func sending(_ pdu: SMPPDU) -> [Action] {
        [.send(pdu), .startTimer]
    }

    /// Sends Pairing Failed and ends the pairing.
    private mutating func fail(_ reason: SMPFailureReason) -> [Action] {
        phase = .failed
        return [.send(.pairingFailed(reason)), .stopTimer, .failed(.local(reason))]
    }

    /// A key cut to the negotiated size: its most significant octets zeroed (Vol 3 Part H 2.3.4).
    private func masked(_ key: [UInt8]) -> [UInt8] {
        key.enumerated().map { $0.offset < Int(keySize) ? $0.element : 0 }
    }

    static func littleEndian128(_ value: UInt64) -> [UInt8] {
        (0..<16).map { $0 < 8 ? UInt8(truncatingIfNeeded: value >> (8 * $0)) : 0 }
    }
}
