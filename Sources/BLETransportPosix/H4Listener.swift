import BLETransport
import NIOCore
import NIOPosix
import Synchronization

/// A listening socket that takes any number of H4 connections at once, each handed to `onConnection` as its own
/// `H4StreamTransport`: what a simulator that gives every connecting host a controller of its own needs (RootCanal
/// does so on its HCI port; the `ble` tool's shared room on its Unix socket and on `--h4 tcp-server:HOST:PORT`).
/// `TCPServerTransport`, by contrast, holds one controller at a time for a host that listens.
///
/// The connection's bytes from the far end are the host's (commands and data); what is sent on the transport
/// goes back to it. The listener does not remove a socket file left by an earlier process: the caller does, once
/// it knows no other process owns it.
public final class H4Listener: Sendable {
    /// Where a listener listens.
    public enum Address: Sendable, Hashable, CustomStringConvertible {
        /// `tcp-server:HOST:PORT` (PORT 0: a free port, see `spec` once bound).
        case tcp(host: String, port: Int)
        /// A Unix-domain stream socket at this path.
        case unix(path: String)

        public var description: String {
            switch self {
            case .tcp(let host, let port): TransportSpec.tcpServer(host: host, port: port).description
            case .unix(let path): TransportSpec.unix(path: path).description
            }
        }
    }

    /// Where it listens, with the port the system chose for a TCP listener bound to port 0.
    public let address: Address
    private let channel: any Channel

    private init(address: Address, channel: any Channel) {
        self.address = address
        self.channel = channel
    }

    /// Starts listening at `address`. Each connection is passed to `onConnection` on its event loop, before any of
    /// its bytes are read (packets that arrive before the receiver is set wait for it).
    ///
    /// - Throws: `TransportError` `.connectionFailed` naming the address when it cannot be bound.
    public static func bind(
        _ address: Address, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onConnection: @escaping @Sendable (H4StreamTransport) -> Void
    ) async throws -> H4Listener {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { child in
                let peer: String? =
                    switch address {
                    case .tcp: child.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" }
                    case .unix: nil
                    }
                let transport = H4StreamTransport(
                    name: "\(address) (host\(peer.map { " at \($0)" } ?? ""))", eventLoop: child.eventLoop, peer: peer)
                return child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(H4FramingHandler(transport: transport))
                    transport.attach(child)
                    onConnection(transport)
                }
            }
        do {
            switch address {
            case .tcp(let host, let port):
                let channel = try await bootstrap.childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                    .bind(host: host, port: port).get()
                let bound = channel.localAddress?.port ?? port
                return H4Listener(address: .tcp(host: host, port: bound), channel: channel)
            case .unix(let path):
                let channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
                return H4Listener(address: address, channel: channel)
            }
        } catch {
            throw TransportError(.connectionFailed, "\(address): cannot listen: \(PosixErrorText.describe(error))")
        }
    }

    /// Stops listening; connections already made stay open.
    public func close() {
        channel.close(promise: nil)
    }
}
