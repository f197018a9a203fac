import BLEHCI
import Synchronization

/// A transport whose link is opened asynchronously: packets sent before it is open wait, in order, and go
/// out once it is; if opening fails, the receiver is told `.closed` with the reason. It lets a synchronous
/// caller (a process-wide default system) start a host on a controller that takes time to reach.
public final class DeferredTransport: HCITransport {
    private enum State {
        case opening(pending: [HCIPacket])
        case open(any HCITransport)
        case closed
    }
    private let state = Mutex(State.opening(pending: []))
    private final class Receiver: Sendable {
        let call: @Sendable (HCITransportEvent) -> Void
        init(_ call: @escaping @Sendable (HCITransportEvent) -> Void) { self.call = call }
    }
    // Boxed: a bare closure in a Mutex is re-abstracted on each access.
    private let receiver = Mutex<Receiver?>(nil)
    private let opener: @Sendable () async throws -> any HCITransport

    public init(open: @escaping @Sendable () async throws -> any HCITransport) {
        self.opener = open
    }

    public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        let box = Receiver(receiver)
        self.receiver.withLock { $0 = box }
        Task { await self.open() }
    }

    private func open() async {
        do {
            let transport = try await opener()
            transport.setReceiver { [weak self] event in self?.forward(event) }
            // The waiting packets go out under the lock, so none sent meanwhile can overtake them.
            let opened = state.withLock { s -> Bool in
                guard case .opening(let pending) = s else { return false }
                for packet in pending { transport.send(packet) }
                s = .open(transport)
                return true
            }
            if !opened { transport.close() }
        } catch {
            let wasOpening = state.withLock { s -> Bool in
                guard case .opening = s else { return false }
                s = .closed
                return true
            }
            if wasOpening { forward(.closed(reason: "\(error)")) }
        }
    }

    private func forward(_ event: HCITransportEvent) {
        receiver.withLock { $0 }?.call(event)
    }

    public func send(_ packet: HCIPacket) {
        state.withLock { s in
            switch s {
            case .opening(var pending):
                pending.append(packet)
                s = .opening(pending: pending)
            case .open(let transport):
                transport.send(packet)  // under the lock: the order the host sent in is kept
            case .closed:
                break
            }
        }
    }

    public func close() {
        let previous = state.withLock { s -> State in
            defer { s = .closed }
            return s
        }
        switch previous {
        case .open(let transport): transport.close()
        case .opening: forward(.closed(reason: nil))
        case .closed: break
        }
    }
}
