import BLECore
import BLETransport
import NIOCore
import NIOPosix

/// `tcp-client:HOST:PORT`: H4 over a TCP connection we open to a controller that listens (Bumble's
/// `tcp-server` transport, RootCanal's HCI port 6402, `ble controller`).
public enum TCPClientTransport {
    /// Connects to `host:port` and returns the link once the connection is up.
    ///
    /// - Throws: `TransportError` `.connectionFailed`, naming `host:port` and the cause (refused, unreachable,
    ///   timed out after `timeout`).
    public static func connect(
        host: String, port: Int, timeout: Duration = .seconds(10),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> H4StreamTransport {
        let spec = TransportSpec.tcpClient(host: host, port: port)
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let loop = group.next()
        let transport = H4StreamTransport(name: spec.description, eventLoop: loop)
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(timeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(H4FramingHandler(transport: transport))
                }
            }
        do {
            let channel = try await bootstrap.connect(host: host, port: port).get()
            transport.attach(channel)
            return transport
        } catch {
            throw TransportError(
                .connectionFailed, "\(spec): cannot connect to \(address): \(PosixErrorText.describe(error))")
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        self = .nanoseconds(duration.clampedNanoseconds)
    }
}

/// Short, readable texts for the errors NIO and the system report.
enum PosixErrorText {
    static func describe(_ error: any Error) -> String {
        if let connection = error as? NIOConnectionError {
            if let first = connection.connectionErrors.first {
                return describe(first.error)
            }
            if let dns = connection.dnsAError ?? connection.dnsAAAAError {
                return "cannot resolve the host (\(dns))"
            }
            return "no address to connect to"
        }
        if let io = error as? IOError {
            // The system's own words ("Connection refused"), not NIO's description of the failed call.
            return String(cString: strerror(io.errnoCode))
        }
        if case .connectTimeout(let amount)? = error as? ChannelError {
            return "timed out after \(amount.nanoseconds / 1_000_000) ms"
        }
        return "\(error)"
    }
}
