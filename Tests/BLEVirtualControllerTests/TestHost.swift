import BLECore
import BLEHCI
import BLETransport
import BLEVirtualController
import Synchronization
import Testing

/// A minimal host for tests: sends raw HCI commands and ACL data through a controller's pipe and records
/// everything that comes back, with the virtual time it arrived.
final class TestHost: Sendable {
    struct Received: Sendable {
        var time: Duration
        var packet: HCIPacket
    }

    struct State: Sendable {
        var received: [Received] = []
        var closedReason: String??
        var onPacket: (@Sendable (HCIPacket) -> Void)?
    }

    let controller: VirtualController
    let radio: SimulatedRadio
    let state = Mutex(State())

    init(_ controller: VirtualController) {
        self.controller = controller
        self.radio = controller.radio
        let radio = controller.radio
        controller.hostTransport.setReceiver { [weak self] event in
            guard let self else { return }
            switch event {
            case .packet(let packet):
                let hook = self.state.withLock { s in
                    s.received.append(Received(time: radio.now, packet: packet))
                    return s.onPacket
                }
                hook?(packet)
            case .closed(let reason):
                self.state.withLock { $0.closedReason = .some(reason) }
            }
        }
    }

    var name: String { controller.name }

    func onPacket(_ hook: (@Sendable (HCIPacket) -> Void)?) { state.withLock { $0.onPacket = hook } }

    // MARK: Sending

    func send(_ opcode: UInt16, _ parameters: [UInt8] = []) {
        controller.hostTransport.send(
            .command(HCICommandPacket(opcode: HCIOpcode(rawValue: opcode), parameters: parameters)))
    }

    func sendACL(handle: UInt16, boundary: UInt8 = 0b00, _ data: [UInt8]) {
        controller.hostTransport.send(
            .acl(
                HCIACLDataPacket(
                    handle: ConnectionHandle(handle),
                    packetBoundary: .init(rawValue: boundary), data: data)))
    }

    /// Sends a command, runs the radio 1 ms, and returns the Command Complete return parameters (status
    /// first) or the Command Status status.
    @discardableResult
    func command(_ opcode: UInt16, _ parameters: [UInt8] = []) async throws -> [UInt8] {
        let before = state.withLock { $0.received.count }
        send(opcode, parameters)
        try await radio.run(for: .milliseconds(1))
        let new = state.withLock { Array($0.received[before...]) }
        for r in new {
            guard case .event(let e) = r.packet else { continue }
            let p = e.parameters
            if e.code.rawValue == 0x0E, p.count >= 3, UInt16(p[1]) | UInt16(p[2]) << 8 == opcode {
                return Array(p[3...])
            }
            if e.code.rawValue == 0x0F, p.count >= 4, UInt16(p[2]) | UInt16(p[3]) << 8 == opcode { return [p[0]] }
        }
        return []
    }

