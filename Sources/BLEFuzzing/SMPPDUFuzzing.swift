import BLESMP

extension FuzzTarget {
    /// An SMP PDU (the whole payload of channel 0x0006) into `SMPPDU(decoding:)`: what decodes keeps its code
    /// and length, and re-encodes to a PDU that decodes the same.
    static let smpPDU = FuzzTarget("smp-pdu", "an SMP payload into SMPPDU") { input throws(Violation) in
        guard let pdu = try? SMPPDU(decoding: input) else { return }
        _ = pdu.description
        let encoded = pdu.encoded
        try expect(pdu.code == input[0], "\(pdu) does not carry the code it was read with")
        try expect(encoded.count == input.count, "\(pdu) re-encodes to \(encoded.count) octets, not \(input.count)")
        try expect((try? SMPPDU(decoding: encoded)) == pdu, "\(pdu) does not survive its own encoding")
    }
}
