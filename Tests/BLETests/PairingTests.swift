import BLEVirtualController
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

/// Security through the public API, as an iOS app meets it: a lock whose state needs encryption is read by a
/// phone that never asks to pair; the system pairs (Just Works, accepted by default), encrypts and retries, and
/// the app sees the value. Both sides keep the bond: the next link is encrypted at once with the kept key (a bond
/// one side lost: `LostBondTests`).
@Suite struct PairingTests {
    static let service = BluetoothUUID(string: "8D3E0001-5C1A-4F2B-9E6A-0C1D2E3F4A5B")!
    static let state = BluetoothUUID(string: "8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B")!

    struct Room {
        let radio = SimulatedRadio(seed: 11)
        let phone: BluetoothSystem
        let lock: BluetoothSystem
        let central: CentralManager
        let peripheral: PeripheralManager
        /// Whether the lock's state needs encryption to be read.
        let encrypted: Bool

        /// nil for a side: that device does not pair.
        init(phone phonePairing: PairingConfiguration? = .init(), lock lockPairing: PairingConfiguration? = .init()) {
            var phoneConfiguration = BluetoothSystem.Configuration()
            phoneConfiguration.pairing = phonePairing
            var lockConfiguration = BluetoothSystem.Configuration()
            lockConfiguration.pairing = lockPairing
            self.init(phoneConfiguration: phoneConfiguration, lockConfiguration: lockConfiguration)
        }

        init(
            phoneConfiguration: BluetoothSystem.Configuration, lockConfiguration: BluetoothSystem.Configuration,
            encrypted: Bool = true
        ) {
            self.encrypted = encrypted
            phone = BluetoothSystem.simulated(on: radio, name: "phone", configuration: phoneConfiguration)
            lock = BluetoothSystem.simulated(
                on: radio, name: "lock", position: RadioPosition(x: 2, y: 0), configuration: lockConfiguration)
            central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
            peripheral = PeripheralManager(
                delegate: nil, queue: DispatchQueue(label: "lock"), options: nil, system: lock)
        }

        /// Publishes the lock's service (its state readable only on an encrypted link) and advertises.
        func publish() async throws {
            try await peripheral.waitUntilPoweredOn(timeout: .seconds(1))
            let service = MutableService(type: PairingTests.service, primary: true)
            service.characteristics = [
                MutableCharacteristic(
                    type: PairingTests.state, properties: [.read], value: Data([0x01]),
                    permissions: encrypted ? [.readEncryptionRequired] : [.readable])
            ]
            try await peripheral.add(service, timeout: .seconds(1))
            try await peripheral.startAdvertising(
                AdvertisementData(localName: "lock", serviceUUIDs: [PairingTests.service]), timeout: .seconds(1))
        }

        /// Connects, finds the state characteristic and reads it; disconnects after.
        func connectAndRead() async throws -> (Peripheral, Result<Data, any Error>) {
            let lock = try await connect()
            let result: Result<Data, any Error>
            do {
                result = .success(try await readState(lock))
            } catch {
                result = .failure(error)
            }
            await disconnect(lock)
            return (lock, result)
        }

        /// Finds the lock by its service and connects.
        func connect() async throws -> Peripheral {
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            var found: Peripheral?
            for try await discovery in central.scan(withServices: [PairingTests.service]) {
                found = discovery.peripheral
                break
            }
            let lock = try #require(found)
            try await central.connect(lock, timeout: .seconds(5))
            return lock
        }

        /// Finds the state characteristic and reads it.
        func readState(_ lock: Peripheral) async throws -> Data {
            let services = try await lock.discoverServices([PairingTests.service], timeout: .seconds(5))
            let characteristics = try await lock.discoverCharacteristics(
                nil, for: try #require(services.first), timeout: .seconds(5))
            let state = try #require(characteristics.first { $0.uuid == PairingTests.state })
            return try await lock.readValue(for: state, timeout: .seconds(40))
        }

        /// Disconnects and waits until the manager reports it.
        func disconnect(_ lock: Peripheral) async {
            central.cancelPeripheralConnection(lock)
            for await gone in central.disconnections where gone.peripheral === lock { break }
        }

        /// Runs `body` as a task on the radio, driving the radio until it ends (at most `limit` of virtual time).
        func run<T: Sendable>(limit: Duration = .seconds(120), _ body: @escaping @Sendable () async throws -> T)
            async throws -> T
        {
            try await Self.drive(radio, limit: limit, body)
        }

        /// Runs `body` as a task on `radio`, driving the radio until it ends (at most `limit` of virtual time).
        static func drive<T: Sendable>(
            _ radio: SimulatedRadio, limit: Duration = .seconds(120), _ body: @escaping @Sendable () async throws -> T
        ) async throws -> T {
            let task = Task(executorPreference: radio) { try await body() }
            let done = Mutex(false)
            let watcher = Task {
                _ = try? await task.value
                done.withLock { $0 = true }
            }
            var waited: Duration = .zero
            while !done.withLock({ $0 }), waited < limit {
                try await radio.run(for: .milliseconds(100))
                waited += .milliseconds(100)
            }
            watcher.cancel()
            if !done.withLock({ $0 }) { task.cancel() }
            return try await task.value
        }
    }

    @Test func aValueThatNeedsEncryptionIsReadAfterTheSystemPairsByItself() async throws {
        let room = Room()
        try await room.run { try await room.publish() }
        let (lock, first) = try await room.run { try await room.connectAndRead() }
        #expect(try first.get() == Data([0x01]))
        // Both sides keep a bond, under the identifiers they know each other by.
        let phoneBond = try #require(room.phone.core.store.bond(for: lock.identifier))
        #expect(phoneBond.centralKey != nil)
        #expect(room.lock.core.store.bonds.count == 1)
        #expect(room.lock.core.store.bonds.first?.peripheralKey?.key == phoneBond.centralKey?.key)

        // The next link is encrypted at once with the kept key: the read is answered the first time.
        let (_, second) = try await room.run { try await room.connectAndRead() }
        #expect(try second.get() == Data([0x01]))
    }

