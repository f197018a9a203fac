import BLECore
import NIOCore
import NIOPosix
import Synchronization

/// The room's control socket: one request line in (`status`, `stop`), one answer line out, then the connection
/// closes. `ble room status` and `stop` speak it; the room answers status as one JSON object.
///
/// Both sides bound their wait. The room closes a connection `connectionLimit` after it came, answered or not,
/// and holds at most `maximumConnections` at once (one more closes the oldest), so clients that connect and say
/// nothing can neither keep a connection for ever nor pile up; the asking side gives up after its `timeout`.
enum RoomControl {
    /// How long a connection may take to send its line and read the answer before the room closes it.
    static let connectionLimit: Duration = .seconds(3)
    /// How many connections the room holds at once.
    static let maximumConnections = 32

    /// Listens at `path`; `answer` turns each request line into the answer line (without its newline).
    static func listen(
        at path: String, connectionLimit: Duration = connectionLimit, maximumConnections: Int = maximumConnections,
        answer: @escaping @Sendable (String) -> String
    ) async throws -> any Channel {
        let connections = ControlConnections(maximum: maximumConnections)
        // One event loop for the listener and every connection: they are counted in as they were accepted, so the
        // oldest is the one let go (across loops, a later connection could be counted first).
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton.next())
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(
                        LineHandler(connections: connections, limit: connectionLimit, respond: answer))
                }
            }
            .bind(unixDomainSocketPath: path).get()
    }

    /// Sends `request` to the room at `path` and returns its answer line; throws when nobody listens or no answer
    /// comes within `timeout`.
    static func ask(_ request: String, at path: String, timeout: Duration = .seconds(5)) async throws -> String {
        let promise = Once(MultiThreadedEventLoopGroup.singleton.next().makePromise(of: String.self))
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.nanoseconds(timeout.clampedNanoseconds))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AnswerHandler(promise: promise))
                    }
                }
                .connect(unixDomainSocketPath: path).get()
        } catch {
            // Nobody listens: the promise is settled all the same (NIO insists that none is left behind).
            promise.complete(.failure(error))
            throw error
        }
        let deadline = channel.eventLoop.scheduleTask(in: .nanoseconds(timeout.clampedNanoseconds)) {
            promise.complete(.failure(RoomControlError.noAnswer))
            channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        var buffer = channel.allocator.buffer(capacity: request.utf8.count + 1)
        buffer.writeString(request + "\n")
        do {
            try await channel.writeAndFlush(buffer).get()
        } catch {
            // The room closed the connection first (its limit ran out on a loaded machine): the close has
            // already said "no answer", which is what the caller hears; the write's own error is the fallback.
            promise.complete(.failure(error))
        }
        return try await promise.future.get()
    }
}

/// A promise completed by whichever comes first (the answer, the close, the deadline); later ones are ignored.
final class Once: Sendable {
    private let promise: EventLoopPromise<String>
    private let done = Mutex(false)

    init(_ promise: EventLoopPromise<String>) { self.promise = promise }

    var future: EventLoopFuture<String> { promise.futureResult }

    func complete(_ result: Result<String, any Error>) {
        guard
            done.withLock({ d in
                defer { d = true }
                return !d
            })
        else { return }
        promise.completeWith(result)
    }
}

enum RoomControlError: Error, CustomStringConvertible {
    case noAnswer
    var description: String { "the room did not answer" }
}

/// The room's open control connections, oldest first.
private final class ControlConnections: Sendable {
    private let maximum: Int
    private let open = Mutex<[(id: ObjectIdentifier, channel: any Channel)]>([])

    init(maximum: Int) { self.maximum = maximum }

    /// Counts `channel` in; returns the connections to close to stay within the maximum (the oldest).
    func admit(_ channel: any Channel) -> [any Channel] {
        open.withLock { open in
            open.append((ObjectIdentifier(channel), channel))
            let excess = max(0, open.count - maximum)
            defer { open.removeFirst(excess) }
            return open.prefix(excess).map(\.channel)
        }
    }

    func remove(_ channel: any Channel) {
        open.withLock { open in open.removeAll { $0.id == ObjectIdentifier(channel) } }
    }
}

/// The room's side: collects a line (at most 256 bytes), answers it, closes; closes anyway after `limit`.
private final class LineHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var line: [UInt8] = []
    private let connections: ControlConnections
    private let limit: Duration
    private let respond: @Sendable (String) -> String
    private var deadline: Scheduled<Void>?

    init(connections: ControlConnections, limit: Duration, respond: @escaping @Sendable (String) -> String) {
        self.connections = connections
        self.limit = limit
        self.respond = respond
    }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(limit.clampedNanoseconds)) {
            channel.close(promise: nil)
        }
        for oldest in connections.admit(channel) { oldest.close(promise: nil) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        connections.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        guard let bytes = buffer.readBytes(length: buffer.readableBytes) else { return }
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                let request = String(decoding: line, as: UTF8.self)
                let answer = respond(request)
                var out = context.channel.allocator.buffer(capacity: answer.utf8.count + 1)
                out.writeString(answer + "\n")
                let channel = context.channel
                context.writeAndFlush(Self.wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
                line = []
                return
            }
            line.append(byte)
            if line.count > 256 {
                context.close(promise: nil)
                return
            }
        }
    }
}

/// The asking side: the answer is everything up to the first newline (or to the close).
private final class AnswerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var bytes: [UInt8] = []
    private let promise: Once

    init(promise: Once) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        bytes += buffer.readBytes(length: buffer.readableBytes) ?? []
        if let end = bytes.firstIndex(of: UInt8(ascii: "\n")) {
            promise.complete(.success(String(decoding: bytes[..<end], as: UTF8.self)))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.complete(
            bytes.isEmpty ? .failure(RoomControlError.noAnswer) : .success(String(decoding: bytes, as: UTF8.self)))
    }
}
