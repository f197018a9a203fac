import BLECore
import BLEHCI
import BLESMP

/// This host's own private addresses (`HostConfiguration.privacy`).
///
/// The host advertises, scans and initiates from a resolvable private address (Core Spec 5.4, Vol 6, Part B,
/// 1.3.2.2) and generates the next one when the period is over. LE Set Random Address is refused while legacy
/// advertising, scanning or initiating is enabled (Vol 4, Part E, 7.8.4), so the host pauses all three, sets
/// the new address once the controller is idle, and resumes them: a few commands' worth of silence per period.
struct AddressPrivacy: Sendable {
    /// The identity address behind the private ones (what a bonded peer knows this host by).
    var identity: BluetoothAddress
    var configuration: HostPrivacyConfiguration
    /// Addresses generated so far (the first at start-up).
    var generated: UInt64 = 1
    /// The timer that ends the current address's period.
    var timer: HostTimerID?
    /// The period is over: the next address waits for advertising, scanning and initiating to stop.
    var due = false
    /// LE Set Random Address is in flight with this address.
    var setting: BluetoothAddress?

    /// The period, bounded below so that a nonsensical setting cannot make the host do nothing else.
    var period: Duration { max(configuration.rotationPeriod, .seconds(1)) }
}

/// The peers whose resolvable private addresses this host resolves (our controller and Bumble's keep no
/// resolving list, so the host does what a controller with LL privacy would: Vol 6, Part B, 6.2).
///
/// Advertising reports and links from an address that resolves carry the peer's identity address, so the
/// layers above know a bonded device by one address whatever it uses on the air; a connection asked for by
/// identity is initiated toward the private address the peer was last heard from, and while one is asked
/// for, the host scans on its own account to hear where the peer advertises now.
struct PeerResolution: Sendable {
    struct Entry: Sendable, Hashable {
        var identity: BluetoothAddress
        var key: [UInt8]
    }

    var entries: [Entry] = []
    /// Private addresses already resolved (to an identity) or found to resolve to none; cleared when it grows
    /// past `cacheLimit` or the list changes.
    var resolved: [BluetoothAddress: BluetoothAddress] = [:]
    var unresolved: Set<BluetoothAddress> = []
    /// Where each listed peer was last heard from.
    var lastHeard: [BluetoothAddress: BluetoothAddress] = [:]
    /// The connect targets of the layer above, as it named them.
    var requested: [BluetoothAddress] = []

    static let cacheLimit = 1024
}

extension HostMachine {
    // MARK: Own addresses

    /// The `count`-th resolvable private address from `resolvingKey`: its random part is drawn from the
    /// security seed (a real host's secure octets) or the host's seed, and the count.
    static func privateAddress(
        resolvingKey: [UInt8], seed: UInt64, securitySeed: [UInt8]? = nil, count: UInt64
    ) -> BluetoothAddress {
        let material = (securitySeed ?? littleEndian(seed)) + Array("private address".utf8) + littleEndian(count)
        var random = SMPRandom(seed: material)
        while true {
            // All zeros or all ones in the random part (1 in 2^21) is drawn again.
            if let address = SMPCrypto.resolvablePrivateAddress(irk: resolvingKey, randomBits: random.next(3)) {
                return address
            }
        }
    }

    /// A count's eight octets, least significant first (what seeds the random sources with it).
    static func littleEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    /// Start-up finished: the first private address is in use; its period starts.
    mutating func startAddressPrivacy() {
        guard let privacy = configuration.privacy, let identity = info?.identityAddress else { return }
        var state = AddressPrivacy(identity: identity, configuration: privacy)
        state.timer = startTimer(.addressRotation, after: state.period)
        addressPrivacy = state
    }

    /// The identity this host distributes when it bonds: the configured one, else its private addresses'.
    var distributedIdentity: SMPPairing.Identity? {
        if let identity = configuration.security?.identity { return identity }
        return addressPrivacy.map {
            SMPPairing.Identity(resolvingKey: $0.configuration.resolvingKey, address: $0.identity)
        }
    }

    /// The current address has had its period: advertising, scanning and initiating pause for the next.
    mutating func addressRotationDue(timer: HostTimerID) {
        guard addressPrivacy?.timer == timer else { return }
        addressPrivacy?.timer = nil
        addressPrivacy?.due = true
        runAdvertising(advertising.pause())
        runScan(scan.pause())
        runConnect(connecting.pause())
        rotateAddressIfQuiet()
    }

