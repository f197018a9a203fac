import BLECore
import BLEHCI
import NIOCore
import Testing

/// 4A:BB:CC:DD:EE:FF, a resolvable private address; on the wire FF EE DD CC BB 4A.
let localRPA = BluetoothAddress(string: "4A:BB:CC:DD:EE:FF", type: .randomDevice)!
let noRPA = BluetoothAddress(bytes: [0, 0, 0, 0, 0, 0], type: .randomDevice)

/// Golden event packets: event code, parameter length, parameters, laid out as Core Spec 5.4, Vol 4, Part E,
/// 7.7 gives them.
let eventCases: [EventCase] = [
    // 7.7.5: status, handle, reason
    .init(
        "DisconnectionComplete",
        .disconnectionComplete(.init(status: .success, handle: handle40, reason: .remoteUserTerminatedConnection)),
        [0x05, 0x04, 0x00, 0x40, 0x00, 0x13]),
    // 7.7.8: status, handle, Encryption_Enabled
    .init(
        "EncryptionChange", .encryptionChange(.init(handle: handle40, encryptionEnabled: 0x01)),
        [0x08, 0x04, 0x00, 0x40, 0x00, 0x01]),
    // 7.7.12: status, handle, version, company, subversion
    .init(
        "ReadRemoteVersionInformationComplete",
        .readRemoteVersionInformationComplete(
            .init(handle: handle40, version: .v5_4, companyIdentifier: 0x0059, subversion: 0x1234)),
        [0x0C, 0x08, 0x00, 0x40, 0x00, 0x0D, 0x59, 0x00, 0x34, 0x12]),
    // 7.7.14: credits, opcode, status
    .init(
        "CommandComplete", .commandComplete(.init(numHCICommandPackets: 1, opcode: .reset, returnParameters: [0x00])),
        [0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]),
    // 7.7.14 with opcode 0x0000: credits only
    .init(
        "CommandComplete NOP", .commandComplete(.init(numHCICommandPackets: 5, opcode: .nop, returnParameters: [])),
        [0x0E, 0x03, 0x05, 0x00, 0x00]),
    // 7.7.15: status, credits, opcode
    .init(
        "CommandStatus", .commandStatus(.init(status: .success, numHCICommandPackets: 1, opcode: .leCreateConnection)),
        [0x0F, 0x04, 0x00, 0x01, 0x0D, 0x20]),
    // 7.7.16: hardware code
    .init("HardwareError", .hardwareError(.init(hardwareCode: 0x42)), [0x10, 0x01, 0x42]),
    // 7.7.19: count, then (handle, completed) per entry
    .init(
        "NumberOfCompletedPackets",
        .numberOfCompletedPackets(
            .init(entries: [
                .init(handle: handle40, numCompletedPackets: 2),
                .init(handle: ConnectionHandle(0x0041), numCompletedPackets: 1),
            ])),
        [0x13, 0x09, 0x02, /* handle */ 0x40, 0x00, /* count */ 0x02, 0x00, 0x41, 0x00, 0x01, 0x00]),
    // 7.7.26: link type ACL
    .init("DataBufferOverflow", .dataBufferOverflow(.init(linkType: 0x01)), [0x1A, 0x01, 0x01]),
    // 7.7.39: status, handle
    .init(
        "EncryptionKeyRefreshComplete", .encryptionKeyRefreshComplete(.init(handle: handle40)),
        [0x30, 0x03, 0x00, 0x40, 0x00]),
    // 7.7.65.1
    .init(
        "LEConnectionComplete",
        .leMeta(
            .connectionComplete(
                .init(
                    status: .success, handle: handle40, role: .central, peerAddress: randomPeer,
                    connectionInterval: 0x0028, peripheralLatency: 0, supervisionTimeout: 0x01F4,
                    centralClockAccuracy: .ppm500))),
        [
            0x3E, 0x13,
            0x01,  // Subevent_Code
            0x00,  // Status
            0x40, 0x00,  // Connection_Handle
            0x00,  // Role central
            0x01,  // Peer_Address_Type random
            0x55, 0x44, 0x33, 0x22, 0x11, 0xC0,  // Peer_Address
            0x28, 0x00,  // Connection_Interval 50 ms
            0x00, 0x00,  // Peripheral_Latency
            0xF4, 0x01,  // Supervision_Timeout 5 s
            0x00,
        ]),  // Central_Clock_Accuracy
    // 7.7.65.2, one report
    .init(
        "LEAdvertisingReport",
        .leMeta(
            .advertisingReport(
                .init(reports: [
                    .init(eventType: .advInd, address: randomPeer, data: [0x02, 0x01, 0x06], rssi: -50)
                ]))),
        [
            0x3E, 0x0F,
            0x02,  // Subevent_Code
            0x01,  // Num_Reports
            0x00,  // Event_Type ADV_IND
            0x01,  // Address_Type random
            0x55, 0x44, 0x33, 0x22, 0x11, 0xC0,  // Address
            0x03,  // Data_Length
            0x02, 0x01, 0x06,  // Data: Flags
            0xCE,
        ]),  // RSSI -50 dBm
    // 7.7.65.2, two reports, the second a scan response without data or RSSI
    .init(
        "LEAdvertisingReport x2",
        .leMeta(
            .advertisingReport(
                .init(reports: [
                    .init(eventType: .advInd, address: randomPeer, data: [0x02, 0x01, 0x06], rssi: -50),
                    .init(eventType: .scanRsp, address: publicAddress, data: [], rssi: 127),
                ]))),
        [
            0x3E, 0x19, 0x02, 0x02,
            0x00, 0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, 0x03, 0x02, 0x01, 0x06, 0xCE,
            0x04, 0x00, 0x03, 0x02, 0x01, 0xDC, 0x1B, 0x00, 0x00, 0x7F,
        ]),
    // 7.7.65.13, a legacy ADV_IND as Bumble's controller reports it
    .init(
        "LEExtendedAdvertisingReport",
        .leMeta(
            .extendedAdvertisingReport(
                .init(reports: [
                    .init(
                        eventType: [.legacy, .connectable, .scannable], address: randomPeer, primaryPHY: 1,
                        secondaryPHY: 0,
                        advertisingSID: 0xFF, txPower: 127, rssi: -50, periodicAdvertisingInterval: 0,
                        directAddress: .zero, data: [0x02, 0x01, 0x06])
                ]))),
        [
            0x3E, 0x1D,
            0x0D,  // Subevent_Code
            0x01,  // Num_Reports
            0x13, 0x00,  // Event_Type: legacy, scannable, connectable (ADV_IND)
            0x01,  // Address_Type random
            0x55, 0x44, 0x33, 0x22, 0x11, 0xC0,  // Address
            0x01,  // Primary_PHY LE 1M
            0x00,  // Secondary_PHY none
            0xFF,  // Advertising_SID none
            0x7F,  // TX_Power not available
            0xCE,  // RSSI -50 dBm
            0x00, 0x00,  // Periodic_Advertising_Interval none
            0x00,  // Direct_Address_Type
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Direct_Address
            0x03,  // Data_Length
            0x02, 0x01, 0x06,
        ]),  // Data: Flags
    // 7.7.65.3
    .init(
        "LEConnectionUpdateComplete",
        .leMeta(
            .connectionUpdateComplete(
                .init(
                    handle: handle40, connectionInterval: 0x0006, peripheralLatency: 0,
                    supervisionTimeout: 0x0064))),
        [0x3E, 0x0A, 0x03, 0x00, 0x40, 0x00, 0x06, 0x00, 0x00, 0x00, 0x64, 0x00]),
    // 7.7.65.4
    .init(
        "LEReadRemoteFeaturesComplete",
        .leMeta(.readRemoteFeaturesComplete(.init(handle: handle40, leFeatures: LEFeatures(rawValue: 0x0123)))),
        [0x3E, 0x0C, 0x04, 0x00, 0x40, 0x00, 0x23, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
    // 7.7.65.5: handle, Rand, EDIV
    .init(
        "LELongTermKeyRequest",
        .leMeta(
            .longTermKeyRequest(
                .init(handle: handle40, randomNumber: 0x0102_0304_0506_0708, encryptedDiversifier: 0xBEEF))),
        [0x3E, 0x0D, 0x05, 0x40, 0x00, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xEF, 0xBE]),
    // 7.7.65.6
    .init(
        "LERemoteConnectionParameterRequest",
        .leMeta(
            .remoteConnectionParameterRequest(
                .init(
                    handle: handle40, intervalMin: 0x0010, intervalMax: 0x0020,
                    maxLatency: 0, timeout: 0x00C8))),
        [0x3E, 0x0B, 0x06, 0x40, 0x00, 0x10, 0x00, 0x20, 0x00, 0x00, 0x00, 0xC8, 0x00]),
    // 7.7.65.7
    .init(
        "LEDataLengthChange",
        .leMeta(
            .dataLengthChange(
                .init(handle: handle40, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 27, maxRxTime: 328))),
        [0x3E, 0x0B, 0x07, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08, 0x1B, 0x00, 0x48, 0x01]),
    // 7.7.65.10
    .init(
        "LEEnhancedConnectionComplete",
        .leMeta(
            .enhancedConnectionComplete(
                .init(
                    status: .success, handle: ConnectionHandle(0x0041), role: .peripheral,
                    peerAddress: BluetoothAddress(string: "00:1B:DC:01:02:03", type: .publicIdentity)!,
                    localResolvablePrivateAddress: localRPA, peerResolvablePrivateAddress: noRPA,
                    connectionInterval: 0x0018, peripheralLatency: 0, supervisionTimeout: 0x00C8,
                    centralClockAccuracy: .ppm20))),
        [
            0x3E, 0x1F,
            0x0A,  // Subevent_Code
            0x00,  // Status
            0x41, 0x00,  // Connection_Handle
            0x01,  // Role peripheral
            0x02,  // Peer_Address_Type public identity
            0x03, 0x02, 0x01, 0xDC, 0x1B, 0x00,  // Peer_Address
            0xFF, 0xEE, 0xDD, 0xCC, 0xBB, 0x4A,  // Local_Resolvable_Private_Address
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Peer_Resolvable_Private_Address
            0x18, 0x00,  // Connection_Interval 30 ms
            0x00, 0x00,  // Peripheral_Latency
            0xC8, 0x00,  // Supervision_Timeout 2 s
            0x07,
        ]),  // Central_Clock_Accuracy 20 ppm
    // 7.7.65.12
    .init(
        "LEPHYUpdateComplete", .leMeta(.phyUpdateComplete(.init(handle: handle40, txPHY: .le2M, rxPHY: .le2M))),
        [0x3E, 0x06, 0x0C, 0x00, 0x40, 0x00, 0x02, 0x02]),
    // Unknown event code 0x57 (Authenticated Payload Timeout Expired) is kept whole.
    .init(
        "unknown event", .unknown(HCIEventPacket(code: .authenticatedPayloadTimeoutExpired, parameters: [0x40, 0x00])),
        [0x57, 0x02, 0x40, 0x00]),
    // Unknown LE subevent 0x14 (Channel Selection Algorithm) is kept with its bytes.
    .init(
        "unknown LE subevent", .leMeta(.unknown(subevent: .channelSelectionAlgorithm, parameters: [0x40, 0x00, 0x01])),
        [0x3E, 0x04, 0x14, 0x40, 0x00, 0x01]),
]

@Suite struct EventGoldenTests {
    @Test(arguments: eventCases)
    func encodes(_ testCase: EventCase) {
        #expect(testCase.event.packet.encode() == testCase.bytes)
    }

    @Test(arguments: eventCases)
    func decodes(_ testCase: EventCase) throws {
        let packet = try HCIEventPacket(decoding: testCase.bytes)
        #expect(try HCIEvent(packet) == testCase.event)
        #expect(testCase.event.code == packet.code)
    }

    @Test(arguments: eventCases)
    func everyParameterPrefixIsRejected(_ testCase: EventCase) throws {
        let packet = try HCIEventPacket(decoding: testCase.bytes)
        // Unknown events and subevents take any bytes; a Command Complete needs only credits and opcode.
        var minimum = packet.parameters.count
        switch testCase.event {
        case .unknown: minimum = 0
        case .leMeta(.unknown): minimum = 1
        case .commandComplete: minimum = 3
        default: break
        }
        for length in 0..<minimum {
            let short = HCIEventPacket(code: packet.code, parameters: Array(packet.parameters.prefix(length)))
            #expect(throws: HCIError.self, "\(length) of \(packet.parameters.count) bytes") { try HCIEvent(short) }
        }
    }

    @Test(arguments: eventCases)
    func everyPacketPrefixIsRejected(_ testCase: EventCase) {
        for length in 0..<testCase.bytes.count {
            #expect(throws: HCIError.self) { try HCIEventPacket(decoding: testCase.bytes.prefix(length)) }
        }
    }

    @Test func typedDecodeChecksTheCode() throws {
        let packet = HCIEvent.HardwareError(hardwareCode: 1).packet
        #expect(try HCIEvent.HardwareError(packet: packet) == .init(hardwareCode: 1))
        #expect(throws: HCIError.self) { try HCIEvent.DataBufferOverflow(packet: packet) }
        let meta = HCILEMetaEvent.PHYUpdateComplete(handle: handle40, txPHY: .le1M, rxPHY: .le1M).packet
        #expect(try HCILEMetaEvent.PHYUpdateComplete(packet: meta).txPHY == .le1M)
        #expect(throws: HCIError.self) { try HCILEMetaEvent.DataLengthChange(packet: meta) }
        #expect(throws: HCIError.self) { try HCILEMetaEvent.DataLengthChange(packet: packet) }
    }

    @Test func advertisingDataLongerThan31IsRejected() {
        var parameters: [UInt8] = [0x02, 0x01, 0x00, 0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, 0x20]
        parameters += [UInt8](repeating: 0, count: 32) + [0x00]
        let error = #expect(throws: HCIError.self) {
            try HCIEvent(HCIEventPacket(code: .leMeta, parameters: parameters))
        }
        #expect(error?.code == .invalidParameter)
    }

    @Test func hugeCountsDoNotTrap() {
        // 255 completed-packet entries claimed, 1 present; 255 advertising reports claimed, none present.
        #expect(throws: HCIError.self) {
            try HCIEvent(HCIEventPacket(code: .numberOfCompletedPackets, parameters: [0xFF, 0x40, 0x00, 0x01, 0x00]))
        }
        #expect(throws: HCIError.self) { try HCIEvent(HCIEventPacket(code: .leMeta, parameters: [0x02, 0xFF])) }
    }

    @Test func extraEventBytesAreIgnored() throws {
        let event = try HCIEvent(HCIEventPacket(code: .hardwareError, parameters: [0x01, 0x02]))
        #expect(event == .hardwareError(.init(hardwareCode: 1)))
    }

    @Test func rssiNotAvailable() throws {
        let event = try HCIEvent(
            HCIEventPacket(decoding: eventCases.first { $0.name == "LEAdvertisingReport x2" }!.bytes))
        guard case .leMeta(.advertisingReport(let report)) = event else {
            Issue.record("not an advertising report")
            return
        }
        #expect(report.reports[1].rssi == HCILEMetaEvent.AdvertisingReport.rssiNotAvailable)
        #expect(report.reports[0].eventType.isConnectable)
        #expect(!report.reports[1].eventType.isConnectable)
    }
}
