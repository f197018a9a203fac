import BLE
import Foundation

/// How one report is written: a text line, its raw AD structures (`--raw`), or a JSON object.
enum ScanFormat {
    static let scanResponseMark = " (scan response)"
    static let shortenedMark = " (shortened)"

    static func services(_ advertisement: AdvertisementData) -> [BluetoothUUID] {
        (advertisement.serviceUUIDs ?? []) + (advertisement.overflowServiceUUIDs ?? [])
    }

    // MARK: Text

    static func line(_ r: ScanReport) -> String {
        let a = r.advertisement
        let inResponse = a.scanResponseTypes
        var parts = [
            r.address.string, r.address.type.isRandom ? "random" : "public", r.identifier.uuidString, "\(r.rssi) dBm",
        ]
        parts.append(
            r.name.map {
                "\"\($0)\"" + (r.nameIsShortened ? shortenedMark : "") + (r.nameInScanResponse ? scanResponseMark : "")
            } ?? "(no name)")
        if let type = a.advertisingType { parts.append(type.description) }
        if let flags = a.flags {
            parts.append("flags: " + (flags.isEmpty ? "none" : flags.names.joined(separator: ", ")))
        }
        if let tx = a.txPowerLevel {
            parts.append("tx power: \(tx) dBm" + (inResponse.contains(.txPowerLevel) ? scanResponseMark : ""))
        }
        let uuids = services(a)
        if !uuids.isEmpty {
            parts.append(
                "services" + (r.scanResponseFields.contains("serviceUUIDs") ? scanResponseMark : "") + ": "
                    + uuids.map(\.labelled).joined(separator: ", "))
        }
        if let m = a.manufacturerData, m.count >= 2 {
            let company = CompanyIdentifier(UInt16(m[m.startIndex]) | UInt16(m[m.startIndex + 1]) << 8)
            parts.append(
                "manufacturer" + (inResponse.contains(.manufacturerSpecificData) ? scanResponseMark : "")
                    + ": \(company.name ?? String(format: "0x%04X", company.rawValue)) \(m.dropFirst(2).hex)")
        }
        let fromResponse = r.serviceDataInScanResponse
        for (uuid, data) in (a.serviceData ?? [:]).sorted(by: { $0.key < $1.key }) {
            parts.append(
                "service data \(uuid.labelled)" + (fromResponse.contains(uuid) ? scanResponseMark : "")
                    + ": \(data.hex)")
        }
        if let beacon = r.iBeacon {
            parts.append(
                "iBeacon \(beacon.proximityUUID.uuidString) major \(beacon.major) minor \(beacon.minor) "
                    + "measured power \(beacon.measuredPower) dBm")
        }
        switch r.eddystone {
        case .success(let frame)?: parts.append(frame.description)
        case .failure(let error)?: parts.append("Eddystone: malformed (\(reason(error)))")
        case nil: break
        }
        if a.isConnectable == false { parts.append("not connectable") }
        return parts.joined(separator: "  ")
    }

    /// What a scan measured of one device, after its line: "12 reports, rssi -60/-55/-50 dBm (min/avg/max),
    /// interval 105 ms, last seen 0.2 s ago" (a device not heard for a while: "gone, last seen 8.0 s ago").
    static func statistics(_ s: ScanStatistics, now: Duration) -> String {
        var parts = ["\(s.packets) report\(s.packets == 1 ? "" : "s")"]
        if let low = s.minimumRSSI, let average = s.averageRSSI, let high = s.maximumRSSI {
            parts.append("rssi \(low)/\(Int(average.rounded()))/\(high) dBm (min/avg/max)")
        }
        if let interval = s.advertisingInterval { parts.append("interval \(milliseconds(interval))") }
        parts.append((s.isGone(at: now) ? "gone, " : "") + "last seen \(seconds(s.age(at: now))) ago")
        return parts.joined(separator: ", ")
    }

    /// The live table's column titles; each row fits 80 columns up to the name (`row`).
    static let tableHeader = "ADDRESS            RSSI  MIN/AVG/MAX    PKTS     INTVL  SEEN     NAME"

