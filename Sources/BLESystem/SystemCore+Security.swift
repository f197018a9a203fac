import BLECore
import BLEHCI
import BLEHost
import BLESMP
import Foundation
import Synchronization

/// The system's part in pairing and encryption, as the apps' side sees it (`SystemCore.security`): a view of the
/// system machine's `SecurityTable`, whose rules say when a link is encrypted, paired, or given up.
///
/// Links that need security (`secure(_:completion:)`) wait for the link's encryption; every waiter completes
/// once, with success or with why not (the pairing's failure, a key the peer no longer has, the link's end).
public struct SystemSecurity: Sendable {
    let core: SystemCore

    /// What a pairing asks the user, with the link and the peer's identifier; the answer goes to
    /// `answer(_:on:)`. Without a prompter, Just Works is accepted and everything else refused.
    public typealias Prompter = @Sendable (ConnectionHandle, UUID?, PairingPrompt) -> Void
    /// Why a link could not be secured.
    public typealias Failure = SecurityFailure
    /// What a pairing agreed, and the identifier its bond is kept under.
    public typealias Paired = PairingOutcome

    /// Hands the host the bonded peers' IRKs, so it knows each by its identity address whatever private address
    /// it uses (at start, after a bonding pairing, and after a bond is removed).
    public func refreshResolvingList() { core.refreshResolvingList() }

    /// Whether the host pairs at all (`HostConfiguration.security`).
    public var isEnabled: Bool { core.host.configuration.security != nil }

    public func setPrompter(_ prompter: Prompter?) {
        core.step { s in
            s.prompter = prompter
            s.machine.prompterChanged(present: prompter != nil)
            return ((), [])
        }
    }

    /// The user's answer to a prompt.
    public func answer(_ answer: PairingAnswer, on handle: ConnectionHandle) {
        core.host.answerPairing(on: handle, answer)
    }

    /// Whether the link is encrypted.
    public func isEncrypted(_ handle: ConnectionHandle) -> Bool {
        core.state.withLock { $0.machine.security.isEncrypted(handle) }
    }

    /// Whether a pairing or an encryption this system started is under way on the link.
    public func isSecuring(_ handle: ConnectionHandle) -> Bool {
        core.state.withLock { $0.machine.security.isSecuring(handle) }
    }

    /// Makes the link encrypted, as a phone does when a peer's attribute needs it: with the bond's key when
    /// this device is central and bonded, else by pairing (a peripheral asks its central with a Security
    /// Request). `completion` hears once, when the link is encrypted or why it cannot be.
    public func secure(_ handle: ConnectionHandle, completion: @escaping @Sendable (Result<Void, Failure>) -> Void) {
        let bonded = core.hasCentralKey(handle)
        let start = core.step { s -> (SecureStart, [SystemAction]) in
            let (start, actions) = s.machine.secure(handle, bonded: bonded)
            // Known before the wait can be answered: its answer is performed after this step.
            if case .waiting(let id) = start { s.secureWaiters[id] = completion }
            return (start, actions)
        }
        switch start {
        case .done: completion(.success(()))
        case .failed(let failure): completion(.failure(failure))
        case .waiting: break
        }
    }

    /// Pairs on the link now, whether or not it is encrypted (a new pairing replaces the bond), as a user's
    /// "pair" does. A pairing under way answers this one too; an encryption under way finishes first.
    /// `completion` hears once, after the bond is kept: the result, or why not: a `Failure` (the pairing's
    /// failure, the link's end) or a `HostError` (the host refused: the system does not pair, say).
    public func pair(_ handle: ConnectionHandle, completion: @escaping @Sendable (Result<Paired, any Error>) -> Void) {
        let now = core.step { s -> (PairAnswer?, [SystemAction]) in
            let ((id, now), actions) = s.machine.pair(handle)
            if let id { s.pairWaiters[id] = completion }
            return (now, actions)
        }
        switch now {
        case .paired(let outcome)?: completion(.success(outcome))
        case .failed(let failure)?: completion(.failure(failure))
        case .refused(let error)?: completion(.failure(error))
        case nil: break
        }
    }
}

