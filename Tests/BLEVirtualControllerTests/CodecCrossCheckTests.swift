import BLECore
import BLEHCI
import BLEVirtualController
import Foundation
import Synchronization
import Testing

/// The controller encodes and decodes HCI by itself, from the spec; these tests hold it against BLEHCI's
/// independent codecs, so a disagreement between the two shows up here rather than in a host.
@Suite struct CodecCrossCheckTests {
    @Test func supportedCommandsMatchBLEHCIsBitPositions() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "a"))
        let reply = try await host.command(HCIReadLocalSupportedCommands.opcode.rawValue)
        let supported = HCISupportedCommands(octets: Array(reply.dropFirst()))
        let implemented: [HCIOpcode] = [
            HCISetEventMask.opcode, HCIReset.opcode, HCISetEventMaskPage2.opcode, HCIWriteLEHostSupport.opcode,
            HCIDisconnect.opcode, HCIReadRemoteVersionInformation.opcode, HCIReadRSSI.opcode,
            HCILECreateConnection.opcode, HCILECreateConnectionCancel.opcode, HCILEConnectionUpdate.opcode,
            HCILEReadRemoteFeatures.opcode, HCILERemoteConnectionParameterRequestReply.opcode,
            HCILERemoteConnectionParameterRequestNegativeReply.opcode, HCILESetScanParameters.opcode,
            HCILESetScanEnable.opcode, HCILESetAdvertisingParameters.opcode,
            HCILEReadAdvertisingPhysicalChannelTxPower.opcode, HCILESetAdvertisingData.opcode,
            HCILESetScanResponseData.opcode, HCILESetAdvertisingEnable.opcode, HCILESetEventMask.opcode,
            HCILEReadBufferSize.opcode, HCILEReadBufferSizeV2.opcode, HCILEReadLocalSupportedFeatures.opcode,
            HCILESetRandomAddress.opcode, HCILEReadFilterAcceptListSize.opcode, HCILEClearFilterAcceptList.opcode,
            HCILERand.opcode, HCILESetDataLength.opcode, HCILEReadSuggestedDefaultDataLength.opcode,
            HCILEWriteSuggestedDefaultDataLength.opcode, HCILEReadMaximumDataLength.opcode, HCILEReadPHY.opcode,
            HCILESetDefaultPHY.opcode, HCILESetPHY.opcode, HCIReadLocalVersionInformation.opcode,
            HCIReadLocalSupportedFeatures.opcode, HCIReadBufferSize.opcode, HCIReadBDADDR.opcode,
            HCILEEncrypt.opcode, HCILEEnableEncryption.opcode, HCILELongTermKeyRequestReply.opcode,
            HCILELongTermKeyRequestNegativeReply.opcode,
        ]
        for opcode in implemented {
            #expect(supported.supports(opcode), "\(opcode) should be claimed")
        }
        for opcode in [HCILEReadSupportedStates.opcode] {
            #expect(!supported.supports(opcode), "\(opcode) is not implemented")
            // ...and indeed answered as unknown.
            #expect(try await host.command(opcode.rawValue, [UInt8](repeating: 0, count: 28)).first == 0x01)
        }
    }

    @Test func everyEventTheControllerSendsDecodes() async throws {
        let radio = SimulatedRadio(seed: 77)
        let packets = Mutex<[HCIPacket]>([])
        radio.setTraceHandler { _, _, direction, packet in
            if direction == .controllerToHost { packets.withLock { $0.append(packet) } }
        }
        // A connection that goes through every procedure, plus scanning.
        let pair = try await ConnectedPair.make(radio: radio, dataLength: 200)
        let scanner = TestHost(radio.addController(name: "scanner", position: .init(x: 1, y: 1)))
        try await scanner.setUp()
        let beacon = TestHost(radio.addController(name: "beacon", position: .init(x: 2, y: 2)))
        try await beacon.setUp()
        try await beacon.setAdvertising(type: 0, data: [2, 1, 6], scanResponse: [3, 9, 0x41, 0x42])
        try await beacon.enableAdvertising()
        try await scanner.startScan(active: true)
        let c = pair.central
        let p = pair.peripheral
        let ch = pair.centralHandle
        let ph = pair.peripheralHandle
        try await c.command(0x2016, le16(ch))
        try await p.command(0x041D, le16(ph))
        try await c.command(0x2032, le16(ch) + [0, 2, 2, 0, 0])
        try await radio.run(for: .milliseconds(200))
        try await c.command(0x2013, le16(ch) + le16(30) + le16(30) + le16(0) + le16(300) + le16(0) + le16(0))
        try await radio.run(for: .milliseconds(500))
        try await p.command(0x2013, le16(ph) + le16(20) + le16(20) + le16(0) + le16(300) + le16(0) + le16(0))
        try await radio.run(for: .milliseconds(200))
        try await c.command(0x2020, le16(ch) + le16(20) + le16(20) + le16(0) + le16(300) + le16(0) + le16(0))
        c.sendACL(handle: ch, [UInt8](repeating: 1, count: 240))
        try await radio.run(for: .milliseconds(500))
        // Encryption, then a key refresh: LE Long Term Key Request, Encryption Change, Key Refresh Complete.
        let key = [UInt8](repeating: 0x5A, count: 16)
        for _ in 0..<2 {
            try await c.command(0x2019, le16(ch) + [UInt8](repeating: 0, count: 10) + key)
            try await radio.run(for: .milliseconds(200))
            try await p.command(0x201A, le16(ph) + key)
            try await radio.run(for: .milliseconds(300))
        }
        try await c.command(0x1405, le16(ch))
        try await c.command(0x0406, le16(ch) + [0x13])
        try await radio.run(for: .milliseconds(100))

        let all = packets.withLock { $0 }
        var subevents = Set<UInt8>()
        var codes = Set<UInt8>()
        for packet in all {
            guard case .event(let e) = packet else { continue }
            let decoded = try HCIEvent(e)
            codes.insert(e.code.rawValue)
            if case .unknown = decoded { Issue.record("BLEHCI does not know event \(e)") }
            if case .leMeta(let meta) = decoded {
                subevents.insert(e.parameters[0])
                if case .unknown = meta { Issue.record("BLEHCI does not know LE subevent \(e)") }
            }
        }
        #expect(codes.isSuperset(of: [0x05, 0x08, 0x0C, 0x0E, 0x0F, 0x13, 0x30, 0x3E]))
        #expect(subevents.isSuperset(of: [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0C]))
    }
}