    /// One device as a row of the live table: address, RSSI, min/avg/max, reports, interval, last seen (or
    /// gone), then the name and a summary (services, beacon) as far as the window goes.
    static func row(_ r: ScanReport, _ s: ScanStatistics, now: Duration) -> String {
        func right(_ text: String, _ width: Int) -> String {
            text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
        }
        func left(_ text: String, _ width: Int) -> String {
            text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
        }
        let range =
            s.minimumRSSI.map { low in "\(low)/\(Int((s.averageRSSI ?? 0).rounded()))/\(s.maximumRSSI ?? low)" } ?? "-"
        let age = s.age(at: now)
        let seen = s.isGone(at: now) ? "gone \(shortSeconds(age))" : shortSeconds(age)
        var name = r.name.map { $0 + (r.nameIsShortened ? shortenedMark : "") } ?? "(no name)"
        let summary = summary(r)
        if !summary.isEmpty { name += "  " + summary }
        return [
            left(r.address.string, 17), right(r.rssi == 127 ? "?" : "\(r.rssi)", 4), left(range, 11),
            right("\(s.packets)", 6), right(s.advertisingInterval.map(milliseconds) ?? "-", 8), left(seen, 7), name,
        ].joined(separator: "  ")
    }

    /// Services and beacon in a few words, for the table.
    private static func summary(_ r: ScanReport) -> String {
        var parts: [String] = []
        if r.iBeacon != nil { parts.append("iBeacon") }
        if case .success(let frame)? = r.eddystone { parts.append("Eddystone-" + frame.name) }
        let uuids = services(r.advertisement)
        if !uuids.isEmpty { parts.append(uuids.map(\.uuidString).joined(separator: ", ")) }
        if r.advertisement.isConnectable == false { parts.append("not connectable") }
        return parts.joined(separator: "  ")
    }

    /// "105 ms", "1.28 s".
    static func milliseconds(_ d: Duration) -> String {
        let ms = d.inSeconds * 1000
        return ms < 1000 ? "\(Int(ms.rounded())) ms" : String(format: "%.2f s", ms / 1000)
    }

    /// "0.2 s", "12.5 s".
    static func seconds(_ d: Duration) -> String { String(format: "%.1f s", d.inSeconds) }

    /// "0.2s", "12s", "3m" (the table's narrow form).
    static func shortSeconds(_ d: Duration) -> String {
        let s = d.inSeconds
        if s < 10 { return String(format: "%.1fs", s) }
        if s < 600 { return "\(Int(s))s" }
        return "\(Int(s / 60))m"
    }

    /// The raw AD structures, advertisement and scan response apart: length, type with its name, value in hex.
    /// Octets that do not form a whole structure are shown as they came.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part C, 11; Core Specification Supplement v11, Part A, 1.
    static func rawLines(_ r: ScanReport) -> [String] {
        let a = r.advertisement
        var lines: [String] = []
        if let bytes = a.rawAdvertisement {
            let type = a.advertisingType.map { "\($0), " } ?? ""
            lines.append("    advertisement (\(type)\(bytes.count) octets):")
            lines += structureLines(Array(bytes))
        }
        if let bytes = a.rawScanResponse {
            lines.append("    scan response (SCAN_RSP, \(bytes.count) octets):" + (bytes.isEmpty ? " empty" : ""))
            lines += structureLines(Array(bytes))
        } else if a.advertisingType?.isScannable == true {
            lines.append("    scan response: none received")
        }
        return lines
    }

