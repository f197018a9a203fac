import Testing

@testable import BLEVirtualController

/// The link layer's ciphers against the sample data of Core Spec 5.4, Vol 6, Part C, 1 ("Encryption sample
/// data"): the session key from the LTK and the two SKD halves, the IV, and the four packets encrypted under them
/// (each side's LL_START_ENC_RSP and one 27-octet data PDU each way) with their MICs.
@Suite struct EncryptionSampleDataTests {
    /// LTK = 0x4C68384139F574D836BCF34E9DFB01BF, as HCI carries it (least significant octet first).
    static let longTermKey: [UInt8] = [
        0xBF, 0x01, 0xFB, 0x9D, 0x4E, 0xF3, 0xBC, 0x36, 0xD8, 0x74, 0xF5, 0x39, 0x41, 0x38, 0x68, 0x4C,
    ]
    static let session = LLSession(
        longTermKey: longTermKey, skdCentral: 0xACBD_CEDF_E0F1_0213, skdPeripheral: 0x0213_2435_4657_6879,
        ivCentral: 0xBADC_AB24, ivPeripheral: 0xDEAF_BABE)

    /// LL_DATA1's payload (central to peripheral) and LL_DATA2's (peripheral to central): an L2CAP header
    /// (length 23, channel 0) and 23 octets of text.
    static let data1: [UInt8] =
        [0x17, 0x00, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6A, 0x6B, 0x6C, 0x6D, 0x6E, 0x6F, 0x70, 0x71]
        + [0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x30]
    static let data2: [UInt8] =
        [0x17, 0x00, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31, 0x30, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47]
        + [0x48, 0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F, 0x50, 0x51]

    /// The samples' packets as sent: header octet, direction, packet counter, plaintext, and what follows the
    /// length field on the air (ciphertext, then MIC).
    struct Packet: Sendable, CustomTestStringConvertible {
        var name: String
        var header: UInt8
        var fromCentral: Bool
        var counter: UInt64
        var plaintext: [UInt8]
        var onAir: [UInt8]
        var testDescription: String { name }
    }

    static let packets: [Packet] = [
        // 0F 05 9F CD A7 F4 48: LLID control, NESN 1, SN 1; LL_START_ENC_RSP (0x06), MIC 0xCDA7F448.
        Packet(
            name: "LL_START_ENC_RSP1", header: 0x0F, fromCentral: true, counter: 0, plaintext: [0x06],
            onAir: [0x9F, 0xCD, 0xA7, 0xF4, 0x48]),
        // 07 05 A3 4C 13 A4 15: LLID control, NESN 1, SN 0.
        Packet(
            name: "LL_START_ENC_RSP2", header: 0x07, fromCentral: false, counter: 0, plaintext: [0x06],
            onAir: [0xA3, 0x4C, 0x13, 0xA4, 0x15]),
        // 0E 1F ...: LLID start of an L2CAP message, NESN 1, SN 1; 27 octets and a MIC.
        Packet(
            name: "LL_DATA1", header: 0x0E, fromCentral: true, counter: 1, plaintext: data1,
            onAir: [0x7A, 0x70, 0xD6, 0x64, 0x15, 0x22, 0x6D, 0xF2, 0x6B, 0x17, 0x83, 0x9A, 0x06, 0x04, 0x05]
                + [0x59, 0x6B, 0xD6, 0x56, 0x4F, 0x79, 0x6B, 0x5B, 0x9C, 0xE6, 0xFF, 0x32]
                + [0xF7, 0x5A, 0x6D, 0x33]),
        // 06 1F ...: LLID start of an L2CAP message, NESN 1, SN 0.
        Packet(
            name: "LL_DATA2", header: 0x06, fromCentral: false, counter: 1, plaintext: data2,
            onAir: [0xF3, 0x88, 0x81, 0xE7, 0xBD, 0x94, 0xC9, 0xC3, 0x69, 0xB9, 0xA6, 0x68, 0x46, 0xDD, 0x47]
                + [0x86, 0xAA, 0x8C, 0x39, 0xCE, 0x54, 0x0D, 0x0D, 0xAE, 0x3A, 0xDC, 0xDF]
                + [0x89, 0xB9, 0x60, 0x88]),
    ]

