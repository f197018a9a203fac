import BLECore
import BLEHCI
import Testing

@testable import BLEHost

/// Connection initiation toward several peers at once: one directly, several through the accept list, with a
/// cancel whenever the list changes under an initiation, and each failure ending only the peers it concerns.
@Suite struct ConnectMachineTests {
    static let a = BluetoothAddress(bytes: [0xC0, 0, 0, 0, 0, 1], type: .randomDevice)
    static let b = BluetoothAddress(bytes: [0xC0, 0, 0, 0, 0, 2], type: .randomDevice)
    static let c = BluetoothAddress(bytes: [0xC0, 0, 0, 0, 0, 3], type: .randomDevice)
    static let ok: Result<Void, HostError> = .success(())

    @Test func oneTargetIsInitiatedDirectly() {
        var m = ConnectMachine()
        #expect(m.setTargets([Self.a]) == [.send(.create(peer: Self.a))])
        #expect(m.answered(Self.ok) == [])
        #expect(m.phase == .initiating([Self.a]))
        #expect(m.connectionComplete(status: .success, peer: Self.a) == [])
        #expect(m.targets.isEmpty && m.phase == .idle)
    }

    @Test func severalTargetsGoThroughTheAcceptList() {
        var m = ConnectMachine()
        #expect(m.setTargets([Self.a, Self.b]) == [.send(.clearAcceptList)])
        #expect(m.answered(Self.ok) == [.send(.addToAcceptList(Self.a))])
        #expect(m.answered(Self.ok) == [.send(.addToAcceptList(Self.b))])
        #expect(m.answered(Self.ok) == [.send(.create(peer: nil))])
        #expect(m.answered(Self.ok) == [])
        #expect(m.phase == .initiating([Self.a, Self.b]))
        // b answers first; a is still wanted and is initiated directly now.
        #expect(m.connectionComplete(status: .success, peer: Self.b) == [.send(.create(peer: Self.a))])
        #expect(m.targets == [Self.a])
    }

