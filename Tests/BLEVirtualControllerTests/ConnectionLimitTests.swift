import BLECore
import BLEVirtualController
import Testing

/// What a real controller refuses: a second link to a device it is connected to, and more links than it holds
/// (Core Spec 5.4, Vol 4, Part E, 7.8.12; Vol 1, Part F, 2.9 and 2.11).
@Suite struct ConnectionLimitTests {
    @Test func aSecondLinkToAConnectedDeviceIsConnectionAlreadyExists() async throws {
        let pair = try await ConnectedPair.make()
        let again = pair.central.createConnection(to: pair.peripheral.controller.address)
        #expect(try await pair.central.command(0x200D, again) == [0x0B])
        // The same pair in the other roles is the same device too.
        let back = pair.peripheral.createConnection(to: pair.central.controller.address)
        #expect(try await pair.peripheral.command(0x200D, back) == [0x0B])
        // Nothing was started: a Create Connection Cancel finds nothing to cancel.
        #expect(try await pair.central.command(0x200E) == [0x0C])
    }

    @Test func aControllerAtItsLimitAnswersConnectionLimitExceededAndTakesNoConnection() async throws {
        let radio = SimulatedRadio(seed: 5)
        let central = TestHost(radio.addController(name: "central", maximumConnections: 1))
        let first = TestHost(radio.addController(name: "first", position: .init(x: 2, y: 0), maximumConnections: 1))
        let second = TestHost(radio.addController(name: "second", position: .init(x: 0, y: 2)))
        let third = TestHost(radio.addController(name: "third", position: .init(x: 2, y: 2)))
        for host in [central, first, second, third] { try await host.setUp() }
        for host in [first, second] {
            try await host.setAdvertising(type: 0, interval: 0x0020, data: [2, 1, 6])
            try await host.enableAdvertising()
        }
        #expect(try await central.command(0x200D, central.createConnection(to: first.controller.address)) == [0])
        try await radio.run(for: .milliseconds(200))
        #expect(central.leEvents(0x01).count == 1)
        // The central holds one link: a second is refused at once.
        #expect(try await central.command(0x200D, central.createConnection(to: second.controller.address)) == [0x09])

        // The first peripheral holds one link too: advertising again, it takes no connection from a third device.
        try await first.enableAdvertising()
        #expect(try await third.command(0x200D, third.createConnection(to: first.controller.address)) == [0])
        try await radio.run(for: .seconds(1))
        #expect(third.leEvents(0x01).isEmpty)
        #expect(first.leEvents(0x01).count == 1)
    }

    @Test func readLocalNameAnswersTheNameInFullAndWriteLocalNameChangesIt() async throws {
        let radio = SimulatedRadio(seed: 6)
        let host = TestHost(radio.addController(name: "lab-dongle"))
        try await host.setUp()
        let read = try await host.command(0x0C14)
        #expect(read.count == 1 + 248)
        #expect(read.first == 0)
        #expect(Array(read[1...].prefix { $0 != 0 }) == Array("lab-dongle".utf8))
        #expect(read[11...].allSatisfy { $0 == 0 })

        let name = Array("Küche".utf8)
        #expect(try await host.command(0x0C13, name + [UInt8](repeating: 0, count: 248 - name.count)) == [0])
        let renamed = try await host.command(0x0C14)
        #expect(Array(renamed[1...].prefix { $0 != 0 }) == name)
        // Read Local Supported Commands lists both (octet 7, bits 0 and 1).
        let supported = try await host.command(0x1002)
        #expect(supported.count == 65 && supported[1 + 7] & 0b11 == 0b11)
    }
}
