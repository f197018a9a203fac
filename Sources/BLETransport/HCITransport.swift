import BLEHCI

/// What a transport tells the host.
public enum HCITransportEvent: Sendable {
    /// One whole HCI packet from the controller.
    case packet(HCIPacket)
    /// The transport closed; nothing more will arrive. `reason` says why (nil: closed by us).
    case closed(reason: String?)
}

/// A link to one HCI controller, carrying whole H4 packets both ways.
///
/// A transport frames bytes (H4 over a byte stream, or an in-memory pipe) and does nothing else: it never
/// interprets commands or events. The host installs a receiver once, then sends; the receiver is called
/// serially, in the order the controller sent, on whatever context the transport delivers from.
public protocol HCITransport: AnyObject, Sendable {
    /// Installs the receiver of controller packets and the close notification. Called once, before `send`.
    func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void)
    /// Sends one packet to the controller. After `close`, or once the link has failed, packets are dropped
    /// (the receiver has been told `.closed`). A host calls it from one thread at a time, in the order its
    /// packets must leave. It should not call the receiver synchronously: a host copes (what the receiver feeds
    /// in is queued behind the work in progress), but a transport that answers before `send` returns hides the
    /// ordering real controllers have.
    func send(_ packet: HCIPacket)
    /// Closes the link; the receiver gets `.closed(reason: nil)` once.
    func close()
}
