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
}
