import BLECore
import BLEHCI
import NIOCore
import Testing

/// Golden command packets: opcode (little-endian), parameter length, parameters, laid out as Core Spec 5.4,
/// Vol 4, Part E, 7.1, 7.3, 7.4, 7.5 and 7.8 give them.
let commandCases: [CommandCase] = [
    // 7.1.6 Disconnect: handle, reason
    .init(
        HCIDisconnect(handle: handle40, reason: .remoteUserTerminatedConnection),
        [0x06, 0x04, 0x03, /* handle */ 0x40, 0x00, /* reason */ 0x13]),
    // 7.1.23 Read Remote Version Information: handle
    .init(HCIReadRemoteVersionInformation(handle: handle40), [0x1D, 0x04, 0x02, 0x40, 0x00]),
    // 7.3.1 Set Event Mask: 8-byte mask
    .init(
        HCISetEventMask(eventMask: HCIEventMask(rawValue: 0x2000_1FFF_FFFF_FFFF)),
        [0x01, 0x0C, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0x00, 0x20]),
    // 7.3.2 Reset: no parameters
    .init(HCIReset(), [0x03, 0x0C, 0x00]),
    // 7.3.69 Set Event Mask Page 2: bit 23 (Authenticated Payload Timeout Expired)
    .init(
        HCISetEventMaskPage2(eventMaskPage2: .authenticatedPayloadTimeoutExpired),
        [0x63, 0x0C, 0x08, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00]),
    // 7.3.79 Write LE Host Support: LE_Supported_Host, Simultaneous_LE_Host
    .init(HCIWriteLEHostSupport(leSupportedHost: true), [0x6D, 0x0C, 0x02, 0x01, 0x00]),
    // 7.4.1, 7.4.2, 7.4.3, 7.4.5, 7.4.6: no parameters
    .init(HCIReadLocalVersionInformation(), [0x01, 0x10, 0x00]),
    .init(HCIReadLocalSupportedCommands(), [0x02, 0x10, 0x00]),
    .init(HCIReadLocalSupportedFeatures(), [0x03, 0x10, 0x00]),
    .init(HCIReadBufferSize(), [0x05, 0x10, 0x00]),
    .init(HCIReadBDADDR(), [0x09, 0x10, 0x00]),
    // 7.5.4 Read RSSI: handle
    .init(HCIReadRSSI(handle: handle40), [0x05, 0x14, 0x02, 0x40, 0x00]),
    // 7.8.1 LE Set Event Mask: 8-byte mask
    .init(
        HCILESetEventMask(leEventMask: .controllerDefault),
        [0x01, 0x20, 0x08, 0x1F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
    // 7.8.2 LE Read Buffer Size v1 and v2: no parameters
    .init(HCILEReadBufferSize(), [0x02, 0x20, 0x00]),
    .init(HCILEReadBufferSizeV2(), [0x60, 0x20, 0x00]),
    // 7.8.3 LE Read Local Supported Features
    .init(HCILEReadLocalSupportedFeatures(), [0x03, 0x20, 0x00]),
    // 7.8.4 LE Set Random Address: 6 bytes little-endian
    .init(HCILESetRandomAddress(randomAddress: randomPeer), [0x05, 0x20, 0x06, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0]),
    // 7.8.5 LE Set Advertising Parameters
    .init(
        HCILESetAdvertisingParameters(
            advertisingIntervalMin: 0x0030, advertisingIntervalMax: 0x0060, advertisingType: .advNonconnInd,
            ownAddressType: .randomDevice, peerAddress: .zero, advertisingChannelMap: .all,
            advertisingFilterPolicy: .acceptAll),
        [
            0x06, 0x20, 0x0F,
            0x30, 0x00,  // Advertising_Interval_Min 30 ms
            0x60, 0x00,  // Advertising_Interval_Max 60 ms
            0x03,  // Advertising_Type ADV_NONCONN_IND
            0x01,  // Own_Address_Type random
            0x00,  // Peer_Address_Type public
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Peer_Address
            0x07,  // Advertising_Channel_Map 37, 38, 39
            0x00,
        ]),  // Advertising_Filter_Policy
    // 7.8.6 LE Read Advertising Physical Channel Tx Power
    .init(HCILEReadAdvertisingPhysicalChannelTxPower(), [0x07, 0x20, 0x00]),
    // 7.8.7 LE Set Advertising Data: length, then 31 bytes zero padded
    .init(
        HCILESetAdvertisingData(advertisingData: [0x02, 0x01, 0x06, 0x03, 0x03, 0x0D, 0x18]),
        [
            0x08, 0x20, 0x20,
            0x07,  // Advertising_Data_Length
            0x02, 0x01, 0x06, 0x03, 0x03, 0x0D, 0x18,
        ]  // Flags; 16-bit UUID 0x180D
            + [UInt8](repeating: 0, count: 24)),  // padding to 31
    // 7.8.8 LE Set Scan Response Data: empty
    .init(
        HCILESetScanResponseData(scanResponseData: []),
        [0x09, 0x20, 0x20, 0x00] + [UInt8](repeating: 0, count: 31)),
    // 7.8.9 LE Set Advertising Enable
    .init(HCILESetAdvertisingEnable(enable: true), [0x0A, 0x20, 0x01, 0x01]),
    // 7.8.10 LE Set Scan Parameters
    .init(
        HCILESetScanParameters(
            scanType: .active, scanInterval: 0x0060, scanWindow: 0x0030,
            ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered),
        [
            0x0B, 0x20, 0x07,
            0x01,  // LE_Scan_Type active
            0x60, 0x00,  // LE_Scan_Interval 60 ms
            0x30, 0x00,  // LE_Scan_Window 30 ms
            0x00,  // Own_Address_Type public
            0x00,
        ]),  // Scanning_Filter_Policy
    // 7.8.11 LE Set Scan Enable: enable, filter duplicates
    .init(HCILESetScanEnable(enable: true, filterDuplicates: true), [0x0C, 0x20, 0x02, 0x01, 0x01]),
    // 7.8.12 LE Create Connection
    .init(
        HCILECreateConnection(
            scanInterval: 0x0060, scanWindow: 0x0030, initiatorFilterPolicy: .usePeerAddress,
            peerAddress: randomPeer, ownAddressType: .publicDevice, connectionIntervalMin: 0x0018,
            connectionIntervalMax: 0x0028, maxLatency: 0, supervisionTimeout: 0x01F4, minCELength: 0, maxCELength: 0),
        [
            0x0D, 0x20, 0x19,
            0x60, 0x00,  // LE_Scan_Interval
            0x30, 0x00,  // LE_Scan_Window
            0x00,  // Initiator_Filter_Policy
            0x01,  // Peer_Address_Type random
            0x55, 0x44, 0x33, 0x22, 0x11, 0xC0,  // Peer_Address
            0x00,  // Own_Address_Type public
            0x18, 0x00,  // Connection_Interval_Min 30 ms
            0x28, 0x00,  // Connection_Interval_Max 50 ms
            0x00, 0x00,  // Max_Latency
            0xF4, 0x01,  // Supervision_Timeout 5 s
            0x00, 0x00,  // Min_CE_Length
            0x00, 0x00,
        ]),  // Max_CE_Length
    // 7.8.13, 7.8.14, 7.8.15: no parameters
    .init(HCILECreateConnectionCancel(), [0x0E, 0x20, 0x00]),
    .init(HCILEReadFilterAcceptListSize(), [0x0F, 0x20, 0x00]),
    .init(HCILEClearFilterAcceptList(), [0x10, 0x20, 0x00]),
    // Random address C0:11:22:33:44:55, least significant octet first.
    .init(
        HCILEAddDeviceToFilterAcceptList(
            address: BluetoothAddress(bytes: [0xC0, 0x11, 0x22, 0x33, 0x44, 0x55], type: .randomDevice)),
        [0x11, 0x20, 0x07, 0x01, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0]),
    // 7.8.18 LE Connection Update
    .init(
        HCILEConnectionUpdate(
            handle: handle40, connectionIntervalMin: 0x0006, connectionIntervalMax: 0x000C,
            maxLatency: 2, supervisionTimeout: 0x0064),
        [
            0x13, 0x20, 0x0E,
            0x40, 0x00,  // Connection_Handle
            0x06, 0x00,  // Connection_Interval_Min 7.5 ms
            0x0C, 0x00,  // Connection_Interval_Max 15 ms
            0x02, 0x00,  // Max_Latency
            0x64, 0x00,  // Supervision_Timeout 1 s
            0x00, 0x00,  // Min_CE_Length
            0x00, 0x00,
        ]),  // Max_CE_Length
    // 7.8.21 LE Read Remote Features
    .init(HCILEReadRemoteFeatures(handle: handle40), [0x16, 0x20, 0x02, 0x40, 0x00]),
    // 7.8.22 LE Encrypt: Key, Plaintext_Data, each least significant octet first; the values of the sample in
    // Vol 6, Part C, 1.1 (Key 0x4C68384139F574D836BCF34E9DFB01BF, Plaintext 0x0213243546576879ACBDCEDFE0F10213)
    .init(
        HCILEEncrypt(
            key: [0xBF, 0x01, 0xFB, 0x9D, 0x4E, 0xF3, 0xBC, 0x36, 0xD8, 0x74, 0xF5, 0x39, 0x41, 0x38, 0x68, 0x4C],
            plaintext: [0x13, 0x02, 0xF1, 0xE0, 0xDF, 0xCE, 0xBD, 0xAC, 0x79, 0x68, 0x57, 0x46, 0x35, 0x24, 0x13, 0x02]),
        [
            0x17, 0x20, 0x20,
            // Key
            0xBF, 0x01, 0xFB, 0x9D, 0x4E, 0xF3, 0xBC, 0x36, 0xD8, 0x74, 0xF5, 0x39, 0x41, 0x38, 0x68, 0x4C,
            // Plaintext_Data
            0x13, 0x02, 0xF1, 0xE0, 0xDF, 0xCE, 0xBD, 0xAC, 0x79, 0x68, 0x57, 0x46, 0x35, 0x24, 0x13, 0x02,
        ]),
    // 7.8.23 LE Rand
    .init(HCILERand(), [0x18, 0x20, 0x00]),
    // 7.8.24 LE Enable Encryption: handle, Rand, EDIV, LTK
    .init(
        HCILEEnableEncryption(
            handle: handle40, randomNumber: 0x0807_0605_0403_0201, encryptedDiversifier: 0x1234,
            longTermKey: Array(0x00...0x0F)),
        [
            0x19, 0x20, 0x1C,
            0x40, 0x00,  // Connection_Handle
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // Random_Number
            0x34, 0x12,
        ]  // Encrypted_Diversifier
            + Array(0x00...0x0F)),  // Long_Term_Key
    // 7.8.25 LE Long Term Key Request Reply: handle, LTK
    .init(
        HCILELongTermKeyRequestReply(handle: handle40, longTermKey: Array(0xF0...0xFF)),
        [0x1A, 0x20, 0x12, 0x40, 0x00] + Array(0xF0...0xFF)),
    // 7.8.26 LE Long Term Key Request Negative Reply: handle
    .init(HCILELongTermKeyRequestNegativeReply(handle: handle40), [0x1B, 0x20, 0x02, 0x40, 0x00]),
    // 7.8.27 LE Read Supported States
    .init(HCILEReadSupportedStates(), [0x1C, 0x20, 0x00]),
    // 7.8.31 LE Remote Connection Parameter Request Reply
    .init(
        HCILERemoteConnectionParameterRequestReply(
            handle: handle40, intervalMin: 0x0010, intervalMax: 0x0020,
            maxLatency: 0, timeout: 0x00C8),
        [
            0x20, 0x20, 0x0E,
            0x40, 0x00,  // Connection_Handle
            0x10, 0x00,  // Interval_Min 20 ms
            0x20, 0x00,  // Interval_Max 40 ms
            0x00, 0x00,  // Max_Latency
            0xC8, 0x00,  // Timeout 2 s
            0x00, 0x00,  // Min_CE_Length
            0x00, 0x00,
        ]),  // Max_CE_Length
    // 7.8.32 LE Remote Connection Parameter Request Negative Reply: handle, reason
    .init(
        HCILERemoteConnectionParameterRequestNegativeReply(handle: handle40, reason: .unacceptableConnectionParameters),
        [0x21, 0x20, 0x03, 0x40, 0x00, 0x3B]),
    // 7.8.33 LE Set Data Length: handle, TX_Octets 251, TX_Time 2120 us
    .init(
        HCILESetDataLength(handle: handle40, txOctets: 251, txTime: 2120),
        [0x22, 0x20, 0x06, 0x40, 0x00, 0xFB, 0x00, 0x48, 0x08]),
    // 7.8.34 LE Read Suggested Default Data Length
    .init(HCILEReadSuggestedDefaultDataLength(), [0x23, 0x20, 0x00]),
    // 7.8.35 LE Write Suggested Default Data Length: octets, time
    .init(
        HCILEWriteSuggestedDefaultDataLength(suggestedMaxTxOctets: 251, suggestedMaxTxTime: 2120),
        [0x24, 0x20, 0x04, 0xFB, 0x00, 0x48, 0x08]),
    // 7.8.46 LE Read Maximum Data Length
    .init(HCILEReadMaximumDataLength(), [0x2F, 0x20, 0x00]),
    // 7.8.47 LE Read PHY: handle
    .init(HCILEReadPHY(handle: handle40), [0x30, 0x20, 0x02, 0x40, 0x00]),
    // 7.8.48 LE Set Default PHY: All_PHYs, TX_PHYs, RX_PHYs
    .init(
        HCILESetDefaultPHY(allPHYs: [], txPHYs: [.le1M, .le2M], rxPHYs: [.le1M, .le2M]),
        [0x31, 0x20, 0x03, 0x00, 0x03, 0x03]),
    // 7.8.49 LE Set PHY: handle, All_PHYs, TX_PHYs, RX_PHYs, PHY_Options
    .init(
        HCILESetPHY(handle: handle40, allPHYs: [], txPHYs: .le2M, rxPHYs: .le2M, phyOptions: 0),
        [0x32, 0x20, 0x07, 0x40, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00]),
]

@Suite struct CommandGoldenTests {
    @Test(arguments: commandCases)
    func encodes(_ testCase: CommandCase) {
        let encoded = HCICommandPacket(command: testCase.command).encode()
        #expect(encoded == testCase.bytes)
    }

    @Test(arguments: commandCases)
    func decodes(_ testCase: CommandCase) throws {
        let packet = try HCICommandPacket(decoding: testCase.bytes)
        #expect(packet.opcode == type(of: testCase.command).opcode)
        let decoded = try decodeCommand(packet)
        let equal = commandsEqual(testCase.command, decoded)
        #expect(equal, "decoded \(decoded)")
    }

    @Test(arguments: commandCases)
    func everyParameterPrefixIsRejected(_ testCase: CommandCase) throws {
        let packet = try HCICommandPacket(decoding: testCase.bytes)
        for length in 0..<packet.parameters.count {
            let short = HCICommandPacket(opcode: packet.opcode, parameters: Array(packet.parameters.prefix(length)))
            #expect(throws: HCIError.self, "\(length) of \(packet.parameters.count) bytes") { try decodeCommand(short) }
            let error = try? #require(throws: HCIError.self) { try decodeCommand(short) }
            #expect(error?.statusForController == .invalidHCICommandParameters)
        }
    }

    @Test(arguments: commandCases)
    func everyPacketPrefixIsRejected(_ testCase: CommandCase) {
        for length in 0..<testCase.bytes.count {
            #expect(throws: HCIError.self) { try HCICommandPacket(decoding: testCase.bytes.prefix(length)) }
        }
    }

    @Test func everyStandardCommandHasAGoldenCase() {
        let covered = Set(commandCases.map { type(of: $0.command).opcode })
        let registered = Set(HCICommandRegistry.standard.opcodes)
        #expect(covered == registered)
        #expect(registered.count == HCICommandRegistry.allStandardCommandTypes.count)
    }

    @Test func unknownOpcodeIsReportedForUnknownHCICommand() {
        let vendor = HCICommandPacket(opcode: HCIOpcode(ogf: 0x3F, ocf: 0x001), parameters: [0x01])
        let error = #expect(throws: HCIError.self) { try decodeCommand(vendor) }
        #expect(error?.code == .unknownCommand)
        #expect(error?.opcode == HCIOpcode(rawValue: 0xFC01))
        #expect(error?.statusForController == .unknownCommand)
    }

    @Test func registryAcceptsOtherCommands() throws {
        struct VendorPing: HCISyncCommand {
            typealias ReturnParameters = HCIEmptyReturn
            static let opcode = HCIOpcode(ogf: 0x3F, ocf: 0x0002)
            var value: UInt8
            init(value: UInt8) { self.value = value }
            init(parameters: inout ByteBuffer) throws {
                guard let value = parameters.readInteger(as: UInt8.self) else { throw HCIError.truncated("value") }
                self.value = value
            }
            func encodeParameters(into buffer: inout ByteBuffer) { buffer.writeInteger(value) }
        }
        var registry = HCICommandRegistry.standard
        registry.register(VendorPing.self)
        let decoded = try registry.decode(VendorPing(value: 7).packet)
        let equal = commandsEqual(VendorPing(value: 7), decoded)
        #expect(equal)
        #expect(try registry.decode(HCIReset().packet) is HCIReset)
    }

    @Test func advertisingDataLongerThan31IsInvalid() {
        let parameters: [UInt8] = [0x20] + [UInt8](repeating: 0, count: 31)
        let error = #expect(throws: HCIError.self) {
            try decodeCommand(HCICommandPacket(opcode: .leSetAdvertisingData, parameters: parameters))
        }
        #expect(error?.code == .invalidParameter)
    }

    @Test func advertisingDataDecodeKeepsOnlyTheSignificantBytes() throws {
        // Length 2 but non-zero garbage in the padding: only the first two bytes are the data.
        let parameters: [UInt8] = [0x02, 0xAA, 0xBB] + [UInt8](repeating: 0xEE, count: 29)
        let command = try HCILESetAdvertisingData(
            packet: HCICommandPacket(opcode: .leSetAdvertisingData, parameters: parameters))
        #expect(command.advertisingData == [0xAA, 0xBB])
    }

    @Test func booleanOutOfRangeIsInvalid() {
        let error = #expect(throws: HCIError.self) {
            try decodeCommand(HCICommandPacket(opcode: .leSetScanEnable, parameters: [0x02, 0x00]))
        }
        #expect(error?.code == .invalidParameter)
        #expect(error?.statusForController == .invalidHCICommandParameters)
    }

    @Test func decodingAsTheWrongTypeIsRejected() {
        #expect(throws: HCIError.self) { try HCIReset(packet: HCIReadBDADDR().packet) }
    }

    @Test func commandKindsAreStaticallyKnown() {
        func isAsync<C: HCICommand>(_: C.Type) -> Bool { C.self is any HCIAsyncCommand.Type }
        func isSync<C: HCICommand>(_: C.Type) -> Bool { C.self is any HCISyncCommand.Type }
        #expect(isAsync(HCIDisconnect.self))
        #expect(isAsync(HCILECreateConnection.self))
        #expect(isSync(HCILECreateConnectionCancel.self))
        #expect(isAsync(HCILESetPHY.self))
        #expect(isSync(HCILESetDataLength.self))
        #expect(!isSync(HCILEConnectionUpdate.self))
    }
}
