import BLECore
import BLEHCI
import BLETransport
import NIOCore
import NIOPosix
import Synchronization

/// What a transport under test delivered to its host.
final class EventLog: Sendable {
    private let events = Mutex<[HCITransportEvent]>([])

    var receiver: @Sendable (HCITransportEvent) -> Void {
        { [self] event in events.withLock { $0.append(event) } }
    }

    var all: [HCITransportEvent] { events.withLock { $0 } }
    var packets: [HCIPacket] {
        all.compactMap { if case .packet(let packet) = $0 { return packet } else { return nil } }
    }
    /// Every close delivered, with its reason.
    var closes: [String?] {
        all.compactMap { if case .closed(let reason) = $0 { return .some(reason) } else { return nil } }
    }
}

/// The controller side of a test: records the bytes it receives and the channels it has.
final class PeerLog: Sendable {
    let bytes = Mutex<[UInt8]>([])
    let channels = Mutex<[any Channel]>([])
    let inactive = Mutex(0)

    var received: [UInt8] { bytes.withLock { $0 } }
    var channel: (any Channel)? { channels.withLock { $0.first } }
    var inactiveCount: Int { inactive.withLock { $0 } }
}

final class PeerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let log: PeerLog
    init(log: PeerLog) { self.log = log }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        log.channels.withLock { $0.append(channel) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
        log.bytes.withLock { $0 += bytes }
    }

    func channelInactive(context: ChannelHandlerContext) {
        log.inactive.withLock { $0 += 1 }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

enum Loopback {
    /// A listening controller on 127.0.0.1 and a free port.
    static func listen(_ log: PeerLog) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerHandler(log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// A controller that connects to `port` on 127.0.0.1.
    static func connect(port: Int, _ log: PeerLog) async throws -> any Channel {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerHandler(log: log))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
    }

    /// Writes `bytes` to the peer's channel, one write each, waiting a little between them so that they
    /// arrive as separate reads.
    /// Writes `bytes` one at a time. A peer that closes the connection part way (as a listener turning away a
    /// stranger does at its first byte) ends the writing there: what it received is for the test to check.
    static func writeSlowly(_ bytes: [UInt8], to channel: any Channel) async throws {
        for byte in bytes {
            do {
                try await channel.writeAndFlush(ByteBuffer(bytes: [byte])).get()
            } catch ChannelError.ioOnClosedChannel {
                return
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

/// Waits, up to `timeout`, until `condition` holds; returns whether it did (the bound is for a loaded machine:
/// it returns as soon as the condition holds).
@discardableResult
func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

enum Packets {
    /// HCI_Reset.
    static let reset = HCIPacket.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0C03)))
    static let resetH4: [UInt8] = [0x01, 0x03, 0x0C, 0x00]
    /// Command Complete for HCI_Reset, success.
    static let resetComplete = HCIPacket.event(
        HCIEventPacket(code: HCIEventCode(rawValue: 0x0E), parameters: [0x01, 0x03, 0x0C, 0x00]))
    static let resetCompleteH4: [UInt8] = [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]
    /// An ACL packet on handle 0x0040, 5 bytes of data.
    static let acl = HCIPacket.acl(
        HCIACLDataPacket(
            handle: ConnectionHandle(rawValue: 0x0040), packetBoundary: .firstFlushable,
            data: [0x01, 0x00, 0x04, 0x00, 0x0A]))
    static let aclH4: [UInt8] = [0x02, 0x40, 0x20, 0x05, 0x00, 0x01, 0x00, 0x04, 0x00, 0x0A]
}
