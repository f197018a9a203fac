import ArgumentParser
import BLE
import Foundation

/// The filters `ble scan` and the shell's `scan` both take.
struct ScanFilterOptions: ParsableArguments {
    @Option(
        name: .customLong("service"),
        help: ArgumentHelp(
            "Only devices advertising this service (16-bit or 128-bit UUID); repeat for any of several.",
            valueName: "uuid"))
    var services: [String] = []

    @Option(
        name: .customLong("name"),
        help: ArgumentHelp("Only devices whose name contains this text (ignoring case).", valueName: "text"))
    var nameFilter: String?

    @Option(
        name: .customLong("rssi"), parsing: .unconditional,
        help: ArgumentHelp("Only reports at least this strong, in dBm (for example -70).", valueName: "dBm"))
    var minimumRSSI: Int?

    @Option(
        name: .customLong("address"),
        help: ArgumentHelp(
            "Only devices whose address is or starts with this (C0:11:22 or a whole address); repeat for any of several.",
            valueName: "address"))
    var addresses: [String] = []

    @Option(
        name: .customLong("manufacturer"),
        help: ArgumentHelp(
            "Only devices whose manufacturer data is this company's (0x004C, or decimal); repeat for any of several.",
            valueName: "id"))
    var manufacturers: [String] = []

    @Flag(help: "Only devices that advertise connectably.")
    var connectable = false

    /// The option names, for the shell's completion.
    static let names = ["--service", "--name", "--rssi", "--address", "--manufacturer", "--connectable"]

    func validate() throws {
        for service in services { _ = try parseService(service) }
        if nameFilter == "" {
            throw ValidationError("--name '' would match no device; leave --name out to list every device")
        }
        if let minimumRSSI, !(-127...20).contains(minimumRSSI) {
            throw ValidationError("--rssi must be between -127 and 20 dBm, not \(minimumRSSI)")
        }
        for address in addresses { _ = try Self.addressPrefix(address) }
        for id in manufacturers { _ = try Self.companyIdentifier(id) }
    }

    /// The `--service` filter the scan applies; nil for every device.
    func serviceFilter() throws -> [BluetoothUUID]? {
        let uuids = try services.map { try parseService($0) }
        return uuids.isEmpty ? nil : uuids
    }

    /// The other filters.
    func filter() throws -> ScanFilter {
        ScanFilter(
            name: nameFilter, minimumRSSI: minimumRSSI, addresses: try addresses.map(Self.addressPrefix),
            manufacturers: try manufacturers.map(Self.companyIdentifier), connectableOnly: connectable)
    }

    /// "c0:11:2" as "C0:11:2": hex digits in pairs separated by colons, up to a whole address.
    static func addressPrefix(_ text: String) throws -> String {
        let upper = text.uppercased()
        let groups = upper.split(separator: ":", omittingEmptySubsequences: false)
        let valid =
            !upper.isEmpty && groups.count <= 6
            && groups.enumerated().allSatisfy { index, group in
                (group.count == 2 || (index == groups.count - 1 && group.count == 1)) && group.allSatisfy(\.isHexDigit)
            }
        guard valid else {
            throw ValidationError("--address '\(text)' is not an address or the start of one (C0:11:22:33:44:55)")
        }
        return upper
    }

    /// A company identifier: 0x-prefixed hex or decimal, 0...65535.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.4 (Manufacturer Specific Data).
    static func companyIdentifier(_ text: String) throws -> UInt16 {
        let lower = text.lowercased()
        let value = lower.hasPrefix("0x") ? UInt16(lower.dropFirst(2), radix: 16) : UInt16(lower, radix: 10)
        guard let value else {
            throw ValidationError(
                "--manufacturer '\(text)' is not a company identifier (0x004C for Apple, or decimal 0...65535)")
        }
        return value
    }
}
