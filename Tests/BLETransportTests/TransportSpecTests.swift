import BLEHCI
import BLETransport
import Testing

@Suite struct TransportSpecTests {
    /// Spec strings and what they parse to; each also prints back as `canonical`.
    static let golden: [(text: String, spec: TransportSpec, canonical: String)] = [
        ("virtual", .virtual, "virtual"),
        ("  virtual\n", .virtual, "virtual"),
        ("tcp-client:127.0.0.1:6402", .tcpClient(host: "127.0.0.1", port: 6402), "tcp-client:127.0.0.1:6402"),
        ("tcp-client:localhost:1", .tcpClient(host: "localhost", port: 1), "tcp-client:localhost:1"),
        ("tcp-client:[::1]:9000", .tcpClient(host: "::1", port: 9000), "tcp-client:[::1]:9000"),
        (
            "tcp-client:[fe80::1%eth0]:65535", .tcpClient(host: "fe80::1%eth0", port: 65535),
            "tcp-client:[fe80::1%eth0]:65535"
        ),
        ("tcp-server:127.0.0.1:0", .tcpServer(host: "127.0.0.1", port: 0), "tcp-server:127.0.0.1:0"),
        ("tcp-server:0.0.0.0:9001", .tcpServer(host: "0.0.0.0", port: 9001), "tcp-server:0.0.0.0:9001"),
        ("tcp-server:[::]:9001", .tcpServer(host: "::", port: 9001), "tcp-server:[::]:9001"),
        ("tcp-server:host.example:00080", .tcpServer(host: "host.example", port: 80), "tcp-server:host.example:80"),
        (
            "serial:/dev/ttyUSB0", .serial(device: "/dev/ttyUSB0", baudRate: 115_200, rtsCts: false),
            "serial:/dev/ttyUSB0,115200"
        ),
        (
            "serial:/dev/ttyACM0,1000000", .serial(device: "/dev/ttyACM0", baudRate: 1_000_000, rtsCts: false),
            "serial:/dev/ttyACM0,1000000"
        ),
        (
            "serial:/dev/ttyAMA0,921600,rtscts", .serial(device: "/dev/ttyAMA0", baudRate: 921_600, rtsCts: true),
            "serial:/dev/ttyAMA0,921600,rtscts"
        ),
        // by-path names contain colons: everything up to the first comma is the device.
        (
            "serial:/dev/serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0,460800",
            .serial(device: "/dev/serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0", baudRate: 460_800, rtsCts: false),
            "serial:/dev/serial/by-path/pci-0000:00:14.0-usb-0:1:1.0-port0,460800"
        ),
        ("hci-socket:0", .hciSocket(index: 0), "hci-socket:0"),
        ("hci-socket:12", .hciSocket(index: 12), "hci-socket:12"),
        ("hci-socket:hci1", .hciSocket(index: 1), "hci-socket:1"),
        ("hci-socket:65534", .hciSocket(index: 65534), "hci-socket:65534"),
        (
            "unix:/run/user/1000/swift-ble/room.sock", .unix(path: "/run/user/1000/swift-ble/room.sock"),
            "unix:/run/user/1000/swift-ble/room.sock"
        ),
        // A path is taken as it is, colons and all.
        ("unix:relative:odd", .unix(path: "relative:odd"), "unix:relative:odd"),
    ]

    @Test(arguments: golden)
    func parsesAndPrints(_ golden: (text: String, spec: TransportSpec, canonical: String)) throws {
        let spec = try TransportSpec(parsing: golden.text)
        #expect(spec == golden.spec)
        #expect(spec.description == golden.canonical)
        #expect(try TransportSpec(parsing: spec.description) == spec)
    }

