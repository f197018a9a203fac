import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLESMP
import BLEVirtualController
import Synchronization
import Testing

@testable import BLEHost

/// Two hosts with the Security Manager on two virtual controllers: pairing over the air in both versions, the
/// link encrypted with the new key (the controllers' LL encryption, AES-CCM), data still flowing, and a
/// reconnection re-encrypted with the kept key or refused when the peripheral lost it.
@Suite struct HostPairingTests {
    /// One side: its host, what it heard, and scripted answers to prompts.
    final class Side: Sendable {
        let host: HostDriver
        let controller: VirtualController
        let events = Mutex<[HostEvent]>([])
        /// The passkey this side shows, for the other side's user to type.
        let shown = Mutex<UInt32?>(nil)
        /// Keys answered to LTK requests by EDIV and Rand (the bond the peripheral kept).
        let keys = Mutex<[SMPPairing.LongTermKey]>([])
        weak var other: Side? {
            get { otherBox.withLock { $0.value } }
            set { otherBox.withLock { $0.value = newValue } }
        }
        private let otherBox = Mutex(WeakSide())

        struct WeakSide: Sendable {
            nonisolated(unsafe) weak var value: Side?
        }

        init(
            radio: SimulatedRadio, name: String, security: HostSecurityConfiguration,
            privacy: HostPrivacyConfiguration? = nil, answersSecurityRequests: Bool = false
        ) {
            io = security.ioCapability
            self.answersSecurityRequests = answersSecurityRequests
            // Public addresses of their own (hosts on controllers without one would draw the same random static
            // address from the default seed).
            let last = UInt8(truncatingIfNeeded: name.utf8.reduce(0) { $0 &+ Int($1) })
            controller = radio.addController(
                name: name, address: BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x5E, 0xC0, last]))
            var configuration = HostConfiguration()
            configuration.deviceName = name
            configuration.security = security
            configuration.privacy = privacy
            host = HostDriver(transport: controller.hostTransport, scheduler: radio, configuration: configuration)
            host.setEventHandler { [weak self] event in self?.heard(event) }
        }

        /// Called with each event after the scripted answers (a test's own reaction).
        let onEvent = Mutex<(@Sendable (HostEvent) -> Void)?>(nil)

        private func heard(_ event: HostEvent) {
            events.withLock { $0.append(event) }
            defer { onEvent.withLock { $0 }?(event) }
            switch event {
            case .pairingPrompt(let handle, .displayPasskey(let value)):
                shown.withLock { $0 = value }
                // A user waiting to type it reads it now.
                if let other, other.waitingToType.withLock({ $0 }), let link = other.host.links.first?.handle {
                    other.waitingToType.withLock { $0 = false }
                    other.host.answerPairing(on: link, .passkey(other.typed(value)))
                }
                _ = handle
            case .pairingPrompt(let handle, .enterPasskey):
                switch user.withLock({ $0 }) {
                case .silent: return
                case .rejects, .cancels: return host.answerPairing(on: handle, .passkey(nil))
                case .accepts, .mistypes: break
                }
                if let value = other?.shown.withLock({ $0 }) {
                    host.answerPairing(on: handle, .passkey(typed(value)))
                } else if io == .keyboardOnly, other?.io == .keyboardOnly {
                    // Both input: the users agreed on a number beforehand.
                    host.answerPairing(on: handle, .passkey(typed(PairingMatrix.agreedPasskey)))
                } else {
                    waitingToType.withLock { $0 = true }
                }
            case .pairingPrompt(let handle, .confirm):
                switch user.withLock({ $0 }) {
                case .silent: break
                case .rejects, .cancels: host.answerPairing(on: handle, .accept(false))
                case .accepts, .mistypes: host.answerPairing(on: handle, .accept(true))
                }
            case .securityRequested(let handle, _):
                // The central's host answers a Security Request by pairing, when this side plays one that does.
                guard answersSecurityRequests else { break }
                host.pair(on: handle) { _ in }
            case .longTermKeyRequested(let handle, let ediv, let rand):
                let key = keys.withLock { $0.first { $0.ediv == ediv && $0.rand == rand }?.key }
                host.replyLongTermKey(on: handle, key: key)
            default:
                break
            }
        }

        let waitingToType = Mutex(false)
        /// What the user does when asked (the pairing matrix's users).
        let user = Mutex(PairingMatrix.User.accepts)
        let io: IOCapability
        /// Whether a Security Request from the peer is answered by pairing.
        let answersSecurityRequests: Bool

        func typed(_ shown: UInt32) -> UInt32 { PairingMatrix.typed(shown, by: user.withLock { $0 }) }

        func heardAny(_ match: (HostEvent) -> Bool) -> Bool { events.withLock { $0.contains(where: match) } }
    }

    struct Pair {
        let radio = SimulatedRadio(seed: 7)
        let central: Side
        let peripheral: Side

        init(
            central: HostSecurityConfiguration, peripheral: HostSecurityConfiguration,
            centralPrivacy: HostPrivacyConfiguration? = nil, peripheralPrivacy: HostPrivacyConfiguration? = nil,
            centralAnswersSecurityRequests: Bool = false
        ) {
            self.central = Side(
                radio: radio, name: "central", security: central, privacy: centralPrivacy,
                answersSecurityRequests: centralAnswersSecurityRequests)
            self.peripheral = Side(
                radio: radio, name: "peripheral", security: peripheral, privacy: peripheralPrivacy)
            self.central.other = self.peripheral
            self.peripheral.other = self.central
        }

        /// Runs the radio until `condition` holds, for at most `limit` of virtual time.
        func run(until condition: () -> Bool, limit: Duration = .seconds(60), _ what: String) async throws {
            var waited: Duration = .zero
            while !condition() {
                guard waited < limit else {
                    Issue.record(
                        "\(what) did not happen within \(limit) of virtual time; the central heard \(central.events.withLock { $0 }), the peripheral \(peripheral.events.withLock { $0 })"
                    )
                    throw CancellationError()
                }
                try await radio.run(for: .milliseconds(50))
                waited += .milliseconds(50)
            }
        }

        /// Both hosts started, the peripheral advertising, the central connected to it; the two handles.
        func connect() async throws -> (central: ConnectionHandle, peripheral: ConnectionHandle) {
            try await start()
            return try await reconnect()
        }

        /// Both hosts initialise their controllers.
        func start() async throws {
            try await start([central, peripheral])
        }

        /// These hosts (the pair's, or others on its radio) initialise their controllers.
        func start(_ sides: [Side]) async throws {
            let started = Mutex(0)
            for side in sides {
                side.host.start { if case .success = $0 { started.withLock { $0 += 1 } } }
            }
            try await run(until: { started.withLock { $0 } == sides.count }, "the hosts starting")
        }

        func reconnect() async throws -> (central: ConnectionHandle, peripheral: ConnectionHandle) {
            try await link(central, peripheral)
        }

        /// `peripheral` advertises and `central` connects to it; the two ends' handles.
        func link(_ central: Side, _ peripheral: Side) async throws
            -> (central: ConnectionHandle, peripheral: ConnectionHandle)
        {
            peripheral.host.startAdvertising(
                AdvertisingParameters(kind: .connectable, intervalMin: 0x20, intervalMax: 0x20),
                data: [0x02, 0x01, 0x06],
                scanResponse: []
            ) { result in if case .failure(let error) = result { Issue.record("advertising failed: \(error)") } }
            central.host.setConnectTargets([peripheral.controller.address], parameters: ConnectionParameters())
            try await run(until: { !central.host.links.isEmpty && !peripheral.host.links.isEmpty }, "the connection")
            central.host.setConnectTargets([], parameters: ConnectionParameters())
            return (central.host.links[0].handle, peripheral.host.links[0].handle)
        }

        func disconnect(_ handle: ConnectionHandle) async throws {
            central.host.disconnect(handle, reason: .remoteUserTerminatedConnection)
            try await run(until: { central.host.links.isEmpty && peripheral.host.links.isEmpty }, "the disconnection")
        }

        /// Pairs from the central (or `side`); returns what its request completed with.
        func pair(_ handle: ConnectionHandle, from side: Side? = nil) async throws
            -> Result<SMPPairing.Result, HostError>
        {
            let outcome = Mutex<Result<SMPPairing.Result, HostError>?>(nil)
            (side ?? central).host.pair(on: handle) { result in outcome.withLock { $0 = result } }
            try await run(until: { outcome.withLock { $0 } != nil }, "the pairing")
            return try #require(outcome.withLock { $0 })
        }
    }

    static func security(
        _ io: IOCapability, seed: UInt8, secure: Bool = true, mitm: Bool = false
    ) -> HostSecurityConfiguration {
        var s = HostSecurityConfiguration(seed: [UInt8](repeating: seed, count: 16))
        s.ioCapability = io
        s.secureConnections = secure
        s.mitm = mitm
        return s
    }

    static func encrypted(_ side: Side) -> Bool {
        side.heardAny { if case .encryptionChanged(_, true, .success) = $0 { true } else { false } }
    }

    @Test(arguments: [true, false])
    func justWorksPairsEncryptsAndReEncryptsWithTheKeptKey(secure: Bool) async throws {
        let pair = Pair(
            central: Self.security(.noInputNoOutput, seed: 1, secure: secure),
            peripheral: Self.security(.noInputNoOutput, seed: 2))
        let (handle, _) = try await pair.connect()
        let result = try await pair.pair(handle).get()
        #expect(result.secureConnections == secure)
        #expect(result.method == .justWorks)
        #expect(Self.encrypted(pair.central) && Self.encrypted(pair.peripheral))
        // The peripheral also reported the pairing, with the key it answers with.
        let peripheralResult = try #require(
            pair.peripheral.events.withLock { events in
                events.compactMap { if case .pairingCompleted(_, let r) = $0 { r } else { nil } }.first
            })
        let kept = try #require(result.peerLongTermKey)
        #expect(peripheralResult.localLongTermKey == kept)
        // Data flows on the encrypted link: a GATT discovery answers.
        let services = Mutex<Result<[GATTService], HostError>?>(nil)
        pair.central.host.discoverServices(on: handle, uuid: nil) { r in services.withLock { $0 = r } }
        try await pair.run(until: { services.withLock { $0 } != nil }, "the discovery")
        #expect(try services.withLock { $0 }?.get().isEmpty == false)

        // Next time: the central encrypts with the kept key, the peripheral finds it by EDIV and Rand.
        pair.peripheral.keys.withLock { $0 = [try! #require(peripheralResult.localLongTermKey)] }
        try await pair.disconnect(handle)
        pair.central.events.withLock { $0.removeAll() }
        pair.peripheral.events.withLock { $0.removeAll() }
        let (again, _) = try await pair.reconnect()
        let encryptedAgain = Mutex<Result<Void, HostError>?>(nil)
        pair.central.host.encrypt(on: again, key: kept) { r in encryptedAgain.withLock { $0 = r } }
        try await pair.run(until: { encryptedAgain.withLock { $0 } != nil }, "the re-encryption")
        #expect(throws: Never.self) { try encryptedAgain.withLock { $0 }?.get() }
        #expect(Self.encrypted(pair.central) && Self.encrypted(pair.peripheral))
    }

    /// Each pairing draws its own values: a second pairing with the same peer makes another key. (The random
    /// values follow a count of the host's pairings, not the link handle, which a controller may reuse.)
    @Test func pairingAgainMakesANewKey() async throws {
        let pair = Pair(
            central: Self.security(.noInputNoOutput, seed: 1), peripheral: Self.security(.noInputNoOutput, seed: 2))
        let (first, _) = try await pair.connect()
        let one = try await pair.pair(first).get()
        try await pair.disconnect(first)
        let (second, _) = try await pair.reconnect()
        let two = try await pair.pair(second).get()
        #expect(one.peerLongTermKey != nil && two.peerLongTermKey != nil)
        #expect(one.peerLongTermKey != two.peerLongTermKey)
    }

    /// A value that needs encryption: refused to a stranger with Insufficient Authentication (pair first), and
    /// read once the link is paired and encrypted; after a reconnection, refused to the bonded central with
    /// Insufficient Encryption (encrypt first) until it encrypts with the kept key (Vol 3, Part C, 10.3.1).
    @Test func anEncryptedValueIsRefusedAsTheSpecSaysUntilTheLinkIsEncrypted() async throws {
        let pair = Pair(
            central: Self.security(.noInputNoOutput, seed: 1), peripheral: Self.security(.noInputNoOutput, seed: 2))
        let definition = GATTServiceDefinition(
            uuid: BluetoothUUID(0xFFF0),
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: BluetoothUUID(0xFFF1), properties: [.read], permissions: [.readEncryptionRequired],
                    value: [0x2A])
            ])
        let service = try pair.peripheral.host.addService(definition).get()
        let value = service.characteristicValueHandles[0]
        func read(_ handle: ConnectionHandle) async throws -> Result<[UInt8], HostError> {
            let outcome = Mutex<Result<[UInt8], HostError>?>(nil)
            pair.central.host.read(on: handle, attribute: value) { r in outcome.withLock { $0 = r } }
            try await pair.run(until: { outcome.withLock { $0 } != nil }, "the read")
            return try #require(outcome.withLock { $0 })
        }
        let (handle, _) = try await pair.connect()
        let stranger = try await read(handle)
        #expect(stranger.error?.code == .att(.insufficientAuthentication), "\(stranger)")
        let result = try await pair.pair(handle).get()
        #expect(try await read(handle).get() == [0x2A])

        try await pair.disconnect(handle)
        let (again, peripheralAgain) = try await pair.reconnect()
        // The peripheral's system knows the central is bonded (the layer above tells the host).
        pair.peripheral.host.setPeerBonded(on: peripheralAgain, true)
        let bonded = try await read(again)
        #expect(bonded.error?.code == .att(.insufficientEncryption), "\(bonded)")
        let kept = try #require(result.peerLongTermKey)
        pair.peripheral.keys.withLock { $0 = [kept] }
        let encrypted = Mutex<Result<Void, HostError>?>(nil)
        pair.central.host.encrypt(on: again, key: kept) { r in
            encrypted.withLock { $0 = r }
        }
        try await pair.run(until: { encrypted.withLock { $0 } != nil }, "the re-encryption")
        #expect(try await read(again).get() == [0x2A])
    }

    @Test func aPeripheralThatLostTheKeyRefusesAndTheLinkStays() async throws {
        let pair = Pair(
            central: Self.security(.noInputNoOutput, seed: 1), peripheral: Self.security(.noInputNoOutput, seed: 2))
        let (handle, _) = try await pair.connect()
        let outcome = Mutex<Result<Void, HostError>?>(nil)
        let key = SMPPairing.LongTermKey(key: [UInt8](repeating: 9, count: 16), ediv: 0x1234, rand: 42)
        pair.central.host.encrypt(on: handle, key: key) { r in outcome.withLock { $0 = r } }
        try await pair.run(until: { outcome.withLock { $0 } != nil }, "the refusal")
        guard case .failure(let error)? = outcome.withLock({ $0 }) else {
            Issue.record("encryption with a key the peripheral does not have succeeded")
            return
        }
        #expect(error.code == .hci(.pinOrKeyMissing))
        #expect(!pair.central.host.links.isEmpty)
    }

    @Test(arguments: [true, false])
    func passkeyEntryAuthenticatesOverTheAir(secure: Bool) async throws {
        let pair = Pair(
            central: Self.security(.keyboardOnly, seed: 3, secure: secure, mitm: true),
            peripheral: Self.security(.displayOnly, seed: 4, mitm: true))
        let (handle, _) = try await pair.connect()
        let result = try await pair.pair(handle).get()
        #expect(result.authenticated)
        #expect(result.method == .passkeyEntry(.responderDisplaysInitiatorInputs))
        #expect(pair.peripheral.shown.withLock { $0 } != nil)
        #expect(Self.encrypted(pair.central) && Self.encrypted(pair.peripheral))
    }

    @Test func numericComparisonShowsBothUsersTheSameValue() async throws {
        let pair = Pair(
            central: Self.security(.displayYesNo, seed: 5, mitm: true),
            peripheral: Self.security(.displayYesNo, seed: 6, mitm: true))
        let (handle, _) = try await pair.connect()
        let result = try await pair.pair(handle).get()
        #expect(result.method == .numericComparison)
        let values = [pair.central, pair.peripheral].map { side in
            side.events.withLock { events in
                events.compactMap { if case .pairingPrompt(_, .confirm(let v)) = $0 { v } else { nil } }.first
            }
        }
        #expect(values[0] != nil && values[0] == values[1])
    }

    /// Vol 3 Part H 2.3.6: after a wrong passkey, neither side pairs with the other until a wait has passed: the
    /// central does not start (nothing goes on the air), and the peripheral refuses a Pairing Request from the
    /// same address with Repeated Attempts. After the wait, the right passkey pairs.
    @Test func aWrongPasskeyMakesBothSidesWaitBeforeTheNextPairing() async throws {
        let pair = Pair(
            central: Self.security(.keyboardOnly, seed: 3, mitm: true),
            peripheral: Self.security(.displayOnly, seed: 4, mitm: true))
        pair.central.user.withLock { $0 = .mistypes }
        let (handle, _) = try await pair.connect()
        #expect(try await pair.pair(handle).error?.message.contains("Confirm Value Failed") == true)
        let prompts = { (side: Side) in
            side.events.withLock { $0.count { if case .pairingPrompt = $0 { true } else { false } } }
        }
        let shownBefore = prompts(pair.peripheral)
        // At once again: the central refuses itself, and the peripheral hears nothing.
        let again = try await pair.pair(handle)
        #expect(again.error?.code == .pairingFailed)
        #expect(again.error?.message.contains("Repeated Attempts") == true, "\(again)")
        try await pair.radio.run(for: .milliseconds(500))
        #expect(prompts(pair.peripheral) == shownBefore)

        // Another host claiming the central's address (the same octets: an anagram of its name) meets the
        // peripheral's own wait.
        try await pair.disconnect(handle)
        let impostor = Side(
            radio: pair.radio, name: "centarl", security: Self.security(.keyboardOnly, seed: 9, mitm: true))
        #expect(impostor.controller.address == pair.central.controller.address)
        impostor.other = pair.peripheral
        pair.peripheral.other = impostor
        try await pair.start([impostor])
        let (link, _) = try await pair.link(impostor, pair.peripheral)
        let refused = try await pair.pair(link, from: impostor)
        #expect(refused.error?.message.contains("Repeated Attempts") == true, "\(refused)")
        // The wait (2 s after the first failure) passes: the right passkey pairs.
        try await pair.radio.run(for: .seconds(2))
        let paired = try await pair.pair(link, from: impostor)
        #expect((try? paired.get())?.authenticated == true, "\(paired)")
    }

    /// During the central's wait a peripheral's Security Request is still heard (a bond could encrypt), but a
    /// pairing it would lead to is refused: the central's `pair` fails at once and the peripheral hears Repeated
    /// Attempts instead of waiting out its 30 s timer. The peripheral here never saw the failure: another host
    /// claiming the first one's address.
    @Test func aSecurityRequestDuringTheWaitHearsRepeatedAttempts() async throws {
        let pair = Pair(
            central: Self.security(.keyboardOnly, seed: 3, mitm: true),
            peripheral: Self.security(.displayOnly, seed: 4, mitm: true))
        pair.central.user.withLock { $0 = .mistypes }
        let (handle, _) = try await pair.connect()
        #expect(try await pair.pair(handle).error?.message.contains("Confirm Value Failed") == true)
        try await pair.disconnect(handle)
        let impostor = Side(
            radio: pair.radio, name: "lapheriper", security: Self.security(.displayOnly, seed: 9, mitm: true))
        #expect(impostor.controller.address == pair.peripheral.controller.address)
        try await pair.start([impostor])
        let (central, peripheral) = try await pair.link(pair.central, impostor)
        let asked = Mutex<Result<SMPPairing.Result, HostError>?>(nil)
        impostor.host.pair(on: peripheral) { result in asked.withLock { $0 = result } }
        try await pair.run(
            until: { pair.central.heardAny { if case .securityRequested = $0 { true } else { false } } },
            "the Security Request")
        let answered = try await pair.pair(central)
        #expect(answered.error?.message.contains("Repeated Attempts") == true, "\(answered)")
        try await pair.run(until: { asked.withLock { $0 } != nil }, limit: .seconds(5), "the peripheral's answer")
        #expect(asked.withLock { $0 }?.error?.message.contains("Repeated Attempts") == true)
    }

    @Test func theWaitDoublesWithEachFailureUpTo64Seconds() {
        #expect((1...8).map { RepeatedAttempts.wait(after: $0) } == [2, 4, 8, 16, 32, 64, 64, 64].map { .seconds($0) })
        #expect(RepeatedAttempts.mostFailures == 6)
    }

    @Test func aHostNotConfiguredToPairRefusesWithPairingNotSupported() async throws {
        let pair = Pair(
            central: Self.security(.noInputNoOutput, seed: 1), peripheral: Self.security(.noInputNoOutput, seed: 2))
        // A third host without security: the central pairs with it and hears Pairing Not Supported.
        let plainController = pair.radio.addController(
            name: "plain", address: BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x5E, 0xC0, 0x01]))
        let plain = HostDriver(transport: plainController.hostTransport, scheduler: pair.radio)
        let started = Mutex(0)
        for host in [pair.central.host, plain] { host.start { if case .success = $0 { started.withLock { $0 += 1 } } } }
        try await pair.run(until: { started.withLock { $0 } == 2 }, "starting")
        plain.startAdvertising(AdvertisingParameters(), data: [0x02, 0x01, 0x06], scanResponse: []) { _ in }
        pair.central.host.setConnectTargets([plainController.address], parameters: ConnectionParameters())
        try await pair.run(until: { !pair.central.host.links.isEmpty }, "the connection")
        let result = try await pair.pair(pair.central.host.links[0].handle)
        guard case .failure(let error) = result else {
            Issue.record("pairing with a host that does not pair succeeded")
            return
        }
        #expect(error.code == .pairingFailed)
        #expect("\(error)".contains("Pairing Not Supported"))
    }
}

extension Result {
    /// The failure, if it is one.
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
