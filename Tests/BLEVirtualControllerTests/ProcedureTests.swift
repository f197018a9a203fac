import BLECore
import BLEHCI
import BLEVirtualController
import Foundation
import Testing

@Suite struct ProcedureTests {
    @Test func centralConnectionUpdateAppliesAtTheInstant() async throws {
        let pair = try await ConnectedPair.make(intervalUnits: 24)
        let sent = pair.radio.now
        #expect(
            try await pair.central.command(
                0x2013,
                le16(pair.centralHandle) + le16(40) + le16(48) + le16(0)
                    + le16(200) + le16(0) + le16(0)) == [0])
        try await pair.radio.run(for: .milliseconds(500))
        for (host, handle) in [(pair.central, pair.centralHandle), (pair.peripheral, pair.peripheralHandle)] {
            let update = host.leEvents(0x03)
            #expect(update.map(\.parameters) == [[0] + le16(handle) + le16(40) + le16(0) + le16(200)])
            // The instant is at least six 30 ms events after the command.
            if let t = update.first?.time { #expect(t - sent >= .milliseconds(6 * 30)) }
        }
        #expect(pair.central.leEvents(0x03).first?.time == pair.peripheral.leEvents(0x03).first?.time)
    }

    @Test func peripheralUpdateGoesThroughTheCentralsHost() async throws {
        let pair = try await ConnectedPair.make(intervalUnits: 24)
        #expect(
            try await pair.peripheral.command(
                0x2013,
                le16(pair.peripheralHandle) + le16(12) + le16(16) + le16(2)
                    + le16(300) + le16(0) + le16(0)) == [0])
        try await pair.radio.run(for: .milliseconds(100))
        let request = pair.central.leEvents(0x06)
        #expect(request.map(\.parameters) == [le16(pair.centralHandle) + le16(12) + le16(16) + le16(2) + le16(300)])
        #expect(
            try await pair.central.command(
                0x2020,
                le16(pair.centralHandle) + le16(12) + le16(16) + le16(2)
                    + le16(300) + le16(0) + le16(0)) == [0] + le16(pair.centralHandle))
        try await pair.radio.run(for: .milliseconds(500))
        #expect(
            pair.peripheral.leEvents(0x03).map(\.parameters) == [
                [0] + le16(pair.peripheralHandle) + le16(12) + le16(2) + le16(300)
            ])
        #expect(pair.central.leEvents(0x03).count == 1)

        // A negative reply reaches the peripheral's host as a failed update.
        #expect(
            try await pair.peripheral.command(
                0x2013,
                le16(pair.peripheralHandle) + le16(80) + le16(80) + le16(0)
                    + le16(400) + le16(0) + le16(0)) == [0])
        try await pair.radio.run(for: .milliseconds(100))
        #expect(
            try await pair.central.command(0x2021, le16(pair.centralHandle) + [0x3B]) == [0] + le16(pair.centralHandle))
        try await pair.radio.run(for: .milliseconds(100))
        #expect(pair.peripheral.leEvents(0x03).last?.parameters.first == 0x3B)
    }

    @Test func dataLengthChange() async throws {
        let pair = try await ConnectedPair.make()
        #expect(
            try await pair.central.command(0x2022, le16(pair.centralHandle) + le16(251) + le16(2120))
                == [0] + le16(pair.centralHandle))
        try await pair.radio.run(for: .milliseconds(200))
        // Central: sends up to 251, receives 27 (the peripheral still transmits 27). Peripheral: the mirror.
        #expect(
            pair.central.leEvents(0x07).map(\.parameters) == [
                le16(pair.centralHandle) + le16(251) + le16(2120) + le16(27) + le16(328)
            ])
        #expect(
            pair.peripheral.leEvents(0x07).map(\.parameters) == [
                le16(pair.peripheralHandle) + le16(27) + le16(328) + le16(251) + le16(2120)
            ])
        pair.central.sendACL(handle: pair.centralHandle, [UInt8](repeating: 7, count: 200))
        pair.peripheral.sendACL(handle: pair.peripheralHandle, [UInt8](repeating: 8, count: 40))
        try await pair.radio.run(for: .milliseconds(100))
        #expect(pair.peripheral.acl.map(\.data.count) == [200])
        #expect(pair.central.acl.map(\.data.count) == [27, 13])
    }

    /// On LE Coded a PDU takes eight times as long: the effective time is at least what 27 octets take there
    /// (2,704 µs), and the octets sent are what fits in it. A host that asks for 251 octets in the 1M time
    /// (2,120 µs) gets 27-octet PDUs; one that asks for the Coded time (17,040 µs) gets 251-octet ones.
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.5.10.
    @Test func dataLengthOnCodedIsBoundByTime() async throws {
        let pair = try await ConnectedPair.make()
        #expect(try await pair.central.command(0x2032, le16(pair.centralHandle) + [0, 4, 4, 2, 0]) == [0])
        try await pair.radio.run(for: .milliseconds(200))
        #expect(pair.central.leEvents(0x0C).map(\.parameters) == [[0] + le16(pair.centralHandle) + [3, 3]])
        // The PHY change alone moves the effective times to the Coded minimum.
        #expect(
            pair.central.leEvents(0x07).map(\.parameters) == [
                le16(pair.centralHandle) + le16(27) + le16(2704) + le16(27) + le16(2704)
            ])
        #expect(
            try await pair.central.command(0x2022, le16(pair.centralHandle) + le16(251) + le16(2120))
                == [0] + le16(pair.centralHandle))
        try await pair.radio.run(for: .milliseconds(300))
        #expect(
            pair.central.leEvents(0x07).last?.parameters
                == le16(pair.centralHandle) + le16(251) + le16(2704) + le16(27) + le16(2704))
        pair.central.sendACL(handle: pair.centralHandle, [UInt8](repeating: 7, count: 200))
        try await pair.radio.run(for: .milliseconds(500))
        #expect(pair.peripheral.acl.map(\.data.count) == [27, 27, 27, 27, 27, 27, 27, 11])

        #expect(
            try await pair.central.command(0x2022, le16(pair.centralHandle) + le16(251) + le16(17040))
                == [0] + le16(pair.centralHandle))
        try await pair.radio.run(for: .milliseconds(300))
        #expect(
            pair.central.leEvents(0x07).last?.parameters
                == le16(pair.centralHandle) + le16(251) + le16(17040) + le16(27) + le16(2704))
        pair.central.sendACL(handle: pair.centralHandle, [UInt8](repeating: 8, count: 200))
        try await pair.radio.run(for: .milliseconds(500))
        #expect(pair.peripheral.acl.map(\.data.count).dropFirst(8) == [200])
    }

    /// Bumble's host asks for a longer data length as soon as it learns of the link; the central's host must
    /// still hear of the link (LE Connection Complete) before any event about it (Data Length Change).
    @Test func theCentralHearsOfTheLinkBeforeAnythingAboutIt() async throws {
        let radio = SimulatedRadio(seed: 3)
        let central = TestHost(radio.addController(name: "central"))
        let peripheral = TestHost(radio.addController(name: "peripheral", position: .init(x: 2, y: 0)))
        try await central.setUp()
        try await peripheral.setUp()
        peripheral.onPacket { packet in
            guard case .event(let event) = packet, event.code.rawValue == 0x3E, event.parameters.first == 0x01 else {
                return
            }
            // LE Set Data Length on the new handle, at once.
            peripheral.send(0x2022, Array(event.parameters[2...3]) + le16(251) + le16(2120))
        }
        try await peripheral.setAdvertising(type: 0, interval: 0x0020, data: [2, 1, 6])
        try await peripheral.enableAdvertising()
        #expect(try await central.command(0x200D, central.createConnection(to: peripheral.controller.address)) == [0])
        try await radio.run(for: .milliseconds(300))
        let subevents = central.events.filter { $0.code == 0x3E }.compactMap(\.parameters.first)
        #expect(subevents.contains(0x07))
        #expect(
            subevents.firstIndex(of: 0x01) != nil && subevents.firstIndex(of: 0x01)! < subevents.firstIndex(of: 0x07)!)
    }

    @Test func remoteFeaturesAndVersion() async throws {
        let pair = try await ConnectedPair.make()
        #expect(try await pair.central.command(0x2016, le16(pair.centralHandle)) == [0])
        #expect(try await pair.peripheral.command(0x041D, le16(pair.peripheralHandle)) == [0])
        try await pair.radio.run(for: .milliseconds(200))
        #expect(
            pair.central.leEvents(0x04).map(\.parameters) == [
                [0] + le16(pair.centralHandle) + [0x2F, 0x09, 0, 0, 0, 0, 0, 0]
            ])
        #expect(
            pair.peripheral.events(code: 0x0C).map(\.parameters) == [
                [0] + le16(pair.peripheralHandle) + [0x0D, 0xFF, 0xFF, 0x01, 0x00]
            ])
        // The exchange happens once; asking again is answered locally.
        #expect(try await pair.central.command(0x041D, le16(pair.centralHandle)) == [0])
        #expect(pair.central.events(code: 0x0C).count == 1)
    }

    @Test func disconnectReasonsOnBothSides() async throws {
        let pair = try await ConnectedPair.make()
        #expect(try await pair.central.command(0x0406, le16(pair.centralHandle) + [0x13]) == [0])
        try await pair.radio.run(for: .milliseconds(100))
        #expect(pair.central.events(code: 0x05).map(\.parameters) == [[0] + le16(pair.centralHandle) + [0x16]])
        #expect(pair.peripheral.events(code: 0x05).map(\.parameters) == [[0] + le16(pair.peripheralHandle) + [0x13]])
        #expect(try await pair.central.command(0x1405, le16(pair.centralHandle)).first == 0x02)
    }

    @Test func supervisionTimeoutAfterMovingOutOfRange() async throws {
        let pair = try await ConnectedPair.make(timeout: 100)  // 1 s
        try await pair.radio.run(for: .seconds(5))  // idle, in range: nothing happens
        #expect(pair.central.events(code: 0x05).isEmpty)
        let rssi = try await pair.central.command(0x1405, le16(pair.centralHandle))
        #expect(rssi.first == 0 && Int8(bitPattern: rssi[3]) > -55)
        let moved = pair.radio.now
        pair.radio.move(pair.peripheral.controller, to: .init(x: 500, y: 0))
        try await pair.radio.run(for: .seconds(2))
        for (host, handle) in [(pair.central, pair.centralHandle), (pair.peripheral, pair.peripheralHandle)] {
            let disconnect = host.events(code: 0x05)
            #expect(disconnect.map(\.parameters) == [[0] + le16(handle) + [0x08]])
            if let t = disconnect.first?.time {
                #expect(t - moved >= .seconds(1) && t - moved <= .milliseconds(1100))
            }
        }
    }

    @Test func supervisionTimeoutAfterVanishing() async throws {
        let pair = try await ConnectedPair.make(timeout: 50)
        pair.peripheral.controller.vanish(reason: "battery removed")
        #expect(pair.peripheral.closedReason == .some("battery removed"))
        #expect(!pair.peripheral.controller.isPowered)
        try await pair.radio.run(for: .seconds(1))
        #expect(pair.central.events(code: 0x05).map(\.parameters) == [[0] + le16(pair.centralHandle) + [0x08]])
        #expect(pair.peripheral.events(code: 0x05).isEmpty)
    }

    @Test func packetLossSlowsButDoesNotCorruptData() async throws {
        let pair = try await ConnectedPair.make()
        pair.radio.packetLossRate = 0.2
        let message = (0..<250).map { UInt8($0 & 0xFF) }
        for _ in 0..<4 { pair.central.sendACL(handle: pair.centralHandle, message) }
        try await pair.radio.run(for: .seconds(1))
        #expect(pair.peripheral.acl.flatMap(\.data) == Array([[UInt8]](repeating: message, count: 4).joined()))
        #expect(pair.central.events(code: 0x13).reduce(0) { $0 + Int(u16($1.parameters, 3)) } == 4)
    }
}

extension ProcedureTests {
    /// A controller powered off in good order (its system shut down) ends its links at once: the peer's host gets
    /// Disconnection Complete with Remote Device Terminated due to Power Off (0x15), not a supervision timeout.
    @Test func aControllerPoweredOffEndsItsLinksAtOnce() async throws {
        let pair = try await ConnectedPair.make()
        pair.peripheral.controller.powerOff(reason: "switched off")
        try await pair.radio.run(for: .milliseconds(10))
        let disconnections = pair.central.events(code: 0x05)
        #expect(disconnections.map(\.parameters) == [[0] + le16(pair.centralHandle) + [0x15]])
        #expect(!pair.peripheral.controller.isPowered)
    }
}