    @Test func kinds() throws {
        #expect(try TransportSpec(parsing: "virtual").kind == .virtual)
        #expect(try TransportSpec(parsing: "tcp-client:a:1").kind == .tcpClient)
        #expect(try TransportSpec(parsing: "tcp-server:a:1").kind == .tcpServer)
        #expect(try TransportSpec(parsing: "serial:/dev/x").kind == .serial)
        #expect(try TransportSpec(parsing: "hci-socket:0").kind == .hciSocket)
        #expect(try TransportSpec(parsing: "unix:/x").kind == .unix)
        #expect(
            TransportSpec.Kind.all.map(\.rawValue) == [
                "virtual", "tcp-client", "tcp-server", "serial", "hci-socket", "unix",
            ])
    }

    /// Every malformed form, the code it gives and a phrase its message must contain.
    static let malformed: [(text: String, code: TransportSpecError.Code, says: String)] = [
        ("", .empty, "empty"),
        ("   ", .empty, "empty"),
        ("bluetooth", .unknownKind, "'bluetooth' is not a transport kind"),
        ("tcp:127.0.0.1:9000", .unknownKind, "'tcp' is not a transport kind"),
        ("TCP-CLIENT:127.0.0.1:9000", .unknownKind, "'TCP-CLIENT'"),
        (":9000", .unknownKind, "'' is not a transport kind"),
        ("virtual:", .unexpectedArgument, "virtual takes no arguments"),
        ("unix", .missingArgument, "unix needs the socket's path"),
        ("unix:", .missingArgument, "unix needs the socket's path"),
        ("unix:/" + String(repeating: "a", count: 107), .invalidPath, "longer than the system's 107"),
        ("virtual:1", .unexpectedArgument, "virtual takes no arguments"),
        ("tcp-client", .missingArgument, "needs a host and a port"),
        ("tcp-client:", .missingArgument, "needs a host and a port"),
        ("tcp-client:127.0.0.1", .missingArgument, "no port"),
        ("tcp-client:127.0.0.1:", .invalidPort, "'' is not a TCP port"),
        ("tcp-client::9000", .invalidHost, "host is empty"),
        ("tcp-client:127.0.0.1:http", .invalidPort, "'http' is not a TCP port"),
        ("tcp-client:127.0.0.1:-1", .invalidPort, "'-1' is not a TCP port"),
        ("tcp-client:127.0.0.1:+80", .invalidPort, "'+80' is not a TCP port"),
        ("tcp-client:127.0.0.1:65536", .invalidPort, "'65536' is not a TCP port"),
        ("tcp-client:127.0.0.1:99999999999", .invalidPort, "is not a TCP port"),
        ("tcp-client:127.0.0.1: 80", .invalidPort, "' 80' is not a TCP port"),
        ("tcp-client:127.0.0.1:0", .invalidPort, "cannot connect to port 0"),
        ("tcp-client:::1:9000", .invalidHost, "IPv6 host goes in brackets"),
        ("tcp-client:fe80::1:9000", .invalidHost, "IPv6 host goes in brackets"),
        ("tcp-client:[::1:9000", .invalidHost, "no closing ']'"),
        ("tcp-client:[]:9000", .invalidHost, "host in brackets is empty"),
        ("tcp-client:[::1]9000", .missingArgument, "port must follow the bracketed host"),
        ("tcp-client:[::1]", .missingArgument, "port must follow the bracketed host"),
        ("tcp-server", .missingArgument, "tcp-server:HOST:PORT"),
        ("tcp-server:127.0.0.1", .missingArgument, "no port"),
        ("tcp-server:127.0.0.1:70000", .invalidPort, "'70000' is not a TCP port"),
        ("serial", .missingArgument, "serial needs a device"),
        ("serial:", .missingArgument, "serial needs a device"),
        ("serial:,115200", .missingArgument, "needs a device before the baud rate"),
        ("serial:/dev/ttyUSB0,", .invalidBaudRate, "'' is not a baud rate"),
        ("serial:/dev/ttyUSB0,fast", .invalidBaudRate, "'fast' is not a baud rate"),
        ("serial:/dev/ttyUSB0,0", .invalidBaudRate, "'0' is not a baud rate"),
        ("serial:/dev/ttyUSB0,-9600", .invalidBaudRate, "'-9600' is not a baud rate"),
        ("serial:/dev/ttyUSB0,115200,", .invalidOption, "'' is not a serial option"),
        ("serial:/dev/ttyUSB0,115200,xonxoff", .invalidOption, "'xonxoff' is not a serial option"),
        ("serial:/dev/ttyUSB0,115200,RTSCTS", .invalidOption, "'RTSCTS' is not a serial option"),
        ("serial:/dev/ttyUSB0,115200,rtscts,extra", .unexpectedArgument, "at most a device, a baud rate and 'rtscts'"),
        ("hci-socket", .missingArgument, "needs a controller index"),
        ("hci-socket:", .missingArgument, "needs a controller index"),
        ("hci-socket:hci", .invalidIndex, "'hci' is not a controller index"),
        ("hci-socket:one", .invalidIndex, "'one' is not a controller index"),
        ("hci-socket:-1", .invalidIndex, "'-1' is not a controller index"),
        ("hci-socket:65535", .invalidIndex, "'65535' is not a controller index"),
        ("hci-socket:0:1", .invalidIndex, "'0:1' is not a controller index"),
    ]

    @Test(arguments: malformed)
    func rejectsMalformed(_ bad: (text: String, code: TransportSpecError.Code, says: String)) {
        do {
            let spec = try TransportSpec(parsing: bad.text)
            Issue.record("'\(bad.text)' parsed as \(spec)")
        } catch {
            #expect(error.code == bad.code, "'\(bad.text)': \(error)")
            let message = error.description
            #expect(message.contains(bad.says), "'\(bad.text)': \(message)")
            // Every message shows the accepted forms.
            #expect(
                message.contains(
                    "virtual, tcp-client:HOST:PORT, tcp-server:HOST:PORT, serial:DEVICE[,BAUD[,rtscts]], hci-socket:N or unix:PATH"
                ))
        }
    }

    @Test func errorsCompareByCode() {
        #expect(TransportSpecError(.invalidPort, spec: "a", problem: "x") == TransportSpecError(.invalidPort))
        #expect(TransportSpecError(.invalidPort) != TransportSpecError(.invalidHost))
        #expect(throws: TransportSpecError(.unknownKind)) { try TransportSpec(parsing: "usb:1") }
    }
}

