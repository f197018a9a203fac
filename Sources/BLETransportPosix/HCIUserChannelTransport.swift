import BLECore
import BLEHCI
import BLETransport
import Dispatch
import Foundation
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `hci-socket:N`: a controller the Linux kernel knows as `hciN` (a USB dongle, a built-in chip), taken over
/// through the HCI user channel, so that our host, not BlueZ, drives it.
///
/// The socket is `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)` bound to `sockaddr_hci { AF_BLUETOOTH, N,
/// HCI_CHANNEL_USER }`. The kernel hands over the controller only when the interface is down and the process
/// has `CAP_NET_ADMIN`:
///
/// ```
/// sudo hciconfig hci0 down          # or: sudo btmgmt --index 0 power off
/// sudo setcap cap_net_admin+ep .build/debug/ble     # or run as root
/// ble scan --transport hci-socket:0
/// ```
///
/// Each read returns one whole packet with its H4 indicator, and each write must be one whole packet, so the
/// socket is served by a reader thread and written directly (no stream coalescing). Packets arrive on a
/// serial queue, in order; a read that is not exactly one packet closes the link with a reason.
public final class HCIUserChannelTransport: HCITransport, CustomStringConvertible {
    /// `AF_BLUETOOTH` (and `PF_BLUETOOTH`).
    public static let addressFamily: UInt16 = 31
    /// `BTPROTO_HCI`.
    public static let protocolHCI: Int32 = 1
    /// `HCI_CHANNEL_USER`: exclusive access to one controller, bypassing the kernel's host stack.
    public static let channelUser: UInt16 = 1
    /// Room for the largest packet the user channel delivers (ACL: indicator, 4-byte header, 65535 bytes).
    static let readBufferSize = 1 + 4 + 65535

    /// The system call a socket error came from.
    public enum Operation: Sendable {
        case socket
        case bind
    }

