import BLEHCI
import BLETransport
import BLETransportPosix
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
    import Glibc
#endif

#if os(Linux)
    /// A pseudo-terminal pair: the transport opens the terminal side by name, the test plays the controller on the
    /// master side.
    struct PseudoTerminal {
        let master: Int32
        let terminal: Int32
        let name: String

        init() throws {
            var master: Int32 = -1
            var terminal: Int32 = -1
            guard openpty(&master, &terminal, nil, nil, nil) == 0 else {
                throw TransportError(.openFailed, "openpty failed")
            }
            self.master = master
            self.terminal = terminal
            var buffer = [CChar](repeating: 0, count: 256)
            guard ttyname_r(terminal, &buffer, buffer.count) == 0 else {
                throw TransportError(.openFailed, "ttyname_r failed")
            }
            self.name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        /// The master side as a NIO channel feeding `log`; NIO owns the descriptor from here on.
        func controller(_ log: PeerLog) async throws -> any Channel {
            try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(PeerHandler(log: log))
                    }
                }
                .takingOwnershipOfDescriptor(inputOutput: master).get()
        }
    }

    @Suite(.timeLimit(.minutes(1))) struct SerialTransportTests {
        @Test func h4BothWaysOverAPseudoTerminal() async throws {
            let pty = try PseudoTerminal()
            let transport = try await SerialTransport.open(device: pty.name, baudRate: 1_000_000, rtsCts: true)
            defer { transport.close() }
            _ = close(pty.terminal)  // the transport has its own descriptor now
            #expect(transport.description == "serial:\(pty.name),1000000,rtscts")
            let peer = PeerLog()
            let controller = try await pty.controller(peer)
            defer { controller.close(promise: nil) }
            let events = EventLog()
            transport.setReceiver(events.receiver)

            transport.send(Packets.reset)
            transport.send(Packets.acl)
            #expect(await eventually { peer.received.count == 14 })
            #expect(peer.received == Packets.resetH4 + Packets.aclH4)  // raw mode: nothing translated or echoed

            try await Loopback.writeSlowly(Packets.resetCompleteH4, to: controller)
            try await controller.writeAndFlush(ByteBuffer(bytes: Packets.aclH4)).get()
            #expect(await eventually { events.packets.count == 2 })
            #expect(events.packets == [Packets.resetComplete, Packets.acl])

            transport.close()
            #expect(await eventually { events.closes == [nil] })
        }

        @Test func malformedStreamClosesWithAReason() async throws {
            let pty = try PseudoTerminal()
            let transport = try await SerialTransport.open(device: pty.name)
            defer { transport.close() }
            _ = close(pty.terminal)
            let peer = PeerLog()
            let controller = try await pty.controller(peer)
            defer { controller.close(promise: nil) }
            let events = EventLog()
            transport.setReceiver(events.receiver)
            try await controller.writeAndFlush(ByteBuffer(bytes: [0xFF, 0x01, 0x02])).get()
            #expect(await eventually { events.closes.count == 1 })
            let reason = try #require(events.closes.first ?? nil)
            #expect(reason.hasPrefix("serial:\(pty.name),115200: malformed H4 stream"))
            #expect(events.packets.isEmpty)
        }

        @Test func missingDeviceAndNonTerminalsAreClearErrors() async throws {
            await #expect(throws: TransportError(.noSuchDevice)) {
                _ = try await SerialTransport.open(device: "/dev/does-not-exist-ble")
            }
            do {
                _ = try await SerialTransport.open(device: "/dev/null")
                Issue.record("/dev/null opened as a serial port")
            } catch let error as TransportError {
                #expect(error.code == .openFailed)
                #expect(error.message.contains("/dev/null is not a serial port"))
            }
        }

        @Test func baudRates() async throws {
            #expect(SerialTransport.speed(forBaudRate: 115_200) == speed_t(B115200))
            #expect(SerialTransport.speed(forBaudRate: 1_000_000) == speed_t(B1000000))
            #expect(SerialTransport.speed(forBaudRate: 12345) == nil)
            let pty = try PseudoTerminal()
            defer {
                _ = close(pty.master)
                _ = close(pty.terminal)
            }
            do {
                _ = try await SerialTransport.open(device: pty.name, baudRate: 12345)
                Issue.record("opened at 12345 baud")
            } catch let error as TransportError {
                #expect(error.message.contains("12345 baud cannot be set"))
            }
        }
    }
#endif

@Suite struct HCIUserChannelTests {
    @Test func socketAddressBytes() {
        // sockaddr_hci in host byte order (little-endian here): family AF_BLUETOOTH (31), device, channel USER (1).
        #expect(HCIUserChannelTransport.socketAddress(index: 0) == [0x1F, 0x00, 0x00, 0x00, 0x01, 0x00])
        #expect(HCIUserChannelTransport.socketAddress(index: 3) == [0x1F, 0x00, 0x03, 0x00, 0x01, 0x00])
        #expect(
            HCIUserChannelTransport.socketAddress(index: 0x0102, channel: 0) == [0x1F, 0x00, 0x02, 0x01, 0x00, 0x00])
        #expect(HCIUserChannelTransport.addressFamily == 31)
        #expect(HCIUserChannelTransport.protocolHCI == 1)
        #expect(HCIUserChannelTransport.channelUser == 1)
    }

    #if os(Linux)
        @Test func errnoMessagesSayWhatToDo() {
            let busy = HCIUserChannelTransport.error(errno: EBUSY, operation: .bind, index: 0)
            #expect(busy.code == .busy)
            #expect(busy.message.contains("hci0 is up: run `sudo hciconfig hci0 down`"))

            for code in [EPERM, EACCES] {
                let denied = HCIUserChannelTransport.error(errno: code, operation: .bind, index: 1)
                #expect(denied.code == .permissionDenied)
                #expect(denied.message.contains("needs CAP_NET_ADMIN"))
                #expect(denied.message.hasPrefix("hci-socket:1:"))
            }

            let missing = HCIUserChannelTransport.error(errno: ENODEV, operation: .bind, index: 7)
            #expect(missing.code == .noSuchDevice)
            #expect(missing.message.contains("no controller hci7"))

            let taken = HCIUserChannelTransport.error(errno: EUSERS, operation: .bind, index: 0)
            #expect(taken.code == .busy)
            #expect(taken.message.contains("already holds the user channel"))

            let noBluetooth = HCIUserChannelTransport.error(errno: EAFNOSUPPORT, operation: .socket, index: 0)
            #expect(noBluetooth.code == .unsupported)
            #expect(noBluetooth.message.contains("AF_BLUETOOTH"))

            let other = HCIUserChannelTransport.error(errno: EIO, operation: .socket, index: 0)
            #expect(other.code == .openFailed)
            #expect(other.message.contains("socket failed"))
        }

        /// Binding a real controller is not possible here; opening one that does not exist must fail with a
        /// clear error (which one depends on the kernel and the privileges), never trap.
        @Test func openingAnAbsentControllerFailsCleanly() {
            do {
                let transport = try HCIUserChannelTransport.open(index: 0xFFF0)
                transport.close()
                Issue.record("bound hci65520")
            } catch let error as TransportError {
                #expect(error.message.hasPrefix("hci-socket:65520:"))
                #expect([.noSuchDevice, .permissionDenied, .unsupported, .openFailed].contains(error.code))
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    #endif
}
