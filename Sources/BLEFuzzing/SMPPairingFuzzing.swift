import BLECore
import BLESMP

extension FuzzTarget {
    /// Two `SMPPairing` machines, a central and a peripheral, on a link the input plays as an active attacker
    /// would: each command in flight delivered, changed, dropped or replaced by any PDU, the users' answers
    /// (the passkey the other side shows, another, or none), the link's encryption and the 30 s timer, all in any
    /// order. Every PDU a machine sends decodes to itself; keys are 16 octets and key sizes 7...16; a machine that
    /// timed out sends nothing again (Vol 3, Part H, 3.4).
    static let smpPairing = FuzzTarget("smp-pairing", "SMP PDUs and user answers into two SMPPairing machines") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        var link = PairingLink(
            central: pairingConfiguration(&reader, keyOctet: 0x11),
            peripheral: pairingConfiguration(&reader, keyOctet: 0x22))
        while !reader.isEmpty {
            let role: SMPPairing.Role = reader.bool() ? .initiator : .responder
            switch reader.below(16) {
            case 0: try link.handle(.start, at: role)
            case 1:
                // The command in flight to `role`, with one octet changed; what no longer decodes is dropped.
                guard var bytes = link.takeInFlight(to: role)?.encoded else { break }
                bytes[reader.below(bytes.count)] = reader.byte()
                if let pdu = try? SMPPDU(decoding: bytes) { try link.handle(.received(pdu), at: role) }
            case 2:
                if let pdu = try? SMPPDU(decoding: reader.chunk()) { try link.handle(.received(pdu), at: role) }
            case 3: _ = link.takeInFlight(to: role)
            case 4:
                let shown = link.shown[role == .initiator ? .responder : .initiator] ?? nil
                let typed: UInt32? =
                    switch reader.below(4) {
                    case 0: nil
                    case 1: reader.uint32()
                    case 2: reader.uint32() % 1_000_000
                    default: shown ?? reader.uint32() % 1_000_000
                    }
                try link.handle(.passkeyEntered(typed), at: role)
            case 5: try link.handle(.confirmed(reader.below(8) != 0), at: role)
            case 6: try link.encrypt(status: reader.byte(), at: role)
            case 7:
                // Rarer than the rest: a timeout ends the pairing for good.
                if reader.below(4) == 0 { try link.handle(.timerExpired, at: role) }
            default:
                if let pdu = link.takeInFlight(to: role) { try link.handle(.received(pdu), at: role) }
            }
        }
    }

    /// A machine's configuration from the input: I/O capabilities (a reserved value now and then), bonding,
    /// MITM, Secure Connections (only), key sizes, an identity to distribute.
    private static func pairingConfiguration(_ reader: inout FuzzInput, keyOctet: UInt8) -> SMPPairing.Configuration {
        let flags = reader.byte()
        let io = reader.byte()
        var configuration = SMPPairing.Configuration(
            ioCapability: IOCapability(rawValue: io < 0xF0 ? io % 5 : io),
            privateKey: [UInt8](repeating: keyOctet, count: 31) + [0x2A],
            identity: flags & 0x20 == 0
                ? nil
                : SMPPairing.Identity(
                    resolvingKey: [UInt8](repeating: keyOctet, count: 16),
                    address: BluetoothAddress(bytes: [0xC0, keyOctet, 2, 3, 4, 5], type: .randomDevice)))
        configuration.bonding = flags & 0x01 != 0
        configuration.mitm = flags & 0x02 != 0
        configuration.secureConnections = flags & 0x04 == 0
        configuration.secureConnectionsOnly = flags & 0x08 != 0
        if flags & 0x10 != 0 {
            configuration.maximumKeySize = reader.byte() % 20
            configuration.minimumKeySize = reader.byte() % 20
        }
        if flags & 0x40 != 0 {
            // Any fields at all, the CSRK and link key among them (the machine leaves those out).
            configuration.distributedKeys = KeyDistribution(rawValue: reader.byte())
            configuration.requestedKeys = KeyDistribution(rawValue: reader.byte())
        }
        return configuration
    }
}

