import ArgumentParser
import BLE
import Foundation

/// `ble scan`: lists advertising devices.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "List advertising devices: address, name, RSSI, advertising type, flags, services, beacons.",
        discussion: """
            In a terminal the list is a live table on the alternate screen: redrawn in place (at most ten times a \
            second, RSSI kept current), as many devices as the window holds; when the scan ends the final table \
            is printed once to the normal screen. Otherwise (a pipe, a file) each new or changed device is \
            printed as a line, or every report with --duplicates; with --sort, each device once when the scan \
            ends, in that order.
            Each line shows the address, address type, RSSI, name, advertising PDU type (ADV_IND, ADV_SCAN_IND, \
            ADV_NONCONN_IND, ADV_DIRECT_IND), flags, TX power, services, manufacturer, service data, a decoded \
            iBeacon or Eddystone frame (UID, URL, TLM, EID), and "not connectable" where it applies. A field \
            that came in the scan response is marked "(scan response)". --raw adds the AD structures of the \
            advertisement and of the scan response (length, type, value in hex); octets that do not form a \
            whole structure are shown as they came.
            With --json, each report is one JSON object per line:
              {"address": "AA:BB:CC:DD:EE:FF", "addressType": "public" | "random", "identifier": "<UUID>",
               "name": "<name>" | null, "rssi": -52, "serviceUUIDs": ["180D", ...],
               "manufacturerData": "<hex>" | null, "serviceData": {"FEAA": "<hex>", ...} | null,
               "connectable": true | false, "advertisingType": "ADV_IND" | ... | null,
               "flags": ["LE General Discoverable", "BR/EDR Not Supported"] | null, "txPowerLevel": -8 | null,
               "scanResponseFields": ["name", ...],
               "iBeacon": {"uuid": "<UUID>", "major": 1, "minor": 42, "measuredPower": -59} | null,
               "eddystone": {"frame": "URL", "txPower": -20, "url": "https://swift.org"} | null,
               "rawAdvertisement": "<hex>" | null, "rawScanResponse": "<hex>" | null}
            UUIDs are printed as CoreBluetooth prints them (4 hex digits for 16-bit ones, the long form otherwise); \
            manufacturerData starts with the company identifier, little-endian. scanResponseFields names the \
            fields that came in the scan response. An Eddystone frame is {"frame": "UID", "txPower", \
            "namespace", "instance"}, {"frame": "URL", "txPower", "url"}, {"frame": "TLM", "version": 0, \
            "batteryVoltage" (mV), "temperature" (°C or null), "advertisingCount", "uptime" (s)}, {"frame": \
            "EID", "txPower", "identifier"}, or {"frame": "malformed", "error"}.
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

    @Option(
        name: .customLong("name"),
        help: ArgumentHelp("Only devices whose name contains this text (ignoring case).", valueName: "text"))
    var nameFilter: String?

    @Option(
        name: .customLong("rssi"), parsing: .unconditional,
        help: ArgumentHelp("Only reports at least this strong, in dBm (for example -70).", valueName: "dBm"))
    var minimumRSSI: Int?

    @Option(
        help: ArgumentHelp(
            "Order of the devices: rssi (strongest first), name, address or seen (first seen first, the default in a terminal).",
            valueName: "order"))
    var sort: ScanSort?

    @Flag(help: "Report every advertisement instead of each device once (and again when its data changes).")
    var duplicates = false

    @Flag(help: "Also print the raw AD structures of the advertisement and the scan response.")
    var raw = false

    @Flag(help: "One JSON object per line.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout")
        for service in services { _ = try parseService(service) }
        if let minimumRSSI, !(-127...20).contains(minimumRSSI) {
            throw ValidationError("--rssi must be between -127 and 20 dBm, not \(minimumRSSI)")
        }
        if sort != nil, duplicates {
            throw ValidationError("--sort lists each device once, so it cannot be used with --duplicates")
        }
    }

    func run() async throws {
        let filter = try services.map { try parseService($0) }
        let limit: Duration? = timeout > 0 ? CommandLineNumbers.duration(seconds: timeout) : nil
        let admits = ScanFilter(name: nameFilter, minimumRSSI: minimumRSSI)
        let live = !json && Output.stdoutIsTerminal
        let output = ScanOutput(
            mode: live ? .live : (sort == nil ? .lines : .sortedAtEnd), json: json, raw: raw, sort: sort ?? .seen,
            duplicates: duplicates)
        // The live table shows each device's RSSI as it changes, and a device weaker than --rssi at first may
        // come closer: both need every report. The output then prints only changes, unless --duplicates.
        let everyReport = duplicates || live || minimumRSSI != nil
        do {
            try await CommandRun.flow(transport, limit: limit, interruptedIsSuccess: true) { tool in
                try await tool.ready()
                tool.markStarted()
                output.start()
                let discoveries = tool.manager.scan(
                    withServices: filter.isEmpty ? nil : filter, options: .init(allowDuplicates: everyReport))
                // Until the session's time is up or Ctrl-C: both cancel this task, which ends the stream and the
                // scan.
                for try await found in discoveries {
                    let report = ScanReport(found)
                    if admits.admits(report) { output.received(report) }
                }
            }
        } catch {
            output.abandon()
            throw error
        }
        output.finish()
    }
}