    @Test func sessionKeyAndIV() {
        // SKD = SKDp || SKDc = 0x0213243546576879ACBDCEDFE0F10213; SK = e(LTK, SKD).
        #expect(
            Self.session.key == [
                0x99, 0xAD, 0x1B, 0x52, 0x26, 0xA3, 0x7E, 0x3E, 0x05, 0x8E, 0x3B, 0x8E, 0x27, 0xC2, 0xC6, 0x66,
            ])
        // IV = IVp || IVc = 0xDEAFBABEBADCAB24, least significant octet first as the nonce takes it.
        #expect(Self.session.iv == [0x24, 0xAB, 0xDC, 0xBA, 0xBE, 0xBA, 0xAF, 0xDE])
    }

    /// The HCI form of e (HCI_LE_Encrypt), as the sample's 1.1 gives it: Key and Plaintext_Data least significant
    /// octet first, Encrypted_Data 0x99AD1B5226A37E3E058E3B8E27C2C666 least significant octet first.
    @Test func hciEncryptIsE() {
        let plaintext: [UInt8] = [
            0x13, 0x02, 0xF1, 0xE0, 0xDF, 0xCE, 0xBD, 0xAC, 0x79, 0x68, 0x57, 0x46, 0x35, 0x24, 0x13, 0x02,
        ]
        #expect(
            LLCrypto.hciEncrypt(key: Self.longTermKey, plaintext: plaintext) == [
                0x66, 0xC6, 0xC2, 0x27, 0x8E, 0x3B, 0x8E, 0x05, 0x3E, 0x7E, 0xA3, 0x26, 0x52, 0x1B, 0xAD, 0x99,
            ])
    }

    @Test(arguments: packets)
    func sealsAsTheSampleShows(_ packet: Packet) {
        #expect(
            Self.session.seal(
                packet.plaintext, header: packet.header, counter: packet.counter, fromCentral: packet.fromCentral)
                == packet.onAir)
    }

    @Test(arguments: packets)
    func opensTheSamplesPacket(_ packet: Packet) {
        #expect(
            Self.session.open(
                packet.onAir, header: packet.header, counter: packet.counter, fromCentral: packet.fromCentral)
                == packet.plaintext)
        // The sequence bits and MD are not authenticated: a retransmission with other bits opens too.
        #expect(
            Self.session.open(
                packet.onAir, header: packet.header ^ 0x1C, counter: packet.counter, fromCentral: packet.fromCentral)
                == packet.plaintext)
    }

    @Test(arguments: packets)
    func anythingElseFailsTheMIC(_ packet: Packet) {
        func opens(_ bytes: [UInt8], header: UInt8, counter: UInt64, fromCentral: Bool) -> Bool {
            Self.session.open(bytes, header: header, counter: counter, fromCentral: fromCentral) != nil
        }
        let (h, n, c) = (packet.header, packet.counter, packet.fromCentral)
        for i in packet.onAir.indices {
            var flipped = packet.onAir
            flipped[i] ^= 0x01
            #expect(!opens(flipped, header: h, counter: n, fromCentral: c), "octet \(i) flipped")
        }
        #expect(!opens(packet.onAir, header: h, counter: n + 1, fromCentral: c))
        #expect(!opens(packet.onAir, header: h, counter: n, fromCentral: !c))
        #expect(!opens(packet.onAir, header: h ^ 0x03, counter: n, fromCentral: c))  // another LLID
        #expect(!opens(Array(packet.onAir.suffix(4)), header: h, counter: n, fromCentral: c))  // no payload
        let otherKey = LLSession(
            longTermKey: [UInt8](repeating: 0, count: 16), skdCentral: 0xACBD_CEDF_E0F1_0213,
            skdPeripheral: 0x0213_2435_4657_6879, ivCentral: 0xBADC_AB24, ivPeripheral: 0xDEAF_BABE)
        #expect(otherKey.open(packet.onAir, header: h, counter: n, fromCentral: c) == nil)
    }

    /// The packet counter's 39 bits and the direction bit share the nonce's fifth octet.
    @Test func nonceLayout() {
        #expect(
            Self.session.nonce(counter: 0, fromCentral: true) == [0, 0, 0, 0, 0x80] + Self.session.iv)
        #expect(
            Self.session.nonce(counter: 0x7F_0102_0304, fromCentral: false)
                == [0x04, 0x03, 0x02, 0x01, 0x7F] + Self.session.iv)
        #expect(
            Self.session.nonce(counter: 0x7F_0102_0304, fromCentral: true)
                == [0x04, 0x03, 0x02, 0x01, 0xFF] + Self.session.iv)
    }

    /// LL_ENC_REQ and LL_ENC_RSP as the sample's central and peripheral send them: Rand 0xABCDEF1234567890, EDIV
    /// 0x2474, SKDm, IVm; SKDs, IVs; every field least significant octet first (Vol 6, Part B, 2.4.2.4, 2.4.2.5).
    @Test func encryptionRequestAndResponseBytes() {
        let request = LLControlPDU.encReq(
            rand: 0xABCD_EF12_3456_7890, ediv: 0x2474, skd: 0xACBD_CEDF_E0F1_0213, iv: 0xBADC_AB24)
        #expect(
            request.bytes == [
                0x03,  // LL_ENC_REQ
                0x90, 0x78, 0x56, 0x34, 0x12, 0xEF, 0xCD, 0xAB,  // Rand
                0x74, 0x24,  // EDIV
                0x13, 0x02, 0xF1, 0xE0, 0xDF, 0xCE, 0xBD, 0xAC,  // SKDm
                0x24, 0xAB, 0xDC, 0xBA,  // IVm
            ])
        #expect(request.bytes.count == request.payloadLength)
        let response = LLControlPDU.encRsp(skd: 0x0213_2435_4657_6879, iv: 0xDEAF_BABE)
        #expect(
            response.bytes == [
                0x04,  // LL_ENC_RSP
                0x79, 0x68, 0x57, 0x46, 0x35, 0x24, 0x13, 0x02,  // SKDs
                0xBE, 0xBA, 0xAF, 0xDE,  // IVs
            ])
        #expect(response.bytes.count == response.payloadLength)
        for pdu in [LLControlPDU.startEncReq, .startEncRsp, .pauseEncReq, .pauseEncRsp, .rejectInd(error: 0x06)] {
            #expect(pdu.bytes.count == pdu.payloadLength)
        }
        #expect(LLControlPDU.rejectInd(error: 0x06).bytes == [0x0D, 0x06])
        #expect(LLControlPDU.pauseEncReq.bytes == [0x0A])
    }

    /// An encrypted PDU takes the MIC's 4 octets longer on the air: 32 µs on LE 1M, 16 µs on LE 2M, 256 µs on
    /// LE Coded (S=8).
    @Test func airTimeCountsTheMIC() {
        for (phy, perOctet) in [(LEPhy.le1M, 8), (.le2M, 4), (.leCoded, 64)] {
            for length in [1, 27, 251] {
                let extra = phy.airTime(payload: length, mic: true) - phy.airTime(payload: length)
                #expect(extra == Int64(4 * perOctet) * VirtualTime.microsecond)
            }
        }
    }
}
