import ArgumentParser
import BLE
import Foundation
import Synchronization

/// `ble scan`: lists advertising devices.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract:
            "List advertising devices: address, identifier, name, RSSI, advertising type, flags, services, beacons, with the time and statistics of each.",
        discussion: """
            In a terminal the list is a live table on the alternate screen, one row per device that fits 80 \
            columns: address, RSSI, RSSI min/avg/max, reports received, advertising interval (as measured: the \
            usual gap between two reports, advDelay included), time since the last report ('gone' when the \
            device has not been heard for 5 s, or three of its intervals when longer), name and services. It is \
            redrawn in place (at most ten times a second, and every second while nothing comes), as many devices \
            as the window holds; --wide shows each device's whole line instead. When the scan ends every device \
            is printed once to the normal screen: its line and its statistics ('12 reports, rssi -60/-55/-50 dBm \
            (min/avg/max), interval 105 ms, last seen 0.2 s ago'). Otherwise (a pipe, a file) each new or \
            changed device is printed as a line, or every report with --duplicates, each after the time it came \
            (UTC, ISO 8601 with milliseconds); with --sort, each device once when the scan ends, in that order, \
            after the time of its last report and with its statistics.
            Each line shows the address, address type, identifier (the UUID a TARGET may be), RSSI, name, \
            advertising PDU type (ADV_IND, ADV_SCAN_IND, ADV_NONCONN_IND, ADV_DIRECT_IND), flags, TX power, \
            services, manufacturer, service data, a decoded iBeacon or Eddystone frame (UID, URL, TLM, EID), and \
            "not connectable" where it applies. A field that came in the scan response is marked "(scan \
            response)"; a name the device shortened to fit (Shortened Local Name, the complete one not sent) is \
            marked "(shortened)". --raw adds the AD structures of the advertisement and of the scan response \
            (length, type, value in hex); octets that do not form a whole structure are shown as they came.
            Times: on the private virtual room (--transport virtual) they are its virtual time, from \
            2026-01-01T00:00:00Z; otherwise the wall clock. The scan is active (it asks for scan responses), as \
            a phone's is; --passive only listens.
            With --json, each report is one JSON object per line:
              {"address": "AA:BB:CC:DD:EE:FF", "addressType": "public" | "random", "identifier": "<UUID>",
               "name": "<name>" | null, "rssi": -52, "serviceUUIDs": ["180D", ...],
               "manufacturerData": "<hex>" | null, "serviceData": {"FEAA": "<hex>", ...} | null,
               "connectable": true | false, "advertisingType": "ADV_IND" | ... | null,
               "flags": ["LE General Discoverable", "BR/EDR Not Supported"] | null, "txPowerLevel": -8 | null,
               "scanResponseFields": ["name", ...],
               "iBeacon": {"uuid": "<UUID>", "major": 1, "minor": 42, "measuredPower": -59} | null,
               "eddystone": {"frame": "URL", "txPower": -20, "url": "https://swift.org"} | null,
               "rawAdvertisement": "<hex>" | null, "rawScanResponse": "<hex>" | null,
               "nameShortened": false, "time": "<ISO 8601>", "firstSeen": "<ISO 8601>", "lastSeen": "<ISO 8601>",
               "age": 0.0, "packets": 12, "rssiMin": -60 | null, "rssiAverage": -55.2 | null, "rssiMax": -50 | null,
               "rssiHistory": [-55, ...], "advertisingInterval": 105.2 | null}
            UUIDs are printed as CoreBluetooth prints them (4 hex digits for 16-bit ones, the long form otherwise); \
            manufacturerData starts with the company identifier, little-endian. scanResponseFields names the \
            fields that came in the scan response. An Eddystone frame is {"frame": "UID", "txPower", \
            "namespace", "instance"}, {"frame": "URL", "txPower", "url"}, {"frame": "TLM", "version": 0, \
            "batteryVoltage" (mV), "temperature" (°C or null), "advertisingCount", "uptime" (s)}, {"frame": \
            "EID", "txPower", "identifier"}, or {"frame": "malformed", "error"}. time is when this report came; \
            firstSeen and lastSeen the device's first and latest reports; age the seconds since the latest when \
            the object was printed; packets the reports received from the device so far; rssiHistory its latest \
            16 RSSI values, oldest first; advertisingInterval in milliseconds (null until four reports came).
            """)

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan; 0 scans until interrupted (Ctrl-C).", valueName: "seconds"))
    var timeout: Double = 10

    @OptionGroup var filters: ScanFilterOptions

    @OptionGroup var printing: ScanPrintOptions

    @Flag(help: "In the live table, each device's whole line (wider than 80 columns) instead of a row.")
    var wide = false

    @Flag(help: "Only listen: send no scan requests, so no scan responses are heard (as a sniffer scans).")
    var passive = false

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout")
    }

    func run() async throws {
        let services = try filters.serviceFilter()
        let limit: Duration? = timeout > 0 ? CommandLineNumbers.duration(seconds: timeout) : nil
        let admits = try filters.filter()
        let live = !printing.json && Output.stdoutIsTerminal
        let clock = SystemClock()
        let output = ScanOutput(
            mode: live ? .live : (printing.sort == nil ? .lines : .sortedAtEnd), json: printing.json, raw: printing.raw,
            sort: printing.sort ?? .seen, duplicates: printing.duplicates, wide: wide, now: { clock.now })
        do {
            var configuration = BluetoothSystem.Configuration()
            configuration.activeScanning = !passive
            try await CommandRun.flow(
                transport, limit: limit, interruptedIsSuccess: true, controllerWait: limit, configuration: configuration
            ) { tool in
                try await tool.ready()
                clock.system.withLock { $0 = tool.system }
                tool.markStarted()
                output.start()
                // Every report, whatever is printed: the statistics count them all (the output prints only changes
                // unless --duplicates).
                let discoveries = tool.manager.scan(withServices: services, options: .init(allowDuplicates: true))
                // Until the session's time is up or Ctrl-C: both cancel this task, which ends the stream and the
                // scan.
                for try await found in discoveries {
                    let report = ScanReport(found, on: tool.system)
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

/// The system's time once the command has a system (zero before).
final class SystemClock: Sendable {
    let system = Mutex<BluetoothSystem?>(nil)

    var now: Duration { system.withLock { $0 }?.now ?? .zero }
}
