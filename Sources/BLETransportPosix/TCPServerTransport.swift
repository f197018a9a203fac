import BLEHCI
import BLETransport
import NIOCore
import NIOPosix
import Synchronization

/// `tcp-server:HOST:PORT`: we listen, and the controller connects to us (Bumble's `tcp-client` transport, a
/// board bridged to TCP). One controller at a time: while one is attached, further connections are accepted
/// and closed at once, or, for a listener that plays the controller (`ble controller`), told the controller is
/// busy (``BusyAnswer``).
///
/// ```swift
/// let server = try await TCPServerTransport.bind(host: "127.0.0.1", port: 0)   // port 0: any free port
/// print("waiting on", server.spec)                                            // tcp-server:127.0.0.1:40123
/// let link = try await server.accept(timeout: .seconds(30))
/// ```
///
/// When the attached controller's link closes, the next controller to connect is accepted (kept until the
/// next `accept`). `close()` stops listening; it does not close a link already returned.
public final class TCPServerTransport: Sendable {
    /// The host the listening socket is bound to.
    public let host: String
    /// The bound port (the system's choice when 0 was asked for).
    public let port: Int
    private let serverChannel: any Channel
    private let whenBusy: BusyAnswer

    /// What a connection that arrives while another is attached is told before it is closed.
    public enum BusyAnswer: Sendable, Hashable {
        /// Nothing: it is closed at once. What a second controller connecting to a host gets.
        case close
        /// Its first HCI command is answered with a Command Complete carrying this status (Controller Busy,
        /// 0x3A, Core Spec 5.4, Vol 1, Part F, 2.58), then it is closed: what a second host connecting to a
        /// controller gets, so that it can say why it was turned away. A connection that sends no whole command
        /// `within` this time (``busyAnswerDeadline`` by default) is closed.
        case failCommands(HCIStatus, within: TimeAmount = TCPServerTransport.busyAnswerDeadline)
    }

    /// How long a turned-away connection may take to send its first command, by default.
    public static let busyAnswerDeadline: TimeAmount = .seconds(5)

    private struct State {
        /// The controller whose link is open, if any.
        var attached: H4StreamTransport?
        /// Attached but not yet taken by `accept`.
        var unclaimed: H4StreamTransport?
        var waiter: CheckedContinuation<H4StreamTransport, any Error>?
        /// Identifies the current waiter, so that an old accept's timeout cannot fail a newer one.
        var waiterID = 0
        var nextWaiterID = 0
        var closed = false
    }

    private let state: Mutex<State>

    private init(host: String, port: Int, serverChannel: any Channel, whenBusy: BusyAnswer) {
        self.host = host
        self.port = port
        self.serverChannel = serverChannel
        self.whenBusy = whenBusy
        self.state = Mutex(State())
    }

    /// The spec with the bound port: what a controller is told to connect to.
    public var spec: TransportSpec { .tcpServer(host: host, port: port) }

