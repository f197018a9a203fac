import BLESMP
import Foundation
import Synchronization

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
    /// LE Secure Connections is offered (true, the default); false: this device pairs as one from before
    /// Bluetooth 4.2 does, with LE legacy pairing only.
    public var secureConnections: Bool

    /// The keys a pairing exchanges after encryption (Core Spec 5.4, Vol 3, Part H, 3.6.1).
    public struct Keys: OptionSet, Sendable, Hashable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The Long Term Key with its EDIV and Rand (LE legacy pairing; Secure Connections derives it instead).
        public static let encryption = Keys(rawValue: 0x01)
        /// The Identity Resolving Key and identity address (with privacy, the key that resolves this device's
        /// private addresses).
        public static let identity = Keys(rawValue: 0x02)

        var smp: KeyDistribution {
            var keys: KeyDistribution = []
            if contains(.encryption) { keys.insert(.encryptionKey) }
            if contains(.identity) { keys.insert(.identityKey) }
            return keys
        }
    }

    /// The keys this device offers to send. nil, the default: both when it bonds (the identity only when it
    /// has one, that is with privacy on), none when it does not. Whatever both devices agree is exchanged,
    /// bonding or not; bonding decides only whether the keys are kept.
    public var distributedKeys: Keys?
    /// The keys this device asks the peer for. nil, the default: both when it bonds, none when it does not.
    public var requestedKeys: Keys?

    public init(
        ioCapability: IOCapability = .noInputNoOutput, bonding: Bool = true, requiresMITMProtection: Bool = false,
        secureConnectionsOnly: Bool = false, secureConnections: Bool = true, distributedKeys: Keys? = nil,
        requestedKeys: Keys? = nil
    ) {
        self.ioCapability = ioCapability
        self.bonding = bonding
        self.requiresMITMProtection = requiresMITMProtection
        self.secureConnectionsOnly = secureConnectionsOnly
        self.secureConnections = secureConnections
        self.distributedKeys = distributedKeys
        self.requestedKeys = requestedKeys
    }
}

/// LE privacy for a device (`BluetoothSystem.Configuration.privacy`, a swift-ble extension).
public struct PrivacyConfiguration: Sendable, Hashable {
    /// How long one resolvable private address is used: 15 minutes by default, as the Core Specification
    /// recommends (Vol 3, Part C, Appendix A, T_GAP(private_addr_int)); at least a second.
    public var rotationPeriod: Duration

    public init(rotationPeriod: Duration = .seconds(900)) {
        self.rotationPeriod = rotationPeriod
    }
}

/// Answers a pairing's questions for a device's user. A swift-ble extension: on iOS the system shows its own
/// dialog and the app never sees these. Every method has a default: Just Works is accepted (as a user would tap
/// "Pair"), a numeric comparison and a passkey are refused, so a pairing that needs the user fails without a
/// delegate that asks one.
public protocol PairingDelegate: AnyObject, Sendable {
    /// Just Works (`numericValue` nil) or Numeric Comparison (the six digits both devices show, to compare):
    /// whether to pair.
    func bluetoothSystem(_ system: BluetoothSystem, shouldPairWith peer: UUID?, numericValue: UInt32?) async -> Bool
    /// Show this passkey (six digits, leading zeros kept) to the user, who types it on the other device.
    func bluetoothSystem(_ system: BluetoothSystem, display passkey: UInt32, for peer: UUID?)
    /// The passkey the other device shows, as the user typed it; nil when they cancelled.
    func bluetoothSystem(_ system: BluetoothSystem, passkeyFor peer: UUID?) async -> UInt32?
}

extension PairingDelegate {
    public func bluetoothSystem(_ system: BluetoothSystem, shouldPairWith peer: UUID?, numericValue: UInt32?) async
        -> Bool
    {
        numericValue == nil
    }

    public func bluetoothSystem(_ system: BluetoothSystem, display passkey: UInt32, for peer: UUID?) {}

    public func bluetoothSystem(_ system: BluetoothSystem, passkeyFor peer: UUID?) async -> UInt32? { nil }
}

extension BluetoothSystem {
    /// Who answers this device's pairing questions (held weakly, as CoreBluetooth holds delegates); nil: the
    /// defaults of `PairingDelegate` (Just Works accepted, anything else refused).
    public var pairingDelegate: (any PairingDelegate)? {
        get { pairingDelegateBox.withLock { $0.value } }
        set {
            pairingDelegateBox.withLock { $0.value = newValue }
            guard newValue != nil else {
                core.security.setPrompter(nil)
                return
            }
            core.security.setPrompter { [weak self] handle, peer, prompt in
                guard let self else { return }
                // A delegate gone meanwhile answers as no delegate does: every question gets an answer.
                let delegate = self.pairingDelegate ?? DefaultPairingDelegate()
                let security = self.core.security
                switch prompt {
                case .displayPasskey(let value):
                    delegate.bluetoothSystem(self, display: value, for: peer)
                case .confirm(let value):
                    self.ask {
                        let accepted = await delegate.bluetoothSystem(self, shouldPairWith: peer, numericValue: value)
                        security.answer(.accept(accepted), on: handle)
                    }
                case .enterPasskey:
                    self.ask {
                        security.answer(.passkey(await delegate.bluetoothSystem(self, passkeyFor: peer)), on: handle)
                    }
                }
            }
        }
    }
}

extension BluetoothSystem {
    /// Runs a question to the delegate as a task; on a simulated device, one that prefers the radio as its
    /// executor, so the answer comes within the radio's time (the 30 s pairing timer counts virtual time).
    fileprivate func ask(_ question: @escaping @Sendable () async -> Void) {
        if let radio = virtualController?.radio {
            Task(executorPreference: radio) { await question() }
        } else {
            Task { await question() }
        }
    }
}

/// The answers of a system without a delegate.
private final class DefaultPairingDelegate: PairingDelegate {}

/// A weak reference to a pairing delegate.
struct WeakPairingDelegate: Sendable {
    nonisolated(unsafe) weak var value: (any PairingDelegate)?
}
