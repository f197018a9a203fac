import BLECore
import BLEHCI
import NIOCore
import Testing

/// Golden Command Complete events: event code 0x0E, length, Num_HCI_Command_Packets, opcode, status, then the
/// return parameters of the command's section in Core Spec 5.4, Vol 4, Part E.
let returnCases: [ReturnCase] = [
    .make(HCIReset.self, HCIEmptyReturn(), [0x0E, 0x04, 0x01, 0x03, 0x0C, /* status */ 0x00]),
    // 7.4.1
    .make(
        HCIReadLocalVersionInformation.self,
        .init(
            hciVersion: .v5_4, hciSubversion: 0x1234, lmpVersion: .v5_4, companyIdentifier: 0x05F1,
            lmpSubversion: 0x5678),
        [
            0x0E, 0x0C, 0x01, 0x01, 0x10, 0x00,
            0x0D,  // HCI_Version 5.4
            0x34, 0x12,  // HCI_Subversion
            0x0D,  // LMP_Version 5.4
            0xF1, 0x05,  // Company_Identifier
            0x78, 0x56,
        ]),  // LMP_Subversion
    // 7.4.2: Reset (octet 5 bit 7), Disconnect (octet 0 bit 5), LE Set Scan Enable (octet 26 bit 3)
    .make(
        HCIReadLocalSupportedCommands.self,
        .init(supportedCommands: HCISupportedCommands(supporting: [.reset, .disconnect, .leSetScanEnable])),
        [0x0E, 0x44, 0x01, 0x02, 0x10, 0x00]
            + [0x20, 0, 0, 0, 0, 0x80] + [UInt8](repeating: 0, count: 20) + [0x08] + [UInt8](repeating: 0, count: 37)),
    // 7.4.3: LE Supported (Controller) bit 38, BR/EDR Not Supported bit 37: octet 4 = 0x60
    .make(
        HCIReadLocalSupportedFeatures.self, .init(lmpFeatures: [.leSupportedController, .brEdrNotSupported]),
        [0x0E, 0x0C, 0x01, 0x03, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x60, 0x00, 0x00, 0x00]),
    // 7.4.5
    .make(
        HCIReadBufferSize.self,
        .init(
            aclDataPacketLength: 1021, synchronousDataPacketLength: 64, totalNumACLDataPackets: 8,
            totalNumSynchronousDataPackets: 0),
        [
            0x0E, 0x0B, 0x01, 0x05, 0x10, 0x00,
            0xFD, 0x03,  // ACL_Data_Packet_Length
            0x40,  // Synchronous_Data_Packet_Length
            0x08, 0x00,  // Total_Num_ACL_Data_Packets
            0x00, 0x00,
        ]),  // Total_Num_Synchronous_Data_Packets
    // 7.4.6
    .make(
        HCIReadBDADDR.self, .init(address: publicAddress),
        [0x0E, 0x0A, 0x01, 0x09, 0x10, 0x00, 0x03, 0x02, 0x01, 0xDC, 0x1B, 0x00]),
    // 7.5.4: handle, RSSI -60 dBm
    .make(
        HCIReadRSSI.self, .init(handle: handle40, rssi: -60),
        [0x0E, 0x07, 0x01, 0x05, 0x14, 0x00, 0x40, 0x00, 0xC4]),
    // 7.8.2 v1: 251 bytes, 15 packets
    .make(
        HCILEReadBufferSize.self, .init(leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15),
        [0x0E, 0x07, 0x01, 0x02, 0x20, 0x00, 0xFB, 0x00, 0x0F]),
    // 7.8.2 v2: adds ISO length and count
    .make(
        HCILEReadBufferSizeV2.self,
        .init(
            leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15, isoDataPacketLength: 0x0100,
            totalNumISODataPackets: 4),
        [0x0E, 0x0A, 0x01, 0x60, 0x20, 0x00, 0xFB, 0x00, 0x0F, 0x00, 0x01, 0x04]),
    // 7.8.3: encryption (0), connection parameters request (1), data length extension (5), 2M PHY (8)
    .make(
        HCILEReadLocalSupportedFeatures.self,
        .init(leFeatures: [.leEncryption, .connectionParametersRequest, .dataPacketLengthExtension, .le2MPHY]),
        [0x0E, 0x0C, 0x01, 0x03, 0x20, 0x00, 0x23, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
    // 7.8.6: -4 dBm
    .make(
        HCILEReadAdvertisingPhysicalChannelTxPower.self, .init(txPowerLevel: -4),
        [0x0E, 0x05, 0x01, 0x07, 0x20, 0x00, 0xFC]),
    // 7.8.14
    .make(
        HCILEReadFilterAcceptListSize.self, .init(filterAcceptListSize: 16),
        [0x0E, 0x05, 0x01, 0x0F, 0x20, 0x00, 0x10]),
    // 7.8.22: Encrypted_Data, least significant octet first (0x99AD1B5226A37E3E058E3B8E27C2C666, Vol 6, Part C, 1.1)
    .make(
        HCILEEncrypt.self,
        .init(encryptedData: [
            0x66, 0xC6, 0xC2, 0x27, 0x8E, 0x3B, 0x8E, 0x05, 0x3E, 0x7E, 0xA3, 0x26, 0x52, 0x1B, 0xAD, 0x99,
        ]),
        [0x0E, 0x14, 0x01, 0x17, 0x20, 0x00]
            + [0x66, 0xC6, 0xC2, 0x27, 0x8E, 0x3B, 0x8E, 0x05, 0x3E, 0x7E, 0xA3, 0x26, 0x52, 0x1B, 0xAD, 0x99]),
    // 7.8.23
    .make(
        HCILERand.self, .init(randomNumber: 0x0807_0605_0403_0201),
        [0x0E, 0x0C, 0x01, 0x18, 0x20, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
    // 7.8.25, 7.8.26, 7.8.31, 7.8.32, 7.8.33: the handle
    .make(
        HCILELongTermKeyRequestReply.self, .init(handle: handle40), [0x0E, 0x06, 0x01, 0x1A, 0x20, 0x00, 0x40, 0x00]),
    .make(
        HCILELongTermKeyRequestNegativeReply.self, .init(handle: handle40),
        [0x0E, 0x06, 0x01, 0x1B, 0x20, 0x00, 0x40, 0x00]),
    // 7.8.27
    .make(
        HCILEReadSupportedStates.self, .init(leStates: 0x0000_03FF_FFFF_FFFF),
        [0x0E, 0x0C, 0x01, 0x1C, 0x20, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x03, 0x00, 0x00]),
    .make(
        HCILERemoteConnectionParameterRequestReply.self, .init(handle: handle40),
        [0x0E, 0x06, 0x01, 0x20, 0x20, 0x00, 0x40, 0x00]),
    .make(
        HCILERemoteConnectionParameterRequestNegativeReply.self, .init(handle: handle40),
        [0x0E, 0x06, 0x01, 0x21, 0x20, 0x00, 0x40, 0x00]),
    .make(HCILESetDataLength.self, .init(handle: handle40), [0x0E, 0x06, 0x01, 0x22, 0x20, 0x00, 0x40, 0x00]),
    // 7.8.34: 27 octets, 328 us
    .make(
        HCILEReadSuggestedDefaultDataLength.self, .init(suggestedMaxTxOctets: 27, suggestedMaxTxTime: 328),
        [0x0E, 0x08, 0x01, 0x23, 0x20, 0x00, 0x1B, 0x00, 0x48, 0x01]),
    // 7.8.46: 251 octets, 2120 us both ways
    .make(
        HCILEReadMaximumDataLength.self,
        .init(supportedMaxTxOctets: 251, supportedMaxTxTime: 2120, supportedMaxRxOctets: 251, supportedMaxRxTime: 2120),
        [0x0E, 0x0C, 0x01, 0x2F, 0x20, 0x00, 0xFB, 0x00, 0x48, 0x08, 0xFB, 0x00, 0x48, 0x08]),
    // 7.8.47: handle, TX 2M, RX 1M
    .make(
        HCILEReadPHY.self, .init(handle: handle40, txPHY: .le2M, rxPHY: .le1M),
        [0x0E, 0x08, 0x01, 0x30, 0x20, 0x00, 0x40, 0x00, 0x02, 0x01]),
]

@Suite struct ReturnParametersTests {
    @Test(arguments: returnCases)
    func encodes(_ testCase: ReturnCase) {
        #expect(testCase.encode().packet.encode() == testCase.event)
    }

    @Test(arguments: returnCases)
    func decodes(_ testCase: ReturnCase) throws {
        let event = try HCIEvent(HCIEventPacket(decoding: testCase.event))
        guard case .commandComplete(let complete) = event else {
            Issue.record("not a Command Complete: \(event)")
            return
        }
        #expect(complete.opcode == testCase.opcode)
        #expect(complete.status == .success)
        #expect(try testCase.decodeMatches(complete))
    }

    @Test(arguments: returnCases)
    func everyReturnPrefixIsRejected(_ testCase: ReturnCase) throws {
        let complete = try HCIEvent.CommandComplete(packet: HCIEventPacket(decoding: testCase.event))
        // Keep the status, cut what follows.
        for length in 1..<complete.returnParameters.count {
            var short = complete
            short.returnParameters = Array(complete.returnParameters.prefix(length))
            let error = #expect(throws: HCIError.self) { try testCase.decode(short) }
            #expect(error?.code == .truncated)
        }
    }

    @Test(arguments: returnCases)
    func statusOnlyFailureThrowsTheStatus(_ testCase: ReturnCase) throws {
        // A controller failing the command sends the status alone: 0E 04 01 <opcode> 01.
        let bytes: [UInt8] = [
            0x0E, 0x04, 0x01, UInt8(testCase.opcode.rawValue & 0xFF), UInt8(testCase.opcode.rawValue >> 8), 0x01,
        ]
        let complete = try HCIEvent.CommandComplete(packet: HCIEventPacket(decoding: bytes))
        #expect(complete.status == .unknownCommand)
        let error = #expect(throws: HCIError.self) { try testCase.decode(complete) }
        #expect(error?.code == .commandFailed)
        #expect(error?.status == .unknownCommand)
        #expect(error?.opcode == testCase.opcode)
    }

    @Test func failureBuilderSendsTheStatusAlone() {
        let complete = HCIEvent.CommandComplete(opcode: .leSetAdvertisingEnable, failure: .commandDisallowed)
        #expect(complete.packet.encode() == [0x0E, 0x04, 0x01, 0x0A, 0x20, 0x0C])
    }

    @Test func noOperationHasNoStatus() throws {
        // 0E 03: one credit, opcode 0x0000, no return parameters at all.
        let complete = try HCIEvent.CommandComplete(packet: HCIEventPacket(decoding: [0x0E, 0x03, 0x01, 0x00, 0x00]))
        #expect(complete.opcode == .nop)
        #expect(complete.status == nil)
        #expect(complete.returnParameters.isEmpty)
    }

    @Test func decodingAnotherCommandsCompletionIsRejected() throws {
        let complete = HCIEvent.CommandComplete(completing: HCIReset.self, returning: HCIEmptyReturn())
        let error = #expect(throws: HCIError.self) { try complete.decodeReturn(HCIReadBDADDR.self) }
        #expect(error?.code == .unexpectedOpcode)
    }

    @Test func extraReturnBytesAreIgnored() throws {
        // A later spec version may append return parameters.
        let complete = HCIEvent.CommandComplete(
            numHCICommandPackets: 1, opcode: .leReadBufferSize,
            returnParameters: [0x00, 0xFB, 0x00, 0x0F, 0xAA])
        let value = try complete.decodeReturn(HCILEReadBufferSize.self)
        #expect(value == .init(leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15))
    }
}