    /// The `sockaddr_hci` bytes binding controller `index` on `channel`: family, device and channel, each an
    /// unsigned 16-bit integer in host byte order.
    public static func socketAddress(index: UInt16, channel: UInt16 = channelUser) -> [UInt8] {
        var bytes: [UInt8] = []
        for field in [addressFamily, index, channel] {
            withUnsafeBytes(of: field) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// The error a failed `socket` or `bind` gives, with what to do about it.
    public static func error(errno code: Int32, operation: Operation, index: Int) -> TransportError {
        let spec = "hci-socket:\(index)"
        let name = "hci\(index)"
        #if canImport(Glibc)
            switch code {
            case EBUSY:
                return TransportError(
                    .busy,
                    "\(spec): \(name) is up: run `sudo hciconfig \(name) down` (or `sudo btmgmt --index \(index) power off`) and try again"
                )
            case EPERM, EACCES:
                return TransportError(
                    .permissionDenied,
                    "\(spec): the HCI user channel needs CAP_NET_ADMIN: run as root, or `sudo setcap cap_net_admin+ep <program>`"
                )
            case ENODEV:
                return TransportError(.noSuchDevice, "\(spec): there is no controller \(name) (`hciconfig` lists them)")
            case EUSERS, EALREADY:
                return TransportError(.busy, "\(spec): another program already holds the user channel of \(name)")
            case EAFNOSUPPORT, EPROTONOSUPPORT:
                return TransportError(
                    .unsupported,
                    "\(spec): this kernel has no Bluetooth sockets (AF_BLUETOOTH); load the `bluetooth` module")
            case EINVAL where operation == .bind:
                return TransportError(.openFailed, "\(spec): the kernel refused the user channel of \(name) (EINVAL)")
            default:
                let call = operation == .socket ? "socket" : "bind"
                return TransportError(.openFailed, "\(spec): \(call) failed: \(errnoText(code))")
            }
        #else
            return TransportError(.unsupported, "\(spec): the HCI user channel exists only on Linux")
        #endif
    }

    /// Opens the user channel of `hci<index>`.
    ///
    /// - Throws: `TransportError` from `error(errno:operation:index:)`; `.unsupported` outside Linux.
    public static func open(index: Int) throws -> HCIUserChannelTransport {
        #if os(Linux)
            guard let device = UInt16(exactly: index), device != 0xFFFF else {
                throw TransportError(.noSuchDevice, "hci-socket:\(index): not a controller index (0...65534)")
            }
            let fd = socket(Int32(addressFamily), Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), protocolHCI)
            guard fd >= 0 else { throw error(errno: errno, operation: .socket, index: index) }
            let address = socketAddress(index: device)
            let bound = address.withUnsafeBytes { raw in
                bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            guard bound == 0 else {
                let code = errno
                _ = systemClose(fd)
                throw error(errno: code, operation: .bind, index: index)
            }
            var wake: [Int32] = [0, 0]
            guard pipe(&wake) == 0 else {
                let code = errno
                _ = systemClose(fd)
                throw TransportError(.openFailed, "hci-socket:\(index): pipe2 failed: \(errnoText(code))")
            }
            for end in wake {
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                _ = fcntl(end, F_SETFL, O_NONBLOCK)
            }
            let transport = HCIUserChannelTransport(index: index, fd: fd, wakeRead: wake[0], wakeWrite: wake[1])
            transport.startReading()
            return transport
        #else
            throw TransportError(.unsupported, "hci-socket:\(index): the HCI user channel exists only on Linux")
        #endif
    }

    public let description: String
    private let index: Int
    private let delivery: DispatchQueue

    private struct State {
        /// -1 once closed; writes and the final close happen under the lock, so the number is never reused
        /// under a writer.
        var fd: Int32
        var wakeWrite: Int32
        var receiver: (@Sendable (HCITransportEvent) -> Void)?
        var pending: [HCITransportEvent] = []
        var closing = false
        var failure: String?
        var closeReported = false
    }

    private let state: Mutex<State>
    private let wakeRead: Int32

    private init(index: Int, fd: Int32, wakeRead: Int32, wakeWrite: Int32) {
        self.index = index
        self.description = "hci-socket:\(index)"
        self.delivery = DispatchQueue(label: "ble.hci-socket.\(index)")
        self.wakeRead = wakeRead
        self.state = Mutex(State(fd: fd, wakeWrite: wakeWrite))
    }

    // MARK: - HCITransport

    public func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {
        delivery.async {
            let pending: [HCITransportEvent] = self.state.withLock { state in
                state.receiver = receiver
                defer { state.pending = [] }
                return state.pending
            }
            for event in pending { receiver(event) }
        }
    }

    public func send(_ packet: HCIPacket) {
        let bytes = H4Encoder.encode(packet)
        let failure: String? = state.withLock { state in
            guard !state.closing, state.fd >= 0 else { return nil }
            #if os(Linux)
                while true {
                    let written = bytes.withUnsafeBytes { Glibc.write(state.fd, $0.baseAddress, $0.count) }
                    if written == bytes.count { return nil }
                    let code = errno
                    if written < 0, code == EINTR { continue }
                    return written < 0
                        ? "write failed: \(errnoText(code))" : "short write (\(written) of \(bytes.count) bytes)"
                }
            #else
                return nil
            #endif
        }
        if let failure { fail(failure) }
    }

    public func close() {
        state.withLock { $0.closing = true }
        wake()
    }

    // MARK: - Reading

    private func fail(_ reason: String) {
        state.withLock { state in
            if state.failure == nil { state.failure = "\(description): \(reason)" }
            state.closing = true
        }
        wake()
    }

    private func wake() {
        state.withLock { state in
            guard state.wakeWrite >= 0 else { return }
            var byte: UInt8 = 1
            #if os(Linux)
                _ = Glibc.write(state.wakeWrite, &byte, 1)
            #endif
        }
    }

    private func startReading() {
        #if os(Linux)
            let thread = Thread { [self] in readLoop() }
            thread.name = "ble.hci-socket.\(index)"
            thread.start()
        #endif
    }

    private func deliver(_ event: HCITransportEvent) {
        delivery.async {
            let receiver: (@Sendable (HCITransportEvent) -> Void)? = self.state.withLock { state in
                guard let receiver = state.receiver else {
                    state.pending.append(event)
                    return nil
                }
                return receiver
            }
            receiver?(event)
        }
    }

    #if os(Linux)
        private func readLoop() {
            let fd = state.withLock { $0.fd }
            var buffer = [UInt8](repeating: 0, count: Self.readBufferSize)
            var endReason: String?
            loop: while true {
                if state.withLock({ $0.closing }) { break }
                var fds = [
                    pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&fds, 2, -1)
                if ready < 0 {
                    if errno == EINTR { continue }
                    endReason = "poll failed: \(errnoText(errno))"
                    break
                }
                if fds[1].revents != 0 { continue }  // woken: re-check `closing`
                if fds[0].revents & Int16(POLLIN) == 0, fds[0].revents != 0 {
                    endReason = "the controller went away (socket error)"
                    break
                }
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 {
                    let code = errno
                    if code == EINTR || code == EAGAIN { continue }
                    switch code {
                    case ENETDOWN: endReason = "hci\(index) went down"
                    case ENODEV: endReason = "hci\(index) was removed (unplugged?)"
                    default: endReason = "read failed: \(errnoText(code))"
                    }
                    break
                }
                if count == 0 {
                    endReason = "the kernel closed the user channel"
                    break
                }
                var bytes = ByteBuffer(bytes: buffer[0..<count])
                var decoder = H4Decoder()
                do {
                    guard let packet = try decoder.decode(&bytes), bytes.readableBytes == 0 else {
                        endReason = "a read was not one whole H4 packet: \(Array(buffer[0..<min(count, 16)]).hexString)"
                        break loop
                    }
                    deliver(.packet(packet))
                } catch {
                    endReason = "malformed packet from the controller: \(error)"
                    break
                }
            }
            finish(endReason)
        }
    #endif

    private func finish(_ endReason: String?) {
        let event: HCITransportEvent? = state.withLock { state in
            #if os(Linux)
                if state.fd >= 0 { _ = systemClose(state.fd) }
                if state.wakeWrite >= 0 { _ = systemClose(state.wakeWrite) }
                _ = systemClose(wakeRead)
            #endif
            state.fd = -1
            state.wakeWrite = -1
            if state.closeReported { return nil }
            state.closeReported = true
            let reason: String?
            if let failure = state.failure {
                reason = failure
            } else if state.closing {
                reason = nil
            } else {
                reason = endReason.map { "\(description): \($0)" } ?? "\(description): closed"
            }
            state.closing = true
            return .closed(reason: reason)
        }
        if let event { deliver(event) }
    }
}
