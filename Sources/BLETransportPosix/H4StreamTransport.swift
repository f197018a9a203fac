import BLEHCI
import BLETransport
import NIOCore
import Synchronization

/// An HCI transport over a byte-stream channel (a TCP connection, a serial port), framed with H4: each packet
/// is its packet indicator followed by the packet, back to back.
///
/// Everything the host sees is delivered on the channel's event loop, in the order the bytes arrived: packets
/// that arrive before `setReceiver` wait for it. A stream that stops making sense (an unknown packet
/// indicator) closes the link with a reason naming the transport; so does an I/O error or the controller
/// closing its end. `.closed` is delivered exactly once; packets sent after it are dropped.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 2 (UART transport layer: packet indicators).
public final class H4StreamTransport: HCITransport, CustomStringConvertible {
    /// The spec of the link, e.g. `tcp-client:127.0.0.1:6402`; every close reason starts with it.
    public let description: String
    /// The peer's address as "IP:PORT", for a TCP link (nil for a serial one).
    public let peer: String?
    let eventLoop: any EventLoop

    private struct State {
        var channel: (any Channel)?
        var receiver: (@Sendable (HCITransportEvent) -> Void)?
        /// Events that arrived before the receiver was installed.
        var pending: [HCITransportEvent] = []
        /// `close()` was called or the link failed: sends are dropped.
        var closing = false
        /// Why the link failed, if it did (the first reason wins).
        var failure: String?
        /// `.closed` has been delivered or queued in `pending`.
        var closeReported = false
        var onClose: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    init(name: String, eventLoop: any EventLoop, peer: String? = nil) {
        self.peer = peer
        self.description = name
        self.eventLoop = eventLoop
    }

    /// Binds the transport to its channel once it is active.
    func attach(_ channel: any Channel) {
        let closeNow = state.withLock { state in
            state.channel = channel
            return state.closing
        }
        if closeNow { channel.close(promise: nil) }
    }

    /// Runs `action` once the link has closed (at once if it already has), after the receiver was told.
    func whenClosed(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state in
            if state.closeReported { return true }
            state.onClose.append(action)
            return false
        }
        if runNow { action() }
    }

    // MARK: - HCITransport

    public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        if eventLoop.inEventLoop {
            install(receiver)
        } else {
            eventLoop.execute { self.install(receiver) }
        }
    }

    public func send(_ packet: HCIPacket) {
        guard let channel = state.withLock({ $0.closing ? nil : $0.channel }) else { return }
        var buffer = channel.allocator.buffer(capacity: 1 + 4 + 255)
        H4Encoder.encode(packet, into: &buffer)
        // Always through the event loop's task queue, even from the event loop itself: a write made on the
        // loop would otherwise go out at once, ahead of writes other threads queued just before it, and the
        // host's order (it sends under its lock, from whichever thread) would be lost. Found by the Bumble
        // interop test: 2 of 50 Write Commands arrived out of order and were dropped.
        let bytes = buffer
        channel.eventLoop.execute { channel.writeAndFlush(bytes, promise: nil) }
    }

    public func close() {
        let channel: (any Channel)? = state.withLock { state in
            state.closing = true
            return state.channel
        }
        guard let channel else {
            eventLoop.execute { self.linkClosed(pendingBytes: 0) }
            return
        }
        channel.close().whenComplete { _ in self.linkClosed(pendingBytes: 0) }
    }

    // MARK: - Called on the event loop by the framing handler

    private func install(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        eventLoop.preconditionInEventLoop()
        let pending: [HCITransportEvent] = state.withLock { state in
            state.receiver = receiver
            defer { state.pending = [] }
            return state.pending
        }
        for event in pending { receiver(event) }
    }

    func received(_ packet: HCIPacket) {
        let receiver: (@Sendable (HCITransportEvent) -> Void)? = state.withLock { state in
            // After close() or a failure nothing but `.closed` reaches the host.
            if state.closeReported || state.closing { return nil }
            guard let receiver = state.receiver else {
                state.pending.append(.packet(packet))
                return nil
            }
            return receiver
        }
        receiver?(.packet(packet))
    }

    /// Records why the link is failing (the first reason wins); the channel is being closed.
    func failed(_ reason: String) {
        state.withLock { state in
            if state.failure == nil, !state.closeReported { state.failure = "\(description): \(reason)" }
            state.closing = true
        }
    }

    /// The channel is gone: tells the receiver once, why.
    func linkClosed(pendingBytes: Int) {
        let (receiver, event, hooks):
            ((@Sendable (HCITransportEvent) -> Void)?, HCITransportEvent?, [@Sendable () -> Void]) =
                state.withLock { state in
                    if state.closeReported { return (nil, nil, []) }
                    state.closeReported = true
                    let reason: String?
                    if let failure = state.failure {
                        reason = failure
                    } else if state.closing {
                        reason = nil  // we closed it
                    } else if pendingBytes > 0 {
                        reason =
                            "\(description): the controller closed the connection in the middle of a packet (\(pendingBytes) bytes pending)"
                    } else {
                        reason = "\(description): the controller closed the connection"
                    }
                    state.closing = true
                    state.channel = nil
                    let hooks = state.onClose
                    state.onClose = []
                    guard let receiver = state.receiver else {
                        state.pending.append(.closed(reason: reason))
                        return (nil, nil, hooks)
                    }
                    return (receiver, .closed(reason: reason), hooks)
                }
        if let receiver, let event { receiver(event) }
        for hook in hooks { hook() }
    }
}

/// Splits the channel's bytes into H4 packets for an `H4StreamTransport`.
final class H4FramingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let transport: H4StreamTransport
    private var decoder = H4Decoder()
    private var cumulation: ByteBuffer?
    private var broken = false

    init(transport: H4StreamTransport) {
        self.transport = transport
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !broken else { return }
        var incoming = Self.unwrapInboundIn(data)
        if var buffer = cumulation {
            cumulation = nil  // keep the buffer uniquely referenced while appending
            buffer.writeBuffer(&incoming)
            cumulation = buffer
        } else {
            cumulation = incoming
        }
        do {
            while var buffer = cumulation {
                cumulation = nil
                let packet = try decoder.decode(&buffer)
                cumulation = buffer.readableBytes > 0 ? buffer : nil
                guard let packet else { break }
                transport.received(packet)
            }
            if cumulation != nil, cumulation!.readerIndex > 4096 { cumulation!.discardReadBytes() }
        } catch {
            broken = true
            cumulation = nil
            transport.failed("malformed H4 stream from the controller: \(error)")
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        transport.linkClosed(pendingBytes: cumulation?.readableBytes ?? 0)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        transport.failed("I/O error: \(error)")
        context.close(promise: nil)
    }
}
