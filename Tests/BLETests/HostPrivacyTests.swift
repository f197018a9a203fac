import BLECore
import BLEHCI
import BLEHost
import BLESMP
import BLEVirtualController
import Synchronization
import Testing

/// LE privacy in the host, over the air on two virtual controllers: a host with privacy advertises, scans and
/// connects from resolvable private addresses it renews every period (pausing advertising and scanning for
/// LE Set Random Address), gives its IRK and identity when it bonds, and a bonded central that holds them knows
/// it by its identity address whatever address it uses, and connects to it by that identity.
@Suite struct HostPrivacyTests {
    typealias Pair = HostPairingTests.Pair

    static let peripheralKey: [UInt8] = (0..<16).map { UInt8(0xA0 + $0) }
    static let centralKey: [UInt8] = (0..<16).map { UInt8(0x30 + $0) }

    static func reports(_ side: HostPairingTests.Side) -> [BluetoothAddress] {
        side.events.withLock { events in
            events.compactMap { if case .advertisingReport(let r) = $0 { r.address } else { nil } }
        }
    }

    static func advertise(_ side: HostPairingTests.Side) {
        side.host.startAdvertising(
            AdvertisingParameters(kind: .connectable, intervalMin: 0x20, intervalMax: 0x20), data: [0x02, 0x01, 0x06],
            scanResponse: []
        ) { result in if case .failure(let error) = result { Issue.record("advertising failed: \(error)") } }
    }

