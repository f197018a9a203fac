import BLECore
import NIOCore

/// The code of a signalling command. An open set: unknown codes round-trip and print as `0xNN`.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4 (Signaling packet formats), Table 4.2.
public struct L2CAPSignalingCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let commandReject = L2CAPSignalingCode(0x01)
    public static let connectionRequest = L2CAPSignalingCode(0x02)
    public static let connectionResponse = L2CAPSignalingCode(0x03)
    public static let configurationRequest = L2CAPSignalingCode(0x04)
    public static let configurationResponse = L2CAPSignalingCode(0x05)
    public static let disconnectionRequest = L2CAPSignalingCode(0x06)
    public static let disconnectionResponse = L2CAPSignalingCode(0x07)
    public static let echoRequest = L2CAPSignalingCode(0x08)
    public static let echoResponse = L2CAPSignalingCode(0x09)
    public static let informationRequest = L2CAPSignalingCode(0x0A)
    public static let informationResponse = L2CAPSignalingCode(0x0B)
    public static let connectionParameterUpdateRequest = L2CAPSignalingCode(0x12)
    public static let connectionParameterUpdateResponse = L2CAPSignalingCode(0x13)
    public static let leCreditBasedConnectionRequest = L2CAPSignalingCode(0x14)
    public static let leCreditBasedConnectionResponse = L2CAPSignalingCode(0x15)
    public static let flowControlCreditIndication = L2CAPSignalingCode(0x16)
    public static let creditBasedConnectionRequest = L2CAPSignalingCode(0x17)
    public static let creditBasedConnectionResponse = L2CAPSignalingCode(0x18)
    public static let creditBasedReconfigureRequest = L2CAPSignalingCode(0x19)
    public static let creditBasedReconfigureResponse = L2CAPSignalingCode(0x1A)

    /// Whether this code names a response (or a Command Reject), which is never answered.
    public var isResponse: Bool {
        switch self {
        case .commandReject, .connectionResponse, .configurationResponse, .disconnectionResponse, .echoResponse,
            .informationResponse, .connectionParameterUpdateResponse, .leCreditBasedConnectionResponse,
            .creditBasedConnectionResponse, .creditBasedReconfigureResponse:
            return true
        default:
            return false
        }
    }

    public var name: String? {
        switch rawValue {
        case 0x01: "L2CAP_COMMAND_REJECT_RSP"
        case 0x02: "L2CAP_CONNECTION_REQ"
        case 0x03: "L2CAP_CONNECTION_RSP"
        case 0x04: "L2CAP_CONFIGURATION_REQ"
        case 0x05: "L2CAP_CONFIGURATION_RSP"
        case 0x06: "L2CAP_DISCONNECTION_REQ"
        case 0x07: "L2CAP_DISCONNECTION_RSP"
        case 0x08: "L2CAP_ECHO_REQ"
        case 0x09: "L2CAP_ECHO_RSP"
        case 0x0A: "L2CAP_INFORMATION_REQ"
        case 0x0B: "L2CAP_INFORMATION_RSP"
        case 0x12: "L2CAP_CONNECTION_PARAMETER_UPDATE_REQ"
        case 0x13: "L2CAP_CONNECTION_PARAMETER_UPDATE_RSP"
        case 0x14: "L2CAP_LE_CREDIT_BASED_CONNECTION_REQ"
        case 0x15: "L2CAP_LE_CREDIT_BASED_CONNECTION_RSP"
        case 0x16: "L2CAP_FLOW_CONTROL_CREDIT_IND"
        case 0x17: "L2CAP_CREDIT_BASED_CONNECTION_REQ"
        case 0x18: "L2CAP_CREDIT_BASED_CONNECTION_RSP"
        case 0x19: "L2CAP_CREDIT_BASED_RECONFIGURE_REQ"
        case 0x1A: "L2CAP_CREDIT_BASED_RECONFIGURE_RSP"
        default: nil
        }
    }

    public var description: String {
        let hex = String(rawValue, radix: 16, uppercase: true)
        let code = "0x" + (hex.count == 1 ? "0" + hex : hex)
        return name.map { "\($0) (\(code))" } ?? code
    }
}

