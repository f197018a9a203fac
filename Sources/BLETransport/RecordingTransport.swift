import BLEHCI
import Synchronization

/// A transport that records every packet, both ways, in a btsnoop capture, then passes it on unchanged.
///
/// Sent packets are recorded before they go to the wrapped transport, received ones before the host sees
/// them. Given the host's scheduler (`domain`), a received packet is recorded and handed on in its serial
/// domain, where the host also sends: the capture's order is then the order the host acted in, even when the
/// transport reads on a thread of its own (without it, a packet read while the host was still answering the
/// one before is recorded ahead of that answer). Packets sent after the link closed are not recorded (the
/// wrapped transport drops them). When the link closes, from either side, the writer is closed too if
/// `closesWriterOnClose` (the default: one capture per link).
public final class RecordingTransport: HCITransport {
    /// The transport underneath.
    public let wrapped: any HCITransport
    /// The capture.
    public let writer: BTSnoopWriter
    private let closesWriterOnClose: Bool
    private let domain: (any HostScheduler)?
    private let closed = ClosedFlag()

    public init(
        wrapping transport: any HCITransport, writer: BTSnoopWriter, closesWriterOnClose: Bool = true,
        domain: (any HostScheduler)? = nil
    ) {
        self.wrapped = transport
        self.writer = writer
        self.closesWriterOnClose = closesWriterOnClose
        self.domain = domain
    }

    public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        let deliver: @Sendable (HCITransportEvent) -> Void = { [writer, closed, closesWriterOnClose] event in
            switch event {
            case .packet(let packet):
                writer.record(packet, direction: .received)
                receiver(event)
            case .closed:
                closed.set()
                receiver(event)
                if closesWriterOnClose { writer.close() }
            }
        }
        guard let domain else { return wrapped.setReceiver(deliver) }
        wrapped.setReceiver { [closed] event in
            // Closed at once: what the host sends from here on is dropped by the wrapped transport, so not recorded.
            if case .closed = event { closed.set() }
            domain.execute { deliver(event) }
        }
    }

    public func send(_ packet: HCIPacket) {
        guard !closed.isSet else { return }
        writer.record(packet, direction: .sent)
        wrapped.send(packet)
    }

    public func close() {
        closed.set()
        wrapped.close()
    }
}

/// Whether the link closed, shared between the transport and its receiver closure.
private final class ClosedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
