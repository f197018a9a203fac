import ArgumentParser
import BLE
import Foundation

/// `ble scan`: lists advertising devices.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "List advertising devices: address, name, RSSI, services, manufacturer.",
        discussion: """
            In a terminal the list is redrawn as devices appear and change. Otherwise (a pipe, a file) each new or \
            changed device is printed as a line. With --json, each report is one JSON object per line:
              {"address": "AA:BB:CC:DD:EE:FF", "addressType": "public" | "random", "identifier": "<UUID>",
               "name": "<name>" | null, "rssi": -52, "serviceUUIDs": ["180D", ...],
               "manufacturerData": "<hex>" | null, "serviceData": {"FEAA": "<hex>", ...} | null,
               "connectable": true | false}
            UUIDs are printed as CoreBluetooth prints them (4 hex digits for 16-bit ones, the long form otherwise); \
            manufacturerData starts with the company identifier, little-endian.
            """)

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan; 0 scans until interrupted (Ctrl-C).", valueName: "seconds"))
    var timeout: Double = 10

    @Option(
        name: .customLong("service"),
        help: ArgumentHelp(
            "Only devices advertising this service (16-bit or 128-bit UUID); repeat for any of several.",
            valueName: "uuid"))
    var services: [String] = []

    @Flag(help: "Report every advertisement instead of each device once (and again when its data changes).")
    var duplicates = false

    @Flag(help: "One JSON object per line.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout")
        for service in services { _ = try parseUUID(service, what: "--service") }
    }

    func run() async throws {
        let filter = try services.map { try parseUUID($0, what: "--service") }
        let limit: Duration? = timeout > 0 ? CommandLineNumbers.duration(seconds: timeout) : nil
        let json = json
        let duplicates = duplicates
        let table = ScanTable(live: !json && Output.stdoutIsTerminal)
        try await CommandRun.flow(transport, limit: limit, interruptedIsSuccess: true) { tool in
            try await tool.ready()
            let discoveries = tool.manager.scan(
                withServices: filter.isEmpty ? nil : filter, options: .init(allowDuplicates: duplicates))
            // Until the session's time is up or Ctrl-C: both cancel this task, which ends the stream and the scan.
            for try await found in discoveries {
                if json {
                    Output.line(ScanTable.json(found.peripheral, found.advertisementData, found.rssi).text)
                } else {
                    table.update(found.peripheral, found.advertisementData, found.rssi)
                }
            }
        }
        table.finish()
    }
}

/// The scan's human-readable output: a table redrawn in place on a terminal, or one line per report.
final class ScanTable: @unchecked Sendable {
    // @unchecked: `update` runs in the scan's one task only; `finish` after the run loop ended.
    let live: Bool
    private var order: [UUID] = []
    private var rows: [UUID: String] = [:]

    init(live: Bool) { self.live = live }

    func update(_ peripheral: Peripheral, _ advertisement: AdvertisementData, _ rssi: Int) {
        let row = Self.line(peripheral, advertisement, rssi)
        guard live else { return Output.line(row) }
        if rows[peripheral.identifier] == nil { order.append(peripheral.identifier) }
        rows[peripheral.identifier] = row
        var screen = "\u{1B}[H\u{1B}[2J"
        screen += "\(order.count) device\(order.count == 1 ? "" : "s") (Ctrl-C to stop)\n"
        for id in order { screen += (rows[id] ?? "") + "\n" }
        Output.write(screen)
    }

    func finish() {}

    static func name(_ peripheral: Peripheral, _ advertisement: AdvertisementData) -> String? {
        advertisement.localName ?? peripheral.name
    }

    static func services(_ advertisement: AdvertisementData) -> [BluetoothUUID] {
        (advertisement.serviceUUIDs ?? []) + (advertisement.overflowServiceUUIDs ?? [])
    }

    static func line(_ peripheral: Peripheral, _ advertisement: AdvertisementData, _ rssi: Int) -> String {
        let address = peripheral.address
        var parts = [address.string, address.type.isRandom ? "random" : "public", "\(rssi) dBm"]
        parts.append(name(peripheral, advertisement).map { "\"\($0)\"" } ?? "(no name)")
        let uuids = services(advertisement)
        if !uuids.isEmpty { parts.append("services: " + uuids.map(\.labelled).joined(separator: ", ")) }
        if let m = advertisement.manufacturerData, m.count >= 2 {
            let company = CompanyIdentifier(UInt16(m[m.startIndex]) | UInt16(m[m.startIndex + 1]) << 8)
            parts.append(
                "manufacturer: \(company.name ?? String(format: "0x%04X", company.rawValue)) \(m.dropFirst(2).hex)")
        }
        for (uuid, data) in (advertisement.serviceData ?? [:]).sorted(by: { $0.key < $1.key }) {
            parts.append("service data \(uuid.labelled): \(data.hex)")
        }
        if advertisement.isConnectable == false { parts.append("not connectable") }
        return parts.joined(separator: "  ")
    }

    static func json(_ peripheral: Peripheral, _ advertisement: AdvertisementData, _ rssi: Int) -> JSON {
        .object([
            ("address", .string(peripheral.address.string)),
            ("addressType", .string(peripheral.address.type.isRandom ? "random" : "public")),
            ("identifier", .string(peripheral.identifier.uuidString)),
            ("name", .optional(name(peripheral, advertisement))),
            ("rssi", .number(rssi)),
            ("serviceUUIDs", .array(services(advertisement).map { .string($0.uuidString) })),
            ("manufacturerData", .optional(advertisement.manufacturerData?.hex)),
            (
                "serviceData",
                advertisement.serviceData.map { data in
                    .object(data.sorted { $0.key < $1.key }.map { ($0.key.uuidString, .string($0.value.hex)) })
                } ?? .null
            ),
            ("connectable", .bool(advertisement.isConnectable ?? true)),
        ])
    }
}
