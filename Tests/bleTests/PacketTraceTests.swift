import BLE
import BLEHCI
import Testing

@testable import ble

/// The packet decoder behind `--trace` and `ble btsnoop`, on packets written out byte by byte.
@Suite struct PacketTraceTests {
    /// An ACL packet of link 0x0040 carrying `payload` on L2CAP channel `channel`, whole.
    private func acl(_ channel: UInt16, _ payload: [UInt8], handle: UInt16 = 0x0040) -> HCIPacket {
        let frame = [
            UInt8(payload.count & 0xFF), UInt8(payload.count >> 8), UInt8(channel & 0xFF), UInt8(channel >> 8),
        ]
        return .acl(
            HCIACLDataPacket(handle: ConnectionHandle(handle), packetBoundary: .firstFlushable, data: frame + payload))
    }

    @Test func anATTWriteRequestIsItsHandleAndValue() {
        var trace = PacketTrace()
        let line = trace.describe(
            acl(
                0x0004,
                [
                    0x12,  // ATT_WRITE_REQ
                    0x12, 0x00,  // Attribute Handle 0x0012
                    0x01, 0x00,  // Attribute Value
                ]), direction: .hostToController)
        #expect(line.text == "ATT Write Request handle 0x0012 value 01 00")
        #expect(line.handle == ConnectionHandle(0x0040))
        #expect(LiveTrace.format(line, .hostToController) == "H>C 0x0040 ATT Write Request handle 0x0012 value 01 00")
    }

