import ArgumentParser
import BLE
import Foundation

/// `--io-capability`'s values: what the tool's user can do while pairing.
enum IOCapabilityOption: String, ExpressibleByArgument, CaseIterable, Sendable {
    case none
    case display
    case displayYesNo = "display-yes-no"
    case keyboard
    case keyboardDisplay = "keyboard-display"

    var capability: PairingConfiguration.IOCapability {
        switch self {
        case .none: .noInputNoOutput
        case .display: .displayOnly
        case .displayYesNo: .displayYesNo
        case .keyboard: .keyboardOnly
        case .keyboardDisplay: .keyboardDisplay
        }
    }

    /// The user can type a passkey.
    var types: Bool { self == .keyboard || self == .keyboardDisplay }
    /// The user can answer a numeric comparison (shows six digits and says yes or no).
    var confirms: Bool { self == .displayYesNo || self == .keyboardDisplay }
}

/// How the tool's device pairs, shared by `pair`, `shell` and `serve`: its IO capability, what it insists on, and
/// the answers it gives to a pairing's questions.
struct PairingOptions: ParsableArguments {
    @Option(
        name: .customLong("io-capability"),
        help: ArgumentHelp(
            "What this side's user can do: none (Just Works only), display, display-yes-no, keyboard, keyboard-display.",
            valueName: "capability"))
    var ioCapability: IOCapabilityOption = .none

    @Option(
        help: ArgumentHelp(
            "The passkey to type when one is asked for: six digits (000000-999999), or '-' to read a line of standard input.",
            valueName: "digits"))
    var passkey: String?

    @Flag(help: "Require protection against a man in the middle (an authenticated pairing).")
    var mitm = false

    @Flag(name: .customLong("sc-only"), help: "Refuse LE legacy pairing (Secure Connections only).")
    var secureConnectionsOnly = false

    @Flag(name: .customLong("no-bond"), help: "Pair without bonding: exchange the keys agreed, keep none.")
    var noBond = false

    @Flag(help: "Pair as a device from before Bluetooth 4.2 does: LE legacy pairing only.")
    var legacy = false

    @Option(
        name: .customLong("send-keys"),
        help: ArgumentHelp(
            "The keys this side offers to send: enc (the legacy LTK), id (IRK and identity address), both as enc,id, or none. Default: both when bonding, none otherwise.",
            valueName: "keys"))
    var sendKeys: KeysOption?

    @Option(
        name: .customLong("ask-keys"),
        help: ArgumentHelp(
            "The keys this side asks the peer for: enc, id, enc,id or none. Default: both when bonding, none otherwise.",
            valueName: "keys"))
    var askKeys: KeysOption?

    @Flag(help: "Answer yes to a numeric comparison (for scripts).")
    var yes = false

    @Flag(help: "Answer no to a numeric comparison (for scripts).")
    var no = false

    func validate() throws {
        if let passkey {
            guard passkey == "-" || Self.passkeyValue(passkey) != nil else {
                throw ValidationError(
                    "--passkey '\(passkey)' is not a passkey: give six digits (000000 to 999999), or '-' to read it from standard input"
                )
            }
            guard ioCapability.types else {
                throw ValidationError(
                    "--passkey is typed only with --io-capability keyboard or keyboard-display (not \(ioCapability.rawValue))"
                )
            }
        }
        if yes && no { throw ValidationError("--yes and --no cannot both be given") }
        if legacy && secureConnectionsOnly { throw ValidationError("--legacy and --sc-only cannot both be given") }
        if yes || no, !ioCapability.confirms {
            throw ValidationError(
                "--\(yes ? "yes" : "no") answers a numeric comparison, which needs --io-capability display-yes-no or keyboard-display (not \(ioCapability.rawValue))"
            )
        }
    }

    /// Six digits, leading zeros kept, as a number.
    static func passkeyValue(_ text: String) -> UInt32? {
        guard text.count == 6, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt32(text)
    }

    var configuration: PairingConfiguration {
        PairingConfiguration(
            ioCapability: ioCapability.capability, bonding: !noBond, requiresMITMProtection: mitm,
            secureConnectionsOnly: secureConnectionsOnly, secureConnections: !legacy, distributedKeys: sendKeys?.keys,
            requestedKeys: askKeys?.keys)
    }

    /// The answer `--yes`/`--no` give a numeric comparison, or nil when neither was given.
    var confirmation: Bool? { yes ? true : no ? false : nil }
}

/// `--send-keys` and `--ask-keys`: a comma-separated list of enc and id, or none.
struct KeysOption: ExpressibleByArgument, Sendable {
    var keys: PairingConfiguration.Keys

    init?(argument: String) {
        var keys: PairingConfiguration.Keys = []
        guard argument != "none" else {
            self.keys = keys
            return
        }
        for name in argument.split(separator: ",", omittingEmptySubsequences: false) {
            switch name.trimmingCharacters(in: .whitespaces) {
            case "enc": keys.insert(.encryption)
            case "id": keys.insert(.identity)
            default: return nil
            }
        }
        self.keys = keys
    }

    static var allValueStrings: [String] { ["none", "enc", "id", "enc,id"] }
}

/// "012345": a passkey as the user sees it.
func passkeyDigits(_ value: UInt32) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
}
