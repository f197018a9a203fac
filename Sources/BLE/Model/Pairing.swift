import BLESMP

/// How a device pairs: what its user can do, and what it insists on. A swift-ble extension: on iOS the
/// system decides it and shows its own dialog; here an application (or the `ble` tool) says it, and answers
/// the questions through `BluetoothSystem.pairingAgent`.
public struct PairingConfiguration: Sendable, Hashable {
    /// What the device's user can do while pairing.
    public enum IOCapability: Sendable, Hashable {
        /// Neither shows nor types: Just Works only (no protection against a man in the middle).
        case noInputNoOutput
        /// Shows six digits.
        case displayOnly
        /// Shows six digits and takes yes or no.
        case displayYesNo
        /// Types six digits.
        case keyboardOnly
        /// Shows and types (a phone).
        case keyboardDisplay

        var smp: BLESMP.IOCapability {
            switch self {
            case .noInputNoOutput: .noInputNoOutput
            case .displayOnly: .displayOnly
            case .displayYesNo: .displayYesNo
            case .keyboardOnly: .keyboardOnly
            case .keyboardDisplay: .keyboardDisplay
            }
        }
    }

    public var ioCapability: IOCapability
    /// Keys are kept, so the next link encrypts without pairing again.
    public var bonding: Bool
    /// A pairing that cannot protect against a man in the middle fails (swift-ble's extension to
    /// CoreBluetooth's permissions, which ask for encryption only).
    public var requiresMITMProtection: Bool
    /// LE legacy pairing is refused.
    public var secureConnectionsOnly: Bool

    public init(
        ioCapability: IOCapability = .noInputNoOutput, bonding: Bool = true, requiresMITMProtection: Bool = false,
        secureConnectionsOnly: Bool = false
    ) {
        self.ioCapability = ioCapability
        self.bonding = bonding
        self.requiresMITMProtection = requiresMITMProtection
        self.secureConnectionsOnly = secureConnectionsOnly
    }
}
