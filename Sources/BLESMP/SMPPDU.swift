import BLECore

/// One Security Manager Protocol command, as carried on the LE Security Manager channel (CID 0x0006): a code
/// octet, then the command's fields. Multi-octet values (keys, random numbers, confirm values, public key
/// coordinates) are kept as they travel, least significant octet first.
///
/// Every PDU has a fixed length; a PDU of another length is malformed (the receiver answers Pairing Failed with
/// Invalid Parameters), and an unknown code is kept as `.unknown` (answered with Command Not Supported).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 3.3 (format), 3.5 (pairing methods), 3.6 (key distribution).
public enum SMPPDU: Hashable, Sendable, CustomStringConvertible {
    /// 0x01, Vol 3 Part H 3.5.1.
    case pairingRequest(PairingFeatures)
    /// 0x02, 3.5.2.
    case pairingResponse(PairingFeatures)
    /// 0x03, 3.5.3: Mconfirm or Sconfirm (legacy), Ca or Cb (Secure Connections).
    case pairingConfirm([UInt8])
    /// 0x04, 3.5.4: Mrand or Srand (legacy), Na or Nb (Secure Connections).
    case pairingRandom([UInt8])
    /// 0x05, 3.5.5.
    case pairingFailed(SMPFailureReason)
    /// 0x06, 3.6.2: the Long Term Key.
    case encryptionInformation(longTermKey: [UInt8])
    /// 0x07, 3.6.3: the LTK's EDIV and Rand (legacy pairing only).
    case centralIdentification(ediv: UInt16, rand: UInt64)
    /// 0x08, 3.6.4: the Identity Resolving Key.
    case identityInformation(identityResolvingKey: [UInt8])
    /// 0x09, 3.6.5: the public or static random identity address.
    case identityAddressInformation(BluetoothAddress)
    /// 0x0A, 3.6.6: the Connection Signature Resolving Key.
    case signingInformation(signatureKey: [UInt8])
    /// 0x0B, 3.6.7: a peripheral asks its central to start pairing or encryption.
    case securityRequest(AuthenticationRequirements)
    /// 0x0C, 3.5.6: X then Y, 32 octets each.
    case pairingPublicKey(x: [UInt8], y: [UInt8])
    /// 0x0D, 3.5.7: Ea or Eb.
    case pairingDHKeyCheck([UInt8])
    /// 0x0E, 3.5.8.
    case keypressNotification(KeypressNotification)
    /// A code this stack does not know, with its data as received.
    case unknown(code: UInt8, data: [UInt8])

    /// The command's code octet.
    public var code: UInt8 {
        switch self {
        case .pairingRequest: 0x01
        case .pairingResponse: 0x02
        case .pairingConfirm: 0x03
        case .pairingRandom: 0x04
        case .pairingFailed: 0x05
        case .encryptionInformation: 0x06
        case .centralIdentification: 0x07
        case .identityInformation: 0x08
        case .identityAddressInformation: 0x09
        case .signingInformation: 0x0A
        case .securityRequest: 0x0B
        case .pairingPublicKey: 0x0C
        case .pairingDHKeyCheck: 0x0D
        case .keypressNotification: 0x0E
        case .unknown(let code, _): code
        }
    }

    /// The length of each known command's fields (without the code), Vol 3 Part H 3.5–3.6.
    static func fieldLength(of code: UInt8) -> Int? {
        switch code {
        case 0x01, 0x02: 6
        case 0x03, 0x04, 0x06, 0x08, 0x0A, 0x0D: 16
        case 0x05, 0x0B, 0x0E: 1
        case 0x07: 10
        case 0x09: 7
        case 0x0C: 64
        default: nil
        }
    }

