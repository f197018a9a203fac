import BLECore
import BLEHCI
import BLEHost
import Foundation
import Testing

@testable import BLESMP
@testable import BLESystem

/// The system's part in pairing and encryption (`SecurityTable`, in the system machine): a bonded peer's link
/// encrypted at once and held from the apps until it is, waits for a link's encryption answered once, a user's
/// pairing answered by a pairing under way or started after an encryption, the pairing's questions asked or
/// answered by default, and every wait failed when the link goes.
@Suite struct SecurityTests {
    static let handle = ConnectionHandle(7)
    static let info = LinkTests.link(7)
    static let peripheralInfo = LinkInfo(
        handle: ConnectionHandle(7), role: .peripheral, peer: LinkTests.peer, interval: 24, latency: 0,
        supervisionTimeout: 400)

    static let result = SMPPairing.Result(
        method: .justWorks, secureConnections: true, authenticated: false, keySize: 16, bonded: true,
        peerLongTermKey: nil, localLongTermKey: nil, peerIdentity: nil)
    static let outcome = PairingOutcome(result: result, bondIdentifier: nil)

    static func secureID(_ start: SecureStart) -> SecureID? {
        if case .waiting(let id) = start { id } else { nil }
    }

    /// IOSRules.md 7.x: a phone encrypts a bonded peripheral's link at once, and the apps' connection completes
    /// only once it is encrypted.
    @Test func aBondedPeersLinkIsEncryptedAtOnceAndHeldUntilItIs() {
        var m = LinkTests.machine()
        _ = m.connect(LinkTests.a, to: LinkTests.peer)
        let up = m.securityLinkUp(Self.info, bonded: true, centralKey: true)
        #expect(up == [.encrypt(Self.handle, peer: LinkTests.peer)])
        #expect(m.security.isSecuring(Self.handle))
        let held = m.linkConnected(Self.info, securing: true)
        #expect(!held.contains(.deliver(LinkTests.a, .linkAttached(Self.info))))
        let encrypted = m.encryptionChanged(Self.handle, encrypted: true)
        #expect(encrypted == [.deliver(LinkTests.a, .linkAttached(Self.info))])
        #expect(m.security.isEncrypted(Self.handle))
    }

    /// The peer answers the kept key with PIN or Key Missing: the link is ended, and the apps waiting for it hear
    /// why.
    @Test func aPeerThatLostTheKeyEndsTheLink() {
        var m = LinkTests.machine()
        _ = m.connect(LinkTests.a, to: LinkTests.peer)
        _ = m.securityLinkUp(Self.info, bonded: true, centralKey: true)
        _ = m.linkConnected(Self.info, securing: true)
        let failed = m.encryptionFailed(Self.handle, status: .pinOrKeyMissing)
        #expect(failed == [.disconnect(Self.handle, .authenticationFailure)])
        let down = m.linkDisconnected(Self.handle, reason: .connectionTerminatedByLocalHost)
        let error = HostError(.hci(.pinOrKeyMissing), "the link was not secured: \(HCIStatus.pinOrKeyMissing)")
        #expect(down == [.deliver(LinkTests.a, .linkFailed(LinkTests.peer, error))])
    }

    /// Several waits for one link's encryption start one pairing and are answered together, once.
    @Test func waitsForALinksEncryptionShareOnePairing() throws {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let (first, asked) = m.secure(Self.handle, bonded: false)
        #expect(asked == [.pair(Self.handle)])
        let (second, none) = m.secure(Self.handle, bonded: false)
        #expect(none == [])
        let one = try #require(Self.secureID(first))
        let two = try #require(Self.secureID(second))
        // A pairing this system asked for ends when the keys are distributed, not at the first encryption.
        #expect(m.encryptionChanged(Self.handle, encrypted: true) == [])
        let done = m.pairingCompleted(Self.handle, Self.outcome)
        #expect(done == [.secureAnswered(one, nil), .secureAnswered(two, nil)])
        #expect(m.secure(Self.handle, bonded: false).0 == .done)
    }

