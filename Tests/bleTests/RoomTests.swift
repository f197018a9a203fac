import Foundation
import Testing

@testable import ble

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shared room's parts that a user meets, tested without a room running: what a command says when the room
/// goes away, and what a failed start quotes from the log. `Scripts/tests/test_room.py` checks the same with real
/// rooms.
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
}
