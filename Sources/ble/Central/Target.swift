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
        try TargetMatcher.check(target)
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout", zeroAllowed: false)
    }

    var timeoutDuration: Duration { CommandLineNumbers.duration(seconds: timeout) }
}

/// Matches advertisements against a TARGET string: an address, an identifier, or a name, compared without
/// regard to case; a name spelled exactly as typed is the better match. A device that advertises only a
/// shortened name (its full name did not fit) matches a TARGET that begins with it.
struct TargetMatcher: Sendable {
    let text: String

    /// How well an advertiser matches.
    enum Match: Sendable, Hashable {
        /// The address, the identifier, or the name exactly as typed.
        case exact
        /// The name, in another case; or a shortened name that TARGET begins with.
        case loose
    }

    /// Refuses an empty TARGET, which no device could match (a usage error, status 64).
    static func check(_ target: String) throws {
        guard !target.isEmpty else {
            throw ValidationError("TARGET is empty: give a name, an address or an identifier (ble scan lists them)")
        }
    }

    func match(_ peripheral: Peripheral, _ advertisement: AdvertisementData) -> Match? {
        if let address = BluetoothAddress(string: text), address.bytes == peripheral.address.bytes { return .exact }
        if let id = UUID(uuidString: text), id == peripheral.identifier { return .exact }
        return match(
            names: [advertisement.localName, peripheral.name].compactMap { $0 },
            shortened: Self.shortenedName(advertisement))
    }

    /// How well a device with these `names` matches, when it advertises only a `shortened` name (or nil).
    func match(names: [String], shortened: String?) -> Match? {
        if names.contains(text) { return .exact }
        if names.contains(where: { $0.caseInsensitiveCompare(text) == .orderedSame }) { return .loose }
        if let shortened, !shortened.isEmpty, text.lowercased().hasPrefix(shortened.lowercased()) { return .loose }
        return nil
    }

    /// The name an advertiser shortened to fit (Shortened Local Name, AD type 0x08), when it sent no complete one.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.2.
    static func shortenedName(_ advertisement: AdvertisementData) -> String? {
        let all = AdvertisingData(
            (advertisement.advertisementStructures?.structures ?? [])
                + (advertisement.scanResponseStructures?.structures ?? []))
        guard all.completeLocalName == nil else { return nil }
        return all.shortenedLocalName
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
