import BLECore
import BLESMP

/// The pairing matrix's rows and what the Core Specification says each must end in: the two devices' features,
/// who starts, what their users do, and the outcome (the method the spec's tables select and the security
/// reached, or the failure and which side finds it). `PairingMatrixTests` runs every row between two SMP machines
/// and a table of them between two hosts on the simulated radio; the Bumble rows are in the interop tests.
///
/// The expectations are written from the spec, not from our code: the method table below is Table 2.8 as
/// printed, and the key rules are 3.5.1-3.5.2 and 3.6.1.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 2.3.5.1 (Tables 2.6-2.8), 2.3.5.6 (Secure Connections' stages),
///   3.5 (the commands), 3.6.1 (key distribution).
enum PairingMatrix {
    /// One device's pairing features.
    struct Device: Hashable, Sendable, CustomStringConvertible {
        var io: IOCapability
        /// LE Secure Connections offered (the SC bit).
        var secure = true
        /// MITM protection asked for, and insisted on.
        var mitm = false
        var bonding = true
        /// The keys it lists to send and asks for (nil: the default, both when bonding, none otherwise).
        var sends: KeyDistribution? = nil
        var asks: KeyDistribution? = nil

        var description: String {
            var parts = ["\(io)", secure ? "SC" : "legacy"]
            if mitm { parts.append("MITM") }
            parts.append(bonding ? "bond" : "no-bond")
            if let sends { parts.append("sends \(sends)") }
            if let asks { parts.append("asks \(asks)") }
            return parts.joined(separator: " ")
        }

        /// The keys it offers: only the LTK and the identity exist here (every device in the matrix has one).
        var offered: KeyDistribution {
            (sends ?? (bonding ? [.encryptionKey, .identityKey] : [])).intersection([.encryptionKey, .identityKey])
        }
        var wanted: KeyDistribution {
            (asks ?? (bonding ? [.encryptionKey, .identityKey] : [])).intersection([.encryptionKey, .identityKey])
        }
    }

    /// Who starts the pairing.
    enum Start: String, Sendable, Hashable {
        /// The central sends a Pairing Request.
        case central
        /// The peripheral sends a Security Request, and the central answers it with a Pairing Request.
        case securityRequest
    }

    /// What a device's user does when asked.
    enum User: String, Sendable, Hashable {
        /// Accepts, and types the passkey the other device shows.
        case accepts
        /// Says no to Just Works or the numbers.
        case rejects
        /// Cancels the passkey entry.
        case cancels
        /// Types a passkey one digit off.
        case mistypes
        /// Never answers.
        case silent
    }

    struct Row: Hashable, Sendable, CustomStringConvertible {
        var central: Device
        var peripheral: Device
        var start = Start.central
        var centralUser = User.accepts
        var peripheralUser = User.accepts

        var description: String {
            var text = "central \(central) / peripheral \(peripheral)"
            if start != .central { text += " / started by \(start)" }
            if centralUser != .accepts { text += " / central's user \(centralUser)" }
            if peripheralUser != .accepts { text += " / peripheral's user \(peripheralUser)" }
            return text
        }
    }

    enum Outcome: Hashable, Sendable, CustomStringConvertible {
        /// Both sides end paired with this method; which keys crossed.
        case paired(Paired)
        /// Both end failed with this reason: found by `detectedBy` (it sends Pairing Failed), heard by the other.
        case failed(SMPFailureReason, detectedBy: SMPPairing.Role)
        /// Both sides' 30 s timers run out (Vol 3 Part H 3.4).
        case timeout

        var description: String {
            switch self {
            case .paired(let p): "paired: \(p)"
            case .failed(let reason, let side): "failed: \(reason), found by the \(side)"
            case .timeout: "both time out"
            }
        }
    }

    struct Paired: Hashable, Sendable, CustomStringConvertible {
        var method: PairingMethod
        var secure: Bool
        var authenticated: Bool
        var bonded: Bool
        /// The responder's keys the initiator receives, and the initiator's the responder receives (LTK only in
        /// legacy pairing: Secure Connections derives it).
        var responderKeys: KeyDistribution
        var initiatorKeys: KeyDistribution

        var description: String {
            "\(method), \(secure ? "Secure Connections" : "legacy"), "
                + "\(authenticated ? "authenticated" : "unauthenticated"), \(bonded ? "bonded" : "not bonded"), "
                + "central receives \(responderKeys), peripheral receives \(initiatorKeys)"
        }
    }

    /// How two devices authenticate, as Table 2.8 prints it: rows the responder's capability, columns the
    /// initiator's, in the order DisplayOnly, DisplayYesNo, KeyboardOnly, NoInputNoOutput, KeyboardDisplay.
    /// JW Just Works; RD the responder displays and the initiator inputs; ID the initiator displays and the
    /// responder inputs; BI both input; "X/NC": X in legacy pairing, Numeric Comparison in Secure Connections.
    static let table: [[String]] = [
        ["JW", "JW", "RD", "JW", "RD"],
        ["JW", "JW/NC", "RD", "JW", "RD/NC"],
        ["ID", "ID", "BI", "JW", "ID"],
        ["JW", "JW", "JW", "JW", "JW"],
        ["ID", "ID/NC", "RD", "JW", "ID/NC"],
    ]

