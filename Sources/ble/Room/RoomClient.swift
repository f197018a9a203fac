import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The side of the room every other `ble` process sees: whether it runs, starting it in the background when it
/// does not, asking it for its status and telling it to stop.
enum RoomClient {
    /// How long the room waits with nothing attached before it stops, when nothing else is said
    /// (`BLE_ROOM_IDLE_TIMEOUT` in seconds, or `--idle-timeout`).
    static var defaultIdleTimeout: Double {
        ProcessInfo.processInfo.environment["BLE_ROOM_IDLE_TIMEOUT"].flatMap(Double.init).flatMap {
            (try? CommandLineNumbers.checkSeconds($0, option: "BLE_ROOM_IDLE_TIMEOUT")) != nil ? $0 : nil
        } ?? 600
    }

    /// How long a started room may take to answer.
    static let startLimit: Duration = .seconds(15)

    /// The running room's status, or nil when none answers at `paths`.
    static func status(_ paths: RoomPaths) async -> [String: Any]? {
        await statusAnswer(paths)?.status
    }

    /// The running room's status as it answered (the line) and read; nil when none answers or it is stopping.
    static func statusAnswer(_ paths: RoomPaths) async -> (line: String, status: [String: Any])? {
        guard let line = try? await RoomControl.ask("status", at: paths.control),
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            object["running"] as? Bool == true
        else { return nil }
        return (line, object)
    }

    /// Makes sure a room runs at `paths`, starting one in the background (with `arguments` for `ble room`) when
    /// none answers. Returns the room's status and whether this call started it.
    @discardableResult
    static func ensureRunning(
        _ paths: RoomPaths, arguments: [String] = []
    ) async throws(ToolError) -> (status: [String: Any], started: Bool) {
        // The folder is checked before anything in it is trusted: in the temporary folder, another user could
        // have made it first.
        try paths.prepare()
        if let status = await status(paths) { return (status, false) }
        // What the log holds already is earlier rooms' story: a failure quotes only what this one writes.
        let logStart = logSize(paths)
        let child = try spawn(paths, arguments: arguments)
        let deadline = ContinuousClock.now + startLimit
        while ContinuousClock.now < deadline {
            if let status = await status(paths) {
                child.reapWhenItEnds()
                return (status, true)
            }
            if !child.isRunning {
                // It ended: another room won the race (then it answers now), or it could not start (its log says).
                if let status = await status(paths) { return (status, false) }
                var reason = lastLogLine(paths, from: logStart) ?? "no reason given"
                // Its own error line ("ble: ..."), quoted inside ours, needs the tool's name no more.
                if reason.hasPrefix("ble: ") { reason.removeFirst(5) }
                throw ToolError(.transport, "the shared room did not start: \(reason) (log: \(paths.log))")
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        child.terminate()
        throw ToolError(.transport, "the shared room did not answer within \(startLimit) (log: \(paths.log))")
    }

    /// Starts `ble room run --daemon` in a session of its own from the start (a Ctrl-C in this terminal never
    /// reaches it), its output appended to the room's log.
    private static func spawn(_ paths: RoomPaths, arguments: [String]) throws(ToolError) -> DaemonProcess {
        do {
            return try DaemonProcess.spawn(
                executablePath, arguments: ["room", "run", "--daemon"] + arguments, log: paths.log)
        } catch {
            throw ToolError(.transport, "cannot start the shared room: \(error.message)")
        }
    }

    /// This program's own file.
    static var executablePath: String {
        #if os(Linux)
            if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        #endif
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
    }

    /// How long the room's log is now (0 when there is none).
    static func logSize(_ paths: RoomPaths) -> UInt64 {
        var info = stat()
        return stat(paths.log, &info) == 0 ? UInt64(info.st_size) : 0
    }

    /// The last line that says something among those written to the room's log from byte `start` on (from the
    /// beginning if the log is now shorter: it was replaced); nil when there is none.
    static func lastLogLine(_ paths: RoomPaths, from start: UInt64 = 0) -> String? {
        guard let file = FileHandle(forReadingAtPath: paths.log) else { return nil }
        defer { try? file.close() }
        let size = (try? file.seekToEnd()) ?? 0
        guard (try? file.seek(toOffset: start <= size ? start : 0)) != nil,
            let data = try? file.readToEnd()
        else { return nil }
        return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.last { !$0.isEmpty }
    }
}
