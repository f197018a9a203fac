import BLEHCI
import BLETransport
import Dispatch
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import BLETransportPosix

@Suite(.timeLimit(.minutes(1))) struct TCPClientTransportTests {
    @Test func h4BothWaysAndPartialFrames() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let port = try #require(server.localAddress?.port)

        let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: port)
        defer { transport.close() }
        #expect(transport.description == "tcp-client:127.0.0.1:\(port)")
        let events = EventLog()
        transport.setReceiver(events.receiver)

        // Host to controller.
        transport.send(Packets.reset)
        transport.send(Packets.acl)
        #expect(await eventually { peer.received.count == 14 })
        #expect(peer.received == Packets.resetH4 + Packets.aclH4)

        // Controller to host, a byte at a time, then two packets in one write.
        let controller = try #require(peer.channel)
        try await Loopback.writeSlowly(Packets.resetCompleteH4, to: controller)
        #expect(await eventually { events.packets.count == 1 })
        try await controller.writeAndFlush(ByteBuffer(bytes: Packets.aclH4 + Packets.resetCompleteH4)).get()
        #expect(await eventually { events.packets.count == 3 })
        #expect(events.packets == [Packets.resetComplete, Packets.acl, Packets.resetComplete])
        #expect(events.closes.isEmpty)
    }

    /// A host sends under its lock from whichever thread it is on: a packet sent from the transport's own event
    /// loop must not overtake one another thread sent just before (Bumble dropped Write Commands that arrived
    /// out of order).
    @Test func packetsLeaveInTheOrderTheyWereSentWhateverTheThread() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: server.localAddress!.port!)
        defer { transport.close() }
        #expect(await eventually { peer.channel != nil })
        let firstSent = DispatchSemaphore(value: 0)
        transport.eventLoop.execute {
            // While the loop is busy here, another thread sends first; then the loop itself sends.
            DispatchQueue.global().async {
                transport.send(Packets.reset)
                firstSent.signal()
            }
            _ = firstSent.wait(timeout: .now() + .seconds(5))
            transport.send(Packets.acl)
        }
        #expect(await eventually { peer.received.count == 14 })
        #expect(peer.received == Packets.resetH4 + Packets.aclH4)
    }

    @Test func packetsBeforeTheReceiverWaitForIt() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: server.localAddress!.port!)
        defer { transport.close() }
        #expect(await eventually { peer.channel != nil })
        try await peer.channel!.writeAndFlush(ByteBuffer(bytes: Packets.resetCompleteH4 + Packets.aclH4)).get()
        try await Task.sleep(for: .milliseconds(50))
        let events = EventLog()
        transport.setReceiver(events.receiver)
        #expect(await eventually { events.packets.count == 2 })
        #expect(events.packets == [Packets.resetComplete, Packets.acl])
    }

    @Test func peerClosingIsReportedOnceAndLaterSendsAreDropped() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let port = server.localAddress!.port!
        let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: port)
        defer { transport.close() }
        let events = EventLog()
        transport.setReceiver(events.receiver)
        #expect(await eventually { peer.channel != nil })

        // Half a packet, then the controller goes away (TCP delivers the bytes before the end of stream).
        try await peer.channel!.writeAndFlush(ByteBuffer(bytes: [0x04, 0x0E, 0x04])).get()
        try await peer.channel!.close()
        #expect(await eventually { events.closes.count == 1 })
        let reason = try #require(events.closes.first ?? nil)
        #expect(reason.hasPrefix("tcp-client:127.0.0.1:\(port):"))
        #expect(reason.contains("closed the connection in the middle of a packet (3 bytes pending)"))

        transport.send(Packets.reset)  // dropped, no trap
        transport.close()  // no second close event
        try await Task.sleep(for: .milliseconds(50))
        #expect(events.closes.count == 1)
        #expect(events.packets.isEmpty)
    }

    @Test func closingFromTheHostReportsNilOnce() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: server.localAddress!.port!)
        let events = EventLog()
        transport.setReceiver(events.receiver)
        #expect(await eventually { peer.channel != nil })
        transport.close()
        transport.close()
        #expect(await eventually { events.closes.count == 1 })
        #expect(events.closes == [nil])
        #expect(await eventually { peer.inactiveCount == 1 })  // the controller saw the connection end
        transport.send(Packets.reset)
        try await Task.sleep(for: .milliseconds(50))
        #expect(peer.received.isEmpty)
        #expect(events.closes.count == 1)
    }

    @Test func malformedStreamClosesWithAReason() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: server.localAddress!.port!)
        defer { transport.close() }
        let events = EventLog()
        transport.setReceiver(events.receiver)
        #expect(await eventually { peer.channel != nil })
        // A good event, then an unknown packet indicator (0x07), then more that must not be delivered.
        try await peer.channel!.writeAndFlush(
            ByteBuffer(bytes: Packets.resetCompleteH4 + [0x07, 0x00] + Packets.resetCompleteH4)
        ).get()
        #expect(await eventually { events.closes.count == 1 })
        #expect(events.packets == [Packets.resetComplete])
        let reason = try #require(events.closes.first ?? nil)
        #expect(reason.contains("malformed H4 stream"))
        #expect(await eventually { peer.inactiveCount == 1 })
    }

    @Test func connectionRefusedNamesHostAndPort() async throws {
        // A port that was free a moment ago: bind, note the port, close.
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        let port = server.localAddress!.port!
        try await server.close()
        do {
            let transport = try await TCPClientTransport.connect(host: "127.0.0.1", port: port, timeout: .seconds(2))
            transport.close()
            Issue.record("connected to a closed port")
        } catch let error as TransportError {
            #expect(error.code == .connectionFailed)
            #expect(error.message.contains("cannot connect to 127.0.0.1:\(port)"))
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct TCPServerTransportTests {
    @Test func acceptsOneControllerAndRefusesOthers() async throws {
        let listener = try await TCPServerTransport.bind(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        #expect(listener.port != 0)
        #expect(listener.spec == .tcpServer(host: "127.0.0.1", port: listener.port))

        let first = PeerLog()
        let controller = try await Loopback.connect(port: listener.port, first)
        defer { controller.close(promise: nil) }
        let transport = try await listener.accept(timeout: .seconds(5))
        defer { transport.close() }
        let events = EventLog()
        transport.setReceiver(events.receiver)

        // A second controller is accepted by TCP and closed at once.
        let second = PeerLog()
        let intruder = try await Loopback.connect(port: listener.port, second)
        defer { intruder.close(promise: nil) }
        #expect(await eventually { second.inactiveCount == 1 })

        // The first one still works, both ways, a byte at a time.
        transport.send(Packets.reset)
        #expect(await eventually { first.received == Packets.resetH4 })
        try await Loopback.writeSlowly(Packets.resetCompleteH4, to: controller)
        #expect(await eventually { events.packets == [Packets.resetComplete] })

        // The controller leaves: closed once, with a reason.
        try await controller.close()
        #expect(await eventually { events.closes.count == 1 })
        #expect((events.closes.first ?? nil)?.contains("the controller closed the connection") == true)

        // The next controller is accepted again.
        let third = PeerLog()
        let again = try await Loopback.connect(port: listener.port, third)
        defer { again.close(promise: nil) }
        let next = try await listener.accept(timeout: .seconds(5))
        defer { next.close() }
        next.send(Packets.reset)
        #expect(await eventually { third.received == Packets.resetH4 })
    }

    @Test func aListenerPlayingTheControllerTellsASecondHostItIsBusy() async throws {
        // The deadline is a hang bound here: what is tested is the answer, and a loaded machine (the sanitized
        // run) once took more than the default 5 s to deliver the four octets a millisecond apart.
        let listener = try await TCPServerTransport.bind(
            host: "127.0.0.1", port: 0, whenBusy: .failCommands(.controllerBusy, within: .seconds(60)))
        defer { listener.close() }
        let first = PeerLog()
        let host = try await Loopback.connect(port: listener.port, first)
        defer { host.close(promise: nil) }
        let transport = try await listener.accept(timeout: .seconds(5))
        defer { transport.close() }

        // The second host's HCI_Reset, sent a byte at a time, is answered with Controller Busy; then it is closed.
        let second = PeerLog()
        let intruder = try await Loopback.connect(port: listener.port, second)
        defer { intruder.close(promise: nil) }
        try await Loopback.writeSlowly(Packets.resetH4, to: intruder)
        #expect(await eventually { second.inactiveCount == 1 })
        #expect(second.received == [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x3A])

        // A third that sends something other than a command is closed with no answer.
        let third = PeerLog()
        let stranger = try await Loopback.connect(port: listener.port, third)
        defer { stranger.close(promise: nil) }
        try await Loopback.writeSlowly(Packets.aclH4, to: stranger)
        #expect(await eventually { third.inactiveCount == 1 })
        #expect(third.received.isEmpty)

        // The first host was not disturbed.
        transport.send(Packets.resetComplete)
        #expect(await eventually { first.received == Packets.resetCompleteH4 })
    }

    @Test func acceptTimesOut() async throws {
        let listener = try await TCPServerTransport.bind(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        await #expect(throws: TransportError(.timedOut)) {
            _ = try await listener.accept(timeout: .milliseconds(50))
        }
    }

    @Test func anEarlierAcceptsTimeoutDoesNotFailALaterOne() async throws {
        let listener = try await TCPServerTransport.bind(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let first = try await Loopback.connect(port: listener.port, PeerLog())
        let link = try await listener.accept(timeout: .milliseconds(100))
        link.close()
        first.close(promise: nil)
        let peer = PeerLog()
        Task {
            try await Task.sleep(for: .milliseconds(300))
            _ = try await Loopback.connect(port: listener.port, peer)
        }
        let next = try await listener.accept(timeout: .seconds(60))  // outlives the first accept's 100 ms
        defer { next.close() }
        #expect(await eventually { peer.channel != nil })
    }

    @Test func cancellingAcceptThrows() async throws {
        let listener = try await TCPServerTransport.bind(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let waiting = Task { try await listener.accept() }
        try await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
    }

    @Test func openerReportsThePortAndClosesTheListenerWithTheLink() async throws {
        let registry = TransportRegistry()
        let peer = PeerLog()
        // The accept's bound is for a loaded machine, not a pace: the peer connects at once.
        PosixTransports.register(
            in: registry,
            onListening: { spec in
                guard case .tcpServer(_, let port) = spec else { return }
                Task { _ = try await Loopback.connect(port: port, peer) }
            }, acceptTimeout: .seconds(60))
        let transport = try await registry.open("tcp-server:127.0.0.1:0")
        let events = EventLog()
        transport.setReceiver(events.receiver)
        transport.send(Packets.reset)
        #expect(await eventually { peer.received == Packets.resetH4 })
        let port = try #require(peer.channel?.remoteAddress?.port)

        transport.close()
        #expect(await eventually { events.closes == [nil] })
        // The listener went with the link: nobody accepts on that port any more (it closes on the event loop, so
        // asked until refused, within a bound).
        let deadline = ContinuousClock.now + .seconds(30)
        var accepting = true
        while accepting, ContinuousClock.now < deadline {
            do {
                let channel = try await Loopback.connect(port: port, PeerLog())
                channel.close(promise: nil)
            } catch {
                accepting = false  // refused: the listener is gone
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(!accepting, "the listener still accepts after its link closed")
    }

    @Test func bindFailureNamesTheAddress() async throws {
        let listener = try await TCPServerTransport.bind(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        do {
            let other = try await TCPServerTransport.bind(host: "192.0.2.1", port: listener.port)  // not our address
            other.close()
            Issue.record("bound to an address this machine does not have")
        } catch let error as TransportError {
            #expect(error.code == .connectionFailed)
            #expect(error.message.contains("cannot listen on 192.0.2.1:\(listener.port)"))
        }
    }
}

@Suite struct PosixTransportsTests {
    @Test func registersTheFiveKinds() {
        let registry = TransportRegistry()
        PosixTransports.register(in: registry, onListening: nil)
        #expect(Set(registry.registeredKinds) == [.tcpClient, .tcpServer, .serial, .hciSocket, .unix])
        #expect(!registry.canOpen(.virtual))
    }

    @Test(.timeLimit(.minutes(1))) func opensTCPClientThroughTheRegistry() async throws {
        let peer = PeerLog()
        let server = try await Loopback.listen(peer)
        defer { server.close(promise: nil) }
        let registry = TransportRegistry()
        PosixTransports.register(in: registry, onListening: nil)
        let transport = try await registry.open("tcp-client:127.0.0.1:\(server.localAddress!.port!)")
        defer { transport.close() }
        transport.setReceiver { _ in }
        transport.send(Packets.reset)
        #expect(await eventually { peer.received == Packets.resetH4 })
    }
}

@Suite(.timeLimit(.minutes(1))) struct H4ListenerTests {
    /// Every connection is a link of its own, at the same time (a simulator's controller each), over a Unix
    /// socket reached with `unix:PATH` and over TCP.
    @Test func takesManyHostsAtOnceOnUnixAndTCP() async throws {
        let folder = "/tmp/h4l-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let accepted = Mutex<[H4StreamTransport]>([])
        let received = Mutex<[String: [HCIPacket]]>([:])
        let closed = Mutex(0)
        let onConnection: @Sendable (H4StreamTransport) -> Void = { link in
            let number = accepted.withLock { a in
                a.append(link)
                return a.count
            }
            // Each link echoes a command complete for what it got, and notes it under its own name.
            link.setReceiver { event in
                guard case .packet(let packet) = event else { return closed.withLock { $0 += 1 } }
                received.withLock { $0["\(number)", default: []].append(packet) }
                link.send(Packets.resetComplete)
            }
        }
        let unix = try await H4Listener.bind(.unix(path: folder + "/room.sock"), onConnection: onConnection)
        defer { unix.close() }
        let tcp = try await H4Listener.bind(.tcp(host: "127.0.0.1", port: 0), onConnection: onConnection)
        defer { tcp.close() }
        guard case .tcp(_, let port) = tcp.address else { throw CancellationError() }
        #expect(port != 0)
        #expect(unix.address.description == "unix:\(folder)/room.sock")

        let hosts: [any HCITransport] = [
            try await UnixClientTransport.connect(path: folder + "/room.sock"),
            try await UnixClientTransport.connect(path: folder + "/room.sock"),
            try await TCPClientTransport.connect(host: "127.0.0.1", port: port),
        ]
        let logs = hosts.map { _ in EventLog() }
        for (host, log) in zip(hosts, logs) {
            host.setReceiver(log.receiver)
            host.send(Packets.reset)
        }
        #expect(await eventually { logs.allSatisfy { $0.packets == [Packets.resetComplete] } })
        #expect(accepted.withLock { $0.count } == 3)
        #expect(received.withLock { r in r.values.map(\.count).sorted() } == [1, 1, 1])

        // One host leaving closes its link only.
        hosts[0].close()
        #expect(await eventually { closed.withLock { $0 } == 1 })
        hosts[1].send(Packets.reset)
        #expect(await eventually { logs[1].packets.count == 2 })
        for host in hosts { host.close() }
    }

    @Test func connectingToNoSocketNamesThePath() async throws {
        await #expect {
            _ = try await UnixClientTransport.connect(
                path: "/tmp/no-such-room-\(UInt32.random(in: 0...UInt32.max)).sock")
        } throws: { error in
            "\(error)".contains("unix:/tmp/no-such-room-") && "\(error)".contains("No such file")
        }
    }
}