@Suite struct TransportRegistryTests {
    final class Dummy: HCITransport {
        let spec: TransportSpec
        init(spec: TransportSpec) { self.spec = spec }
        func setReceiver(_ receiver: @escaping @Sendable (HCITransportEvent) -> Void) {}
        func send(_ packet: HCIPacket) {}
        func close() {}
    }

    @Test func opensWithTheRegisteredOpener() async throws {
        let registry = TransportRegistry()
        registry.register(.tcpClient) { spec in Dummy(spec: spec) }
        let transport = try await registry.open("tcp-client:127.0.0.1:6402")
        #expect((transport as? Dummy)?.spec == .tcpClient(host: "127.0.0.1", port: 6402))
        #expect(registry.canOpen(.tcpClient))
        #expect(!registry.canOpen(.serial))
        #expect(registry.registeredKinds == [.tcpClient])
    }

    @Test func unregisteredKindNamesTheKind() async {
        let registry = TransportRegistry()
        registry.register(.tcpClient) { spec in Dummy(spec: spec) }
        do {
            _ = try await registry.open("serial:/dev/ttyUSB0")
            Issue.record("opened without an opener")
        } catch let error as TransportError {
            #expect(error.code == .notRegistered)
            #expect(error.message.contains("the serial transport is not available"))
            #expect(error.message.contains("registered: tcp-client"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        registry.unregister(.tcpClient)
        await #expect(throws: TransportError(.notRegistered)) { try await registry.open("tcp-client:a:1") }
    }

    @Test func malformedSpecThrowsTheSpecError() async {
        let registry = TransportRegistry()
        await #expect(throws: TransportSpecError(.invalidPort)) { try await registry.open("tcp-client:a:b") }
    }

    @Test func openerErrorsPassThrough() async {
        let registry = TransportRegistry()
        registry.register(.hciSocket) { _ in throw TransportError(.busy, "hci0 is up") }
        await #expect(throws: TransportError(.busy)) { try await registry.open("hci-socket:0") }
    }

    @Test func laterRegistrationReplaces() async throws {
        let registry = TransportRegistry()
        registry.register(.serial) { _ in throw TransportError(.openFailed) }
        registry.register(.serial) { spec in Dummy(spec: spec) }
        _ = try await registry.open("serial:/dev/null")
    }
}
