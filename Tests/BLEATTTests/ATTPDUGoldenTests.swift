import BLEATT
import BLECore
import NIOCore
import Testing

/// One golden PDU: its bytes with field comments, its meaning, and the shortest prefix that may decode.
struct Golden: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var pdu: ATTPDU
    /// Every prefix shorter than this must be rejected; `nil`: every strict prefix must be.
    var minimumLength: Int?
    /// Shorter lengths at which the prefix is itself a valid PDU (a 16-bit form inside a 128-bit one).
    var validPrefixLengths: Set<Int> = []
    var testDescription: String { name }
}

let uuid128: BluetoothUUID = "12345678-9ABC-DEF0-1234-56789ABCDEF0"
let uuid128Wire: [UInt8] = [
    0xF0, 0xDE, 0xBC, 0x9A, 0x78, 0x56, 0x34, 0x12, 0xF0, 0xDE, 0xBC, 0x9A, 0x78, 0x56, 0x34, 0x12,
]

let goldens: [Golden] = [
    Golden(
        name: "Error Response",
        bytes: [
            0x01,  // opcode ATT_ERROR_RSP
            0x0A,  // request opcode: ATT_READ_REQ
            0x34, 0x12,  // handle 0x1234
            0x02,  // Read Not Permitted
        ],
        pdu: .errorResponse(
            .init(requestOpcode: .readRequest, handle: AttributeHandle(0x1234), errorCode: .readNotPermitted))),
    Golden(
        name: "Exchange MTU Request",
        bytes: [
            0x02,  // opcode
            0x05, 0x02,  // Client Rx MTU 517
        ], pdu: .exchangeMTURequest(.init(clientRxMTU: 517))),
    Golden(
        name: "Exchange MTU Response",
        bytes: [
            0x03,  // opcode
            0xF7, 0x00,  // Server Rx MTU 247
        ], pdu: .exchangeMTUResponse(.init(serverRxMTU: 247))),
    Golden(
        name: "Find Information Request",
        bytes: [
            0x04,  // opcode
            0x01, 0x00,  // starting handle 0x0001
            0xFF, 0xFF,  // ending handle 0xFFFF
        ], pdu: .findInformationRequest(.init(startingHandle: .min, endingHandle: .max))),
    Golden(
        name: "Find Information Response, 16-bit",
        bytes: [
            0x05,  // opcode
            0x01,  // format 1: 16-bit UUIDs
            0x0E, 0x00, 0x02, 0x29,  // handle 0x000E, 0x2902 CCCD
            0x0F, 0x00, 0x01, 0x29,  // handle 0x000F, 0x2901 user description
        ],
        pdu: .findInformationResponse(
            .init(information: [
                .init(handle: AttributeHandle(0x0E), type: .clientCharacteristicConfiguration),
                .init(handle: AttributeHandle(0x0F), type: .characteristicUserDescription),
            ])), minimumLength: 6),
    Golden(
        name: "Find Information Response, 128-bit",
        bytes: [
            0x05,  // opcode
            0x02,  // format 2: 128-bit UUIDs
            0x10, 0x00,  // handle 0x0010
        ] + uuid128Wire,  // the UUID, little-endian
        pdu: .findInformationResponse(.init(information: [.init(handle: AttributeHandle(0x10), type: uuid128)]))),
    Golden(
        name: "Find By Type Value Request",
        bytes: [
            0x06,  // opcode
            0x01, 0x00,  // starting handle
            0xFF, 0xFF,  // ending handle
            0x00, 0x28,  // type 0x2800 «Primary Service»
            0x0D, 0x18,  // value: Heart Rate 0x180D
        ],
        pdu: .findByTypeValueRequest(
            .init(
                startingHandle: .min, endingHandle: .max, attributeType: 0x2800,
                attributeValue: [0x0D, 0x18])), minimumLength: 7),
    Golden(
        name: "Find By Type Value Response",
        bytes: [
            0x07,  // opcode
            0x0A, 0x00, 0x12, 0x00,  // found 0x000A, group end 0x0012
            0x20, 0x00, 0xFF, 0xFF,  // found 0x0020, group end 0xFFFF
        ],
        pdu: .findByTypeValueResponse(
            .init(handlesInformation: [
                .init(foundAttributeHandle: AttributeHandle(0x0A), groupEndHandle: AttributeHandle(0x12)),
                .init(foundAttributeHandle: AttributeHandle(0x20), groupEndHandle: .max),
            ])), minimumLength: 5),
    Golden(
        name: "Read By Type Request, 16-bit",
        bytes: [
            0x08,  // opcode
            0x01, 0x00,  // starting handle
            0xFF, 0xFF,  // ending handle
            0x03, 0x28,  // type 0x2803 «Characteristic»
        ],
        pdu: .readByTypeRequest(
            .init(startingHandle: .min, endingHandle: .max, attributeType: .characteristicDeclaration))),
    Golden(
        name: "Read By Type Request, 128-bit",
        bytes: [
            0x08,  // opcode
            0x01, 0x00,  // starting handle
            0x05, 0x00,  // ending handle
        ] + uuid128Wire,  // type, 128-bit
        pdu: .readByTypeRequest(.init(startingHandle: .min, endingHandle: AttributeHandle(5), attributeType: uuid128)),
        validPrefixLengths: [7]),
    Golden(
        name: "Read By Type Response",
        bytes: [
            0x09,  // opcode
            0x07,  // length: handle (2) + value (5)
            0x02, 0x00, 0x02, 0x03, 0x00, 0x00, 0x2A,  // 0x0002: read, value 0x0003, Device Name
            0x04, 0x00, 0x02, 0x05, 0x00, 0x01, 0x2A,  // 0x0004: read, value 0x0005, Appearance
        ],
        pdu: .readByTypeResponse(
            .init(attributeData: [
                .init(handle: AttributeHandle(2), value: [0x02, 0x03, 0x00, 0x00, 0x2A]),
                .init(handle: AttributeHandle(4), value: [0x02, 0x05, 0x00, 0x01, 0x2A]),
            ])), minimumLength: 9),
    Golden(
        name: "Read Request",
        bytes: [
            0x0A,  // opcode
            0x03, 0x00,  // handle 0x0003
        ], pdu: .readRequest(.init(handle: AttributeHandle(3)))),
    Golden(
        name: "Read Response",
        bytes: [
            0x0B,  // opcode
            0x42, 0x4C, 0x45,  // value "BLE"
        ], pdu: .readResponse(.init(value: Array("BLE".utf8))), minimumLength: 1),
    Golden(
        name: "Read Blob Request",
        bytes: [
            0x0C,  // opcode
            0x03, 0x00,  // handle
            0x16, 0x00,  // offset 22
        ], pdu: .readBlobRequest(.init(handle: AttributeHandle(3), offset: 22))),
    Golden(
        name: "Read Blob Response",
        bytes: [
            0x0D,  // opcode
            0x01, 0x02,  // part of the value
        ], pdu: .readBlobResponse(.init(partAttributeValue: [1, 2])), minimumLength: 1),
    Golden(
        name: "Read Multiple Request",
        bytes: [
            0x0E,  // opcode
            0x03, 0x00,  // handle 0x0003
            0x05, 0x00,  // handle 0x0005
        ], pdu: .readMultipleRequest(.init(setOfHandles: [AttributeHandle(3), AttributeHandle(5)]))),
    Golden(
        name: "Read Multiple Response",
        bytes: [
            0x0F,  // opcode
            0x41, 0x00, 0x00,  // the values, concatenated
        ], pdu: .readMultipleResponse(.init(setOfValues: [0x41, 0, 0])), minimumLength: 1),
    Golden(
        name: "Read By Group Type Request",
        bytes: [
            0x10,  // opcode
            0x01, 0x00,  // starting handle
            0xFF, 0xFF,  // ending handle
            0x00, 0x28,  // group type «Primary Service»
        ],
        pdu: .readByGroupTypeRequest(
            .init(startingHandle: .min, endingHandle: .max, attributeGroupType: .primaryService))),
    Golden(
        name: "Read By Group Type Response",
        bytes: [
            0x11,  // opcode
            0x06,  // length: handle + end + 16-bit UUID
            0x01, 0x00, 0x05, 0x00, 0x00, 0x18,  // 0x0001...0x0005 Generic Access
            0x06, 0x00, 0x09, 0x00, 0x01, 0x18,  // 0x0006...0x0009 Generic Attribute
        ],
        pdu: .readByGroupTypeResponse(
            .init(attributeData: [
                .init(handle: AttributeHandle(1), endGroupHandle: AttributeHandle(5), value: [0x00, 0x18]),
                .init(handle: AttributeHandle(6), endGroupHandle: AttributeHandle(9), value: [0x01, 0x18]),
            ])), minimumLength: 8),
    Golden(
        name: "Write Request",
        bytes: [
            0x12,  // opcode
            0x0E, 0x00,  // handle
            0x01, 0x00,  // value: enable notifications
        ], pdu: .writeRequest(.init(handle: AttributeHandle(0x0E), value: [1, 0])), minimumLength: 3),
    Golden(
        name: "Write Response",
        bytes: [
            0x13  // opcode, no parameters
        ], pdu: .writeResponse(.init())),
    Golden(
        name: "Write Command",
        bytes: [
            0x52,  // opcode (command flag set)
            0x10, 0x00,  // handle
            0xAA,  // value
        ], pdu: .writeCommand(.init(handle: AttributeHandle(0x10), value: [0xAA])), minimumLength: 3),
    Golden(
        name: "Signed Write Command",
        bytes: [
            0xD2,  // opcode (command and signature flags set)
            0x10, 0x00,  // handle
            0xAA,  // value
            1, 0, 0, 0,  // SignCounter
            1, 2, 3, 4, 5, 6, 7, 8,  // MAC
        ],
        pdu: .signedWriteCommand(
            .init(
                handle: AttributeHandle(0x10), value: [0xAA],
                authenticationSignature: [1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])),
        minimumLength: 15),
    Golden(
        name: "Prepare Write Request",
        bytes: [
            0x16,  // opcode
            0x20, 0x00,  // handle
            0x12, 0x00,  // offset 18
            0x01, 0x02, 0x03,  // part value
        ], pdu: .prepareWriteRequest(.init(handle: AttributeHandle(0x20), offset: 18, partAttributeValue: [1, 2, 3])),
        minimumLength: 5),
    Golden(
        name: "Prepare Write Response",
        bytes: [
            0x17,  // opcode
            0x20, 0x00,  // handle
            0x12, 0x00,  // offset 18
            0x01, 0x02, 0x03,  // part value, echoed
        ], pdu: .prepareWriteResponse(.init(handle: AttributeHandle(0x20), offset: 18, partAttributeValue: [1, 2, 3])),
        minimumLength: 5),
    Golden(
        name: "Execute Write Request",
        bytes: [
            0x18,  // opcode
            0x01,  // flags: write all prepared values
        ], pdu: .executeWriteRequest(.init(flags: .write))),
    Golden(
        name: "Execute Write Response",
        bytes: [
            0x19  // opcode
        ], pdu: .executeWriteResponse(.init())),
    Golden(
        name: "Handle Value Notification",
        bytes: [
            0x1B,  // opcode
            0x0D, 0x00,  // handle
            0x00, 0x48,  // value: flags, 72 bpm
        ], pdu: .handleValueNotification(.init(handle: AttributeHandle(0x0D), value: [0x00, 0x48])), minimumLength: 3),
    Golden(
        name: "Handle Value Indication",
        bytes: [
            0x1D,  // opcode
            0x08, 0x00,  // handle (Service Changed)
            0x01, 0x00, 0xFF, 0xFF,  // affected range
        ], pdu: .handleValueIndication(.init(handle: AttributeHandle(8), value: [1, 0, 0xFF, 0xFF])), minimumLength: 3),
    Golden(
        name: "Handle Value Confirmation",
        bytes: [
            0x1E  // opcode
        ], pdu: .handleValueConfirmation(.init())),
    Golden(
        name: "Read Multiple Variable Request",
        bytes: [
            0x20,  // opcode
            0x03, 0x00,  // handle
            0x05, 0x00,  // handle
        ], pdu: .readMultipleVariableRequest(.init(setOfHandles: [AttributeHandle(3), AttributeHandle(5)]))),
    Golden(
        name: "Read Multiple Variable Response",
        bytes: [
            0x21,  // opcode
            0x01, 0x00, 0x41,  // length 1, "A"
            0x02, 0x00, 0x00, 0x00,  // length 2, appearance 0
        ],
        pdu: .readMultipleVariableResponse(.init(lengthValueTupleList: [.init(value: [0x41]), .init(value: [0, 0])])),
        minimumLength: 1),
    Golden(
        name: "Multiple Handle Value Notification",
        bytes: [
            0x23,  // opcode
            0x0D, 0x00, 0x01, 0x00, 0x48,  // handle 0x000D, length 1, value
            0x10, 0x00, 0x02, 0x00, 0x01, 0x02,  // handle 0x0010, length 2, value
        ],
        pdu: .multipleHandleValueNotification(
            .init(handleLengthValueTupleList: [
                .init(handle: AttributeHandle(0x0D), value: [0x48]),
                .init(handle: AttributeHandle(0x10), value: [1, 2]),
            ])), minimumLength: 5),
    Golden(
        name: "Unknown opcode",
        bytes: [
            0x3F,  // opcode this stack does not know
            0x01, 0x02,  // its parameters, kept
        ], pdu: .unknown(opcode: ATTOpcode(0x3F), bytes: [1, 2]), minimumLength: 1),
]

