import BLECore
import BLEHCI
import BLEHost
import BLESMP
import Foundation
import Synchronization

/// The system's part in pairing and encryption on one controller, as a phone's Bluetooth daemon does it: bonds
/// kept in the store after a bonding pairing, the controller's LTK requests answered from them, a bonded
/// peripheral's link encrypted at once when this device connects to it, a peripheral's Security Request
/// answered (encrypt with the bond, or pair), and the pairing's questions passed to the user (`prompter`).
///
/// Links that need security (`secure(_:completion:)`) wait for the link's encryption; every waiter completes
/// once, with success or with why not (the pairing's failure, a key the peer no longer has, the link's end).
public final class SystemSecurity: Sendable {
    let host: HostDriver
    let store: SystemStore

    /// What a pairing asks the user, with the link and the peer's identifier; the answer goes to
    /// `answer(_:on:)`. Without a prompter, Just Works is accepted and everything else refused.
    public typealias Prompter = @Sendable (ConnectionHandle, UUID?, PairingPrompt) -> Void

    /// Why a link could not be secured.
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// Pairing failed (the machine's reason).
        case pairing(SMPPairing.Failure)
        /// The peer answered the kept key with PIN or Key Missing: it removed the pairing information.
        case peerRemovedPairingInformation
        /// The controller refused or failed the encryption with this status.
        case encryption(HCIStatus)
        /// The link went down first, or the system does not pair.
        case unavailable(String)