    static let capabilities: [IOCapability] = [
        .displayOnly, .displayYesNo, .keyboardOnly, .noInputNoOutput, .keyboardDisplay,
    ]

    /// The method Table 2.8 gives (Tables 2.6 and 2.7: Just Works when neither side asks for MITM protection).
    static func method(_ row: Row, secure: Bool) -> PairingMethod {
        guard row.central.mitm || row.peripheral.mitm else { return .justWorks }
        let column = capabilities.firstIndex(of: row.central.io)!
        let cell = table[capabilities.firstIndex(of: row.peripheral.io)!][column].split(separator: "/")
        switch secure && cell.count == 2 ? cell[1] : cell[0] {
        case "RD": return .passkeyEntry(.responderDisplaysInitiatorInputs)
        case "ID": return .passkeyEntry(.initiatorDisplaysResponderInputs)
        case "BI": return .passkeyEntry(.bothInput)
        case "NC": return .numericComparison
        default: return .justWorks
        }
    }

    /// Which sides' users the method asks something: both confirm Just Works and Numeric Comparison (Vol 3 Part
    /// H 2.3.5.6.2 and the legacy Just Works confirmation), the inputting side(s) type a passkey.
    static func asked(_ method: PairingMethod) -> Set<SMPPairing.Role> {
        switch method {
        case .justWorks, .numericComparison, .passkeyEntry(.bothInput): [.initiator, .responder]
        case .passkeyEntry(.responderDisplaysInitiatorInputs): [.initiator]
        case .passkeyEntry(.initiatorDisplaysResponderInputs): [.responder]
        }
    }

    static func expected(_ row: Row) -> Outcome {
        let secure = row.central.secure && row.peripheral.secure
        let method = method(row, secure: secure)
        // A side that insists on MITM protection refuses a method without it: the responder on the request, else
        // the initiator on the response.
        if !method.isAuthenticated {
            if row.peripheral.mitm { return .failed(.authenticationRequirements, detectedBy: .responder) }
            if row.central.mitm { return .failed(.authenticationRequirements, detectedBy: .initiator) }
        }
        let asked = asked(method)
        for (role, user) in [(SMPPairing.Role.initiator, row.centralUser), (.responder, row.peripheralUser)]
        where asked.contains(role) {
            switch user {
            case .accepts, .mistypes: continue
            case .silent: return .timeout
            case .rejects, .cancels:
                return .failed(
                    method == .numericComparison ? .numericComparisonFailed : .passkeyEntryFailed, detectedBy: role)
            }
        }
        if case .passkeyEntry = method, [row.centralUser, row.peripheralUser].contains(.mistypes) {
            let typist: SMPPairing.Role = row.centralUser == .mistypes ? .initiator : .responder
            // The responder checks the initiator's commitment first, in both versions (Vol 3 Part H 2.3.5.5,
            // 2.3.5.6.3): a wrong digit on either side is found there.
            if asked.contains(typist) { return .failed(.confirmValueFailed, detectedBy: .responder) }
        }
        // The Pairing Response's fields are the agreement (3.5.2): each side sends what the other asked and it
        // offered; Secure Connections ignores EncKey (3.6.1).
        var responderKeys = row.peripheral.offered.intersection(row.central.wanted)
        var initiatorKeys = row.central.offered.intersection(row.peripheral.wanted)
        if secure {
            responderKeys.remove(.encryptionKey)
            initiatorKeys.remove(.encryptionKey)
        }
        return .paired(
            Paired(
                method: method, secure: secure, authenticated: method.isAuthenticated,
                bonded: row.central.bonding && row.peripheral.bonding, responderKeys: responderKeys,
                initiatorKeys: initiatorKeys))
    }

    /// The passkey both users agree on when both type one, and the one a mistyping user types instead.
    static let agreedPasskey: UInt32 = 123_456
    static func typed(_ shown: UInt32, by user: User) -> UInt32 {
        user == .mistypes ? (shown + 1) % 1_000_000 : shown
    }

    /// Every device of the matrix has an identity to distribute; the central's and the peripheral's differ.
    static func identity(_ role: SMPPairing.Role) -> SMPPairing.Identity {
        let octet: UInt8 = role == .initiator ? 0x1C : 0x1D
        return SMPPairing.Identity(
            resolvingKey: [UInt8](repeating: octet, count: 16),
            address: BluetoothAddress(bytes: [0xC0 | octet, 1, 2, 3, 4, 5], type: .randomDevice))
    }
}