    /// Decodes one PDU (the whole L2CAP payload).
    public init(decoding bytes: [UInt8]) throws(SMPError) {
        guard let code = bytes.first else { throw SMPError(.malformed, "an empty SMP PDU") }
        let fields = Array(bytes.dropFirst())
        guard let length = Self.fieldLength(of: code) else {
            self = .unknown(code: code, data: fields)
            return
        }
        guard fields.count == length else {
            throw SMPError(
                .malformed,
                "SMP command 0x\(String(code, radix: 16)) has \(fields.count) octets of fields; it has \(length)")
        }
        switch code {
        case 0x01: self = .pairingRequest(PairingFeatures(fields))
        case 0x02: self = .pairingResponse(PairingFeatures(fields))
        case 0x03: self = .pairingConfirm(fields)
        case 0x04: self = .pairingRandom(fields)
        case 0x05: self = .pairingFailed(SMPFailureReason(rawValue: fields[0]))
        case 0x06: self = .encryptionInformation(longTermKey: fields)
        case 0x07:
            self = .centralIdentification(
                ediv: UInt16(fields[0]) | UInt16(fields[1]) << 8, rand: Self.littleEndian(fields[2..<10]))
        case 0x08: self = .identityInformation(identityResolvingKey: fields)
        case 0x09:
            // 0x00 public, 0x01 static random (Vol 3 Part H 3.6.5); anything else is not an identity address.
            guard fields[0] <= 0x01,
                let address = BluetoothAddress(
                    littleEndian: fields[1...], type: fields[0] == 0 ? .publicDevice : .randomDevice)
            else {
                throw SMPError(.malformed, "identity address type 0x\(String(fields[0], radix: 16)) is reserved")
            }
            self = .identityAddressInformation(address)
        case 0x0A: self = .signingInformation(signatureKey: fields)
        case 0x0B: self = .securityRequest(AuthenticationRequirements(rawValue: fields[0]))
        case 0x0C: self = .pairingPublicKey(x: Array(fields[0..<32]), y: Array(fields[32..<64]))
        case 0x0D: self = .pairingDHKeyCheck(fields)
        default: self = .keypressNotification(KeypressNotification(rawValue: fields[0]))
        }
    }

    /// The PDU's octets: code, then fields. A value of the wrong length (a 15-octet key, say) is a programming
    /// error the machines never make; it is padded or cut to the field's length so the PDU keeps its size.
    public var encoded: [UInt8] {
        var out: [UInt8] = [code]
        func field(_ value: [UInt8], _ length: Int) {
            out += value.prefix(length) + [UInt8](repeating: 0, count: max(0, length - value.count))
        }
        switch self {
        case .pairingRequest(let f), .pairingResponse(let f): out += f.encoded
        case .pairingConfirm(let v), .pairingRandom(let v), .pairingDHKeyCheck(let v): field(v, 16)
        case .pairingFailed(let reason): out.append(reason.rawValue)
        case .encryptionInformation(let key): field(key, 16)
        case .centralIdentification(let ediv, let rand):
            out += [UInt8(ediv & 0xFF), UInt8(ediv >> 8)]
            out += (0..<8).map { UInt8(truncatingIfNeeded: rand >> (8 * $0)) }
        case .identityInformation(let key): field(key, 16)
        case .identityAddressInformation(let address):
            out.append(address.type.isRandom ? 0x01 : 0x00)
            out += address.littleEndianBytes
        case .signingInformation(let key): field(key, 16)
        case .securityRequest(let requirements): out.append(requirements.rawValue)
        case .pairingPublicKey(let x, let y):
            field(x, 32)
            field(y, 32)
        case .keypressNotification(let type): out.append(type.rawValue)
        case .unknown(_, let data): out += data
        }
        return out
    }

    static func littleEndian(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    public var description: String {
        switch self {
        case .pairingRequest(let f): "Pairing Request \(f)"
        case .pairingResponse(let f): "Pairing Response \(f)"
        case .pairingConfirm(let v): "Pairing Confirm \(v.hexString)"
        case .pairingRandom(let v): "Pairing Random \(v.hexString)"
        case .pairingFailed(let reason): "Pairing Failed (\(reason))"
        case .encryptionInformation: "Encryption Information (LTK)"
        case .centralIdentification(let ediv, let rand):
            "Central Identification EDIV 0x\(String(ediv, radix: 16)) Rand 0x\(String(rand, radix: 16))"
        case .identityInformation: "Identity Information (IRK)"
        case .identityAddressInformation(let address): "Identity Address Information \(address)"
        case .signingInformation: "Signing Information (CSRK)"
        case .securityRequest(let r): "Security Request \(r)"
        case .pairingPublicKey: "Pairing Public Key"
        case .pairingDHKeyCheck(let v): "Pairing DHKey Check \(v.hexString)"
        case .keypressNotification(let type): "Keypress Notification \(type)"
        case .unknown(let code, let data): "SMP command 0x\(String(code, radix: 16)) \(data.hexString)"
        }
    }
}

/// The six feature octets of a Pairing Request or Pairing Response.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 3.5.1 and 3.5.2.
public struct PairingFeatures: Hashable, Sendable, CustomStringConvertible {
    public var ioCapability: IOCapability
    /// Whether OOB authentication data from the remote device is present.
    public var oobDataPresent: Bool
    public var authentication: AuthenticationRequirements
    /// 7...16 octets.
    public var maximumKeySize: UInt8
    public var initiatorKeys: KeyDistribution
    public var responderKeys: KeyDistribution

