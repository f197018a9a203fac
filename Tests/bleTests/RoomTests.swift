import Foundation
import NIOCore
import Testing

@testable import ble

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shared room's parts that a user meets without a room running: what a command says when the room goes
/// away, what a failed start quotes from the log, how the control socket treats clients that say nothing, and how
/// the room's process is started. `Scripts/tests/test_room.py` checks the same with real rooms.
@Suite(.timeLimit(.minutes(1))) struct RoomTests {
    // MARK: A room that goes away

    @Test func aCommandWhoseRoomWentAwaySaysSoAndNamesTheLog() {
        let room = RoomPaths(folder: "/run/user/1000/swift-ble")
        let lost = ToolError(.transport, "subscribing to 2A37: the controller went away")
        let error = Session.explained(lost, room: room, controllerGone: true)
        #expect(error.kind == .transport)
        #expect(error.message == "the shared room went away (log: /run/user/1000/swift-ble/room.log)")
    }

    @Test func otherFailuresAndOtherTransportsKeepTheirMessage() {
        let room = RoomPaths(folder: "/run/user/1000/swift-ble")
        let notFound = ToolError(.noSuchDevice, "no device matching 'Lamp' found within 5 s")
        #expect(Session.explained(notFound, room: room, controllerGone: false).message == notFound.message)
        let closed = ToolError(.transport, "subscribing to 2A37: the controller went away")
        let elsewhere = Session.explained(closed, room: nil, controllerGone: true)
        #expect((elsewhere.kind, elsewhere.message) == (.transport, closed.message))
    }

    // MARK: A start that fails

    @Test func aFailedStartQuotesOnlyWhatTheNewRoomWrote() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let paths = RoomPaths(folder: folder)
        #expect(RoomClient.logSize(paths) == 0)
        #expect(RoomClient.lastLogLine(paths) == nil)
        try Self.append("2026-01-01T00:00:00.000Z room stopped (idle for 600 s)\n", to: paths.log)
        let start = RoomClient.logSize(paths)
        #expect(RoomClient.lastLogLine(paths, from: start) == nil, "an earlier room's line is not this one's reason")
        try Self.append("\n   \n", to: paths.log)
        #expect(RoomClient.lastLogLine(paths, from: start) == nil, "blank lines say nothing")
        try Self.append("ble: the room cannot listen: address in use\n\n", to: paths.log)
        #expect(RoomClient.lastLogLine(paths, from: start) == "ble: the room cannot listen: address in use")
    }

    @Test func aLogReplacedSinceItWasMeasuredIsReadFromItsStart() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let paths = RoomPaths(folder: folder)
        try Self.append(String(repeating: "an old line\n", count: 20), to: paths.log)
        let start = RoomClient.logSize(paths)
        try "ble: cannot open room.lock\n".write(toFile: paths.log, atomically: true, encoding: .utf8)
        #expect(RoomClient.lastLogLine(paths, from: start) == "ble: cannot open room.lock")
    }

    // MARK: The control socket

    @Test func theRoomClosesAControlConnectionThatSaysNothing() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/room.ctl"
        // A limit of a few seconds: short enough to see it end the idle connection, long enough that a question
        // asked on a loaded machine (the whole suite on two cores, where this test once took 13 s) is written and
        // answered within it.
        let listener = try await RoomControl.listen(at: path, connectionLimit: .seconds(4)) { _ in "{}" }
        defer { listener.close(promise: nil) }
        let idle = try Self.connectClient(path)
        defer { close(idle) }
        let started = ContinuousClock.now
        #expect(await Self.closedByPeer(idle, within: .seconds(20)))
        #expect(ContinuousClock.now - started >= .seconds(3), "not before its time")
        // A client that asks is still answered.
        #expect(try await RoomControl.ask("status", at: path) == "{}")
    }

    @Test func idleControlConnectionsCannotCrowdOutAQuestion() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/room.ctl"
        let listener = try await RoomControl.listen(
            at: path, connectionLimit: .seconds(30), maximumConnections: 4
        ) { request in "answer to \(request)" }
        defer { listener.close(promise: nil) }
        var idle: [Int32] = []
        defer {
            for descriptor in idle { close(descriptor) }
        }
        for _ in 0..<12 { idle.append(try Self.connectClient(path)) }
        #expect(try await RoomControl.ask("status", at: path, timeout: .seconds(5)) == "answer to status")
        // The oldest were let go to make room, long before their time was up: all but the 3 newest (the question
        // was the fourth).
        var closed: [Int] = []
        for index in idle.indices where await Self.closedByPeer(idle[index], within: .seconds(1)) {
            closed.append(index)
        }
        #expect(closed == Array(0..<9))
    }

    @Test func askingARoomThatNeverAnswersGivesUp() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/room.ctl"
        // Listens and never accepts: a connection succeeds (the backlog takes it) and nothing ever answers.
        let silent = try Self.listenWithoutAccepting(path)
        defer { close(silent) }
        let started = ContinuousClock.now
        await #expect(throws: (any Error).self) {
            try await RoomControl.ask("status", at: path, timeout: .milliseconds(300))
        }
        // A bound that catches a hang, not a speed measurement (a loaded machine took 4 s for the 300 ms limit).
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    // MARK: Starting the room's process

    @Test func aDaemonStartsInASessionOfItsOwnWithItsOutputInTheLog() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = folder + "/room.log"
        try Self.append("an earlier line\n", to: log)
        // A file of ours that a child would inherit if nothing closed it.
        let ours = open(folder + "/ours", O_WRONLY | O_CREAT, 0o600)
        #expect(ours > STDERR_FILENO)
        defer { close(ours) }
        let script = """
            echo out; echo err >&2
            if read line; then echo "read $line"; else echo "stdin: end"; fi
            if [ -e /dev/fd/\(ours) ]; then echo "fd \(ours): inherited"; else echo "fd \(ours): closed"; fi
            exec sleep 20
            """
        let child = try DaemonProcess.spawn("/bin/sh", arguments: ["-c", script], log: log)
        defer { child.terminate() }
        #expect(child.isRunning)
        #expect(getsid(child.pid) == child.pid, "it leads a session of its own")
        #expect(getpgid(child.pid) == child.pid)
        let expected = "an earlier line\nout\nerr\nstdin: end\nfd \(ours): closed\n"
        // Bounded generously: the whole suite on two cores once left the shell's output short after 10 s.
        let deadline = ContinuousClock.now + .seconds(30)
        var text = ""
        while ContinuousClock.now < deadline {
            text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if text == expected { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(text == expected)
    }

    @Test func aDaemonThatEndsIsCollected() async throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let child = try DaemonProcess.spawn("/bin/sh", arguments: ["-c", "exit 3"], log: folder + "/room.log")
        let deadline = ContinuousClock.now + .seconds(10)
        while child.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!child.isRunning)
        #expect(!child.isRunning, "and says so again")
        #expect(kill(child.pid, 0) != 0, "no zombie is left")
    }

    @Test func aDaemonThatCannotStartIsNamed() throws {
        let folder = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(throws: ToolError.self) {
            try DaemonProcess.spawn(folder + "/missing", arguments: [], log: folder + "/room.log")
        }
        do {
            _ = try DaemonProcess.spawn("/bin/sh", arguments: [], log: folder + "/no/such/room.log")
            Issue.record("a log that cannot be opened is an error")
        } catch {
            #expect(error.message.hasPrefix("cannot open \(folder)/no/such/room.log: "))
        }
    }

    // MARK: Helpers

    /// A new folder of the test's own, short enough for a socket path.
    static func temporaryFolder() throws -> String {
        var template = Array("/tmp/ble-room-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        return String(cString: made)
    }

    static func append(_ text: String, to path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? file.close() }
        try file.seekToEnd()
        try file.write(contentsOf: Data(text.utf8))
    }

    static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        return address
    }

    static func socketDescriptor() throws -> Int32 {
        #if canImport(Glibc)
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        return descriptor
    }

    /// A client connection to the Unix socket at `path`.
    static func connectClient(_ path: String) throws -> Int32 {
        let descriptor = try socketDescriptor()
        var address = address(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        return descriptor
    }

    /// A socket listening at `path` that never accepts.
    static func listenWithoutAccepting(_ path: String) throws -> Int32 {
        let descriptor = try socketDescriptor()
        var address = address(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(descriptor, 8) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        return descriptor
    }

    /// Whether the other end closes the connection `descriptor` (reading shows its end) within `limit`.
    /// Whether the other end closes `descriptor` within `limit`. Polled without blocking, so a wait never holds
    /// one of the few threads the other tests' tasks (and the room's answers) run on.
    static func closedByPeer(_ descriptor: Int32, within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while true {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&entry, 1, 0) == 1 {
                var byte: UInt8 = 0
                return read(descriptor, &byte, 1) <= 0
            }
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
