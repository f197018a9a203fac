import ArgumentParser
import BLE
import Foundation

/// TARGET and how long to look for it, shared by the commands that connect.
struct TargetOptions: ParsableArguments {
    @Argument(
        help: ArgumentHelp(
            "The device: an address (AA:BB:CC:DD:EE:FF), a peripheral identifier (UUID), or an advertised name.",
            valueName: "target"))
    var target: String

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan for the target before giving up.", valueName: "seconds"))
    var timeout: Double = 10

    func validate() throws {
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout", zeroAllowed: false)
    }

    var timeoutDuration: Duration { CommandLineNumbers.duration(seconds: timeout) }
}

/// Matches advertisements against a TARGET string: an address, an identifier, or a name, compared without
/// regard to case; a name spelled exactly as typed is the better match.
struct TargetMatcher: Sendable {
    let text: String

    /// How well an advertiser matches.
    enum Match: Sendable, Hashable {
        /// The address, the identifier, or the name exactly as typed.
        case exact
        /// The name, in another case.
        case caseInsensitive
    }

    func match(_ peripheral: Peripheral, _ advertisement: AdvertisementData) -> Match? {
        if let address = BluetoothAddress(string: text), address.bytes == peripheral.address.bytes { return .exact }
        if let id = UUID(uuidString: text), id == peripheral.identifier { return .exact }
        let names = [advertisement.localName, peripheral.name].compactMap { $0 }
        if names.contains(text) { return .exact }
        if names.contains(where: { $0.caseInsensitiveCompare(text) == .orderedSame }) { return .caseInsensitive }
        return nil
    }

    /// The names seen that look like what was typed (a few edits away, or one containing the other), closest
    /// first: what a "did you mean" offers.
    func nearMisses(among names: Set<String>) -> [String] {
        let typed = text.lowercased()
        let scored = names.compactMap { name -> (String, Int)? in
            let lower = name.lowercased()
            let distance = typed.editDistance(to: lower)
            guard distance <= max(2, typed.count / 3) || lower.contains(typed) || typed.contains(lower) else {
                return nil
            }
            return (name, distance)
        }
        return scored.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.prefix(3).map(\.0)
    }
}

/// Parses a CHAR or `--service` argument: a 16-bit ("2A37"), 32-bit or 128-bit UUID.
func parseUUID(_ text: String, what: String) throws -> BluetoothUUID {
    guard let uuid = BluetoothUUID(string: text) else {
        throw ValidationError("\(what) '\(text)' is not a UUID: give 4 hex digits (2A37), 8, or the long form")
    }
    return uuid
}