/// The identifier that matches a signalling response to its request: 0x01...0xFF (0x00 is never valid).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4 (Identifier field).
public struct L2CAPSignalingIdentifier: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt8

    /// `nil` for 0x00, which the specification forbids.
    public init?(rawValue: UInt8) {
        guard rawValue != 0 else { return nil }
        self.rawValue = rawValue
    }

    /// The next identifier, wrapping from 0xFF to 0x01.
    public var next: L2CAPSignalingIdentifier {
        // Never 0: 0xFF wraps to 0x01, and anything below it plus one is at most 0xFF.
        L2CAPSignalingIdentifier(rawValue: rawValue == 0xFF ? 0x01 : rawValue + 1)!
    }

    public static let first = L2CAPSignalingIdentifier(rawValue: 0x01)!

    public var description: String { "#\(rawValue)" }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

extension L2CAPSignalingIdentifier: ExpressibleByIntegerLiteral {
    /// A literal must be 1...255; zero is a programming error.
    public init(integerLiteral value: UInt8) {
        guard let identifier = L2CAPSignalingIdentifier(rawValue: value) else {
            preconditionFailure("a signalling identifier is never 0")
        }
        self = identifier
    }
}

/// One signalling command as carried in a C-frame on the LE signalling channel (CID 0x0005).
///
/// ```
/// | Code (1) | Identifier (1) | Length (2, LE) | Data (Length octets) |
/// ```
/// On LE-U a C-frame carries exactly one command, so the decoder rejects octets after it.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4 (Signaling packet formats).
public struct L2CAPSignalingCommand: Hashable, Sendable, CustomStringConvertible {
    /// The length of the command header: code, identifier and length.
    public static let headerLength = 4

    public var identifier: L2CAPSignalingIdentifier
    public var pdu: L2CAPSignalingPDU

    public init(identifier: L2CAPSignalingIdentifier, _ pdu: L2CAPSignalingPDU) {
        self.identifier = identifier
        self.pdu = pdu
    }

    /// Decodes the payload of one C-frame.
    ///
    /// Throws `.truncated` when the header or the declared data is incomplete, or the data is too short for
    /// its command; `.malformed` for identifier 0x00 or octets after the command. Data longer than a
    /// fixed-size command needs is accepted and the extra octets ignored. An unknown code decodes to
    /// `.unknown` with its data.
    public init(decoding payload: ByteBuffer) throws(L2CAPError) {
        var buffer = payload
        guard let code = buffer.readLE(UInt8.self), let rawIdentifier = buffer.readLE(UInt8.self),
            let length = buffer.readLE(UInt16.self)
        else {
            throw .truncated("signalling command header needs 4 octets, got \(payload.readableBytes)")
        }
        guard let identifier = L2CAPSignalingIdentifier(rawValue: rawIdentifier) else {
            throw .malformed("signalling identifier 0x00")
        }
        guard var data = buffer.readSlice(length: Int(length)) else {
            throw .truncated("signalling command declares \(length) octets, \(buffer.readableBytes) follow")
        }
        guard buffer.readableBytes == 0 else {
            throw .malformed("\(buffer.readableBytes) octets after the command; LE C-frames carry one command")
        }
        self.identifier = identifier
        self.pdu = try L2CAPSignalingPDU(code: L2CAPSignalingCode(code), data: &data)
    }

    /// Appends the encoded command to `buffer`; returns the number of octets written.
    @discardableResult
    public func encode(into buffer: inout ByteBuffer) -> Int {
        var data = ByteBuffer()
        pdu.encodeData(into: &data)
        var written = buffer.writeLE(pdu.code.rawValue)
        written += buffer.writeLE(identifier.rawValue)
        written += buffer.writeLE(UInt16(data.readableBytes))
        written += buffer.writeImmutableBuffer(data)
        return written
    }

    /// The encoded command: the payload of a C-frame.
    public var encoded: ByteBuffer {
        var buffer = ByteBuffer()
        encode(into: &buffer)
        return buffer
    }

    /// The B-frame carrying this command on the LE signalling channel.
    public var frame: L2CAPBasicFrame {
        L2CAPBasicFrame(channelID: .leSignaling, payload: encoded)
    }

    public var description: String { "\(identifier) \(pdu)" }
}
