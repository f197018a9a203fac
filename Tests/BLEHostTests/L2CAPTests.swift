import BLECore
import BLEHCI
import BLEHost
import Testing

/// The fixed channels the host answers itself: LE signalling (Core Spec 5.4, Vol 3, Part A, 4) and SMP
/// (Vol 3, Part H, 3.5.5), against a scripted controller.
@Suite struct L2CAPTests {
    /// A Connection Parameter Update Request (code 0x12) with identifier 0x07.
    static let updateRequest: [UInt8] = [
        0x12, 0x07, 0x08, 0x00,  // code, identifier, length 8
        0x28, 0x00,  // Interval Min 40 (50 ms)
        0x38, 0x00,  // Interval Max 56 (70 ms)
        0x02, 0x00,  // Peripheral Latency 2
        0x2C, 0x01,  // Timeout Multiplier 300 (3 s)
    ]

    @Test func connectionParameterUpdateRequestOnACentralLink() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)

        harness.controller.deliverL2CAP(handle: ConnectionHandle(1), channel: .leSignaling, Self.updateRequest)
        let command = try #require(harness.controller.commands.first { $0.opcode == .leConnectionUpdate })
        let update = try HCILEConnectionUpdate(packet: command)
        #expect(update.handle == ConnectionHandle(1))
        #expect(update.connectionIntervalMin == 40)
        #expect(update.connectionIntervalMax == 56)
        #expect(update.maxLatency == 2)
        #expect(update.supervisionTimeout == 300)

        // The controller accepted the command: the host answers "accepted" with the same identifier.
        let signalling = harness.controller.l2cap(on: ConnectionHandle(1)).filter { $0.channel == .leSignaling }
        #expect(signalling.map(\.payload) == [[0x13, 0x07, 0x02, 0x00, 0x00, 0x00]])
    }

    @Test func connectionParameterUpdateRefusedByTheController() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)
        harness.controller.answer(.leConnectionUpdate, with: .status(.unsupportedFeatureOrParameterValue))

        harness.controller.deliverL2CAP(handle: ConnectionHandle(1), channel: .leSignaling, Self.updateRequest)
        let signalling = harness.controller.l2cap(on: ConnectionHandle(1)).filter { $0.channel == .leSignaling }
        #expect(signalling.map(\.payload) == [[0x13, 0x07, 0x02, 0x00, 0x01, 0x00]])  // result: rejected
    }

    @Test func connectionParameterUpdateRequestOnAPeripheralLinkIsRejected() throws {
        // Only the central accepts this request (Vol 3, Part A, 4.20).
        let harness = HostHarness()
        try harness.started()
        harness.connect(2, role: .peripheral)
        harness.controller.clear()
        harness.controller.deliverL2CAP(handle: ConnectionHandle(2), channel: .leSignaling, Self.updateRequest)
        #expect(!harness.controller.opcodes.contains(.leConnectionUpdate))
        let signalling = harness.controller.l2cap(on: ConnectionHandle(2)).filter { $0.channel == .leSignaling }
        #expect(signalling.map(\.payload) == [[0x01, 0x07, 0x02, 0x00, 0x00, 0x00]])
    }

    @Test func unknownSignallingCommandIsRejected() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connectCentral(1)
        harness.controller.deliverL2CAP(
            handle: ConnectionHandle(1), channel: .leSignaling,
            [0x3F, 0x09, 0x02, 0x00, 0xAB, 0xCD])  // unknown code 0x3F, identifier 9
        let signalling = harness.controller.l2cap(on: ConnectionHandle(1)).filter { $0.channel == .leSignaling }
        // Command Reject (0x01), identifier 9, length 2, reason Command Not Understood (0x0000).
        #expect(signalling.map(\.payload) == [[0x01, 0x09, 0x02, 0x00, 0x00, 0x00]])
    }

    @Test func pairingRequestIsRefusedWithPairingNotSupported() throws {
        let harness = HostHarness()
        try harness.started()
        harness.connect(2, role: .peripheral)
        harness.controller.clear()
        // Pairing Request: IO NoInputNoOutput, no OOB, bonding + SC, max key 16, key distributions.
        harness.controller.deliverL2CAP(
            handle: ConnectionHandle(2), channel: .smp, [0x01, 0x03, 0x00, 0x09, 0x10, 0x07, 0x07])
        let smp = harness.controller.l2cap(on: ConnectionHandle(2)).filter { $0.channel == .smp }
        #expect(smp.map(\.payload) == [[0x05, 0x05]])  // Pairing Failed, Pairing Not Supported

        // A Pairing Failed from the peer is never answered.
        harness.controller.clear()
        harness.controller.deliverL2CAP(handle: ConnectionHandle(2), channel: .smp, [0x05, 0x08])
        #expect(harness.controller.acl.isEmpty)
    }
}
