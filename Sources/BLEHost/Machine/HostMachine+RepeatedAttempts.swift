import BLECore
import BLESMP

/// The Repeated Attempts rule (Core Spec 5.4, Vol 3, Part H, 2.3.6): after a pairing with a peer fails its
/// authentication, a wait must pass before this host starts another pairing with that peer (a Pairing Request or
/// a Security Request) or answers one from it; each further failure doubles the wait, and it shrinks again, one
/// step per quiet interval, while nothing fails. It keeps a peer from trying passkeys one after another.
///
/// The spec leaves the figures to the implementation: the first wait is 2 s and the longest 64 s (the sixth
/// failure in a row; failures past six are not counted, so six quiet intervals wear it off). What counts is a
/// failed authentication: Confirm Value Failed (a wrong passkey, legacy or Secure Connections) and DHKey Check
/// Failed, whichever side found it. The spec asks the wait of the side that verified; this host waits when the
/// peer found the failure too, which only delays a retry the peer would refuse anyway. A user who cancels or
/// refuses, a timeout or a dropped link is not an attempt at guessing, and does not count. Peers are told apart
/// by the address the link names them by (their identity once it resolved), as long as this host runs.
///
/// During the wait a peripheral refuses a Pairing Request with Pairing Failed (Repeated Attempts). A central
/// still hears a Security Request (encrypting with a bond is no pairing); if it would pair, its `pair` fails at
/// once and the peripheral is told Repeated Attempts.
struct RepeatedAttempts: Sendable {
    struct Peer: Sendable {
        /// Failures that have not yet worn off.
        var failures: Int
        /// The wait (true) or a quiet interval that wears one failure off (false).
        var waiting: Bool
        var timer: HostTimerID
    }

    var peers: [BluetoothAddress: Peer] = [:]

    static let firstWait: Duration = .seconds(2)
    static let longestWait: Duration = .seconds(64)
    /// The failures that reach the longest wait; more are not counted.
    static let mostFailures = 6

    /// The wait after `failures` failures in a row.
    static func wait(after failures: Int) -> Duration {
        var wait = firstWait
        for _ in 1..<max(1, min(failures, mostFailures)) { wait *= 2 }
        return min(wait, longestWait)
    }

    /// Whether a failure with this reason counts as a failed attempt.
    static func counts(_ failure: SMPPairing.Failure) -> Bool {
        switch failure {
        case .local(let reason), .remote(let reason):
            reason == .confirmValueFailed || reason == .dhKeyCheckFailed
        case .timeout, .encryption:
            false
        }
    }
}

extension HostMachine {
    /// The wait still to pass before pairing with the peer of `handle`, if one is running.
    func repeatedAttemptsWait(on handle: ConnectionHandle) -> Duration? {
        guard let peer = links[handle]?.info.peer, let state = attempts.peers[peer], state.waiting else { return nil }
        return RepeatedAttempts.wait(after: state.failures)
    }

    /// A pairing on `handle` failed: a failed authentication starts (or lengthens) the wait for its peer.
    mutating func pairingAttemptFailed(on handle: ConnectionHandle, _ failure: SMPPairing.Failure) {
        guard RepeatedAttempts.counts(failure), let peer = links[handle]?.info.peer else { return }
        var failures = 1
        if let state = attempts.peers[peer] {
            cancelTimer(state.timer)
            failures = min(state.failures + 1, RepeatedAttempts.mostFailures)
        }
        let wait = RepeatedAttempts.wait(after: failures)
        let timer = startTimer(.repeatedAttempts(peer), after: wait)
        attempts.peers[peer] = RepeatedAttempts.Peer(failures: failures, waiting: true, timer: timer)
        log(
            .info,
            "pairing with \(peer) failed its authentication (\(failures) in a row): no pairing with it for \(wait)",
            connection: handle)
    }

    /// The wait for `peer` ended, or a quiet interval after it passed.
    mutating func repeatedAttemptsTimerFired(_ id: HostTimerID, for peer: BluetoothAddress) {
        guard var state = attempts.peers[peer], state.timer == id else { return }
        if !state.waiting {
            state.failures -= 1
            guard state.failures > 0 else {
                attempts.peers[peer] = nil
                return
            }
        }
        state.waiting = false
        state.timer = startTimer(.repeatedAttempts(peer), after: RepeatedAttempts.wait(after: state.failures))
        attempts.peers[peer] = state
    }

    /// A Pairing Request to this peripheral while the peer's wait runs: refused with Repeated Attempts, and the
    /// layer above hears of it as a failed pairing. Whether it was.
    mutating func refusedAsRepeatedAttempt(_ pdu: SMPPDU, on handle: ConnectionHandle) -> Bool {
        guard case .pairingRequest = pdu, links[handle]?.info.role == .peripheral,
            links[handle]?.security.pairing?.isPairing != true, let wait = repeatedAttemptsWait(on: handle)
        else { return false }
        log(.info, "refused \(pdu): pairing with this peer failed lately (wait \(wait))", connection: handle)
        let request = links[handle]?.security.pairRequest
        links[handle]?.security.pairRequest = nil
        refuseForRepeatedAttempts(on: handle, wait: wait, request: request, tellPeer: true)
        return true
    }

    /// A pairing that does not happen during the peer's wait: `request` (this side's, if one waits) fails, the
    /// layer above hears Repeated Attempts, and with `tellPeer` so does the peer.
    mutating func refuseForRepeatedAttempts(
        on handle: ConnectionHandle, wait: Duration, request: HostOperationID?, tellPeer: Bool
    ) {
        if tellPeer {
            sendPairingFailed(.repeatedAttempts, on: handle)
            pumpACL()
        }
        if let request { complete(request, .failure(HostError(.pairingFailed, Self.repeatedAttemptsMessage(wait)))) }
        emit(.pairingFailed(handle, .local(.repeatedAttempts)))
    }

    static func repeatedAttemptsMessage(_ wait: Duration) -> String {
        "a pairing with this peer failed its authentication lately; the next is allowed \(wait) after that failure"
            + " (Repeated Attempts, Core Spec Vol 3 Part H 2.3.6)"
    }

    /// The host closes: the waits end with it.
    mutating func forgetRepeatedAttempts() {
        for state in attempts.peers.values { cancelTimer(state.timer) }
        attempts.peers = [:]
    }
}
