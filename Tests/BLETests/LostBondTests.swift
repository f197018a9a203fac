import BLESystem
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// A bond that one side lost, through the public API, as an iPhone meets it.
///
/// The lock forgot the phone (a factory reset): the phone's encryption with its kept key meets PIN or Key Missing,
/// the system ends the link, and the app hears `peerRemovedPairingInformation`; as on iOS, the phone keeps its bond
/// (only the user's "Forget This Device" removes it), so every later connection fails the same way until then.
/// The phone forgot the lock: its read meets the lock's refusal, the phone pairs again, the lock accepts and
/// replaces its bond, and the read succeeds.
@Suite struct LostBondTests {
    typealias Room = PairingTests.Room

    /// What the phone's app hears of its connections.
    final class Recorder: CentralManagerDelegate {
        enum Event: Equatable {
            case connected
            case failed(BluetoothError.Code?)
            case disconnected(BluetoothError.Code?)
        }
        let events = Mutex<[Event]>([])

        func centralManagerDidUpdateState(_ central: CentralManager) {}
        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            events.withLock { $0.append(.connected) }
        }
        func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
            events.withLock { $0.append(.failed((error as? BluetoothError)?.code)) }
        }
        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
        ) {
            events.withLock { $0.append(.disconnected((error as? BluetoothError)?.code)) }
        }
    }

    /// A phone and a lock that bonded: the phone connected, read the encrypted state (pairing for it) and
    /// disconnected; the recorder hears the phone's connections from then on.
    static func bonded(sourceLocation: SourceLocation = #_sourceLocation) async throws -> (Room, Recorder, Peripheral) {
        let room = Room()
        let recorder = Recorder()
        room.central.delegate = recorder
        try await room.run { try await room.publish() }
        let (lock, first) = try await room.run { try await room.connectAndRead() }
        #expect(try first.get() == Data([0x01]), sourceLocation: sourceLocation)
        return (room, recorder, lock)
    }

    /// Finds the lock and tries to connect; the error of the attempt, if it failed.
    static func connect(_ room: Room) async throws -> (Peripheral, BluetoothError?) {
        try await room.central.waitUntilPoweredOn(timeout: .seconds(1))
        var found: Peripheral?
        for try await discovery in room.central.scan(withServices: [PairingTests.service]) {
            found = discovery.peripheral
            break
        }
        let lock = try #require(found)
        do {
            try await room.central.connect(lock, timeout: .seconds(10))
            return (lock, nil)
        } catch {
            return (lock, try #require(error as? BluetoothError))
        }
    }

    @Test func aBondTheLockForgotFailsTheConnectionWithPeerRemovedPairingInformationUntilThePhoneForgetsIt()
        async throws
    {
        let (room, recorder, lock) = try await Self.bonded()
        let bond = try #require(room.phone.core.store.bond(for: lock.identifier))
        // The lock forgets the phone (a factory reset of the lock's bonds).
        for bond in room.lock.core.store.bonds { room.lock.core.store.removeBond(bond.identifier) }
        recorder.events.withLock { $0 = [] }

        // As on iOS, the connection to a bonded peripheral completes only once the link is encrypted: here it
        // cannot be, and the app hears didFailToConnect with peerRemovedPairingInformation, never didConnect.
        let (_, second) = try await room.run { try await Self.connect(room) }
        #expect(second?.code == .peerRemovedPairingInformation, "\(String(describing: second))")
        #expect(second?.hciStatus == .pinOrKeyMissing)
        #expect(recorder.events.withLock { $0 } == [.failed(.peerRemovedPairingInformation)])
        #expect(lock.state == .disconnected)
        // The phone keeps its bond, so the next attempt fails the same way.
        #expect(room.phone.core.store.bond(for: lock.identifier) == bond)
        let (_, third) = try await room.run { try await Self.connect(room) }
        #expect(third?.code == .peerRemovedPairingInformation, "\(String(describing: third))")
        #expect(room.phone.core.store.bond(for: lock.identifier) == bond)

        // The user forgets the lock on the phone: the phone pairs again when the read needs it, and both keep
        // the new bond.
        room.phone.core.store.removeBond(lock.identifier)
        recorder.events.withLock { $0 = [] }
        let (_, fourth) = try await room.run { try await room.connectAndRead() }
        #expect(try fourth.get() == Data([0x01]))
        let renewed = try #require(room.phone.core.store.bond(for: lock.identifier))
        #expect(renewed.centralKey != bond.centralKey)
        #expect(room.lock.core.store.bonds.count == 1)
        #expect(room.lock.core.store.bonds.first?.peripheralKey?.key == renewed.centralKey?.key)
        #expect(recorder.events.withLock { $0 } == [.connected, .disconnected(nil)])
    }

    /// The phone keeps a link to the lock with `enableAutoReconnect`; the lock leaves its range, forgets the phone
    /// meanwhile, and comes back. The reconnection meets PIN or Key Missing: the system stops reconnecting (no
    /// attempt can succeed until the user forgets the lock) and the app hears `didFailToConnect` with
    /// `peerRemovedPairingInformation`, once; the phone does not connect again and again by itself.
    @Test func anAutomaticReconnectionToALockThatForgotThePhoneStopsAndSaysWhy() async throws {
        let (room, recorder, lock) = try await Self.bonded()
        room.central.connect(lock, options: CentralManager.ConnectOptions(enableAutoReconnect: true))
        try await room.radio.runExpecting(
            { lock.state == .connected }, within: .seconds(10), "the connection", sourceLocation: #_sourceLocation)
        recorder.events.withLock { $0 = [] }
        // Every link the phone's controller reports from now on.
        let links = Mutex(0)
        room.radio.setTraceHandler { _, name, direction, packet in
            guard name == "phone", direction == .controllerToHost, case .event(let event) = packet,
                event.code == .leMeta, [0x01, 0x0A].contains(event.parameters.first)
            else { return }
            links.withLock { $0 += 1 }
        }

        room.lock.move(to: RadioPosition(x: 1_000, y: 0))
        try await room.radio.runExpecting(
            { recorder.events.withLock { $0 } == [.disconnected(.connectionTimeout)] }, within: .seconds(30),
            "the link's loss", sourceLocation: #_sourceLocation)
        #expect(lock.state == .connecting, "reconnecting by itself")
        for bond in room.lock.core.store.bonds { room.lock.core.store.removeBond(bond.identifier) }
        room.lock.move(to: RadioPosition(x: 2, y: 0))
        try await room.radio.runExpecting(
            { recorder.events.withLock { $0 }.count == 2 }, within: .seconds(30), "the reconnection's end",
            sourceLocation: #_sourceLocation)
        // Then a minute in which nothing more happens.
        try await room.radio.run(for: .seconds(60))
        #expect(
            recorder.events.withLock { $0 } == [
                .disconnected(.connectionTimeout), .failed(.peerRemovedPairingInformation),
            ])
        #expect(lock.state == .disconnected)
        #expect(links.withLock { $0 } == 1, "one reconnection, not one a second")
        #expect(room.phone.core.store.bond(for: lock.identifier) != nil, "the phone keeps its bond")
        room.radio.setTraceHandler(nil)
    }

    @Test func aBondThePhoneForgotIsMadeAgainAndTheLockReplacesItsOwn() async throws {
        let (room, recorder, lock) = try await Self.bonded()
        let lockBond = try #require(room.lock.core.store.bonds.first)
        // The phone forgets the lock; the lock keeps its bond.
        room.phone.core.store.removeBond(lock.identifier)
        recorder.events.withLock { $0 = [] }

        // The connection completes (the phone has no key to encrypt with), the read meets the lock's refusal,
        // the phone pairs again, the lock accepts the new pairing, and the read succeeds.
        let (_, second) = try await room.run { try await room.connectAndRead() }
        #expect(try second.get() == Data([0x01]))
        #expect(recorder.events.withLock { $0 } == [.connected, .disconnected(nil)])
        let phoneBond = try #require(room.phone.core.store.bond(for: lock.identifier))
        #expect(room.lock.core.store.bonds.count == 1)
        let replaced = try #require(room.lock.core.store.bonds.first)
        #expect(replaced.identifier == lockBond.identifier)
        #expect(replaced.peripheralKey != lockBond.peripheralKey)
        #expect(replaced.peripheralKey?.key == phoneBond.centralKey?.key)

        // Both sides hold the new bond: the next link is encrypted at once with it.
        let (_, third) = try await room.run { try await room.connectAndRead() }
        #expect(try third.get() == Data([0x01]))
    }

    @Test func aReadThatMeetsAKeyThePeerLacksFailsWithPeerRemovedPairingInformationAndEndsTheLink() async throws {
        // The phone has a key the lock never had, learnt while the link was up (the store's hook stands for a
        // bond made elsewhere): the read's refusal makes the system encrypt with it, the lock answers its LTK
        // request negatively, and the read, then the link, fail with peerRemovedPairingInformation, not with the
        // lock's ATT refusal.
        let room = Room()
        let recorder = Recorder()
        room.central.delegate = recorder
        try await room.run { try await room.publish() }
        let outcome = try await room.run { () async throws -> (Peripheral, Result<Data, any Error>) in
            let (lock, failure) = try await Self.connect(room)
            #expect(failure == nil)
            let services = try await lock.discoverServices([PairingTests.service], timeout: .seconds(5))
            let characteristics = try await lock.discoverCharacteristics(
                nil, for: try #require(services.first), timeout: .seconds(5))
            let state = try #require(characteristics.first { $0.uuid == PairingTests.state })
            let store = room.phone.core.store
            store.setBond(
                StoredBond(
                    identifier: lock.identifier, identityAddress: try #require(store.address(for: lock.identifier)),
                    centralKey: StoredLongTermKey(key: Array(repeating: 0x5A, count: 16), ediv: 0x1234, rand: 42),
                    keySize: 16, authenticated: false, secureConnections: false, created: store.currentTime))
            let result: Result<Data, any Error>
            do {
                result = .success(try await lock.readValue(for: state, timeout: .seconds(40)))
            } catch {
                result = .failure(error)
            }
            if lock.state != .disconnected {
                for await gone in room.central.disconnections where gone.peripheral === lock { break }
            }
            return (lock, result)
        }
        let (lock, read) = outcome
        #expect((read.error as? BluetoothError)?.code == .peerRemovedPairingInformation, "\(read)")
        #expect(lock.state == .disconnected)
        #expect(recorder.events.withLock { $0 } == [.connected, .disconnected(.peerRemovedPairingInformation)])
        #expect(room.phone.core.store.bond(for: lock.identifier) != nil)
    }
}