    private static func structureLines(_ bytes: [UInt8]) -> [String] {
        var lines: [String] = []
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            if length == 0 {
                let rest = bytes[index...]
                if rest.allSatisfy({ $0 == 0 }) {
                    lines.append("      padding: \(rest.count) zero octet\(rest.count == 1 ? "" : "s")")
                } else {
                    lines.append("      after a zero length octet (not significant): \(Array(rest).hexString)")
                }
                return lines
            }
            guard index + 1 + length <= bytes.count else {
                lines.append(
                    "      malformed: \(Array(bytes[index...]).hexString) (length \(length), "
                        + "\(bytes.count - index - 1) octets follow)")
                return lines
            }
            let type = ADType(bytes[index + 1])
            let value = Array(bytes[(index + 2)..<(index + 1 + length)])
            // A name (0x08 shortened, 0x09 complete) is text: shown as text after its hex.
            var text = ""
            if [0x08, 0x09].contains(bytes[index + 1]), let name = String(validating: value, as: UTF8.self) {
                text = "  \"\(name)\""
            }
            lines.append("      len \(length)  \(type): \(value.isEmpty ? "(empty)" : value.hexString)\(text)")
            index += 1 + length
        }
        return lines
    }

    /// The message of a decoding error, without the error's type and code.
    static func reason(_ error: AdvertisingDataError) -> String {
        let text = error.description
        guard let colon = text.range(of: ": ") else { return text }
        return String(text[colon.upperBound...])
    }

    // MARK: JSON

    /// A report as JSON, with what the scan measured of its device until then (`statistics`), `now`.
    static func json(_ r: ScanReport, _ s: ScanStatistics, now: Duration) -> JSON {
        guard case .object(var fields) = json(r) else { return json(r) }
        // The dates of the system's times: the report's date, less what passed since.
        func date(_ time: Duration) -> String {
            Timestamp.format(r.date.addingTimeInterval(-(r.time - time).inSeconds))
        }
        fields += [
            ("nameShortened", .bool(r.nameIsShortened)),
            ("time", .string(Timestamp.format(r.date))),
            ("firstSeen", .string(date(s.firstSeen))),
            ("lastSeen", .string(date(s.lastSeen))),
            ("age", .double(s.age(at: now).inSeconds)),
            ("packets", .number(s.packets)),
            ("rssiMin", s.minimumRSSI.map(JSON.number) ?? .null),
            ("rssiAverage", s.averageRSSI.map { .double(($0 * 10).rounded() / 10) } ?? .null),
            ("rssiMax", s.maximumRSSI.map(JSON.number) ?? .null),
            ("rssiHistory", .array(s.recentRSSI.map(JSON.number))),
            (
                "advertisingInterval",
                s.advertisingInterval.map { .double(($0.inSeconds * 10_000).rounded() / 10) } ?? .null
            ),
        ]
        return .object(fields)
    }

    static func json(_ r: ScanReport) -> JSON {
        let a = r.advertisement
        return .object([
            ("address", .string(r.address.string)),
            ("addressType", .string(r.address.type.isRandom ? "random" : "public")),
            ("identifier", .string(r.identifier.uuidString)),
            ("name", .optional(r.name)),
            ("rssi", .number(r.rssi)),
            ("serviceUUIDs", .array(services(a).map { .string($0.uuidString) })),
            ("manufacturerData", .optional(a.manufacturerData?.hex)),
            (
                "serviceData",
                a.serviceData.map { data in
                    .object(data.sorted { $0.key < $1.key }.map { ($0.key.uuidString, .string($0.value.hex)) })
                } ?? .null
            ),
            ("connectable", .bool(a.isConnectable ?? true)),
            // Added with the scan detail: after the fields above, whose order stays.
            ("advertisingType", .optional(a.advertisingType?.description)),
            ("flags", a.flags.map { .array($0.names.map(JSON.string)) } ?? .null),
            ("txPowerLevel", a.txPowerLevel.map(JSON.number) ?? .null),
            ("scanResponseFields", .array(r.scanResponseFields.map(JSON.string))),
            ("iBeacon", r.iBeacon.map(json) ?? .null),
            ("eddystone", r.eddystone.map(json) ?? .null),
            ("rawAdvertisement", .optional(a.rawAdvertisement?.hex)),
            ("rawScanResponse", .optional(a.rawScanResponse?.hex)),
        ])
    }

    static func json(_ beacon: IBeacon) -> JSON {
        .object([
            ("uuid", .string(beacon.proximityUUID.uuidString)),
            ("major", .number(Int(beacon.major))),
            ("minor", .number(Int(beacon.minor))),
            ("measuredPower", .number(Int(beacon.measuredPower))),
        ])
    }

    static func json(_ eddystone: Result<EddystoneFrame, AdvertisingDataError>) -> JSON {
        let frame: EddystoneFrame
        switch eddystone {
        case .success(let decoded): frame = decoded
        case .failure(let error): return .object([("frame", .string("malformed")), ("error", .string(reason(error)))])
        }
        let type: (String, JSON) = ("frame", .string(frame.name))
        switch frame {
        case .uid(let f):
            return .object([
                type, ("txPower", .number(Int(f.txPower))), ("namespace", .string(f.namespace.hexString)),
                ("instance", .string(f.instance.hexString)),
            ])
        case .url(let f):
            return .object([type, ("txPower", .number(Int(f.txPower))), ("url", .string(f.url))])
        case .tlm(let f):
            return .object([
                type, ("version", .number(0)), ("batteryVoltage", .number(Int(f.batteryVoltage))),
                ("temperature", f.temperature.map(JSON.double) ?? .null),
                ("advertisingCount", .number(Int(f.advertisingCount))),
                ("uptime", .double(Double(f.uptimeTenthsOfSecond) / 10)),
            ])
        case .encryptedTLM(let data):
            return .object([type, ("version", .number(1)), ("encrypted", .string(data.hexString))])
        case .eid(let f):
            return .object([
                type, ("txPower", .number(Int(f.txPower))), ("identifier", .string(f.identifier.hexString)),
            ])
        case .unknown(_, let data):
            return .object([type, ("data", .string(data.hexString))])
        }
    }
}