    /// A legacy bond between our own central and peripheral re-encrypts on the next link (Bumble's peripheral
    /// answers such a request with the wrong key, BLEHost.docc/Peers.md, so this is where the case is checked).
    @Test func aLegacyBondReEncryptsTheNextLink() async throws {
        let room = Room(phone: PairingConfiguration(secureConnections: false))
        try await room.run { try await room.publish() }
        let (lock, first) = try await room.run { try await room.connectAndRead() }
        #expect(try first.get() == Data([0x01]))
        let bond = try #require(room.phone.core.store.bond(for: lock.identifier))
        #expect(!bond.secureConnections)
        // Legacy keys: each side distributed its own, named by EDIV and Rand.
        #expect(bond.centralKey?.ediv != 0 || bond.centralKey?.rand != 0)
        let (_, second) = try await room.run { try await room.connectAndRead() }
        #expect(try second.get() == Data([0x01]))
        #expect(room.phone.core.store.bond(for: lock.identifier) == bond, "paired again instead of re-encrypting")
    }

    /// A user at each device: what they were shown, and how they answer.
    final class User: PairingDelegate {
        let accepts: Bool
        let compared = Mutex<[UInt32?]>([])
        let shown = Mutex<UInt32?>(nil)
        /// The other device's user, whose screen this one reads when asked for a passkey.
        let other = Mutex<User?>(nil)
        /// What this user's screen shows, as it shows it: another user reading it waits for it (in the radio's
        /// time: the questions are asked in tasks that prefer the radio), rather than polling.
        let screen: AsyncStream<UInt32>
        private let show: AsyncStream<UInt32>.Continuation

        init(accepts: Bool = true) {
            self.accepts = accepts
            (screen, show) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        }

        deinit { show.finish() }

        /// The passkey on this user's screen: shown already (the displaying side shows it before the other side
        /// is asked), or when it is.
        func readScreen() async -> UInt32? {
            for await value in screen { return value }
            return nil
        }

        func bluetoothSystem(_ system: BluetoothSystem, shouldPairWith peer: UUID?, numericValue: UInt32?) async
            -> Bool
        {
            compared.withLock { $0.append(numericValue) }
            return accepts
        }

        func bluetoothSystem(_ system: BluetoothSystem, display passkey: UInt32, for peer: UUID?) {
            shown.withLock { $0 = passkey }
            show.yield(passkey)
        }

        func bluetoothSystem(_ system: BluetoothSystem, passkeyFor peer: UUID?) async -> UInt32? {
            await other.withLock({ $0 })?.readScreen()
        }
    }

    @Test func numericComparisonGoesThroughBothUsersAndTheyCompareTheSameDigits() async throws {
        let both = PairingConfiguration(ioCapability: .displayYesNo, requiresMITMProtection: true)
        let room = Room(phone: both, lock: both)
        let phoneUser = User()
        let lockUser = User()
        room.phone.pairingDelegate = phoneUser
        room.lock.pairingDelegate = lockUser
        try await room.run { try await room.publish() }
        let (lock, read) = try await room.run { try await room.connectAndRead() }
        #expect(try read.get() == Data([0x01]))
        let phoneSaw = phoneUser.compared.withLock { $0 }
        #expect(phoneSaw.count == 1 && phoneSaw.first! != nil)
        #expect(lockUser.compared.withLock { $0 } == phoneSaw)
        #expect(room.phone.core.store.bond(for: lock.identifier)?.authenticated == true)
    }

    @Test func passkeyEntryTheLockShowsAndThePhonesUserTypes() async throws {
        let room = Room(
            phone: PairingConfiguration(ioCapability: .keyboardOnly, requiresMITMProtection: true),
            lock: PairingConfiguration(ioCapability: .displayOnly, requiresMITMProtection: true))
        let phoneUser = User()
        let lockUser = User()
        phoneUser.other.withLock { $0 = lockUser }
        room.phone.pairingDelegate = phoneUser
        room.lock.pairingDelegate = lockUser
        try await room.run { try await room.publish() }
        let (_, read) = try await room.run { try await room.connectAndRead() }
        #expect(try read.get() == Data([0x01]))
        #expect(lockUser.shown.withLock { $0 } != nil)
    }

    @Test func aUserWhoRefusesLeavesThePhoneWithTheRefusal() async throws {
        let both = PairingConfiguration(ioCapability: .displayYesNo, requiresMITMProtection: true)
        let room = Room(phone: both, lock: both)
        let phoneUser = User(accepts: false)
        room.phone.pairingDelegate = phoneUser
        room.lock.pairingDelegate = User()
        try await room.run { try await room.publish() }
        let (lock, read) = try await room.run { try await room.connectAndRead() }
        guard case .failure(let error) = read else {
            Issue.record("the state was read though the user refused to pair")
            return
        }
        #expect((error as? BluetoothError)?.attErrorCode == .insufficientAuthentication, "\(error)")
        #expect(room.phone.core.store.bond(for: lock.identifier) == nil)
    }

    @Test func withoutADelegateANumericComparisonIsRefused() async throws {
        let both = PairingConfiguration(ioCapability: .displayYesNo, requiresMITMProtection: true)
        let room = Room(phone: both, lock: both)
        try await room.run { try await room.publish() }
        let (_, read) = try await room.run { try await room.connectAndRead() }
        #expect((read.error as? BluetoothError)?.attErrorCode == .insufficientAuthentication)
    }
}