        public var description: String {
            switch self {
            case .pairing(let failure): "\(failure)"
            case .peerRemovedPairingInformation: "the peer removed its pairing information (it no longer has the key)"
            case .encryption(let status): "encrypting the link failed: \(status)"
            case .unavailable(let why): why
            }
        }
    }

    private struct LinkState {
        var info: LinkInfo
        var encrypted = false
        /// Waiting for the link to be encrypted.
        var waiters: [@Sendable (Result<Void, Failure>) -> Void] = []
        /// A pairing or an encryption this system started is under way.
        var securing = false
        /// This system asked for a pairing on the link: its waiters hear when the keys are distributed, not when
        /// the link is first encrypted (an app that disconnects right after its retried read must not cut the
        /// distribution off, or the peer keeps no bond).
        var pairing = false
        /// Waiting for the end of a pairing asked for with `pair(_:completion:)`.
        var pairWaiters: [@Sendable (Result<Paired, any Error>) -> Void] = []
    }

    private struct State {
        var links: [ConnectionHandle: LinkState] = [:]
        var prompter: Prompter?
        var keyMissing: (@Sendable (ConnectionHandle) -> Void)?
    }

    private let state = Mutex(State())

    init(host: HostDriver, store: SystemStore) {
        self.host = host
        self.store = store
    }

    /// Hands the host the bonded peers' IRKs, so it knows each by its identity address whatever private address
    /// it uses (at start, after a bonding pairing, and after a bond is removed).
    public func refreshResolvingList() {
        host.setResolvingList(
            store.resolvableBonds().map { ResolvableIdentity(address: $0.address, resolvingKey: $0.resolvingKey) })
    }

    /// Whether the host pairs at all (`HostConfiguration.security`).
    public var isEnabled: Bool { host.configuration.security != nil }

    public func setPrompter(_ prompter: Prompter?) {
        state.withLock { $0.prompter = prompter }
    }

    /// The user's answer to a prompt.
    public func answer(_ answer: PairingAnswer, on handle: ConnectionHandle) {
        host.answerPairing(on: handle, answer)
    }

    /// Whether the link is encrypted.
    public func isEncrypted(_ handle: ConnectionHandle) -> Bool {
        state.withLock { $0.links[handle]?.encrypted ?? false }
    }

    /// Whether a pairing or an encryption is under way on the link (right after `.connected`: the link's peer is
    /// bonded and this device, central, encrypts with the kept key).
    public func isSecuring(_ handle: ConnectionHandle) -> Bool {
        state.withLock { $0.links[handle]?.securing ?? false }
    }

    /// `body` hears of a link whose encryption with a bond's key failed with PIN or Key Missing (the peer no
    /// longer has the key), before the link's waiters do: the system ends such a link.
    func onPeerRemovedPairingInformation(_ body: @escaping @Sendable (ConnectionHandle) -> Void) {
        state.withLock { $0.keyMissing = body }
    }

    /// Makes the link encrypted, as a phone does when a peer's attribute needs it: with the bond's key when
    /// this device is central and bonded, else by pairing (a peripheral asks its central with a Security
    /// Request). `completion` hears once, when the link is encrypted or why it cannot be.
    public func secure(_ handle: ConnectionHandle, completion: @escaping @Sendable (Result<Void, Failure>) -> Void) {
        guard isEnabled else { return completion(.failure(.unavailable("this system is not configured to pair"))) }
        enum Start {
            case noLink, encrypted, waiting
            case first(LinkInfo)
        }
        let start = state.withLock { s -> Start in
            guard var link = s.links[handle] else { return .noLink }
            if link.encrypted { return .encrypted }
            link.waiters.append(completion)
            let first = !link.securing
            link.securing = true
            s.links[handle] = link
            return first ? .first(link.info) : .waiting
        }
        let info: LinkInfo
        switch start {
        case .noLink: return completion(.failure(.unavailable("the link is not up")))
        case .encrypted: return completion(.success(()))
        case .waiting: return
        case .first(let link): info = link
        }
        if info.role == .central, let key = bond(of: info)?.centralKey {
            encrypt(handle, with: key)
        } else {
            pair(handle)
        }
    }

    /// What a pairing agreed (`pair(_:completion:)`), and the identifier its bond is kept under (nil when it did
    /// not bond: the peer's identifier may change with a bond, when the peer tells its identity address).
    public struct Paired: Sendable, Hashable {
        public var result: SMPPairing.Result
        public var bondIdentifier: UUID?
    }

    /// Pairs on the link now, whether or not it is encrypted (a new pairing replaces the bond), as a user's
    /// "pair" does. A pairing or an encryption under way finishes first; a pairing under way answers this one too.
    /// `completion` hears once, after the bond is kept: the result, or why not: a `Failure` (the pairing's
    /// failure, the link's end) or a `HostError` (the host refused: the system does not pair, say).
    public func pair(_ handle: ConnectionHandle, completion: @escaping @Sendable (Result<Paired, any Error>) -> Void) {
        guard isEnabled else {
            return completion(.failure(HostError(.unsupported, "this system is not configured to pair")))
        }
        let busy = state.withLock { s -> Bool? in
            guard s.links[handle] != nil else { return nil }
            s.links[handle]?.pairWaiters.append(completion)
            defer { s.links[handle]?.securing = true }
            return s.links[handle]?.securing
        }
        switch busy {
        case nil: completion(.failure(Failure.unavailable("the link is not up")))
        case true?:
            // Once what is under way ends: a pairing has answered the waiters by then; an encryption has not.
            let waiter: @Sendable (Result<Void, Failure>) -> Void = { [weak self] _ in
                guard let self, state.withLock({ !($0.links[handle]?.pairWaiters.isEmpty ?? true) }) else { return }
                state.withLock { $0.links[handle]?.securing = true }
                pair(handle)
            }
            state.withLock { $0.links[handle]?.waiters.append(waiter) }
        case false?: pair(handle)
        }
    }

    // MARK: Events

    /// The host's events this part takes (the system passes every event on to the managers as well).
    func handle(_ event: HostEvent) {
        switch event {
        case .connected(let info):
            state.withLock { $0.links[info.handle] = LinkState(info: info) }
            guard isEnabled, let bond = bond(of: info) else { return }
            host.setPeerBonded(on: info.handle, true)
            // A phone encrypts a bonded peripheral's link at once, with the key it kept.
            if info.role == .central, let key = bond.centralKey {
                state.withLock { $0.links[info.handle]?.securing = true }
                encrypt(info.handle, with: key)
            }
        case .disconnected(let handle, let reason):
            let link = state.withLock { $0.links.removeValue(forKey: handle) }
            for waiter in link?.waiters ?? [] { waiter(.failure(.unavailable("the link went down: \(reason)"))) }
            for waiter in link?.pairWaiters ?? [] {
                waiter(.failure(Failure.unavailable("the link went down: \(reason)")))
            }
        case .transportClosed(let reason), .controllerResetting(let reason as String?):
            let links = state.withLock { s -> [LinkState] in
                defer { s.links = [:] }
                return Array(s.links.values)
            }
            let why = reason ?? "the controller's transport closed"
            for waiter in links.flatMap(\.waiters) { waiter(.failure(.unavailable(why))) }
            for waiter in links.flatMap(\.pairWaiters) { waiter(.failure(Failure.unavailable(why))) }
        case .encryptionChanged(let handle, let encrypted, let status):
            if status == .success {
                let waiters = state.withLock { s -> [@Sendable (Result<Void, Failure>) -> Void] in
                    s.links[handle]?.encrypted = encrypted
                    guard encrypted, s.links[handle]?.pairing != true else { return [] }
                    s.links[handle]?.securing = false
                    defer { s.links[handle]?.waiters = [] }
                    return s.links[handle]?.waiters ?? []
                }
                for waiter in waiters { waiter(.success(())) }
            }
        case .pairingCompleted(let handle, let result):
            let identifier = keep(result, on: handle)
            let done: @Sendable () -> Void = { [weak self] in
                guard let self else { return }
                state.withLock { $0.links[handle]?.pairing = false }
                finish(handle, .success(()))
                for waiter in takePairWaiters(handle) {
                    waiter(.success(Paired(result: result, bondIdentifier: identifier)))
                }
            }
            // The central distributes its keys last, and SMP acknowledges none: an app that disconnects as soon as
            // it hears "paired" can cut them off before the peer has them (Bumble's link delivers the
            // disconnection first now and then, and the peer keeps no bond). One ATT exchange after them (a read
            // of the first handle, whatever it answers) comes back only once the peer has read what came before it
            // on the link; then the waiters hear.
            if state.withLock({ $0.links[handle]?.info.role }) == .central {
                host.read(on: handle, attribute: .min) { _ in done() }
            } else {
                done()
            }
        case .pairingFailed(let handle, let failure):
            state.withLock { $0.links[handle]?.pairing = false }
            finish(handle, .failure(.pairing(failure)))
            for waiter in takePairWaiters(handle) { waiter(.failure(Failure.pairing(failure))) }
        case .pairingPrompt(let handle, let prompt):
            let (prompter, peer) = state.withLock { s in
                (s.prompter, s.links[handle].map { store.existingIdentifier(for: $0.info.peer) } ?? nil)
            }
            if let prompter {
                prompter(handle, peer, prompt)
            } else {
                // No one to ask: Just Works is accepted (as a phone's dialog would be), anything that needs the
                // user is refused.
                switch prompt {
                case .confirm(numericValue: nil): host.answerPairing(on: handle, .accept(true))
                case .confirm: host.answerPairing(on: handle, .accept(false))
                case .enterPasskey: host.answerPairing(on: handle, .passkey(nil))
                case .displayPasskey: break
                }
            }
        case .longTermKeyRequested(let handle, let ediv, let rand):
            host.replyLongTermKey(on: handle, key: keyForRequest(handle, ediv: ediv, rand: rand)?.key)
        case .securityRequested(let handle, _):
            // Central: the peripheral wants security; encrypt with the bond, or pair.
            secure(handle) { _ in }
        default:
            break
        }
    }

    // MARK: Helpers

    private func bond(of info: LinkInfo) -> StoredBond? {
        store.existingIdentifier(for: info.peer).flatMap { store.bond(for: $0) }
    }

    private func encrypt(_ handle: ConnectionHandle, with key: StoredLongTermKey) {
        host.encrypt(on: handle, key: SMPPairing.LongTermKey(key: key.key, ediv: key.ediv, rand: key.rand)) {
            [weak self] result in
            guard case .failure(let error) = result else { return }
            // PIN or Key Missing: the peripheral no longer has the bond (iOS: peerRemovedPairingInformation).
            guard let self else { return }
            guard error.code == .hci(.pinOrKeyMissing) else {
                return finish(handle, .failure(.encryption(error.code.hciStatus ?? .unspecifiedError)))
            }
            // The bond is kept, as iOS keeps it until the user forgets the device: the next link fails the same way.
            state.withLock { $0.keyMissing }?(handle)
            finish(handle, .failure(.peerRemovedPairingInformation))
        }
    }

    private func pair(_ handle: ConnectionHandle) {
        state.withLock { $0.links[handle]?.pairing = true }
        host.pair(on: handle) { [weak self] result in
            guard let self, case .failure(let error) = result, error.code != .pairingFailed else { return }
            // A failure the pairing machine did not report (the link's end, a host refusal).
            state.withLock { $0.links[handle]?.pairing = false }
            finish(handle, .failure(.unavailable(error.message)))
            // A pairing already under way (the peer's, say) answers `pair`'s waiters when it ends, and a link
            // gone does when its end is reported: the host refuses both as not fitting the link's state.
            guard error.code != .invalidState else { return }
            for waiter in takePairWaiters(handle) { waiter(.failure(error)) }
        }
    }

    private func takePairWaiters(_ handle: ConnectionHandle) -> [@Sendable (Result<Paired, any Error>) -> Void] {
        state.withLock { s in
            defer { s.links[handle]?.pairWaiters = [] }
            return s.links[handle]?.pairWaiters ?? []
        }
    }

    private func finish(_ handle: ConnectionHandle, _ result: Result<Void, Failure>) {
        let waiters = state.withLock { s -> [@Sendable (Result<Void, Failure>) -> Void] in
            s.links[handle]?.securing = false
            defer { s.links[handle]?.waiters = [] }
            return s.links[handle]?.waiters ?? []
        }
        for waiter in waiters { waiter(result) }
    }

    /// The key for the controller's LTK request: the legacy bond its EDIV and Rand name, or, with both zero
    /// (Secure Connections), the bond of the link's peer.
    private func keyForRequest(_ handle: ConnectionHandle, ediv: UInt16, rand: UInt64) -> StoredLongTermKey? {
        if ediv != 0 || rand != 0 {
            return store.bondAnswering(ediv: ediv, rand: rand)?.peripheralKey
        }
        guard let info = state.withLock({ $0.links[handle]?.info }), let bond = bond(of: info),
            bond.secureConnections
        else { return nil }
        return bond.peripheralKey
    }

    /// A bonding pairing's keys, kept under the peer's identifier (its identity address when it gave one); that
    /// identifier, or nil when nothing was kept.
    @discardableResult
    private func keep(_ result: SMPPairing.Result, on handle: ConnectionHandle) -> UUID? {
        guard result.bonded, let info = state.withLock({ $0.links[handle]?.info }) else { return nil }
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
