import BLECore
import NIOCore
import NIOPosix
import Synchronization

/// The room's control socket: one request line in (`status`, `stop`), one answer line out, then the connection
/// closes. `ble room status` and `stop` speak it; the room answers status as one JSON object.
enum RoomControl {
    /// Listens at `path`; `answer` turns each request line into the answer line (without its newline).
    static func listen(
        at path: String, answer: @escaping @Sendable (String) -> String
    ) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(LineHandler(respond: answer))
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
        try await channel.writeAndFlush(buffer).get()
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

/// The room's side: collects a line (at most 256 bytes), answers it, closes.
private final class LineHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var line: [UInt8] = []
    private let respond: @Sendable (String) -> String

    init(respond: @escaping @Sendable (String) -> String) { self.respond = respond }

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