    @Test func aPrivatePeripheralRotatesItsAddressAndABondedCentralStillFindsItByIdentity() async throws {
        let pair = Pair(
            central: HostPairingTests.security(.noInputNoOutput, seed: 1),
            peripheral: HostPairingTests.security(.noInputNoOutput, seed: 2),
            centralPrivacy: HostPrivacyConfiguration(resolvingKey: Self.centralKey, rotationPeriod: .seconds(10)),
            peripheralPrivacy: HostPrivacyConfiguration(resolvingKey: Self.peripheralKey, rotationPeriod: .seconds(10)))
        try await pair.start()

        // Both use a resolvable private address of their IRK, not the controller's public address.
        let peripheralInfo = try #require(pair.peripheral.host.controllerInfo)
        let first = peripheralInfo.address
        #expect(first.randomKind == .resolvablePrivate)
        #expect(SMPCrypto.resolves(first, irk: Self.peripheralKey))
        #expect(peripheralInfo.identityAddress == pair.peripheral.controller.address)
        let centralFirst = try #require(pair.central.host.controllerInfo?.address)
        #expect(SMPCrypto.resolves(centralFirst, irk: Self.centralKey))

        // The central scans and hears the peripheral's private address; it connects to it and pairs.
        Self.advertise(pair.peripheral)
        pair.central.host.startScan(ScanParameters(active: false)) { _ in }
        try await pair.run(until: { Self.reports(pair.central).contains(first) }, "the first address heard")
        pair.central.host.setConnectTargets([first], parameters: ConnectionParameters())
        try await pair.run(
            until: { !pair.central.host.links.isEmpty && !pair.peripheral.host.links.isEmpty }, "the connection")
        let handle = pair.central.host.links[0].handle
        #expect(pair.peripheral.host.links[0].peer.randomKind == .resolvablePrivate)
        let result = try await pair.pair(handle).get()
        // Each side gave its IRK and identity address.
        let peripheralIdentity = try #require(result.peerIdentity)
        #expect(peripheralIdentity.resolvingKey == Self.peripheralKey)
        #expect(peripheralIdentity.address == pair.peripheral.controller.address)
        let peripheralResult = try #require(
            pair.peripheral.events.withLock { events in
                events.compactMap { if case .pairingCompleted(_, let r) = $0 { r } else { nil } }.first
            })
        #expect(peripheralResult.peerIdentity?.resolvingKey == Self.centralKey)
        pair.peripheral.keys.withLock { $0 = [try! #require(peripheralResult.localLongTermKey)] }
        try await pair.disconnect(handle)

        // The peripheral goes on advertising through two periods: its address changes (advertising paused and
        // resumed for it), and the central, not yet resolving, hears the new addresses as strangers.
        Self.advertise(pair.peripheral)
        pair.central.events.withLock { $0.removeAll() }
        try await pair.radio.run(for: .seconds(25))
        let later = try #require(pair.peripheral.host.controllerInfo?.address)
        #expect(later != first)
        #expect(SMPCrypto.resolves(later, irk: Self.peripheralKey))
        #expect(Self.reports(pair.central).contains(later))
        #expect(pair.central.host.controllerInfo?.address != centralFirst)  // scanning did not stop it rotating

        // With the bond's IRK in its resolving list, the central hears the peripheral by its identity...
        let identity = peripheralIdentity.address
        pair.central.host.setResolvingList([
            ResolvableIdentity(address: identity, resolvingKey: peripheralIdentity.resolvingKey)
        ])
        pair.central.events.withLock { $0.removeAll() }
        try await pair.run(until: { Self.reports(pair.central).contains(identity) }, "the identity heard")
        #expect(!Self.reports(pair.central).contains { SMPCrypto.resolves($0, irk: Self.peripheralKey) })

        // ... and connects to it by identity, without a scan of its own, after it rotated once more; the link
        // is the identity's, and the kept key encrypts it.
        pair.central.host.stopScan { _ in }
        try await pair.radio.run(for: .seconds(11))
        #expect(pair.peripheral.host.controllerInfo?.address != later)
        pair.central.host.setConnectTargets([identity], parameters: ConnectionParameters())
        try await pair.run(
            until: { !pair.central.host.links.isEmpty && !pair.peripheral.host.links.isEmpty }, "the reconnection")
        #expect(pair.central.host.links[0].peer == identity)
        pair.central.host.setConnectTargets([], parameters: ConnectionParameters())
        let encrypted = Mutex<Result<Void, HostError>?>(nil)
        let kept = try #require(result.peerLongTermKey)
        pair.central.host.encrypt(on: pair.central.host.links[0].handle, key: kept) { r in
            encrypted.withLock { $0 = r }
        }
        try await pair.run(until: { encrypted.withLock { $0 } != nil }, "the re-encryption")
        #expect(throws: Never.self) { try encrypted.withLock { $0 }?.get() }
    }

    /// A central that disconnects the moment its pairing completes does not cut its own keys off: the pairing
    /// completes once they are delivered, so the peripheral has them (found with `ble pair`, whose lock had no
    /// bond).
    @Test func aCentralThatDisconnectsAtOnceAfterPairingStillGaveItsKeys() async throws {
        let pair = Pair(
            central: HostPairingTests.security(.noInputNoOutput, seed: 1),
            peripheral: HostPairingTests.security(.noInputNoOutput, seed: 2),
            centralPrivacy: HostPrivacyConfiguration(resolvingKey: Self.centralKey))
        let (handle, _) = try await pair.connect()
        let host = pair.central.host
        let done = Mutex(false)
        host.pair(on: handle) { result in
            if case .failure(let error) = result { Issue.record("pairing failed: \(error)") }
            host.disconnect(handle, reason: .remoteUserTerminatedConnection)
            done.withLock { $0 = true }
        }
        try await pair.run(
            until: { done.withLock { $0 } && pair.peripheral.host.links.isEmpty }, "the pairing and the disconnection")
        let heard = pair.peripheral.events.withLock { events in
            events.compactMap { if case .pairingCompleted(_, let r) = $0 { r } else { nil } }.first
        }
        #expect(heard?.peerIdentity?.resolvingKey == Self.centralKey, "the peripheral did not get the central's keys")
    }

    /// Advertising and scanning outlive many rotations: each period the host pauses them for the new address
    /// and they resume; nothing the layer above asked for fails or ends.
    @Test func advertisingAndScanningGoOnAcrossRotations() async throws {
        let pair = Pair(
            central: HostPairingTests.security(.noInputNoOutput, seed: 1),
            peripheral: HostPairingTests.security(.noInputNoOutput, seed: 2),
            centralPrivacy: HostPrivacyConfiguration(resolvingKey: Self.centralKey, rotationPeriod: .seconds(2)),
            peripheralPrivacy: HostPrivacyConfiguration(resolvingKey: Self.peripheralKey, rotationPeriod: .seconds(3)))
        try await pair.start()
        Self.advertise(pair.peripheral)
        pair.central.host.startScan(ScanParameters(active: true)) { result in
            if case .failure(let error) = result { Issue.record("scanning failed: \(error)") }
        }
        var addresses = Set<BluetoothAddress>()
        for _ in 0..<30 {
            try await pair.radio.run(for: .seconds(1))
            if let address = pair.peripheral.host.controllerInfo?.address { addresses.insert(address) }
        }
        // About ten periods: as many addresses, each heard by the scanner.
        #expect(addresses.count >= 8)
        let heard = Set(Self.reports(pair.central))
        #expect(addresses.subtracting(heard).count <= 1)  // the newest may not be heard yet
        #expect(!pair.peripheral.heardAny { if case .advertisingEnded = $0 { true } else { false } })
    }
}
