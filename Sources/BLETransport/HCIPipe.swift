import BLEHCI
import Synchronization

/// An in-memory link between a host and a controller in the same process, carrying whole HCI packets.
///
/// `hostEnd` is the `HCITransport` a host uses; the controller side attaches with `attachController` and
/// delivers packets with `deliverToHost`. Both directions are synchronous calls: a controller that needs
/// ordering (the virtual controller does, for determinism) queues what it receives on its own scheduler.
public final class HCIPipe: Sendable {
    public let hostEnd: HostEnd

    public init() {
        hostEnd = HostEnd()
    }

    /// Installs the controller's receiver of host packets.
    public func attachController(_ receiver: @escaping @Sendable (HCIPacket) -> Void) {
        hostEnd.state.withLock { $0.controller = receiver }
    }

    /// Hands one packet from the controller to the host.
    public func deliverToHost(_ packet: HCIPacket) {
        // Taken out through a captured variable: a closure returned from `withLock`, through its generic result,
        // was wrapped in a new closure (an allocation) for every packet.
        var receiver: (@Sendable (HCITransportEvent) -> Void)?
        hostEnd.state.withLock { if !$0.closed { receiver = $0.host } }
        receiver?(.packet(packet))
    }

    /// Closes the link from the controller's side (a controller that vanished); the host is told why.
    public func closeFromController(reason: String) {
        hostEnd.closeLink(reason: reason)
    }

    public final class HostEnd: HCITransport {
        struct State {
            var host: (@Sendable (HCITransportEvent) -> Void)?
            var controller: (@Sendable (HCIPacket) -> Void)?
            var closed = false
        }
        let state = Mutex(State())

        public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
            state.withLock { $0.host = receiver }
        }

        public func send(_ packet: HCIPacket) {
            // As in `deliverToHost`: no closure through `withLock`'s generic result.
            var controller: (@Sendable (HCIPacket) -> Void)?
            state.withLock { if !$0.closed { controller = $0.controller } }
            controller?(packet)
        }

        public func close() { closeLink(reason: nil) }

        func closeLink(reason: String?) {
            let host: (@Sendable (HCITransportEvent) -> Void)? = state.withLock {
                if $0.closed { return nil }
                $0.closed = true
                return $0.host
            }
            host?(.closed(reason: reason))
        }
    }
}
