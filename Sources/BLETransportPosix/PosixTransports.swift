import BLETransport
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Registers the real transports of this module with a `TransportRegistry`, so that code that cannot depend
/// on this module (the public `BLE` library) can open them by spec string.
///
/// ```swift
/// PosixTransports.install()                                   // at the start of main
/// let link = try await TransportRegistry.shared.open("tcp-client:127.0.0.1:6402")
/// ```
public enum PosixTransports {
    /// The kinds this module opens: `tcp-client`, `tcp-server`, `serial`, `hci-socket`, `unix` (not `virtual`).
    public static let kinds: [TransportSpec.Kind] = [.tcpClient, .tcpServer, .serial, .hciSocket, .unix]

    /// Called with the bound spec when a `tcp-server` transport starts waiting for its controller (useful with
    /// port 0, where the system picks the port).
    public typealias ListeningHandler = @Sendable (TransportSpec) -> Void

    /// Logs "waiting for a controller to connect to tcp-server:HOST:PORT" (notice): the library writes nothing to
    /// stdout or stderr itself; an application that wants the line on its terminal passes its own handler.
    public static let logWaiting: ListeningHandler = { spec in
        Logger(label: "swift-ble.transport").notice("waiting for a controller to connect to \(spec)")
    }

    /// Registers openers for every kind in `kinds` in `registry`.
    ///
    /// - Parameters:
    ///   - registry: the registry that opens transports by spec (the shared one, for `install()`).
    ///   - onListening: told the bound spec when a `tcp-server` transport is waiting for its controller.
    ///   - acceptTimeout: how long a `tcp-server` opener waits for the controller; nil waits until cancelled.
    public static func register(
        in registry: TransportRegistry,
        onListening: ListeningHandler? = logWaiting,
        acceptTimeout: Duration? = nil
    ) {
        for kind in kinds {
            registry.register(kind) { spec in
                try await open(spec, onListening: onListening, acceptTimeout: acceptTimeout)
            }
        }
    }

    /// Registers the openers in `TransportRegistry.shared`.
    public static func install(onListening: ListeningHandler? = logWaiting) {
        register(in: .shared, onListening: onListening)
    }

    /// Opens the transport `spec` names.
    ///
    /// `tcp-server` returns once a controller has connected; while it is attached further connections are
    /// refused, and when its link closes the listening socket closes too.
    ///
    /// - Throws: `TransportError` saying what failed and, where it can, what to do.
    public static func open(
        _ spec: TransportSpec, onListening: ListeningHandler? = nil, acceptTimeout: Duration? = nil
    ) async throws -> any HCITransport {
        switch spec {
        case .tcpClient(let host, let port):
            return try await TCPClientTransport.connect(host: host, port: port)
        case .tcpServer(let host, let port):
            let listener = try await TCPServerTransport.bind(host: host, port: port)
            onListening?(listener.spec)
            let link: H4StreamTransport
            do {
                link = try await listener.accept(timeout: acceptTimeout)
            } catch {
                listener.close()
                throw error
            }
            link.whenClosed { listener.close() }
            return link
        case .serial(let device, let baudRate, let rtsCts):
            return try await SerialTransport.open(device: device, baudRate: baudRate, rtsCts: rtsCts)
        case .hciSocket(let index):
            return try HCIUserChannelTransport.open(index: index)
        case .unix(let path):
            return try await UnixClientTransport.connect(path: path)
        case .virtual:
            throw TransportError(
                .unsupported, "virtual: the virtual controller is not a POSIX transport; BluetoothSystem makes it")
        }
    }
}
