import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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

    /// A device name as a file name, one per name: a name of letters, digits, '-', '_' and '.' (up to
    /// `longestKeptName` of them) is kept as it is; any other has its other characters made '_', is cut to that
    /// length, and gets a hash of the whole name ("a_b-5d6a3c0e2f1b7a94" for "a/b"), so two names never share a
    /// store (and with it an identity and its bonds).
    static func fileName(_ name: String) -> String {
        var replaced = false
        let kept = name.unicodeScalars.map { scalar -> Character in
            let allowed =
                CharacterSet.alphanumerics.contains(scalar) && scalar.isASCII || "-_.".unicodeScalars.contains(scalar)
            if !allowed { replaced = true }
            return allowed ? Character(scalar) : "_"
        }
        var text = String(kept)
        if text.isEmpty || text.hasPrefix(".") {
            text = "_" + text
            replaced = true
        }
        // A name that was exactly one of the hashed forms must not meet its twin either.
        if !replaced, text.count <= longestKeptName, text.wholeMatch(of: /.*-[0-9a-f]{16}/) == nil { return text }
        return String(text.prefix(longestKeptName)) + "-" + hash(name)
    }

    /// The longest name kept as it is (a file name holds 255 bytes).
    static let longestKeptName = 64

    /// FNV-1a, 64 bits, of the name's UTF-8, as 16 hex digits: the same in every process (Swift's `hashValue`
    /// is not).
    static func hash(_ name: String) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            value ^= UInt64(byte)
            value &*= 0x0000_0100_0000_01b3
        }
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Where the lock of the store at `path` is: in the runtime folder (`$XDG_RUNTIME_DIR/swift-ble/locks`, emptied
    /// at log-out), named by a hash of the store's whole path, so lock files never pile up beside the stores and two
    /// state folders never share one.
    static func lockPath(for path: String) throws(ToolError) -> String {
        let room = RoomPaths.locate()
        try room.prepare()
        let folder = room.folder + "/locks"
        if mkdir(folder, 0o700) != 0, errno != EEXIST {
            throw ToolError(.transport, "cannot make \(folder): \(String(cString: strerror(errno)))")
        }
        return folder + "/" + hash(path) + ".lock"
    }

    /// Holds `path`'s store for this process until it ends: `exclusive` (a served device's store, one process at
    /// a time) or shared (the tool's central store, which commands use side by side, and which `ble identities
    /// forget` must not delete under them). False when another process holds it in a way that excludes this one.
    static func lockStore(_ path: String, exclusive: Bool) throws(ToolError) -> Bool {
        let lockPath = try lockPath(for: path)
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ToolError(.transport, "cannot open \(lockPath): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 else {
            close(fd)
            return false
        }
        // Left open on purpose: the lock lasts as long as the process.
        return true
    }
}
