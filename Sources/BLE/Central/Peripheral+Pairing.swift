import BLECore
import BLEHost
import BLESMP
import BLESystem
import Foundation

/// Pairing on the user's request. A swift-ble extension: on iOS an app cannot ask to pair; the system pairs
/// when an attribute needs it (which `Peripheral` does here too, `securing`) and shows its own dialog.
extension Peripheral {
    /// Pairs with the connected peripheral now and returns what was agreed, once the bond (when the two bond) is
    /// kept. A link already encrypted pairs again: the new keys replace the bond. Questions for the user (a
    /// passkey, a numeric comparison) go to `BluetoothSystem.pairingDelegate`; how this device pairs is
    /// `BluetoothSystem.Configuration.pairing`.
    ///
    /// - Throws: `BluetoothError`: `.pairingFailed` with ``BluetoothError/pairingFailureReason`` when either side
    ///   failed the pairing (a user refused or cancelled, a wrong passkey, the peer does not pair, requirements
    ///   that cannot both be met); `.encryptionTimedOut` when the pairing's 30 s timer ran out (a peer or a user
    ///   that did not answer); `.operationNotSupported` when this system does not pair; `.notConnected`,
    ///   `.peripheralDisconnected` when the link is not up or goes down; `.timeout` when `timeout` (the
    ///   system's time) passes first.
    public func pair(timeout: Duration?) async throws -> PairingResult {
        try await perform(timeout: timeout, what: "pair") { pair(reply: $0) }
    }

    func pair(reply: Reply<PairingResult>) {
        let silent: EventReport = { _ in nil }
        guard let (_, handle) = link(reply, silent) else { return }
        guard let security = manager?.system.core.security else { return reply.finish(.failure(Self.managerGone)) }
        let identifier = self.identifier
        security.pair(handle) { [self] result in
            let outcome = result.mapError { Self.pairingError($0) }
            report(reply, outcome, delegate: silent) { _, paired in
                PairingResult(
                    peer: paired.bondIdentifier ?? identifier, method: PairingResult.Method(paired.result.method),
                    secureConnections: paired.result.secureConnections, authenticated: paired.result.authenticated,
                    bonded: paired.result.bonded, keySize: Int(paired.result.keySize))
            }
        }
    }

    /// The public error for a pairing that did not complete, saying why in a user's words.
    static func pairingError(_ error: any Error) -> BluetoothError {
        if let host = error as? HostError { return BluetoothError(host) }
        guard let failure = error as? SystemSecurity.Failure else { return BluetoothError(.unknown, "\(error)") }
        switch failure {
        case .pairing(.local(let reason)):
            return BluetoothError(
                .pairingFailed, "pairing failed here: \(Self.explain(reason, byPeer: false)) (\(reason))",
                pairingFailureReason: reason)
        case .pairing(.remote(let reason)):
            return BluetoothError(
                .pairingFailed, "the peer failed the pairing: \(Self.explain(reason, byPeer: true)) (\(reason))",
                pairingFailureReason: reason)
        case .pairing(.timeout):
            return BluetoothError(
                .encryptionTimedOut, "pairing timed out: 30 s without the next step (the peer or a user did not answer)"
            )
        case .pairing(.encryption(let status)):
            let hci = HCIStatus(rawValue: status)
            return BluetoothError(.pairingFailed, "encrypting the link with the new key failed: \(hci)", hciStatus: hci)
        case .peerRemovedPairingInformation:
            return BluetoothError(.peerRemovedPairingInformation, failure.description)
        case .encryption(let status):
            return .fromLinkStatus(status, failure.description)
        case .unavailable(let why):
            return BluetoothError(why == "the link is not up" ? .notConnected : .peripheralDisconnected, why)
        }
    }

    /// What a Security Manager reason means for the user who asked to pair.
    private static func explain(_ reason: SMPFailureReason, byPeer: Bool) -> String {
        switch reason {
        case .passkeyEntryFailed:
            byPeer ? "its user cancelled or gave no passkey" : "no passkey was given (cancelled)"
        case .confirmValueFailed, .dhKeyCheckFailed: "the passkeys did not match (a wrong passkey typed)"
        case .numericComparisonFailed: "the numbers were not confirmed as matching"
        case .pairingNotSupported: byPeer ? "it does not pair" : "this device does not pair"
        case .authenticationRequirements:
            "the requirements cannot be met (MITM protection or Secure Connections asked for, and not possible with these two devices' IO capabilities or pairing versions)"
        case .encryptionKeySize: "the key would be too short"
        case .repeatedAttempts:
            byPeer
                ? "it refuses for now, as a pairing with it failed lately (a wrong passkey?); wait a few seconds and try again"
                : "a pairing with it failed lately (a wrong passkey?), so this device waits before the next: 2 s, doubling with each failure in a row (Core Spec Vol 3 Part H 2.3.6)"
        case .commandNotSupported: "a step of the pairing is not supported"
        case .oobNotAvailable: "out-of-band data is not available"
        case .busy: "busy with another pairing"
        default: "refused"
        }
    }
}
