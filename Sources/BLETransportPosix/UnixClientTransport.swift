import BLETransport
import NIOCore
import NIOPosix

/// `unix:PATH`: H4 over a Unix-domain stream socket we connect to, where a controller listens (the `ble` tool's
/// shared room gives each connection a controller of its own, as RootCanal does for each TCP connection).
public enum UnixClientTransport {
    /// Connects to the socket at `path` and returns the link once the connection is up.
    ///
    /// - Throws: `TransportError` `.connectionFailed`, naming the path and the cause (no such file, refused).
    public static func connect(
        path: String, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> H4StreamTransport {
        let spec = TransportSpec.unix(path: path)
        let loop = group.next()
        let transport = H4StreamTransport(name: spec.description, eventLoop: loop)
        let bootstrap = ClientBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(H4FramingHandler(transport: transport))
                }
            }
        do {
            let channel = try await bootstrap.connect(unixDomainSocketPath: path).get()
            transport.attach(channel)
            return transport
        } catch {
            throw TransportError(.connectionFailed, "\(spec): cannot connect: \(PosixErrorText.describe(error))")
        }
    }
}
