import ArgumentParser
import BLE
import Foundation

/// A service, characteristic or descriptor as typed on the command line: a UUID (`2A19`, `0x2A19`, the long
/// form), or a name from the Bluetooth SIG's Assigned Numbers (or the simulated world's own), compared without
/// regard to case or spacing: `"battery level"`, `"Battery Level"`, or the start of words (`battery`).
struct AttributeReference: Hashable, Sendable, CustomStringConvertible {
    enum Kind: String, Sendable {
        case service
        case characteristic
        case descriptor
    }

    /// As typed.
    let text: String
    /// The UUIDs it may stand for: one for a UUID or an exact name, several for the start of several names (the
    /// device decides which it has).
    let candidates: [BluetoothUUID]
    let kind: Kind

    var description: String { text }

    /// The one UUID, when it is not a matter of what the device has.
    var uuid: BluetoothUUID? { candidates.count == 1 ? candidates[0] : nil }

    /// Parses CHAR, `--descriptor` or `--service`; `what` names it in the error.
    init(_ text: String, kind: Kind, what: String) throws {
        self.text = text
        self.kind = kind
        if let uuid = BluetoothUUID(string: text) {
            candidates = [uuid]
            return
        }
        let found = AssignedNames.lookup(text, kind: kind)
        guard !found.isEmpty else {
            let near = AssignedNames.nearMisses(text, kind: kind)
            let hint = near.isEmpty ? "" : "; did you mean " + near.map { "'\($0)'" }.joined(separator: " or ") + "?"
            throw ValidationError(
                "\(what) '\(text)' is neither a UUID (2A37, 0x2A37, 8 hex digits or the long form) nor the name of a \(kind.rawValue)\(hint)"
            )
        }
        candidates = found
    }

    init(uuid: BluetoothUUID, kind: Kind) {
        text = uuid.uuidString
        candidates = [uuid]
        self.kind = kind
    }

    /// Picks, among the UUIDs present (`present`, in the device's order), the one this stands for; an error
    /// that lists what the device has, or the candidates when the name fits several.
    func pick(among present: [BluetoothUUID], on device: String) throws -> BluetoothUUID {
        var seen: Set<BluetoothUUID> = []
        let matching = present.filter { candidates.contains($0) && seen.insert($0).inserted }
        if matching.count == 1 { return matching[0] }
        if matching.count > 1 {
            throw ToolError(
                .usage,
                "'\(text)' names several \(kind.rawValue)s of \(device): \(matching.map(\.labelled).joined(separator: ", ")); give one of them"
            )
        }
        var listed: Set<BluetoothUUID> = []
        let has = present.filter { listed.insert($0).inserted }.map(\.labelled).joined(separator: ", ")
        let named = uuid.map(\.labelled) ?? "named '\(text)'"
        throw ToolError(
            .noSuchCharacteristic,
            "\(device) has no \(kind.rawValue) \(named) (its \(kind.rawValue)s: \(has.isEmpty ? "none" : has))")
    }
}

/// The names the tool knows, by kind: every SIG name BLECore has (services 0x18xx, descriptors 0x29xx,
/// characteristics 0x2Axx-0x2Bxx) and the simulated world's custom services and characteristics.
enum AssignedNames {
    static let services: [(BluetoothUUID, String)] = table(in: 0x1800...0x18FF, custom: true)
    static let descriptors: [(BluetoothUUID, String)] = table(in: 0x2900...0x29FF, custom: nil)
    static let characteristics: [(BluetoothUUID, String)] = table(in: 0x2A00...0x2BFF, custom: false)

    static func names(of kind: AttributeReference.Kind) -> [(BluetoothUUID, String)] {
        switch kind {
        case .service: services
        case .characteristic: characteristics
        case .descriptor: descriptors
        }
    }

    private static func table(in range: ClosedRange<UInt16>, custom: Bool?) -> [(BluetoothUUID, String)] {
        var rows = range.compactMap { v in BluetoothUUID(v).name.map { (BluetoothUUID(v), $0) } }
        if let custom {
            rows += ToolNames.names.filter { ToolNames.services.contains($0.key) == custom }.map { ($0.key, $0.value) }
                .sorted { $0.0 < $1.0 }
        }
        return rows
    }

    /// "Battery  level" and "battery level" alike.
    static func fold(_ text: String) -> String {
        text.lowercased().split(whereSeparator: { $0 == " " || $0 == "_" || $0 == "-" }).joined(separator: " ")
    }

    /// The UUIDs whose name is `text` (any case, any spacing); else those whose name's words start with the words
    /// typed, in order (`battery` for Battery Level, `heart meas` for Heart Rate Measurement).
    static func lookup(_ text: String, kind: AttributeReference.Kind) -> [BluetoothUUID] {
        let typed = fold(text)
        guard !typed.isEmpty else { return [] }
        let rows = names(of: kind)
        let exact = rows.filter { fold($0.1) == typed }.map(\.0)
        if !exact.isEmpty { return exact }
        let words = typed.split(separator: " ")
        return rows.filter { row in
            var rest = fold(row.1).split(separator: " ")[...]
            for word in words {
                guard let at = rest.firstIndex(where: { $0.hasPrefix(word) }) else { return false }
                rest = rest[(at + 1)...]
            }
            return true
        }.map(\.0)
    }

    /// Names a few edits from what was typed, for "did you mean".
    static func nearMisses(_ text: String, kind: AttributeReference.Kind) -> [String] {
        let typed = fold(text)
        // A name, or the start of one, a few edits away ("batery" for Battery Level).
        let scored = names(of: kind).map { row -> (String, Int) in
            let name = fold(row.1)
            return (row.1, min(typed.editDistance(to: name), typed.editDistance(to: name.prefix(typed.count))))
        }
        .filter { $0.1 <= max(2, typed.count / 4) }
        // The closest only (several when they are as close).
        guard let best = scored.map(\.1).min() else { return [] }
        return Array(Set(scored.filter { $0.1 == best }.map(\.0))).sorted().prefix(3).map { $0 }
    }

    /// The names Tab offers for a device's attributes: each UUID's name when it has one.
    static func completionName(_ uuid: BluetoothUUID) -> String? { uuid.displayName }
}

/// Parses a characteristic argument (CHAR, `--subscribe`).
func parseCharacteristic(_ text: String, what: String = "CHAR") throws -> AttributeReference {
    try AttributeReference(text, kind: .characteristic, what: what)
}

/// Parses a `--service` filter: a UUID, or a name that stands for one service (several are an error that lists
/// them).
func parseService(_ text: String, what: String = "--service") throws -> BluetoothUUID {
    let reference = try AttributeReference(text, kind: .service, what: what)
    guard let uuid = reference.uuid else {
        let names = reference.candidates.map(\.labelled).joined(separator: ", ")
        throw ValidationError("\(what) '\(text)' names several services: \(names); give one of them")
    }
    return uuid
}
