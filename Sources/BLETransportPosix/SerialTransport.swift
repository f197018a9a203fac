import BLETransport
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `serial:DEVICE[,BAUD[,rtscts]]`: H4 over a UART, such as a board running an HCI UART firmware (Zephyr's
/// `hci_uart`, a Nordic or ESP32 HCI image) or a USB serial adapter.
///
/// The port is put in raw mode (no echo, no line editing, no character translation, 8 data bits, no parity,
/// one stop bit), at the baud rate given, with RTS/CTS hardware flow control when asked (most HCI UART
/// firmwares expect it at rates above 115200).
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part A, 1 (UART transport: settings).
public enum SerialTransport {
    /// Opens `device` and configures it.
    ///
    /// - Throws: `TransportError`: `.noSuchDevice`, `.permissionDenied` (with a hint about the `dialout`
    ///   group), `.busy`, `.openFailed` for a device that is not a terminal or a baud rate this system cannot
    ///   set.
    public static func open(
        device: String, baudRate: Int = TransportSpec.defaultBaudRate, rtsCts: Bool = false,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> H4StreamTransport {
        let spec = TransportSpec.serial(device: device, baudRate: baudRate, rtsCts: rtsCts)
        let fd = try openConfigured(device: device, baudRate: baudRate, rtsCts: rtsCts, spec: spec)
        let loop = group.next()
        let transport = H4StreamTransport(name: spec.description, eventLoop: loop)
        do {
            let channel = try await NIOPipeBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(H4FramingHandler(transport: transport))
                    }
                }
                .takingOwnershipOfDescriptor(inputOutput: fd).get()
            transport.attach(channel)
            return transport
        } catch {
            _ = systemClose(fd)
            throw TransportError(
                .openFailed, "\(spec): cannot read and write \(device): \(PosixErrorText.describe(error))")
        }
    }

    /// The termios speed constant for a baud rate, or nil when this system has none.
    public static func speed(forBaudRate rate: Int) -> speed_t? {
        #if os(Linux)
            let table: [Int: Int32] = [
                1200: B1200, 2400: B2400, 4800: B4800, 9600: B9600, 19200: B19200, 38400: B38400, 57600: B57600,
                115_200: B115200, 230_400: B230400, 460_800: B460800, 500_000: B500000, 576_000: B576000,
                921_600: B921600, 1_000_000: B1000000, 1_152_000: B1152000, 1_500_000: B1500000,
                2_000_000: B2000000, 2_500_000: B2500000, 3_000_000: B3000000, 3_500_000: B3500000,
                4_000_000: B4000000,
            ]
            return table[rate].map { speed_t($0) }
        #else
            // Darwin's speed_t is the rate itself.
            return rate > 0 ? speed_t(rate) : nil
        #endif
    }

    /// The baud rates `speed(forBaudRate:)` knows, for error messages.
    static let knownRates = [
        9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 921_600, 1_000_000, 2_000_000, 3_000_000,
    ]

    /// Opens the device non-blocking and applies raw mode, the speed and the flow control; returns the fd.
    private static func openConfigured(device: String, baudRate: Int, rtsCts: Bool, spec: TransportSpec) throws -> Int32
    {
        guard let speed = speed(forBaudRate: baudRate) else {
            throw TransportError(
                .openFailed,
                "\(spec): \(baudRate) baud cannot be set on this system; use one of "
                    + knownRates.map(String.init).joined(separator: ", "))
        }
        let fd = systemOpen(device, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENXIO, ENODEV:
                throw TransportError(.noSuchDevice, "\(spec): no such device \(device)")
            case EACCES, EPERM:
                throw TransportError(
                    .permissionDenied,
                    "\(spec): no permission to open \(device) (on Linux, add your user to the group that owns it, usually `dialout`)"
                )
            case EBUSY:
                throw TransportError(.busy, "\(spec): \(device) is in use by another program")
            default:
                throw TransportError(.openFailed, "\(spec): cannot open \(device): \(errnoText(code))")
            }
        }
        do {
            var options = termios()
            guard tcgetattr(fd, &options) == 0 else {
                let code = errno
                throw TransportError(
                    .openFailed, "\(spec): \(device) is not a serial port (tcgetattr: \(errnoText(code)))")
            }
            cfmakeraw(&options)
            options.c_cflag |= tcflag_t(CLOCAL | CREAD)
            if rtsCts {
                options.c_cflag |= hardwareFlowControl
            } else {
                options.c_cflag &= ~hardwareFlowControl
            }
            // Reads return as soon as one byte is there.
            withUnsafeMutableBytes(of: &options.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            guard cfsetispeed(&options, speed) == 0, cfsetospeed(&options, speed) == 0 else {
                throw TransportError(.openFailed, "\(spec): \(device) refuses \(baudRate) baud")
            }
            guard tcsetattr(fd, TCSANOW, &options) == 0 else {
                let code = errno
                throw TransportError(.openFailed, "\(spec): cannot configure \(device): \(errnoText(code))")
            }
            // Whatever the device sent before we were listening is stale.
            _ = tcflush(fd, TCIOFLUSH)
            return fd
        } catch {
            _ = systemClose(fd)
            throw error
        }
    }

    /// The c_cflag bit for RTS/CTS flow control.
    private static var hardwareFlowControl: tcflag_t {
        #if os(Linux)
            return 0x8000_0000  // CRTSCTS, 020000000000
        #else
            return tcflag_t(CRTSCTS)
        #endif
    }
}

func errnoText(_ code: Int32) -> String {
    "\(String(cString: strerror(code))) (errno \(code))"
}

private func systemOpen(_ path: String, _ flags: Int32) -> Int32 {
    #if canImport(Glibc)
        return Glibc.open(path, flags)
    #else
        return Darwin.open(path, flags)
    #endif
}

func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
        return Glibc.close(fd)
    #else
        return Darwin.close(fd)
    #endif
}
