/// How two devices authenticate each other while pairing, chosen from their features.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part H, 2.3.5.1 (Tables 2.6–2.8).
public enum PairingMethod: Hashable, Sendable, CustomStringConvertible {
    /// No authentication: protects against passive eavesdropping (Secure Connections) only.
    case justWorks
    /// A six-digit passkey shown on one device and typed on the other (or typed on both).
    case passkeyEntry(PasskeyRoles)
    /// Both devices show a six-digit value and their users confirm it matches (Secure Connections only).
    case numericComparison

    /// Who shows the passkey and who types it.
    public enum PasskeyRoles: Hashable, Sendable {
        case initiatorDisplaysResponderInputs
        case responderDisplaysInitiatorInputs
        case bothInput
    }

    /// Whether the method protects against a man in the middle (the keys are then "authenticated").
    public var isAuthenticated: Bool { self != .justWorks }

    public var description: String {
        switch self {
        case .justWorks: "Just Works"
        case .passkeyEntry: "Passkey Entry"
        case .numericComparison: "Numeric Comparison"
        }
    }

    /// The method for the two devices' IO capabilities when at least one asked for MITM protection (Table 2.8:
    /// the initiator's capability picks the column, the responder's the row).
    public static func forCapabilities(
        initiator: IOCapability, responder: IOCapability, secureConnections: Bool
    ) -> PairingMethod {
        let initiatorDisplays: PairingMethod = .passkeyEntry(.initiatorDisplaysResponderInputs)
        let responderDisplays: PairingMethod = .passkeyEntry(.responderDisplaysInitiatorInputs)
        // Where legacy pairing would use a passkey between two devices that can both show and confirm.
        let compare: (PairingMethod) -> PairingMethod = { secureConnections ? .numericComparison : $0 }
        switch (responder, initiator) {
        case (.noInputNoOutput, _), (_, .noInputNoOutput): return .justWorks
        case (.displayOnly, .displayOnly), (.displayOnly, .displayYesNo): return .justWorks
        case (.displayOnly, .keyboardOnly), (.displayOnly, .keyboardDisplay): return responderDisplays
        case (.displayYesNo, .displayOnly): return .justWorks
        case (.displayYesNo, .displayYesNo): return compare(.justWorks)
        case (.displayYesNo, .keyboardOnly): return responderDisplays
        case (.displayYesNo, .keyboardDisplay): return compare(responderDisplays)
        case (.keyboardOnly, .keyboardOnly): return .passkeyEntry(.bothInput)
        case (.keyboardOnly, _): return initiatorDisplays
        case (.keyboardDisplay, .displayOnly): return initiatorDisplays
        case (.keyboardDisplay, .displayYesNo): return compare(initiatorDisplays)
        case (.keyboardDisplay, .keyboardOnly): return responderDisplays
        case (.keyboardDisplay, .keyboardDisplay): return compare(initiatorDisplays)
        default: return .justWorks
        }
    }

    /// The method two feature sets lead to (OOB aside: this stack never has OOB data, see `SMPPairing`).
    /// Without MITM on either side it is Just Works whatever the capabilities (Table 2.6 and 2.7).
    public static func select(initiator: PairingFeatures, responder: PairingFeatures) -> PairingMethod {
        let secure =
            initiator.authentication.contains(.secureConnections)
            && responder.authentication.contains(.secureConnections)
        guard initiator.authentication.contains(.mitm) || responder.authentication.contains(.mitm) else {
            return .justWorks
        }
        return forCapabilities(
            initiator: initiator.ioCapability, responder: responder.ioCapability, secureConnections: secure)
    }
}