@Test(arguments: goldens)
func decodesGoldenBytes(_ golden: Golden) throws {
    #expect(try ATTPDU(bytes: golden.bytes) == golden.pdu)
}

@Test(arguments: goldens)
func encodesGoldenBytes(_ golden: Golden) {
    #expect(golden.pdu.bytes == golden.bytes)
    #expect(golden.pdu.encodedLength == golden.bytes.count)
    #expect(golden.pdu.opcode.rawValue == golden.bytes[0])
}

@Test(arguments: goldens)
func rejectsTruncations(_ golden: Golden) {
    let minimum = golden.minimumLength ?? golden.bytes.count
    for length in 0..<minimum where !golden.validPrefixLengths.contains(length) {
        #expect(throws: ATTError.self, "\(golden.name) cut to \(length) octets") {
            try ATTPDU(bytes: golden.bytes.prefix(length))
        }
    }
}

@Test func rejectsTrailingBytesOnFixedPDUs() {
    for bytes: [UInt8] in [
        [0x01, 0x0A, 0x03, 0x00, 0x02, 0x00], [0x02, 0x17, 0x00, 0x00], [0x13, 0x00],
        [0x0A, 0x01, 0x00, 0x00], [0x18, 0x01, 0x00], [0x1E, 0x00],
    ] {
        #expect(throws: ATTError(.invalidLength)) { try ATTPDU(bytes: bytes) }
    }
}

