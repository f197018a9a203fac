import BLEVirtualController
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Pairing when the user asks (`Peripheral.pair`), and the bonds it leaves (`BluetoothSystem.bonds`,
/// `removeBond(for:)`), between a phone and a lock on one simulated radio, as the `ble pair` and `ble bonds`
/// commands use them: what was agreed, why a pairing failed, and a removed bond costing a new pairing.
@Suite struct PairOnRequestTests {
    typealias User = PairingTests.User

    typealias Room = PairingTests.Room

    @Test func pairingOnRequestSaysWhatWasAgreedAndBothSidesListTheBond() async throws {
        let room = Room()
        try await room.run { try await room.publish() }
        let (lock, result, state, again) = try await room.run {
            let lock = try await room.connect()
            let result = try await lock.pair(timeout: .seconds(60))
            // The link is encrypted by the pairing: the value is read the first time.
            let state = try await room.readState(lock)
            // Pairing again on the encrypted link makes new keys, which replace the bond.
            let again = try await lock.pair(timeout: .seconds(60))
            await room.disconnect(lock)
            return (lock, result, state, again)
        }
        #expect(state == Data([0x01]))
        #expect(
            result
                == PairingResult(
                    peer: lock.identifier, method: .justWorks, secureConnections: true, authenticated: false,
                    bonded: true, keySize: 16))
        #expect(again == result)
        let phoneBonds = room.phone.bonds
        #expect(phoneBonds.map(\.identifier) == [lock.identifier])
        let bond = try #require(phoneBonds.first)
        #expect(bond.name == "lock")
        #expect(bond.identityAddress.bytes == lock.address.bytes)
        #expect(bond.secureConnections && !bond.authenticated && bond.keySize == 16)
        #expect(room.lock.bonds.count == 1)
        #expect(room.lock.bonds.first?.identityAddress.bytes == room.phone.address?.bytes)
    }

    /// A lock whose app also uses the async streams: its delegate still hears the security of each link (the
    /// async layer hears the same events after it).
    @Test func aLockUsingTheAsyncStreamsStillTellsItsDelegateOfThePairing() async throws {
        let room = Room()
        let recorder = SecurityRecorder()
        room.peripheral.delegate = recorder
        let subscriptions = room.peripheral.subscriptions
        try await room.run { try await room.publish() }
        let paired = try await room.run {
            let result = try await room.connectAndPair()
            // The lock hears of it in a delivery of its own: waited for in the radio's time, within a bound.
            for _ in 0..<100 where !recorder.events.withLock({ $0.contains { $0.hasPrefix("paired (") } }) {
                try await room.lock.sleep(for: .milliseconds(10))
            }
            return result
        }
        #expect((try? paired.get())?.bonded == true)
        let events = recorder.events.withLock { $0 }
        #expect(events.first == "pairing started", "\(events)")
        #expect(events.contains { $0.hasPrefix("paired (") }, "\(events)")
        withExtendedLifetime(subscriptions) {}
    }

    final class SecurityRecorder: PeripheralManagerDelegate, Sendable {
        let events = Mutex<[String]>([])
        func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {}
        func peripheralManager(
            _ peripheral: PeripheralManager, central: Central, didUpdateSecurity event: CentralSecurityEvent
        ) {
            events.withLock { $0.append("\(event)") }
        }
    }

    @Test func aRemovedBondCostsANewPairingBeforeTheValueIsReadAgain() async throws {
        let room = Room()
        try await room.run { try await room.publish() }
        let paired = try await room.run { try await room.connectAndPair() }
        let identifier = try paired.get().peer
        let created = try #require(room.phone.bonds.first?.created)
        // The phone forgets the lock (Settings' "Forget This Device"); a second removal finds nothing.
        #expect(room.phone.removeBond(for: identifier))
        #expect(!room.phone.removeBond(for: identifier))
        #expect(room.phone.bonds.isEmpty)
        // The next link is not encrypted at once: the read is refused, the phone pairs again, and reads.
        try await room.run { try await room.phone.sleep(for: .seconds(5)) }
        let state = try await room.run {
            let lock = try await room.connect()
            let state = try await room.readState(lock)
            await room.disconnect(lock)
            return state
        }
        #expect(state == Data([0x01]))
        let renewed = try #require(room.phone.bonds.first)
        #expect(renewed.identifier == identifier)
        #expect(renewed.created > created)
    }

    @Test func aWrongPasskeyFailsThePairingAndKeepsNoBond() async throws {
        let room = Room(
            phone: PairingConfiguration(ioCapability: .keyboardOnly, requiresMITMProtection: true),
            lock: PairingConfiguration(ioCapability: .displayOnly, requiresMITMProtection: true))
        let lockUser = User()
        let phoneUser = MistypingUser(reading: lockUser)
        room.phone.pairingDelegate = phoneUser
        room.lock.pairingDelegate = lockUser
        try await room.run { try await room.publish() }
        let result = try await room.run { try await room.connectAndPair() }
        guard case .failure(let error) = result else {
            Issue.record("a wrong passkey paired")
            return
        }
        #expect(error.code == .pairingFailed, "\(error)")
        #expect(error.pairingFailureReason == .confirmValueFailed, "\(error)")
        #expect(error.description.contains("passkey"), "\(error)")
        #expect(room.phone.bonds.isEmpty)
        #expect(room.lock.bonds.isEmpty)
    }

    @Test func aPeerThatDoesNotPairSaysSo() async throws {
        let room = Room(lock: nil)
        try await room.run { try await room.publish() }
        let result = try await room.run { try await room.connectAndPair() }
        #expect(result.failure?.code == .pairingFailed)
        #expect(result.failure?.pairingFailureReason == .pairingNotSupported)
        #expect(result.failure?.description.contains("does not pair") == true, "\(String(describing: result))")
    }

    @Test func aSystemThatDoesNotPairRefusesAtOnce() async throws {
        let room = Room(phone: nil)
        try await room.run { try await room.publish() }
        let result = try await room.run { try await room.connectAndPair() }
        #expect(result.failure?.code == .operationNotSupported)
    }

    @Test func aUserWhoRefusesTheNumbersFailsThePairing() async throws {
        let both = PairingConfiguration(ioCapability: .displayYesNo, requiresMITMProtection: true)
        let room = Room(phone: both, lock: both)
        room.phone.pairingDelegate = User(accepts: false)
        room.lock.pairingDelegate = User()
        try await room.run { try await room.publish() }
        let result = try await room.run { try await room.connectAndPair() }
        #expect(result.failure?.code == .pairingFailed)
        #expect(result.failure?.pairingFailureReason == .numericComparisonFailed)
        #expect(room.phone.bonds.isEmpty)
    }

    /// Types the passkey the other device shows, off by one.
    final class MistypingUser: PairingDelegate {
        let other: User
        init(reading other: User) { self.other = other }

        func bluetoothSystem(_ system: BluetoothSystem, passkeyFor peer: UUID?) async -> UInt32? {
            await other.readScreen().map { ($0 + 1) % 1_000_000 }
        }
    }
}

extension PairingTests.Room {
    /// Connects and pairs; the result or the error.
    func connectAndPair() async throws -> Result<PairingResult, BluetoothError> {
        let lock = try await connect()
        defer { central.cancelPeripheralConnection(lock) }
        do {
            return .success(try await lock.pair(timeout: .seconds(60)))
        } catch let error as BluetoothError {
            return .failure(error)
        }
    }
}
