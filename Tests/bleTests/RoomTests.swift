import Foundation
import Testing

@testable import ble

/// The shared room's parts that a user meets, tested without a room running: what a command says when the room
/// goes away. `Scripts/tests/test_room.py` checks the same with real rooms.
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
}
