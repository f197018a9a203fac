import BLEHCI
import Foundation
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP listener that carries H4-framed HCI packets with one client at a time, on plain POSIX sockets and
/// one thread. It only frames: bytes from the client are split into packets with `H4Decoder` and handed to
/// `onPacket`; `send` writes a packet with its H4 indicator. When the client leaves, the next one is accepted.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 2 (UART transport: the H4 packet indicators).
final class H4SocketServer: Sendable {
    /// What the server reports, on its thread.
    enum Event: Sendable {
        case connected(peer: String)
        case packet(HCIPacket)
        /// The client closed the connection, or sent bytes that are not H4 (then `reason` says so).
        case disconnected(reason: String?)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private struct State {
        var client: Int32 = -1
        var stopped = false
    }

    private let listener: Int32
    /// The port the listener is bound to (the one the system chose if 0 was asked for).
    let port: UInt16
    let host: String
    private let state = Mutex(State())

    /// Binds and listens on `host` (an IPv4 address) and `port` (0: any free port).
    init(host: String, port: UInt16) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw Failure(description: "'\(host)' is not an IPv4 address")
        }
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket: \(Self.errorText())") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 1) == 0 else {
            let message = Self.errorText()
            close(fd)
            throw Failure(description: "cannot listen on \(host):\(port): \(message)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.listener = fd
        self.host = host
        self.port = UInt16(bigEndian: actual.sin_port)
    }

    /// Accepts clients one after another on a thread of its own until `stop`, reporting through `handler`.
    func start(_ handler: @escaping @Sendable (Event) -> Void) {
        let thread = Thread { [self] in serve(handler) }
        thread.name = "h4-server"
        thread.start()
    }

    /// Writes one packet to the client, if one is connected (otherwise the packet is dropped, as a UART with
    /// nobody on the other end would drop it).
    func send(_ packet: HCIPacket) {
        let bytes = H4Encoder.encode(packet)
        // Writes are serialised under the lock so that two packets never interleave on the stream.
        state.withLock { s in
            guard s.client >= 0 else { return }
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(s.client, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { shutdown(s.client, Int32(SHUT_RDWR)); return }
                offset += written
            }
        }
    }

    /// Closes the listener and the client; the thread ends.
    func stop() {
        state.withLock { s in
            guard !s.stopped else { return }
            s.stopped = true
            if s.client >= 0 { shutdown(s.client, Int32(SHUT_RDWR)) }
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
        }
    }

    private func serve(_ handler: @Sendable (Event) -> Void) {
        while true {
            var peer = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &length) }
            }
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let accepted = state.withLock { s -> Bool in
                if s.stopped { return false }
                s.client = fd
                return true
            }
            guard accepted else { close(fd); return }
            handler(.connected(peer: Self.describe(peer)))
            let reason = pump(fd, handler)
            state.withLock { s in s.client = -1 }
            close(fd)
            if state.withLock({ $0.stopped }) { return }
            handler(.disconnected(reason: reason))
        }
    }

    /// Reads the client until it closes; returns why it ended if that was not a clean close.
    private func pump(_ fd: Int32, _ handler: @Sendable (Event) -> Void) -> String? {
        var decoder = H4Decoder()
        var buffer = ByteBuffer()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return nil }
            buffer.writeBytes(chunk[0..<count])
            do {
                while let packet = try decoder.decode(&buffer) { handler(.packet(packet)) }
            } catch {
                return "the host sent bytes that are not H4: \(error)"
            }
            buffer.discardReadBytes()
        }
    }

    private static func errorText() -> String {
        String(validatingCString: strerror(errno)) ?? "error \(errno)"
    }

    private static func describe(_ peer: sockaddr_in) -> String {
        var address = peer.sin_addr
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &address, &text, socklen_t(INET_ADDRSTRLEN))
        let printable = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return "\(String(decoding: printable, as: UTF8.self)):\(UInt16(bigEndian: peer.sin_port))"
    }
}
