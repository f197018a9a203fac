import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLESMP
import BLETransport
import DequeModule
import Synchronization

/// Everything the host tells the layer above, in the order it happened.
public enum HostEvent: Sendable, Hashable {
    /// An advertising report while scanning.
    case advertisingReport(AdvertisingReport)
    /// A link came up (either role).
    case connected(LinkInfo)
    /// A connection this host initiated failed or was cancelled.
    case connectionFailed(peer: BluetoothAddress, error: HostError)
    /// A link went down. Every operation pending on it has already been completed with an error.
    case disconnected(ConnectionHandle, reason: HCIStatus)
    /// The ATT_MTU of a link changed after an exchange.
    case mtuChanged(ConnectionHandle, mtu: Int)
    /// A notification or indication from the peer's server (the indication is already confirmed).
    case valueUpdated(ConnectionHandle, attribute: AttributeHandle, value: [UInt8], isIndication: Bool)
    /// Write Commands may be queued again on this link.
    case readyToWriteWithoutResponse(ConnectionHandle)
    /// A client reads a dynamic attribute: answer with `respond(to:result:value:)`.
    case serverRead(GATTServerRequestID, ConnectionHandle, attribute: AttributeHandle, offset: Int)
    /// A client writes a dynamic attribute. With an id, answer with `respond(to:result:value:)`; a Write
    /// Command has none. A long write arrives as all its prepared parts at once, on Execute Write.
    case serverWrite(GATTServerRequestID?, ConnectionHandle, [GATTWriteRequest])
    /// A client changed its Client Characteristic Configuration for the characteristic whose value handle is
    /// `attribute`.
    case subscriptionChanged(ConnectionHandle, attribute: AttributeHandle, notify: Bool, indicate: Bool)
    /// Notifications may be queued again after `notify` refused.
    case readyToNotify
    /// Advertising ended because a central connected (legacy connectable advertising stops then).
    case advertisingEnded
    /// The transport closed; the host is unusable.
    case transportClosed(String?)
    /// The controller reported a hardware error (Core Spec 5.4, Vol 4, Part E, 7.7.16) and the host resets it:
    /// what it held is gone. Every request it had has failed and every link is gone (without a `.disconnected`
    /// each, as with `.transportClosed`); `.controllerRestarted` follows.
    case controllerResetting(String)
    /// The controller was initialised again after a reset, with this information, or could not be (why).
    case controllerRestarted(Result<ControllerInfo, HostError>)
    /// A pairing asks the user something: answer with `answerPairing`.
    case pairingPrompt(ConnectionHandle, PairingPrompt)
    /// Central: the peripheral asked for security (encrypt with a bond, or pair).
    case securityRequested(ConnectionHandle, AuthenticationRequirements)
    /// A pairing began on the link: the peer's Pairing Request arrived (`byPeer`), or this central sent one.
    case pairingStarted(ConnectionHandle, byPeer: Bool)
    /// A pairing finished: the keys to keep (when bonded) and how strong they are.
    case pairingCompleted(ConnectionHandle, SMPPairing.Result)
    case pairingFailed(ConnectionHandle, SMPPairing.Failure)
    /// The link's encryption changed (or a start failed: the status says why).
    case encryptionChanged(ConnectionHandle, encrypted: Bool, status: HCIStatus)
    /// Peripheral: the central encrypts with a kept key: answer with `replyLongTermKey`.
    case longTermKeyRequested(ConnectionHandle, ediv: UInt16, rand: UInt64)
}