    /// As central, a pairing is reported only once an ATT exchange after the distributed keys came back.
    @Test func aCentralsPairingIsReportedOnceItsKeysAreDelivered() throws {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.info, bonded: false, centralKey: false)
        let ((id, now), asked) = m.pair(Self.handle)
        #expect(now == nil)
        #expect(asked == [.pair(Self.handle)])
        let pairID = try #require(id)
        #expect(m.pairingCompleted(Self.handle, Self.outcome) == [.confirmKeyDelivery(Self.handle)])
        #expect(m.keysDelivered(Self.handle) == [.pairAnswered(pairID, .paired(Self.outcome))])
        #expect(m.keysDelivered(Self.handle) == [])
    }

    /// A user's pairing asked while an encryption is under way starts once it ends; one asked during a pairing is
    /// answered by that pairing (no second one).
    @Test func aPairAskedDuringAnEncryptionFollowsItAndOneDuringAPairingJoinsIt() throws {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.info, bonded: true, centralKey: true)
        let ((during, _), waiting) = m.pair(Self.handle)
        #expect(waiting == [])
        let after = m.encryptionChanged(Self.handle, encrypted: true)
        #expect(after == [.pair(Self.handle)])
        _ = m.pairingCompleted(Self.handle, Self.outcome)
        #expect(m.keysDelivered(Self.handle) == [.pairAnswered(try #require(during), .paired(Self.outcome))])

        var n = LinkTests.machine()
        _ = n.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let ((first, _), _) = n.pair(Self.handle)
        let ((second, _), joined) = n.pair(Self.handle)
        #expect(joined == [])
        let failure = SMPPairing.Failure.timeout
        let failed = n.pairingFailed(Self.handle, failure)
        #expect(
            failed == [
                .pairAnswered(try #require(first), .failed(.pairing(failure))),
                .pairAnswered(try #require(second), .failed(.pairing(failure))),
            ])
    }

    /// The host refuses the pairing as not fitting the link's state (the peer's own pairing is under way): the
    /// user's pairing waits for that one; any other refusal answers it.
    @Test func aPairingTheHostRefusesWaitsForThePeersOrFails() throws {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let ((id, _), _) = m.pair(Self.handle)
        let pairID = try #require(id)
        #expect(m.pairingRefused(Self.handle, HostError(.invalidState, "pairing already")) == [])
        #expect(m.pairingCompleted(Self.handle, Self.outcome) == [.pairAnswered(pairID, .paired(Self.outcome))])
        let ((other, _), _) = m.pair(Self.handle)
        let refusal = HostError(.unsupported, "no")
        #expect(m.pairingRefused(Self.handle, refusal) == [.pairAnswered(try #require(other), .refused(refusal))])
    }

    /// With nobody to ask, Just Works is accepted and anything that needs the user refused; with a prompter, the
    /// question goes to it.
    @Test func thePairingsQuestionsGoToTheUserOrTheDefaults() {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.info, bonded: false, centralKey: false)
        #expect(
            m.pairingPrompt(Self.handle, .confirm(numericValue: nil)) == [.answerPairing(Self.handle, .accept(true))])
        #expect(
            m.pairingPrompt(Self.handle, .confirm(numericValue: 123_456)) == [
                .answerPairing(Self.handle, .accept(false))
            ])
        #expect(m.pairingPrompt(Self.handle, .enterPasskey) == [.answerPairing(Self.handle, .passkey(nil))])
        #expect(m.pairingPrompt(Self.handle, .displayPasskey(42)) == [])
        m.prompterChanged(present: true)
        #expect(
            m.pairingPrompt(Self.handle, .enterPasskey) == [.prompt(Self.handle, peer: LinkTests.peer, .enterPasskey)])
    }

    /// The link goes (or the controller does): every wait on it fails, once.
    @Test func everyWaitFailsWhenTheLinkGoes() throws {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let secureID = try #require(Self.secureID(m.secure(Self.handle, bonded: false).0))
        let ((pairID, _), _) = m.pair(Self.handle)
        let down = m.linkDisconnected(Self.handle, reason: .connectionTimeout)
        let why = SecurityFailure.unavailable("the link went down: \(HCIStatus.connectionTimeout)")
        #expect(down == [.secureAnswered(secureID, why), .pairAnswered(try #require(pairID), .failed(why))])
        #expect(m.secure(Self.handle, bonded: false).0 == .failed(.unavailable("the link is not up")))
        #expect(m.securityReset("gone") == [])
    }

    @Test func aSystemThatDoesNotPairRefuses() {
        var m = SystemMachine(pairs: false)
        _ = m.opened(LinkTests.a, app: "one")
        #expect(m.securityLinkUp(Self.info, bonded: true, centralKey: true) == [])
        #expect(m.secure(Self.handle, bonded: true).0 == .failed(.unavailable("this system is not configured to pair")))
        let ((id, now), _) = m.pair(Self.handle)
        #expect(id == nil)
        #expect(now == .refused(HostError(.unsupported, "this system is not configured to pair")))
    }

    /// A link comes up on a handle whose end was never told: the old link's waits fail with it, and the waits
    /// are answered in the order the old class answered them (the encryption's first, then the pairing's).
    @Test func aLinkOnAReusedHandleFailsTheOldOnesWaits() throws {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let secureID = try #require(Self.secureID(m.secure(Self.handle, bonded: false).0))
        let ((pairID, _), _) = m.pair(Self.handle)
        let again = m.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let why = SecurityFailure.unavailable("the link went down")
        #expect(again == [.secureAnswered(secureID, why), .pairAnswered(try #require(pairID), .failed(why))])

        var n = LinkTests.machine()
        _ = n.securityLinkUp(Self.peripheralInfo, bonded: false, centralKey: false)
        let waiting = try #require(Self.secureID(n.secure(Self.handle, bonded: false).0))
        let ((paired, _), _) = n.pair(Self.handle)
        let done = n.pairingCompleted(Self.handle, Self.outcome)
        #expect(done == [.secureAnswered(waiting, nil), .pairAnswered(try #require(paired), .paired(Self.outcome))])
    }

    /// The key to encrypt with went from the store as the link came up: the link is paired instead.
    @Test func aKeyGoneBeforeTheEncryptionIsReplacedByAPairing() {
        var m = LinkTests.machine()
        _ = m.securityLinkUp(Self.info, bonded: true, centralKey: true)
        #expect(m.encryptionKeyGone(Self.handle) == [.pair(Self.handle)])
        #expect(m.encryptionKeyGone(Self.handle) == [])
    }

    /// Every sequence of seven of thirteen inputs on one link, central or peripheral (waits for its encryption and
    /// for a pairing; the controller encrypting or failing with PIN or Key Missing or another status; the pairing
    /// completing, its keys delivered, failing, or refused by the host as under way or otherwise; the link going,
    /// coming back, the controller going). After each step: every wait is answered at most once, and none is
    /// left once its link is gone; at most one pairing and one encryption this system asked for are under way; the
    /// link is securing only while such a request is out, and a wait always has something under way to answer it.
    @Test func everySequenceAnswersEachWaitOnceAndNeverPairsTwiceAtOnce() {
        enum Input: CaseIterable {
            case secure, pair, encrypted, lostKey, encryptionRefused, completed, delivered, failed
            case refusedUnderWay, refused, down, up, reset
        }
        struct Node {
            var machine = LinkTests.machine()
            var up = true
            var central: Bool
            /// Waits not answered, by id.
            var secureWaits: Set<SecureID> = []
            var pairWaits: Set<PairID> = []
            var answered = 0
            /// Requests this system sent and the host has not ended; the peer's own pairing (ours was refused as
            /// one under way); a central's keys waiting to be confirmed delivered, and whether the pairing was ours.
            var pairing = false
            var encrypting = false
            var peerPairing = false
            var keysPending = false
            var keysOurs = false
        }
        var failures: [String] = []
        var visited = 0
        for central in [true, false] {
            var start = Node(central: central)
            _ = start.machine.securityLinkUp(
                central ? Self.info : Self.peripheralInfo, bonded: central, centralKey: central)
            start.encrypting = central
            let (count, found) = walkEverySequence(from: start, depth: 7) { (n: inout Node, input: Input) in
                var failures: [String] = []
                var actions: [SystemAction] = []
                switch input {
                case .secure:
                    guard n.up else { return nil }
                    let (answer, new) = n.machine.secure(Self.handle, bonded: n.central)
                    actions = new
                    if case .waiting(let id) = answer { n.secureWaits.insert(id) }
                case .pair:
                    guard n.up else { return nil }
                    let ((id, _), new) = n.machine.pair(Self.handle)
                    actions = new
                    if let id { n.pairWaits.insert(id) }
                case .encrypted:
                    guard n.encrypting || n.pairing || n.peerPairing else { return nil }
                    n.encrypting = false
                    actions = n.machine.encryptionChanged(Self.handle, encrypted: true)
                case .lostKey, .encryptionRefused:
                    guard n.encrypting else { return nil }
                    n.encrypting = false
                    actions = n.machine.encryptionFailed(
                        Self.handle, status: input == .lostKey ? .pinOrKeyMissing : .connectionTimeout)
                case .completed:
                    guard n.pairing || n.peerPairing else { return nil }
                    n.keysPending = n.central
                    n.keysOurs = n.pairing
                    n.pairing = false
                    n.peerPairing = false
                    actions = n.machine.pairingCompleted(Self.handle, Self.outcome)
                case .delivered:
                    guard n.keysPending else { return nil }
                    n.keysPending = false
                    actions = n.machine.keysDelivered(Self.handle)
                case .failed:
                    guard n.pairing || n.peerPairing else { return nil }
                    n.pairing = false
                    n.peerPairing = false
                    actions = n.machine.pairingFailed(Self.handle, .timeout)
                case .refusedUnderWay, .refused:
                    guard n.pairing else { return nil }
                    n.pairing = false
                    let code: HostError.Code = input == .refusedUnderWay ? .invalidState : .unsupported
                    actions = n.machine.pairingRefused(Self.handle, HostError(code, "refused"))
                    // Refused as under way: the peer's pairing answers the waits when it ends.
                    if input == .refusedUnderWay { n.peerPairing = true }
                case .down:
                    guard n.up else { return nil }
                    n.up = false
                    n.pairing = false
                    n.peerPairing = false
                    n.encrypting = false
                    n.keysPending = false
                    actions = n.machine.linkDisconnected(Self.handle, reason: .connectionTimeout)
                case .up:
                    guard !n.up else { return nil }
                    n.up = true
                    actions = n.machine.securityLinkUp(
                        n.central ? Self.info : Self.peripheralInfo, bonded: n.central, centralKey: n.central)
                case .reset:
                    n.up = false
                    n.pairing = false
                    n.peerPairing = false
                    n.encrypting = false
                    n.keysPending = false
                    actions = n.machine.securityReset("gone")
                }
                for action in actions {
                    switch action {
                    case .pair:
                        if n.pairing { failures.append("a second pairing while one is under way") }
                        n.pairing = true
                    case .encrypt:
                        if n.encrypting { failures.append("a second encryption while one is under way") }
                        n.encrypting = true
                    case .secureAnswered(let id, _):
                        if n.secureWaits.remove(id) == nil { failures.append("secure wait \(id) answered twice") }
                    case .pairAnswered(let id, _):
                        if n.pairWaits.remove(id) == nil { failures.append("pair wait \(id) answered twice") }
                    case .confirmKeyDelivery, .disconnect, .setConnectTargets, .deliver: break
                    default: failures.append("unexpected \(action)")
                    }
                }
                let link = n.machine.security.links[Self.handle]
                if !n.up, !(n.secureWaits.isEmpty && n.pairWaits.isEmpty) {
                    failures.append("waits left with the link gone")
                }
                if n.up, let link {
                    // Securing with nothing out would leave its waits for ever; waits with nothing that will end
                    // them likewise. (A request out after its waits were answered is allowed: a peer's pairing that
                    // ends answers them, as the old class did.)
                    let out = n.pairing || n.encrypting || (n.keysPending && n.keysOurs)
                    if link.securing && !out { failures.append("securing with no request out") }
                    let ending = link.securing || n.pairing || n.peerPairing || n.keysPending
                    if !(n.secureWaits.isEmpty && n.pairWaits.isEmpty) && !ending {
                        failures.append("waits with nothing under way to answer them")
                    }
                }
                return failures
            }
            visited += count
            failures += found.map { "\(central ? "central" : "peripheral"): \($0)" }
        }
        #expect(visited > 50_000)
        let count = failures.count
        #expect(count == 0, "first failures: \(failures.prefix(3))")
    }
}