    /// Reset, all events unmasked.
    func setUp() async throws {
        try await command(0x0C03)
        try await command(0x0C01, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x3F])
        try await command(0x2001, [0xFF, 0xFD, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])  // all but Enhanced Conn Complete
    }

    // MARK: Reading

    var received: [Received] { state.withLock { $0.received } }
    var closedReason: String?? { state.withLock { $0.closedReason } }

    var events: [(time: Duration, code: UInt8, parameters: [UInt8])] {
        received.compactMap { r in
            guard case .event(let e) = r.packet else { return nil }
            return (r.time, e.code.rawValue, e.parameters)
        }
    }

    /// LE Meta subevents with their parameters (after the subevent code).
    func leEvents(_ subevent: UInt8) -> [(time: Duration, parameters: [UInt8])] {
        events.compactMap { e in
            guard e.code == 0x3E, e.parameters.first == subevent else { return nil }
            return (e.time, Array(e.parameters.dropFirst()))
        }
    }

    func events(code: UInt8) -> [(time: Duration, parameters: [UInt8])] {
        events.filter { $0.code == code }.map { ($0.time, $0.parameters) }
    }

    var acl: [(time: Duration, handle: UInt16, boundary: UInt8, data: [UInt8])] {
        received.compactMap { r in
            guard case .acl(let a) = r.packet else { return nil }
            return (r.time, a.handle.rawValue, a.packetBoundary.rawValue, a.data)
        }
    }

    /// Advertising reports as (event type, address bytes in printed order, data, RSSI).
    var reports: [(time: Duration, type: UInt8, address: [UInt8], data: [UInt8], rssi: Int8)] {
        leEvents(0x02).map { e in
            let p = e.parameters
            let length = Int(p[9])
            return (
                e.time, p[1], Array(p[3..<9].reversed()), Array(p[10..<10 + length]), Int8(bitPattern: p[10 + length])
            )
        }
    }

    func clear() { state.withLock { $0.received.removeAll() } }

    // MARK: Command builders (raw parameters, little-endian)

    func setAdvertising(
        type: UInt8 = 0, interval: UInt16 = 0x00A0, ownAddressType: UInt8 = 1,
        peer: BluetoothAddress? = nil, data: [UInt8] = [], scanResponse: [UInt8] = []
    ) async throws {
        var p = le16(interval) + le16(interval) + [type, ownAddressType]
        p += [peer?.type.isRandom == true ? 1 : 0] + (peer?.littleEndianBytes ?? [0, 0, 0, 0, 0, 0]) + [0x07, 0x00]
        #expect(try await command(0x2006, p) == [0])
        #expect(
            try await command(0x2008, [UInt8(data.count)] + data + [UInt8](repeating: 0, count: 31 - data.count)) == [0]
        )
        #expect(
            try await command(
                0x2009,
                [UInt8(scanResponse.count)] + scanResponse
                    + [UInt8](repeating: 0, count: 31 - scanResponse.count)) == [0])
    }

    func enableAdvertising(_ on: Bool = true) async throws {
        #expect(try await command(0x200A, [on ? 1 : 0]) == [0])
    }

    func startScan(active: Bool, interval: UInt16 = 0x0010, window: UInt16 = 0x0010, filterDuplicates: Bool = false)
        async throws
    {
        #expect(try await command(0x200B, [active ? 1 : 0] + le16(interval) + le16(window) + [1, 0]) == [0])
        #expect(try await command(0x200C, [1, filterDuplicates ? 1 : 0]) == [0])
    }

    func createConnection(
        to peer: BluetoothAddress, intervalMin: UInt16 = 24, intervalMax: UInt16 = 40,
        timeout: UInt16 = 100
    ) -> [UInt8] {
        le16(0x0010) + le16(0x0010) + [0, peer.type.isRandom ? 1 : 0] + peer.littleEndianBytes + [1]
            + le16(intervalMin) + le16(intervalMax) + le16(0) + le16(timeout) + le16(0) + le16(0)
    }
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }

/// Two controllers connected, central `a` and peripheral `b`, with their connection handles.
struct ConnectedPair {
    let radio: SimulatedRadio
    let central: TestHost
    let peripheral: TestHost
    let centralHandle: UInt16
    let peripheralHandle: UInt16

    static func make(
        seed: UInt64 = 1, radio: SimulatedRadio? = nil, distance: Double = 2, intervalUnits: UInt16 = 24,
        timeout: UInt16 = 100, dataLength: UInt16? = nil
    ) async throws -> ConnectedPair {
        let radio = radio ?? SimulatedRadio(seed: seed)
        let central = TestHost(radio.addController(name: "central"))
        let peripheral = TestHost(radio.addController(name: "peripheral", position: .init(x: distance, y: 0)))
        try await central.setUp()
        try await peripheral.setUp()
        if let dataLength {
            for host in [central, peripheral] {
                #expect(try await host.command(0x2024, le16(dataLength) + le16(2120)) == [0])
            }
        }
        try await peripheral.setAdvertising(type: 0, interval: 0x0020, data: [2, 1, 6])
        try await peripheral.enableAdvertising()
        #expect(
            try await central.command(
                0x200D,
                central.createConnection(
                    to: peripheral.controller.address, intervalMin: intervalUnits, intervalMax: intervalUnits,
                    timeout: timeout)) == [0])
        try await radio.run(for: .milliseconds(200))
        let c = central.leEvents(0x01)
        let p = peripheral.leEvents(0x01)
        #expect(c.count == 1 && p.count == 1)
        return ConnectedPair(
            radio: radio, central: central, peripheral: peripheral,
            centralHandle: u16(c[0].parameters, 1), peripheralHandle: u16(p[0].parameters, 1))
    }
}