    @Test func aReadRequestAndItsResponse() {
        var trace = PacketTrace()
        #expect(
            trace.describe(acl(0x0004, [0x0A, 0x03, 0x00]), direction: .hostToController).text
                == "ATT Read Request handle 0x0003")
        #expect(
            trace.describe(acl(0x0004, [0x0B, 0x57]), direction: .controllerToHost).text == "ATT Read Response value 57"
        )
        #expect(
            trace.describe(acl(0x0004, [0x01, 0x0A, 0x03, 0x00, 0x05]), direction: .controllerToHost).text
                == "ATT Error Response request=Read Request handle 0x0003 error=Insufficient Authentication (0x05)")
    }

    @Test func aPairingRequestNamesItsFeatures() {
        var trace = PacketTrace()
        let line = trace.describe(
            acl(
                0x0006,
                [
                    0x01,  // Pairing Request
                    0x03,  // IO Capability: NoInputNoOutput
                    0x00,  // OOB data flag: absent
                    0x09,  // AuthReq: bonding, Secure Connections
                    0x10,  // Maximum Encryption Key Size: 16
                    0x03,  // Initiator Key Distribution: EncKey, IdKey
                    0x03,  // Responder Key Distribution: EncKey, IdKey
                ]), direction: .hostToController)
        #expect(
            line.text
                == "SMP Pairing Request io=NoInputNoOutput oob=absent auth=bond,sc max_key_size=16 initiator_keys=enc,id responder_keys=enc,id"
        )
        #expect(!line.carriesSecret)
    }

    @Test func keysAreRedactedUnlessAsked() {
        let random: [UInt8] = Array(0x10...0x1F)
        let packet = acl(0x0006, [0x04] + random)  // Pairing Random
        var redacting = PacketTrace()
        let hidden = redacting.describe(packet, direction: .controllerToHost)
        #expect(hidden.text == "SMP Pairing Random value=<redacted>")
        #expect(hidden.carriesSecret)
        var showing = PacketTrace(showsSecrets: true)
        #expect(
            showing.describe(packet, direction: .controllerToHost).text
                == "SMP Pairing Random value=101112131415161718191a1b1c1d1e1f")
        // The key the host hands its controller to encrypt with, too.
        let encrypt = HCILEEnableEncryption(
            handle: ConnectionHandle(0x0040), randomNumber: 0, encryptedDiversifier: 0, longTermKey: random)
        let command = redacting.describe(.command(encrypt.packet), direction: .hostToController)
        #expect(command.text.hasSuffix("ltk=<redacted>"), "\(command.text)")
        #expect(!command.text.contains("101112"))
        #expect(command.carriesSecret)
        let ltk = redacting.describe(acl(0x0006, [0x06] + random), direction: .hostToController)
        #expect(ltk.text == "SMP Encryption Information ltk=<redacted>")
    }

    @Test func aConnectionCompleteGivesThePeerAndTheParameters() throws {
        var trace = PacketTrace()
        let event = HCIEventPacket(
            code: .leMeta,
            parameters: [
                0x01,  // LE Connection Complete
                0x00,  // Status: Success
                0x40, 0x00,  // Connection_Handle 0x0040
                0x00,  // Role: central
                0x01,  // Peer_Address_Type: random
                0xEA, 0xFD, 0x29, 0x80, 0xC0, 0xF7,  // Peer_Address F7:C0:80:29:FD:EA
                0x18, 0x00,  // Connection_Interval 24 x 1.25 ms
                0x00, 0x00,  // Peripheral_Latency 0
                0xF4, 0x01,  // Supervision_Timeout 500 x 10 ms
                0x00,  // Central_Clock_Accuracy
            ])
        let line = trace.describe(.event(event), direction: .controllerToHost)
        #expect(
            line.text
                == "HCI Event LE Connection Complete status=Success (0x00) handle 0x0040 role=central peer=F7:C0:80:29:FD:EA (random) interval=30 ms latency=0 timeout=5000 ms"
        )
        #expect(line.handle == ConnectionHandle(0x0040))
    }

    @Test func aDisconnectionCompleteNamesItsReason() {
        var trace = PacketTrace()
        let event = HCIEventPacket(code: .disconnectionComplete, parameters: [0x00, 0x40, 0x00, 0x13])
        #expect(
            trace.describe(.event(event), direction: .controllerToHost).text
                == "HCI Event Disconnection Complete status=Success (0x00) handle 0x0040 reason=Remote User Terminated Connection (0x13)"
        )
    }

    @Test func anAdvertisingReportGivesAddressRSSIAndADStructures() {
        var trace = PacketTrace()
        let data: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0x09] + Array("Lock".utf8) + [0x03, 0x03, 0x0D, 0x18]
        let event = HCIEventPacket(
            code: .leMeta,
            parameters: [
                0x02,  // LE Advertising Report
                0x01,  // Num_Reports
                0x00,  // Event_Type: ADV_IND
                0x00,  // Address_Type: public
                0x34, 0x12, 0x0A, 0xDC, 0x1B, 0x00,  // Address 00:1B:DC:0A:12:34
                UInt8(data.count),
            ] + data + [0xC4])  // RSSI -60
        let text = trace.describe(.event(event), direction: .controllerToHost).text
        #expect(text.hasPrefix("HCI Event LE Advertising Report "), "\(text)")
        #expect(text.contains("00:1B:DC:0A:12:34 (public) rssi=-60 dBm"), "\(text)")
        #expect(text.contains("Complete Local Name \"Lock\""), "\(text)")
        #expect(text.contains("180D"), "\(text)")
    }

    @Test func commandsAndTheirCompletionsByName() {
        var trace = PacketTrace()
        let reset = trace.describe(.command(HCIReset().packet), direction: .hostToController)
        #expect(reset.text == "HCI Command Reset")
        let complete = HCIEventPacket(code: .commandComplete, parameters: [0x01, 0x03, 0x0C, 0x00])
        #expect(
            trace.describe(.event(complete), direction: .controllerToHost).text
                == "HCI Event Command Complete Reset status=Success (0x00)")
        let disconnect = trace.describe(
            .command(HCIDisconnect(handle: ConnectionHandle(0x0040), reason: .remoteUserTerminatedConnection).packet),
            direction: .hostToController)
        #expect(
            disconnect.text == "HCI Command Disconnect handle 0x0040 reason=Remote User Terminated Connection (0x13)")
        #expect(disconnect.handle == ConnectionHandle(0x0040))
    }

    @Test func fragmentsAreDecodedOnceTheFrameIsWhole() {
        var trace = PacketTrace()
        let value: [UInt8] = Array(repeating: 0xAB, count: 30)
        let pdu: [UInt8] = [0x1B, 0x2A, 0x00] + value  // Handle Value Notification, handle 0x002A
        let frame = [UInt8(pdu.count), 0x00, 0x04, 0x00] + pdu
        let first = HCIACLDataPacket(
            handle: ConnectionHandle(0x0040), packetBoundary: .firstFlushable, data: Array(frame.prefix(27)))
        let rest = HCIACLDataPacket(
            handle: ConnectionHandle(0x0040), packetBoundary: .continuing, data: Array(frame.dropFirst(27)))
        let part = trace.describe(.acl(first), direction: .controllerToHost)
        #expect(part.text == "ACL part of an L2CAP frame, 23 of 33 octets so far")
        // The other direction's packets do not mix with it.
        _ = trace.describe(acl(0x0004, [0x0A, 0x03, 0x00]), direction: .hostToController)
        let whole = trace.describe(.acl(rest), direction: .controllerToHost)
        #expect(whole.text == "ATT Handle Value Notification handle 0x002A value " + ATTText.value(value))
    }

    @Test func malformedPacketsAreSaidAndShownAsBytes() {
        var trace = PacketTrace()
        // A Write Request cut short.
        let short = trace.describe(acl(0x0004, [0x12, 0x12]), direction: .hostToController)
        #expect(short.text.hasPrefix("ATT (malformed"), "\(short.text)")
        #expect(short.text.hasSuffix("1212"), "\(short.text)")
    }

    @Test func specNamesFromSwiftNames() {
        #expect(Fields.specName("connectionInterval") == "connection_interval")
        #expect(Fields.specName("txPHY") == "tx_phy")
        #expect(Fields.specName("leScanType") == "le_scan_type")
        #expect(Fields.specName("maxTxOctets") == "max_tx_octets")
    }
}