    public init(
        ioCapability: IOCapability, oobDataPresent: Bool = false, authentication: AuthenticationRequirements,
        maximumKeySize: UInt8 = 16, initiatorKeys: KeyDistribution, responderKeys: KeyDistribution
    ) {
        self.ioCapability = ioCapability
        self.oobDataPresent = oobDataPresent
        self.authentication = authentication
        self.maximumKeySize = maximumKeySize
        self.initiatorKeys = initiatorKeys
        self.responderKeys = responderKeys
    }

    init(_ f: [UInt8]) {
        // The OOB flag's other values are reserved; only 0x01 says data is present.
        self.init(
            ioCapability: IOCapability(rawValue: f[0]), oobDataPresent: f[1] == 0x01,
            authentication: AuthenticationRequirements(rawValue: f[2]), maximumKeySize: f[3],
            initiatorKeys: KeyDistribution(rawValue: f[4]), responderKeys: KeyDistribution(rawValue: f[5]))
    }

    var encoded: [UInt8] {
        [
            ioCapability.rawValue, oobDataPresent ? 0x01 : 0x00, authentication.rawValue, maximumKeySize,
            initiatorKeys.rawValue, responderKeys.rawValue,
        ]
    }

    public var description: String {
        "(io \(ioCapability), oob \(oobDataPresent), auth \(authentication), key size \(maximumKeySize), "
            + "initiator keys \(initiatorKeys), responder keys \(responderKeys))"
    }
}

/// A device's input and output for pairing.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 2.3.2, Table 3.4.
public struct IOCapability: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let displayOnly = IOCapability(rawValue: 0x00)
    public static let displayYesNo = IOCapability(rawValue: 0x01)
    public static let keyboardOnly = IOCapability(rawValue: 0x02)
    public static let noInputNoOutput = IOCapability(rawValue: 0x03)
    public static let keyboardDisplay = IOCapability(rawValue: 0x04)

    /// 0x05–0xFF are reserved (a Pairing Request with one fails with Invalid Parameters).
    public var isValid: Bool { rawValue <= 0x04 }

    public var description: String {
        switch rawValue {
        case 0x00: "DisplayOnly"
        case 0x01: "DisplayYesNo"
        case 0x02: "KeyboardOnly"
        case 0x03: "NoInputNoOutput"
        case 0x04: "KeyboardDisplay"
        default: "reserved 0x" + String(rawValue, radix: 16)
        }
    }
}

/// The AuthReq octet.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 3.5.1, Figure 3.3.
public struct AuthenticationRequirements: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bonding_Flags 0b01: keys are stored (0b00: no bonding; 0b10 and 0b11 are reserved).
    public static let bonding = AuthenticationRequirements(rawValue: 0x01)
    /// Man-in-the-middle protection wanted.
    public static let mitm = AuthenticationRequirements(rawValue: 0x04)
    /// LE Secure Connections supported.
    public static let secureConnections = AuthenticationRequirements(rawValue: 0x08)
    /// Keypress notifications wanted in Passkey Entry.
    public static let keypress = AuthenticationRequirements(rawValue: 0x10)
    /// h7 supported for cross-transport key derivation.
    public static let ct2 = AuthenticationRequirements(rawValue: 0x20)

    public var description: String {
        var names: [String] = []
        if contains(.bonding) { names.append("bonding") }
        if contains(.mitm) { names.append("MITM") }
        if contains(.secureConnections) { names.append("SC") }
        if contains(.keypress) { names.append("keypress") }
        if contains(.ct2) { names.append("CT2") }
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}