/// The central's and the peripheral's machines and what is in flight between them.
struct PairingLink {
    var machines: [SMPPairing.Role: SMPPairing]
    /// Commands sent and not yet delivered, by the role they go to.
    var inFlight: [SMPPairing.Role: [SMPPDU]] = [.initiator: [], .responder: []]
    /// The passkey each side last showed.
    var shown: [SMPPairing.Role: UInt32?] = [:]
    /// The key the central asked its controller to encrypt with, and the one the peripheral will answer with.
    var encryptingWith: [UInt8]?
    var peripheralKey: [UInt8]?
    var timedOut: Set<SMPPairing.Role> = []
    /// The sides whose last pairing completed: Pairing Failed aborts a pairing under way (Vol 3, Part H, 3.5.5),
    /// so one of them sends it only to a pairing that starts anew.
    var completed: Set<SMPPairing.Role> = []

    static let centralAddress = BluetoothAddress(bytes: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x55], type: .randomDevice)
    static let peripheralAddress = BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x0A, 0x12, 0x34])

    init(central: SMPPairing.Configuration, peripheral: SMPPairing.Configuration) {
        machines = [
            .initiator: SMPPairing(
                role: .initiator, configuration: central, initiatorAddress: Self.centralAddress,
                responderAddress: Self.peripheralAddress,
                random: SMPRandom(seed: [UInt8](repeating: 0x01, count: 16))),
            .responder: SMPPairing(
                role: .responder, configuration: peripheral, initiatorAddress: Self.centralAddress,
                responderAddress: Self.peripheralAddress,
                random: SMPRandom(seed: [UInt8](repeating: 0x02, count: 16))),
        ]
    }

    mutating func takeInFlight(to role: SMPPairing.Role) -> SMPPDU? {
        guard let first = inFlight[role]?.first else { return nil }
        inFlight[role]?.removeFirst()
        return first
    }

    /// The link's encryption finishes: with the keys the two machines gave when the central asked for it (a
    /// mismatch fails as a controller fails it, MIC failure 0x3D), else with any status at one side.
    mutating func encrypt(status: UInt8, at role: SMPPairing.Role) throws(FuzzTarget.Violation) {
        guard let key = encryptingWith else { return try handle(.encryptionChanged(status: status), at: role) }
        encryptingWith = nil
        let result: UInt8 = key == peripheralKey ? 0x00 : 0x3D
        try handle(.encryptionChanged(status: result), at: .initiator)
        try handle(.encryptionChanged(status: result), at: .responder)
    }

    mutating func handle(_ event: SMPPairing.Event, at role: SMPPairing.Role) throws(FuzzTarget.Violation) {
        guard let actions = machines[role]?.handle(event) else { return }
        let other: SMPPairing.Role = role == .initiator ? .responder : .initiator
        switch event {
        case .start, .received(.pairingRequest): completed.remove(role)
        default: break
        }
        for action in actions {
            switch action {
            case .send(let pdu):
                try expect(!timedOut.contains(role), "\(role) sent \(pdu) after its pairing timed out")
                if case .pairingFailed = pdu {
                    try expect(!completed.contains(role), "\(role) sent \(pdu) after its pairing completed")
                }
                try expect((try? SMPPDU(decoding: pdu.encoded)) == pdu, "\(role) sent \(pdu), which does not decode")
                inFlight[other, default: []].append(pdu)
            case .displayPasskey(let value):
                try expect(value < 1_000_000, "\(role) shows passkey \(value), more than six digits")
                shown[role] = value
            case .confirm(let value):
                try expect((value ?? 0) < 1_000_000, "\(role) compares \(value ?? 0), more than six digits")
            case .encrypt(let key):
                try expect(role == .initiator, "the peripheral asked to start encryption")
                try checkKey(key.key, "the key to encrypt with")
                encryptingWith = key.key
            case .provideKeyForEncryption(let key):
                try expect(role == .responder, "the central offered a key for the peer's encryption")
                try checkKey(key, "the key to answer with")
                peripheralKey = key
            case .completed(let result):
                try expect((7...16).contains(result.keySize), "a key size of \(result.keySize)")
                for key in [result.peerLongTermKey, result.localLongTermKey].compactMap(\.self) {
                    try checkKey(key.key, "a long term key")
                }
                if let identity = result.peerIdentity { try checkKey(identity.resolvingKey, "an IRK") }
                completed.insert(role)
            case .failed(.timeout):
                timedOut.insert(role)
            case .failed, .startTimer, .stopTimer, .requestPasskey, .securityRequested, .ignored:
                break
            }
        }
    }

    private func checkKey(_ key: [UInt8], _ what: String) throws(FuzzTarget.Violation) {
        try expect(key.count == 16, "\(what) has \(key.count) octets")
    }
}