@Test func rejectsBadLengthsInLists() {
    // Read By Type Response: 5 octets after a length of 7.
    #expect(throws: ATTError(.invalidLength)) { try ATTPDU(bytes: [0x09, 0x07, 0x01, 0x00, 0x01, 0x02, 0x03]) }
    // Read By Type Response: a length below 2.
    #expect(throws: ATTError(.invalidLength)) { try ATTPDU(bytes: [0x09, 0x01, 0x01]) }
    // Find Information Response: an unknown format.
    #expect(throws: ATTError(.invalidValue)) { try ATTPDU(bytes: [0x05, 0x03, 0x01, 0x00, 0x00, 0x28]) }
    // Read By Group Type Request with a 4-octet type.
    #expect(throws: ATTError(.invalidLength)) { try ATTPDU(bytes: [0x10, 1, 0, 0xFF, 0xFF, 0, 0x28, 0, 0]) }
    // Read Multiple Request with one handle only.
    #expect(throws: ATTError(.truncatedPDU)) { try ATTPDU(bytes: [0x0E, 0x01, 0x00]) }
    // Multiple Handle Value Notification whose length runs past the end.
    #expect(throws: ATTError(.truncatedPDU)) { try ATTPDU(bytes: [0x23, 0x01, 0x00, 0x05, 0x00, 0x01]) }
}

