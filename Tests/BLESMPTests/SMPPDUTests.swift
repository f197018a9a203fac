import BLECore
import Testing

@testable import BLESMP

/// SMP commands as they travel (Core Spec 5.4, Vol 3, Part H, 3.5–3.6): each decoded from its octets and encoded
/// back to the same octets; wrong lengths and reserved values refused; unknown codes kept.
@Suite struct SMPPDUTests {
    static let sixteen: [UInt8] = Array(0x10...0x1F)

    /// Octets (code first) and the PDU they are.
    static let golden: [([UInt8], SMPPDU)] = [
        // A phone's usual request: KeyboardDisplay, no OOB, bonding + MITM + SC, 16 octets, EncKey+IdKey both ways.
        (
            [0x01, 0x04, 0x00, 0x0D, 0x10, 0x03, 0x03],
            .pairingRequest(
                PairingFeatures(
                    ioCapability: .keyboardDisplay, authentication: [.bonding, .mitm, .secureConnections],
                    initiatorKeys: [.encryptionKey, .identityKey], responderKeys: [.encryptionKey, .identityKey]))
        ),
        (
            [0x02, 0x03, 0x01, 0x01, 0x07, 0x00, 0x07],
            .pairingResponse(
                PairingFeatures(
                    ioCapability: .noInputNoOutput, oobDataPresent: true, authentication: [.bonding],
                    maximumKeySize: 7, initiatorKeys: [],
                    responderKeys: [.encryptionKey, .identityKey, .signingKey]))
        ),
        ([0x03] + sixteen, .pairingConfirm(sixteen)),
        ([0x04] + sixteen, .pairingRandom(sixteen)),
        ([0x05, 0x04], .pairingFailed(.confirmValueFailed)),
        ([0x06] + sixteen, .encryptionInformation(longTermKey: sixteen)),
        (
            [0x07, 0x34, 0x12, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08],
            .centralIdentification(ediv: 0x1234, rand: 0x0807_0605_0403_0201)
        ),
        ([0x08] + sixteen, .identityInformation(identityResolvingKey: sixteen)),
        (
            [0x09, 0x00, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11],
            .identityAddressInformation(BluetoothAddress(bytes: [0x11, 0x22, 0x33, 0x44, 0x55, 0x66]))
        ),
        (
            [0x09, 0x01, 0x66, 0x55, 0x44, 0x33, 0x22, 0xD1],
            .identityAddressInformation(
                BluetoothAddress(bytes: [0xD1, 0x22, 0x33, 0x44, 0x55, 0x66], type: .randomDevice))
        ),
        ([0x0A] + sixteen, .signingInformation(signatureKey: sixteen)),
        ([0x0B, 0x2D], .securityRequest([.bonding, .mitm, .secureConnections, .ct2])),
        (
            [0x0C] + Array(repeating: 0xAA, count: 32) + Array(repeating: 0xBB, count: 32),
            .pairingPublicKey(x: Array(repeating: 0xAA, count: 32), y: Array(repeating: 0xBB, count: 32))
        ),
        ([0x0D] + sixteen, .pairingDHKeyCheck(sixteen)),
        ([0x0E, 0x01], .keypressNotification(.digitEntered)),
        // An unknown code keeps its data (the receiver answers Command Not Supported).
        ([0x1F, 0x01, 0x02], .unknown(code: 0x1F, data: [0x01, 0x02])),
    ]

    @Test(arguments: golden)
    func decodesAndEncodesBack(octets: [UInt8], pdu: SMPPDU) throws {
        #expect(try SMPPDU(decoding: octets) == pdu)
        #expect(pdu.encoded == octets)
        #expect(pdu.code == octets[0])
    }

    @Test(arguments: [UInt8](0x01...0x0E))
    func aKnownCommandOfAnotherLengthIsMalformed(code: UInt8) throws {
        let length = try #require(SMPPDU.fieldLength(of: code))
        for wrong in [length - 1, length + 1] {
            #expect(throws: SMPError.self) {
                try SMPPDU(decoding: [code] + [UInt8](repeating: 0, count: wrong))
            }
        }
    }

    @Test func anEmptyPDUAndAReservedIdentityAddressTypeAreMalformed() {
        #expect(throws: SMPError.self) { try SMPPDU(decoding: []) }
        #expect(throws: SMPError.self) { try SMPPDU(decoding: [0x09, 0x02, 1, 2, 3, 4, 5, 6]) }
    }

    @Test func reservedFieldValuesAreKeptForTheMachineToJudge() throws {
        // A reserved IO capability and bonding flags decode; the pairing machine answers Invalid Parameters.
        let pdu = try SMPPDU(decoding: [0x01, 0x09, 0x00, 0x02, 0x10, 0x00, 0x00])
        guard case .pairingRequest(let features) = pdu else {
            Issue.record("not a Pairing Request: \(pdu)")
            return
        }
        #expect(!features.ioCapability.isValid)
        #expect(features.authentication.rawValue == 0x02)
        #expect(pdu.encoded == [0x01, 0x09, 0x00, 0x02, 0x10, 0x00, 0x00])
    }

    @Test func failureReasonsAreNamedWithTheirCode() {
        #expect("\(SMPFailureReason.pairingNotSupported)" == "Pairing Not Supported, 0x05")
        #expect("\(SMPFailureReason.dhKeyCheckFailed)" == "DHKey Check Failed, 0x0B")
        #expect("\(SMPFailureReason(rawValue: 0x42))" == "reserved, 0x42")
    }
}