    /// Starts listening on `host:port` (0: a free port, see `port`). `whenBusy` says what a connection that
    /// arrives while another is attached is told before it is closed.
    ///
    /// - Throws: `TransportError` `.connectionFailed` naming the address when it cannot be bound.
    public static func bind(
        host: String, port: Int, whenBusy: BusyAnswer = .close,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> TCPServerTransport {
        let requested = TransportSpec.tcpServer(host: host, port: port)
        let box = ListenerBox()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { child in
                guard let listener = box.listener.withLock({ $0 }) else {
                    return child.close()
                }
                return listener.adopt(child)
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            throw TransportError(
                .connectionFailed, "\(requested): cannot listen on \(host):\(port): \(PosixErrorText.describe(error))")
        }
        let bound = channel.localAddress?.port ?? port
        let listener = TCPServerTransport(host: host, port: bound, serverChannel: channel, whenBusy: whenBusy)
        box.listener.withLock { $0 = listener }
        return listener
    }

    /// Waits until a controller has connected and returns its link.
    ///
    /// - Throws: `TransportError` `.timedOut` after `timeout`, `.closed` if the listener closes first;
    ///   `CancellationError` if the task is cancelled.
    public func accept(timeout: Duration? = nil) async throws -> H4StreamTransport {
        let id = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<H4StreamTransport, any Error>) in
                let outcome: Result<H4StreamTransport, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if let ready = state.unclaimed {
                        state.unclaimed = nil
                        return .success(ready)
                    }
                    if state.closed {
                        return .failure(TransportError(.closed, "\(spec): the listener is closed"))
                    }
                    if state.waiter != nil {
                        return .failure(TransportError(.busy, "\(spec): another accept is already waiting"))
                    }
                    state.waiter = continuation
                    state.waiterID = id
                    return nil
                }
                if let outcome {
                    continuation.resume(with: outcome)
                    return
                }
                if let timeout {
                    serverChannel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                        self.failWaiter(
                            id,
                            TransportError(
                                .timedOut, "\(self.spec): no controller connected within \(timeout)"))
                    }
                }
            }
        } onCancel: {
            failWaiter(id, CancellationError())
        }
    }

    /// Stops listening. A waiting `accept` throws; links already returned stay open.
    public func close() {
        let waiter = state.withLock { state in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: TransportError(.closed, "\(spec): the listener was closed"))
        serverChannel.close(promise: nil)
    }

    private func failWaiter(_ id: Int, _ error: any Error) {
        let waiter = state.withLock { state -> CheckedContinuation<H4StreamTransport, any Error>? in
            guard state.waiterID == id else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: error)
    }

    /// A controller connected: attach it, or refuse it if one is attached already.
    fileprivate func adopt(_ child: any Channel) -> EventLoopFuture<Void> {
        let peer = child.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" }
        let transport = H4StreamTransport(
            name: "\(spec) (controller at \(peer ?? "?"))", eventLoop: child.eventLoop, peer: peer)
        let accepted = state.withLock { state in
            guard !state.closed, state.attached == nil else { return false }
            state.attached = transport
            return true
        }
        guard accepted else { return turnAway(child) }
        do {
            try child.pipeline.syncOperations.addHandler(H4FramingHandler(transport: transport))
        } catch {
            state.withLock { $0.attached = nil }
            return child.eventLoop.makeFailedFuture(error)
        }
        transport.attach(child)
        transport.whenClosed { [weak self] in
            self?.state.withLock { state in
                if state.attached === transport { state.attached = nil }
                if state.unclaimed === transport { state.unclaimed = nil }
            }
        }
        let waiter: CheckedContinuation<H4StreamTransport, any Error>? = state.withLock { state in
            guard let waiter = state.waiter else {
                state.unclaimed = transport
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: transport)
        return child.eventLoop.makeSucceededVoidFuture()
    }
}

extension TCPServerTransport {
    /// Closes a connection that came while another is attached, after telling it so if `whenBusy` asks.
    fileprivate func turnAway(_ child: any Channel) -> EventLoopFuture<Void> {
        guard case .failCommands(let status, let deadline) = whenBusy, !state.withLock({ $0.closed }) else {
            return child.close()
        }
        do {
            try child.pipeline.syncOperations.addHandler(BusyAnswerHandler(status: status))
        } catch {
            return child.close()
        }
        child.eventLoop.scheduleTask(in: deadline) { child.close(promise: nil) }
        return child.eventLoop.makeSucceededVoidFuture()
    }
}

/// Answers the first HCI command of a turned-away connection with a failure status, then closes it. Anything
/// else it sends (or bytes that are not H4) closes it at once.
private final class BusyAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let status: HCIStatus
    private var decoder = H4Decoder()
    private var cumulation: ByteBuffer?
    private var done = false

    init(status: HCIStatus) { self.status = status }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        var incoming = Self.unwrapInboundIn(data)
        if var buffer = cumulation {
            cumulation = nil
            buffer.writeBuffer(&incoming)
            incoming = buffer
        }
        let packet: HCIPacket?
        do {
            packet = try decoder.decode(&incoming)
        } catch {
            done = true
            context.close(promise: nil)
            return
        }
        guard let packet else {
            cumulation = incoming
            return
        }
        done = true
        guard case .command(let command) = packet else {
            context.close(promise: nil)
            return
        }
        let answer = HCIEvent.CommandComplete(opcode: command.opcode, failure: status)
        var buffer = context.channel.allocator.buffer(capacity: 8)
        H4Encoder.encode(.event(answer.packet), into: &buffer)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Lets the child initializer, built before the listener exists, reach it.
private final class ListenerBox: Sendable {
    let listener = Mutex<TCPServerTransport?>(nil)
}