/// Which keys a device will distribute after pairing.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 3.6.1, Figure 3.11.
public struct KeyDistribution: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// LTK with EDIV and Rand (legacy); in Secure Connections the bit is ignored (the LTK is derived).
    public static let encryptionKey = KeyDistribution(rawValue: 0x01)
    /// IRK and identity address.
    public static let identityKey = KeyDistribution(rawValue: 0x02)
    /// CSRK.
    public static let signingKey = KeyDistribution(rawValue: 0x04)
    /// BR/EDR link key derivation (cross-transport).
    public static let linkKey = KeyDistribution(rawValue: 0x08)

    public var description: String {
        var names: [String] = []
        if contains(.encryptionKey) { names.append("EncKey") }
        if contains(.identityKey) { names.append("IdKey") }
        if contains(.signingKey) { names.append("SignKey") }
        if contains(.linkKey) { names.append("LinkKey") }
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}

/// Why pairing failed, as Pairing Failed carries it.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 3.5.5, Table 3.7.
public struct SMPFailureReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let passkeyEntryFailed = SMPFailureReason(rawValue: 0x01)
    public static let oobNotAvailable = SMPFailureReason(rawValue: 0x02)
    public static let authenticationRequirements = SMPFailureReason(rawValue: 0x03)
    public static let confirmValueFailed = SMPFailureReason(rawValue: 0x04)
    public static let pairingNotSupported = SMPFailureReason(rawValue: 0x05)
    public static let encryptionKeySize = SMPFailureReason(rawValue: 0x06)
    public static let commandNotSupported = SMPFailureReason(rawValue: 0x07)
    public static let unspecifiedReason = SMPFailureReason(rawValue: 0x08)
    public static let repeatedAttempts = SMPFailureReason(rawValue: 0x09)
    public static let invalidParameters = SMPFailureReason(rawValue: 0x0A)
    public static let dhKeyCheckFailed = SMPFailureReason(rawValue: 0x0B)
    public static let numericComparisonFailed = SMPFailureReason(rawValue: 0x0C)
    public static let brEdrPairingInProgress = SMPFailureReason(rawValue: 0x0D)
    public static let crossTransportKeyNotAllowed = SMPFailureReason(rawValue: 0x0E)
    public static let keyRejected = SMPFailureReason(rawValue: 0x0F)
    public static let busy = SMPFailureReason(rawValue: 0x10)

    public var description: String {
        let name: String
        switch rawValue {
        case 0x01: name = "Passkey Entry Failed"
        case 0x02: name = "OOB Not Available"
        case 0x03: name = "Authentication Requirements"
        case 0x04: name = "Confirm Value Failed"
        case 0x05: name = "Pairing Not Supported"
        case 0x06: name = "Encryption Key Size"
        case 0x07: name = "Command Not Supported"
        case 0x08: name = "Unspecified Reason"
        case 0x09: name = "Repeated Attempts"
        case 0x0A: name = "Invalid Parameters"
        case 0x0B: name = "DHKey Check Failed"
        case 0x0C: name = "Numeric Comparison Failed"
        case 0x0D: name = "BR/EDR pairing in progress"
        case 0x0E: name = "Cross-transport Key Derivation/Generation not allowed"
        case 0x0F: name = "Key Rejected"
        case 0x10: name = "Busy"
        default: name = "reserved"
        }
        return "\(name), 0x" + (rawValue < 0x10 ? "0" : "") + String(rawValue, radix: 16, uppercase: true)
    }
}

/// What a Keypress Notification says.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 3.5.8, Table 3.8.
public struct KeypressNotification: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let entryStarted = KeypressNotification(rawValue: 0)
    public static let digitEntered = KeypressNotification(rawValue: 1)
    public static let digitErased = KeypressNotification(rawValue: 2)
    public static let cleared = KeypressNotification(rawValue: 3)
    public static let entryCompleted = KeypressNotification(rawValue: 4)

    public var description: String {
        switch rawValue {
        case 0: "entry started"
        case 1: "digit entered"
        case 2: "digit erased"
        case 3: "cleared"
        case 4: "entry completed"
        default: "reserved 0x" + String(rawValue, radix: 16)
        }
    }
}

/// A failure of the Security Manager layer: a malformed PDU, or a pairing that ended.
public struct SMPError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A PDU of the wrong length or with a reserved value where the spec allows none.
        public static let malformed = Code(rawValue: "malformed")
        public var description: String { rawValue }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
