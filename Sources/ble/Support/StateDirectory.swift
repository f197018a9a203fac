import Foundation

/// Where the tool keeps each device's system store: `$XDG_STATE_HOME/swift-ble/NAME.sqlite`, or
/// `~/.local/state/swift-ble/NAME.sqlite` where that is unset (the XDG Base Directory rules). The store keeps the
/// identifiers the tool printed, so `ble connect UUID` reaches the device another run reported.
enum StateDirectory {
    /// The store file for the device `name`, its folder made if missing. Nil (the store stays in memory) when
    /// neither `XDG_STATE_HOME` nor `HOME` says where to put it.
    static func storePath(forDevice name: String) throws(ToolError) -> String? {
        try folder().map { $0 + "/" + fileName(name) + ".sqlite" }
    }

    /// The tool's state folder, made if missing; nil when neither `XDG_STATE_HOME` nor `HOME` says where it is.
    static func folder() throws(ToolError) -> String? {
        let environment = ProcessInfo.processInfo.environment
        let base: String
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            base = state
        } else if let home = environment["HOME"], !home.isEmpty {
            base = home + "/.local/state"
        } else {
            return nil
        }
        let folder = base + "/swift-ble"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw ToolError(
                .transport, "cannot make the folder for the tool's state, \(folder): \(error.localizedDescription)")
        }
        return folder
    }

    /// A device name as a file name: letters, digits, '-', '_' and '.' kept, everything else '_'.
    static func fileName(_ name: String) -> String {
        let kept = name.unicodeScalars.map { scalar -> Character in
            let allowed =
                CharacterSet.alphanumerics.contains(scalar) && scalar.isASCII || "-_.".unicodeScalars.contains(scalar)
            return allowed ? Character(scalar) : "_"
        }
        let text = String(kept)
        return text.isEmpty || text.hasPrefix(".") ? "_" + text : text
    }
}
