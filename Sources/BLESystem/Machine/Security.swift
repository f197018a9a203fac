import BLECore
import BLEHCI
import BLEHost
import BLESMP
import Foundation

/// Why a link could not be secured.
public enum SecurityFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// Pairing failed (the pairing machine's reason).
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

/// What a pairing agreed, and the identifier its bond is kept under (nil when it did not bond: the peer's
/// identifier may change with a bond, when the peer tells its identity address).
public struct PairingOutcome: Sendable, Hashable {
    public var result: SMPPairing.Result
    public var bondIdentifier: UUID?

    public init(result: SMPPairing.Result, bondIdentifier: UUID?) {
        self.result = result
        self.bondIdentifier = bondIdentifier
    }
}

/// Which wait for a link's encryption (`secure`) an answer is for.
package struct SecureID: RawRepresentable, Hashable, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// Which wait for a pairing (`pair`) an answer is for.
package struct PairID: RawRepresentable, Hashable, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// How a pairing asked for ended, for whoever asked.
package enum PairAnswer: Sendable, Hashable {
    case paired(PairingOutcome)
    case failed(SecurityFailure)
    /// The host refused to start it (the system does not pair, say).
    case refused(HostError)
}

/// How the machine takes a wish for a link's encryption.
package enum SecureStart: Sendable, Hashable {
    /// Encrypted already.
    case done
    /// It cannot be: why.
    case failed(SecurityFailure)
    /// Answered with `.secureAnswered` when the link is encrypted, or why not.
    case waiting(SecureID)
}