@Test func keepsATruncatedLastTupleOfReadMultipleVariable() throws {
    let pdu = try ATTPDU(bytes: [0x21, 0x01, 0x00, 0x41, 0x05, 0x00, 0x01, 0x02])
    guard case .readMultipleVariableResponse(let response) = pdu else {
        Issue.record("decoded \(pdu)")
        return
    }
    #expect(response.lengthValueTupleList.last == .init(valueLength: 5, value: [1, 2]))
    #expect(response.lengthValueTupleList.last?.isTruncated == true)
    #expect(pdu.bytes == [0x21, 0x01, 0x00, 0x41, 0x05, 0x00, 0x01, 0x02])
}

@Test func opcodeFlagsAndKinds() {
    #expect(ATTOpcode.writeCommand.isCommand)
    #expect(!ATTOpcode.writeCommand.hasAuthenticationSignature)
    #expect(ATTOpcode.signedWriteCommand.isCommand && ATTOpcode.signedWriteCommand.hasAuthenticationSignature)
    #expect(ATTOpcode.signedWriteCommand.method == 0x12)
    #expect(ATTOpcode.readRequest.kind == .request)
    #expect(ATTOpcode.readRequest.responseOpcode == .readResponse)
    #expect(ATTOpcode.readMultipleVariableRequest.responseOpcode == .readMultipleVariableResponse)
    #expect(ATTOpcode.errorResponse.kind == .response)
    #expect(ATTOpcode(0x7F).kind == .command)
    #expect(ATTOpcode(0x3F).kind == .request)
    #expect(ATTOpcode.readRequest.description == "ATT_READ_REQ")
    #expect(ATTOpcode(0x3F).description == "0x3F")
}

@Test func errorCodeNames() {
    #expect(ATTErrorCode.success.rawValue == 0)
    #expect(ATTErrorCode.valueNotAllowed.rawValue == 0x13)
    #expect(ATTErrorCode.insufficientEncryption.description == "Insufficient Encryption")
    #expect(ATTErrorCode.cccdImproperlyConfigured.rawValue == 0xFD)
    #expect(ATTErrorCode(0x80).description == "Application Error 0x80")
    #expect(ATTErrorCode(0x14).description == "0x14")
    for raw in UInt8(0x01)...0x13 { #expect(ATTErrorCode(raw).name != nil) }
    for raw in UInt8(0xFC)...0xFF { #expect(ATTErrorCode(raw).name != nil) }
}
