import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the shared room lives: a folder of the user's own, `$XDG_RUNTIME_DIR/swift-ble` (the XDG Base Directory
/// rules' place for sockets), or `swift-ble-UID` under the system's temporary directory where that is unset. It
/// holds the room's sockets (`room.sock` for devices, `room.ctl` for `ble room status` and `stop`), its lock,
/// its process id and its log.
struct RoomPaths: Sendable {
    let folder: String

    var socket: String { folder + "/room.sock" }
    var control: String { folder + "/room.ctl" }
    var lock: String { folder + "/room.lock" }
    var pid: String { folder + "/room.pid" }
    var log: String { folder + "/room.log" }

    /// The folder from the environment (not made yet).
    static func locate(environment: [String: String] = ProcessInfo.processInfo.environment) -> RoomPaths {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return RoomPaths(folder: runtime + "/swift-ble")
        }
        var temporary = environment["TMPDIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        while temporary.count > 1, temporary.hasSuffix("/") { temporary.removeLast() }
        return RoomPaths(folder: "\(temporary)/swift-ble-\(getuid())")
    }

    /// Makes the folder (mode 0700) if missing and checks that it is the user's own and nobody else's to write:
    /// a socket in a folder another user controls could be someone else's room.
    func prepare() throws(ToolError) {
        if mkdir(folder, 0o700) != 0, errno != EEXIST {
            throw ToolError(.transport, "cannot make the room's folder \(folder): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(folder, &info) == 0 else {
            throw ToolError(.transport, "cannot read the room's folder \(folder): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ToolError(.transport, "the room's folder \(folder) is not a folder")
        }
        guard info.st_uid == getuid() else {
            throw ToolError(.transport, "the room's folder \(folder) belongs to another user (uid \(info.st_uid))")
        }
        if info.st_mode & 0o022 != 0 {
            throw ToolError(
                .transport,
                "the room's folder \(folder) can be written by others (mode \(String(info.st_mode & 0o777, radix: 8))): make it 0700"
            )
        }
        // The socket path must fit the system's limit (108 bytes with the terminating zero).
        guard socket.utf8.count <= 107 else {
            throw ToolError(
                .transport,
                "the room's socket path \(socket) is longer than the system allows: set XDG_RUNTIME_DIR to a shorter folder"
            )
        }
    }
}