    @Test func aNewTargetCancelsTheInitiationAndTheListIsProgrammedAgain() {
        var m = ConnectMachine()
        _ = m.setTargets([Self.a])
        _ = m.answered(Self.ok)
        #expect(m.setTargets([Self.a, Self.b]) == [.send(.cancel), .startCancelTimer])
        #expect(m.answered(Self.ok) == [])  // Command Status; the Connection Complete confirms
        #expect(m.phase == .cancelling)
        #expect(
            m.connectionComplete(status: .unknownConnectionIdentifier, peer: Self.a) == [
                .stopCancelTimer, .send(.clearAcceptList),
            ])
        // Removing every target cancels too, and nothing follows the confirmation.
        _ = m.answered(Self.ok)
        _ = m.answered(Self.ok)
        _ = m.answered(Self.ok)
        _ = m.answered(Self.ok)
        #expect(m.phase == .initiating([Self.a, Self.b]))
        #expect(m.setTargets([]) == [.send(.cancel), .startCancelTimer])
        _ = m.answered(Self.ok)
        #expect(m.connectionComplete(status: .unknownConnectionIdentifier, peer: Self.a) == [.stopCancelTimer])
        #expect(m.phase == .idle)
    }

    @Test func aRefusedCreateFailsEveryPeerItWasFor() {
        var m = ConnectMachine()
        _ = m.setTargets([Self.a, Self.b])
        for _ in 0..<3 { _ = m.answered(Self.ok) }
        let limit = HostError(.hci(.connectionLimitExceeded), "refused")
        #expect(m.answered(.failure(limit)) == [.failed(Self.a, limit), .failed(Self.b, limit)])
        #expect(m.targets.isEmpty && m.phase == .idle)
    }

    @Test func aFailedEstablishmentEndsOnlyItsPeer() {
        var m = ConnectMachine()
        _ = m.setTargets([Self.a, Self.b, Self.c])
        for _ in 0..<5 { _ = m.answered(Self.ok) }
        #expect(m.phase == .initiating([Self.a, Self.b, Self.c]))
        let out = m.connectionComplete(status: .connectionFailedToBeEstablished, peer: Self.b)
        #expect(out.first == .failed(Self.b, HostError(.hci(.connectionFailedToBeEstablished), "")))
        #expect(out.dropFirst() == [.send(.clearAcceptList)])
        #expect(m.targets == [Self.a, Self.c])
    }

    @Test func aCancelThatIsNeverConfirmedIsTakenAsDone() {
        var m = ConnectMachine()
        _ = m.setTargets([Self.a])
        _ = m.answered(Self.ok)
        _ = m.setTargets([Self.b])
        _ = m.answered(Self.ok)
        // Bumble's controller: Command Status, then nothing.
        #expect(m.cancelTimedOut() == [.send(.create(peer: Self.b))])
        _ = m.answered(Self.ok)
        // A confirmation that comes after all is the old cancel's: the new initiation goes on.
        #expect(m.connectionComplete(status: .unknownConnectionIdentifier, peer: Self.a) == [])
        #expect(m.phase == .initiating([Self.b]))
    }

    @Test func aCancelThatFindsNothingToCancelEndsTheWaitAtOnce() {
        var m = ConnectMachine()
        _ = m.setTargets([Self.a])
        _ = m.answered(Self.ok)
        _ = m.setTargets([])
        #expect(m.answered(.failure(HostError(.hci(.commandDisallowed), "nothing to cancel"))) == [.stopCancelTimer])
        #expect(m.phase == .idle)
    }

    /// More peers than the accept list holds: the first eight are initiated, and every turn the next ones are,
    /// so the ninth is tried too.
    @Test func peersBeyondTheListsSizeTakeTurns() {
        var m = ConnectMachine()
        let peers = (1...10).map { BluetoothAddress(bytes: [0xC0, 0, 0, 0, 1, UInt8($0)], type: .randomDevice) }
        var out = m.setTargets(peers)
        #expect(out == [.send(.clearAcceptList), .startTurnTimer])
        for _ in 0..<9 { out = m.answered(Self.ok) }  // the clear and eight additions answered: the create
        #expect(out == [.send(.create(peer: nil))])
        #expect(m.answered(Self.ok) == [])
        #expect(m.phase == .initiating(Array(peers.prefix(8))))
        // The turn: the first eight go to the back; the cancel, then the list with the last two first.
        #expect(m.nextTurn() == [.send(.cancel), .startCancelTimer, .startTurnTimer])
        _ = m.answered(Self.ok)
        #expect(
            m.connectionComplete(status: .unknownConnectionIdentifier, peer: peers[0]) == [
                .stopCancelTimer, .send(.clearAcceptList),
            ])
        #expect(Array(m.targets.prefix(2)) == [peers[8], peers[9]])
        // Once no more than eight wait, no more turns.
        #expect(m.setTargets(Array(peers.prefix(8))).contains(.stopTurnTimer))
    }

    /// A controller whose accept list holds fewer entries refuses the next addition with Memory Capacity
    /// Exceeded: the machine initiates toward what fits, and the rest take turns.
    @Test func aSmallerAcceptListIsUsedAsItIs() {
        var m = ConnectMachine()
        _ = m.setTargets([Self.a, Self.b, Self.c])
        _ = m.answered(Self.ok)  // cleared
        _ = m.answered(Self.ok)  // a added
        _ = m.answered(Self.ok)  // b added
        let full = HostError(.hci(.memoryCapacityExceeded), "full")
        #expect(m.answered(.failure(full)) == [.send(.create(peer: nil)), .startTurnTimer])
        _ = m.answered(Self.ok)
        #expect(m.phase == .initiating([Self.a, Self.b]))
        #expect(m.targets == [Self.a, Self.b, Self.c])
    }
}