extension SystemCore {
    /// Pairing and encryption: bonds, LTK requests, links secured on demand.
    public var security: SystemSecurity { SystemSecurity(core: self) }

    /// Hands the host the bonded peers' IRKs (`SystemSecurity.refreshResolvingList`).
    func refreshResolvingList() {
        host.setResolvingList(
            store.resolvableBonds().map { ResolvableIdentity(address: $0.address, resolvingKey: $0.resolvingKey) })
    }

    /// Whether the link's peer has a bond with a key this device encrypts with as central.
    func hasCentralKey(_ handle: ConnectionHandle) -> Bool {
        guard let info = state.withLock({ $0.machine.security.links[handle]?.info }) else { return false }
        return bond(of: info.peer)?.centralKey != nil
    }

    func bond(of peer: BluetoothAddress) -> StoredBond? {
        store.existingIdentifier(for: peer).flatMap { store.bond(for: $0) }
    }

    /// Encrypts the link with the key kept for `peer`'s bond; a failure is stepped (`encryptionFailed`).
    func encrypt(_ handle: ConnectionHandle, peer: BluetoothAddress) {
        guard let key = bond(of: peer)?.centralKey else {
            // The bond went between the step and now (the user forgot the device): paired instead.
            return step { ((), $0.machine.encryptionKeyGone(handle)) }
        }
        host.encrypt(on: handle, key: SMPPairing.LongTermKey(key: key.key, ediv: key.ediv, rand: key.rand)) {
            [weak self] result in
            guard case .failure(let error) = result else { return }
            // The link (or the controller) went first: its end, reported next, fails the waits with the
            // controller's reason; refusing the link here would put "unspecified error" in its place.
            let gone: [HostError.Code] = [.disconnected, .transportClosed, .shutDown, .controllerReset]
            guard !gone.contains(error.code) else { return }
            // PIN or Key Missing: the peripheral no longer has the bond (iOS: peerRemovedPairingInformation).
            let status =
                error.code == .hci(.pinOrKeyMissing) ? .pinOrKeyMissing : error.code.hciStatus ?? .unspecifiedError
            self?.step { ((), $0.machine.encryptionFailed(handle, status: status)) }
        }
    }

    /// The key for the controller's LTK request: the legacy bond its EDIV and Rand name, or, with both zero
    /// (Secure Connections), the bond of the link's peer.
    func keyForRequest(_ handle: ConnectionHandle, ediv: UInt16, rand: UInt64) -> StoredLongTermKey? {
        if ediv != 0 || rand != 0 {
            return store.bondAnswering(ediv: ediv, rand: rand)?.peripheralKey
        }
        guard let info = state.withLock({ $0.machine.security.links[handle]?.info }), let bond = bond(of: info.peer),
            bond.secureConnections
        else { return nil }
        return bond.peripheralKey
    }

    /// A bonding pairing's keys, kept under the peer's identifier (its identity address when it gave one); that
    /// identifier, or nil when nothing was kept.
    func keepBond(_ result: SMPPairing.Result, on handle: ConnectionHandle) -> UUID? {
        guard result.bonded, let info = state.withLock({ $0.machine.security.links[handle]?.info }) else { return nil }
        let identity = result.peerIdentity?.address ?? info.peer
        let identifier = store.identifierAfterPairing(peerAddress: info.peer, identityAddress: identity)
        func stored(_ key: SMPPairing.LongTermKey?) -> StoredLongTermKey? {
            key.map { StoredLongTermKey(key: $0.key, ediv: $0.ediv, rand: $0.rand) }
        }
        store.setBond(
            StoredBond(
                identifier: identifier, identityAddress: identity, resolvingKey: result.peerIdentity?.resolvingKey,
                // The key this device encrypts with as central, and the one it answers with as peripheral (the
                // same derived key in Secure Connections; in legacy pairing, each side's distributed LTK).
                centralKey: stored(result.peerLongTermKey), peripheralKey: stored(result.localLongTermKey),
                keySize: result.keySize, authenticated: result.authenticated,
                secureConnections: result.secureConnections, created: store.currentTime))
        if result.peerIdentity?.resolvingKey != nil { refreshResolvingList() }
        return identifier
    }
}