    /// Sets the next private address once the controller neither advertises, scans nor initiates.
    mutating func rotateAddressIfQuiet() {
        guard var privacy = addressPrivacy, privacy.due, privacy.setting == nil, advertising.isQuiet, scan.isQuiet,
            connecting.isQuiet
        else { return }
        let address = Self.privateAddress(
            resolvingKey: privacy.configuration.resolvingKey, seed: configuration.randomSeed,
            securitySeed: configuration.security?.seed, count: privacy.generated)
        privacy.generated += 1
        privacy.setting = address
        addressPrivacy = privacy
        enqueue(HCILESetRandomAddress(randomAddress: address).packet, for: .randomAddress)
    }

    /// The controller answered LE Set Random Address: the new address is in use (or, refused, the old one
    /// stays for another period), and advertising, scanning and initiating go on.
    mutating func randomAddressAnswered(_ result: Result<Void, HostError>) {
        guard var privacy = addressPrivacy, let address = privacy.setting else { return }
        privacy.setting = nil
        privacy.due = false
        switch result {
        case .success:
            info?.address = address
        case .failure(let error):
            log(
                .warning,
                "the controller refused the next private address (\(error.message)); the current one is used for another period"
            )
        }
        privacy.timer = startTimer(.addressRotation, after: privacy.period)
        addressPrivacy = privacy
        runAdvertising(advertising.resume())
        runScan(scan.resume())
        runConnect(connecting.resume())
    }

    // MARK: Peers' addresses

    /// Replaces the resolving list.
    mutating func setResolvingList(_ identities: [ResolvableIdentity]) {
        var seen = Set<BluetoothAddress>()
        resolution.entries = identities.compactMap { identity in
            // An all-zero IRK means "no IRK" (Vol 3, Part H, 3.6.4): nothing resolves with it.
            guard identity.resolvingKey.count == 16, identity.resolvingKey.contains(where: { $0 != 0 }) else {
                return nil
            }
            let address = identity.address.identityForm
            guard seen.insert(address).inserted else { return nil }
            return PeerResolution.Entry(identity: address, key: identity.resolvingKey)
        }
        resolution.resolved = [:]
        resolution.unresolved = []
        resolution.lastHeard = resolution.lastHeard.filter { seen.contains($0.key) }
        updateConnectTargets()
    }

    /// The identity address behind `address`, or `address` itself when it resolves to no listed peer.
    mutating func identity(of address: BluetoothAddress) -> BluetoothAddress {
        guard address.randomKind == .resolvablePrivate, !resolution.entries.isEmpty else { return address }
        if let known = resolution.resolved[address] { return known }
        if resolution.unresolved.contains(address) { return address }
        if resolution.resolved.count + resolution.unresolved.count >= PeerResolution.cacheLimit {
            resolution.resolved = [:]
            resolution.unresolved = []
        }
        for entry in resolution.entries where SMPCrypto.resolves(address, irk: entry.key) {
            resolution.resolved[address] = entry.identity
            return entry.identity
        }
        resolution.unresolved.insert(address)
        return address
    }

    /// A peer was heard from `address` (advertising or connecting): returns its identity address, and a
    /// connection asked for by that identity now goes to `address`.
    mutating func heard(from address: BluetoothAddress) -> BluetoothAddress {
        let identity = identity(of: address)
        guard identity != address, resolution.lastHeard[identity] != address else { return identity }
        resolution.lastHeard[identity] = address
        if resolution.requested.contains(identity) { updateConnectTargets() }
        return identity
    }

    /// The layer above's connect targets.
    mutating func setConnectTargets(_ peers: [BluetoothAddress]) {
        resolution.requested = peers
        updateConnectTargets()
    }

    /// A target's attempt ended (a link, or a failure): it is no longer asked for until the layer above asks
    /// again. Returns the address the layer above named it by.
    mutating func connectTargetEnded(onAir address: BluetoothAddress) -> BluetoothAddress {
        let named =
            resolution.requested.first { (resolution.lastHeard[$0] ?? $0) == address } ?? identity(of: address)
        resolution.requested.removeAll { $0 == named }
        return named
    }

    /// The connect machine initiates toward where each target was last heard; while a target is a listed peer,
    /// the host scans to hear where it advertises now.
    private mutating func updateConnectTargets() {
        runConnect(connecting.setTargets(resolution.requested.map { resolution.lastHeard[$0] ?? $0 }))
        let listed = Set(resolution.entries.map(\.identity))
        let listening = resolution.requested.contains { listed.contains($0) }
        runScan(scan.setBackground(listening ? Self.listeningScan : nil))
    }

    /// The host's own scan for resolvable peers: passive (nothing sent), every report.
    static let listeningScan = ScanParameters(active: false, interval: 0x0060, window: 0x0030, filterDuplicates: false)
}

extension BluetoothAddress {
    /// The address as an identity: public or random (static), whatever type a controller with LL privacy would
    /// have reported it with (0x02 and 0x03).
    var identityForm: BluetoothAddress {
        BluetoothAddress(bytes: bytes, type: type.isRandom ? .randomDevice : .publicDevice)
    }
}
