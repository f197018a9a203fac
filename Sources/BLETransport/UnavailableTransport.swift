import BLEHCI

/// A transport that is closed from the start: what a host gets when the controller a spec names cannot be
/// reached. The host's start fails with `.transportClosed` and `reason`, so managers report `poweredOff`
/// instead of waiting for a controller that will never answer.
public final class UnavailableTransport: HCITransport {
    public let reason: String

    public init(reason: String) { self.reason = reason }

    public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        receiver(.closed(reason: reason))
    }

    public func send(_ packet: HCIPacket) {}

    public func close() {}
}
