import BLEHCI
import Synchronization

/// A transport that records every packet, both ways, in a btsnoop capture, then passes it on unchanged.
///
/// Sent packets are recorded before they go to the wrapped transport, received ones before the host sees
/// them, so the capture's order is the order the host acted in. Packets sent after the link closed are not
/// recorded (the wrapped transport drops them). When the link closes, from either side, the writer is
/// closed too if `closesWriterOnClose` (the default: one capture per link).
public final class RecordingTransport: HCITransport {
    /// The transport underneath.
    public let wrapped: any HCITransport
    /// The capture.
    public let writer: BTSnoopWriter
    private let closesWriterOnClose: Bool
    private let closed = ClosedFlag()

    public init(wrapping transport: any HCITransport, writer: BTSnoopWriter, closesWriterOnClose: Bool = true) {
        self.wrapped = transport
        self.writer = writer
        self.closesWriterOnClose = closesWriterOnClose
    }

    public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        wrapped.setReceiver { [writer, closed, closesWriterOnClose] event in
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