/// The system's part in pairing and encryption on one controller, as a phone's Bluetooth daemon does it, as a
/// value of `SystemMachine`.
///
/// ### Function
/// A bonded peer's link is encrypted at once with the kept key when this device is its central (`.encrypt`;
/// the driver tells the host the peer is bonded, at once, as the link comes up). Links that need security (`secure`) wait for
/// the link's encryption: with the bond's key when this device is central and bonded, else by pairing (a
/// peripheral asks its central with a Security Request); every wait completes once, with success or why not (the
/// pairing's failure, a key the peer no longer has, the link's end). A user's "pair" (`pair`) pairs now, whether
/// or not the link is encrypted: a pairing under way answers it too, an encryption under way finishes first.
/// A peripheral's Security Request is answered by securing the link. The pairing's questions go to the user
/// (`.prompt`); with nobody to ask, Just Works is accepted (as a phone's dialog would be) and anything that
/// needs the user refused. When this device, central, distributes its keys last, the pairing is reported only
/// once one ATT exchange after them came back (`.confirmKeyDelivery`): SMP acknowledges none, and an app that
/// disconnects as soon as it hears "paired" could cut them off before the peer has them.
///
/// ### Implementation
/// Per link: its info, whether it is encrypted, whether this system is securing it (an encryption or a pairing
/// it started) and pairing it, the waits by id, and the pairing's result while its keys' delivery is confirmed.
/// The store (bonds, keys, identifiers) is the driver's: it says whether a bond with a central key exists when
/// it steps, and performs `.encrypt` with the kept key. Each link whose securing ended is noted (`ended`) for
/// `SystemMachine`, which attaches or refuses a link it holds for its encryption.
package struct SecurityTable: Sendable, Hashable {
    package struct Link: Sendable, Hashable {
        package var info: LinkInfo
        package var encrypted = false
        /// A pairing or an encryption this system started is under way.
        package var securing = false
        /// This system asked for a pairing on the link: its waits end when the keys are distributed, not when the
        /// link is first encrypted.
        var pairing = false
        var waiters: [SecureID] = []
        var pairWaiters: [PairID] = []
        /// A pair asked while an encryption was under way: it starts once the encryption ends.
        var pairAfter = false
        /// A central's pairing, reported once its keys' delivery is confirmed.
        var completed: PairingOutcome?
        /// An encryption this system asked for has not ended: no second one is asked for (a peer's pairing that
        /// ends answers the waits before it does).
        var encrypting = false
    }

    /// Whether the host pairs at all (`HostConfiguration.security`).
    package let enabled: Bool
    /// Whether someone answers the pairing's questions (else the defaults do).
    package private(set) var hasPrompter = false
    package private(set) var links: [ConnectionHandle: Link] = [:]
    /// A link whose securing ended, with the failure (nil: encrypted).
    struct Ended: Sendable, Hashable {
        var handle: ConnectionHandle
        var failure: SecurityFailure?
    }

    /// Links whose securing ended since the machine last looked.
    private(set) var ended: [Ended] = []
    private var nextID: UInt64 = 0

    package init(enabled: Bool) {
        self.enabled = enabled
    }

    /// Whether a pairing or an encryption this system started is under way on the link.
    package func isSecuring(_ handle: ConnectionHandle) -> Bool { links[handle]?.securing ?? false }

    /// Whether the link is encrypted.
    package func isEncrypted(_ handle: ConnectionHandle) -> Bool { links[handle]?.encrypted ?? false }

    /// The links whose securing ended since the last call, in order.
    mutating func takeEnded() -> [Ended] {
        defer { ended = [] }
        return ended
    }

    // MARK: Requests

    mutating func setPrompter(_ present: Bool) { hasPrompter = present }

    /// Makes the link encrypted (`bonded`: the peer has a bond with a key this device encrypts with as central);
    /// `waiting` false for the system's own wish (a Security Request), which nobody waits on.
    mutating func secure(
        _ handle: ConnectionHandle, bonded: Bool, waiting: Bool = true, _ actions: inout [SystemAction]
    ) -> SecureStart {
        guard enabled else { return .failed(.unavailable("this system is not configured to pair")) }
        guard var link = links[handle] else { return .failed(.unavailable("the link is not up")) }
        if link.encrypted { return .done }
        let id = draw(SecureID.init)
        if waiting { link.waiters.append(id) }
        let first = !link.securing && !link.encrypting
        link.securing = true
        links[handle] = link
        if first {
            if link.info.role == .central, bonded {
                links[handle]!.encrypting = true
                actions.append(.encrypt(handle, peer: link.info.peer))
            } else {
                startPairing(handle, &actions)
            }
        }
        return .waiting(id)
    }

    /// Pairs on the link now: answered with `.pairAnswered`, or at once (nil id, with the answer) when it cannot.
    mutating func pair(_ handle: ConnectionHandle, _ actions: inout [SystemAction]) -> (PairID?, PairAnswer?) {
        guard enabled else { return (nil, .refused(HostError(.unsupported, "this system is not configured to pair"))) }
        guard var link = links[handle] else { return (nil, .failed(.unavailable("the link is not up"))) }
        let id = draw(PairID.init)
        link.pairWaiters.append(id)
        if link.pairing || link.completed != nil {
            // A pairing under way (or whose keys are being delivered) answers this one too.
            links[handle] = link
        } else if link.securing {
            // An encryption under way finishes first.
            link.pairAfter = true
            links[handle] = link
        } else {
            link.securing = true
            links[handle] = link
            startPairing(handle, &actions)
        }
        return (id, nil)
    }

    // MARK: The host's events and answers

    /// A link came up; `bonded`: its peer has a bond (and `centralKey`: with a key this device encrypts with as
    /// central). A phone encrypts a bonded peripheral's link at once.
    mutating func connected(_ info: LinkInfo, bonded: Bool, centralKey: Bool, _ actions: inout [SystemAction]) {
        // A link on this handle whose end was never told: its waits fail with it.
        if let old = links[info.handle] { fail(old, .unavailable("the link went down"), &actions) }
        links[info.handle] = Link(info: info)
        guard enabled, bonded else { return }
        if info.role == .central, centralKey {
            links[info.handle]!.securing = true
            links[info.handle]!.encrypting = true
            actions.append(.encrypt(info.handle, peer: info.peer))
        }
    }

    /// The link went down: every wait on it fails.
    mutating func disconnected(_ handle: ConnectionHandle, reason: HCIStatus, _ actions: inout [SystemAction]) {
        guard let link = links.removeValue(forKey: handle) else { return }
        fail(link, .unavailable("the link went down: \(reason)"), &actions)
    }

    /// The controller went away, or is being reset: every wait fails.
    mutating func reset(_ why: String, _ actions: inout [SystemAction]) {
        let all = links.keys.sorted { $0.rawValue < $1.rawValue }.compactMap { links[$0] }
        links = [:]
        for link in all { fail(link, .unavailable(why), &actions) }
    }

    /// The link's encryption changed.
    mutating func encryptionChanged(_ handle: ConnectionHandle, encrypted: Bool, _ actions: inout [SystemAction]) {
        guard var link = links[handle] else { return }
        link.encrypted = encrypted
        link.encrypting = false
        links[handle] = link
        // A pairing this system asked for ends when the keys are distributed, not at the first encryption.
        guard encrypted, !link.pairing else { return }
        finish(handle, nil, &actions)
    }

    /// The encryption with a bond's key failed (`status`); PIN or Key Missing: the peer no longer has the key.
    mutating func encryptionFailed(_ handle: ConnectionHandle, status: HCIStatus, _ actions: inout [SystemAction]) {
        // The bond is kept, as iOS keeps it until the user forgets the device: the next link fails the same way.
        links[handle]?.encrypting = false
        finish(handle, status == .pinOrKeyMissing ? .peerRemovedPairingInformation : .encryption(status), &actions)
    }

    /// A pairing completed (its bond, if any, kept under `identifier` by the driver). A central reports it once
    /// its keys' delivery is confirmed.
    mutating func pairingCompleted(
        _ handle: ConnectionHandle, _ outcome: PairingOutcome, _ actions: inout [SystemAction]
    ) {
        guard var link = links[handle] else { return }
        if link.info.role == .central {
            link.completed = outcome
            links[handle] = link
            actions.append(.confirmKeyDelivery(handle))
        } else {
            paired(handle, outcome, &actions)
        }
    }

    /// The ATT exchange after a central's keys came back: the peer has them.
    mutating func keysDelivered(_ handle: ConnectionHandle, _ actions: inout [SystemAction]) {
        guard let outcome = links[handle]?.completed else { return }
        links[handle]?.completed = nil
        paired(handle, outcome, &actions)
    }

    /// A pairing failed.
    mutating func pairingFailed(
        _ handle: ConnectionHandle, _ failure: SMPPairing.Failure, _ actions: inout [SystemAction]
    ) {
        guard links[handle] != nil else { return }
        links[handle]!.pairing = false
        // Taken first, so that `finish` does not start another pairing for them; answered after the other waits.
        let pairWaiters = takePairWaiters(handle)
        finish(handle, .pairing(failure), &actions)
        for id in pairWaiters { actions.append(.pairAnswered(id, .failed(.pairing(failure)))) }
    }

    /// The key the driver was to encrypt with is gone (the user forgot the device as the link came up): the link
    /// is paired instead, as it would have been without the bond.
    mutating func keyGone(_ handle: ConnectionHandle, _ actions: inout [SystemAction]) {
        guard links[handle]?.securing == true, links[handle]?.pairing == false else { return }
        links[handle]?.encrypting = false
        startPairing(handle, &actions)
    }

    /// The host refused or ended the pairing this system asked for without the pairing machine reporting it
    /// (the link's end, a host refusal). A pairing already under way (the peer's) answers the waits when it ends,
    /// and a link gone does when its end is reported: the host refuses both as not fitting the link's state.
    mutating func pairingRefused(_ handle: ConnectionHandle, _ error: HostError, _ actions: inout [SystemAction]) {
        guard links[handle] != nil else { return }
        links[handle]!.pairing = false
        if error.code != .invalidState {
            for id in takePairWaiters(handle) { actions.append(.pairAnswered(id, .refused(error))) }
        }
        finish(handle, .unavailable(error.message), &actions)
    }

    /// The pairing asks the user: whoever answers for this system, or the defaults.
    mutating func prompt(_ handle: ConnectionHandle, _ prompt: PairingPrompt, _ actions: inout [SystemAction]) {
        if hasPrompter { return actions.append(.prompt(handle, peer: links[handle]?.info.peer, prompt)) }
        if let answer = Self.defaultAnswer(to: prompt) { actions.append(.answerPairing(handle, answer)) }
    }

    /// The answer when nobody answers for this system: Just Works is accepted (as a phone's dialog would be),
    /// anything that needs the user refused; a passkey to show needs no answer.
    package static func defaultAnswer(to prompt: PairingPrompt) -> PairingAnswer? {
        switch prompt {
        case .confirm(numericValue: nil): .accept(true)
        case .confirm: .accept(false)
        case .enterPasskey: .passkey(nil)
        case .displayPasskey: nil
        }
    }

    // MARK: Private

    private mutating func draw<ID>(_ make: (UInt64) -> ID) -> ID {
        defer { nextID += 1 }
        return make(nextID)
    }

    private mutating func startPairing(_ handle: ConnectionHandle, _ actions: inout [SystemAction]) {
        links[handle]?.pairing = true
        actions.append(.pair(handle))
    }

    private mutating func paired(_ handle: ConnectionHandle, _ outcome: PairingOutcome, _ actions: inout [SystemAction])
    {
        links[handle]?.pairing = false
        // Taken first, so that `finish` does not start another pairing for them; answered after the other waits.
        let pairWaiters = takePairWaiters(handle)
        finish(handle, nil, &actions)
        for id in pairWaiters { actions.append(.pairAnswered(id, .paired(outcome))) }
    }

    private mutating func takePairWaiters(_ handle: ConnectionHandle) -> [PairID] {
        defer { links[handle]?.pairWaiters = [] }
        return links[handle]?.pairWaiters ?? []
    }

    /// What this system started on the link ended (nil: encrypted): its waits are answered, and a pair asked
    /// meanwhile starts.
    private mutating func finish(
        _ handle: ConnectionHandle, _ failure: SecurityFailure?, _ actions: inout [SystemAction]
    ) {
        guard var link = links[handle] else { return }
        let wasSecuring = link.securing
        link.securing = false
        let waiters = link.waiters
        link.waiters = []
        let again = link.pairAfter && !link.pairWaiters.isEmpty
        link.pairAfter = false
        links[handle] = link
        if wasSecuring { ended.append(Ended(handle: handle, failure: failure)) }
        for id in waiters { actions.append(.secureAnswered(id, failure)) }
        if again {
            links[handle]!.securing = true
            startPairing(handle, &actions)
        }
    }

    private mutating func fail(_ link: Link, _ failure: SecurityFailure, _ actions: inout [SystemAction]) {
        for id in link.waiters { actions.append(.secureAnswered(id, failure)) }
        for id in link.pairWaiters { actions.append(.pairAnswered(id, .failed(failure))) }
    }
}
