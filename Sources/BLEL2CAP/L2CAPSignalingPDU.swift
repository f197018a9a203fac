import BLECore
import NIOCore

/// The commands of the LE signalling channel, without their identifier (see `L2CAPSignalingCommand`).
///
/// One case per command this stack understands on LE-U, each with a nested struct carrying its `code`, and
/// `.unknown` for every other code, kept with its data so it round-trips (and so the signalling channel can
/// answer it with a Command Reject).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.
public enum L2CAPSignalingPDU: Hashable, Sendable, CustomStringConvertible {
    case commandReject(CommandReject)
    case disconnectionRequest(DisconnectionRequest)
    case disconnectionResponse(DisconnectionResponse)
    case connectionParameterUpdateRequest(ConnectionParameterUpdateRequest)
    case connectionParameterUpdateResponse(ConnectionParameterUpdateResponse)
    case leCreditBasedConnectionRequest(LECreditBasedConnectionRequest)
    case leCreditBasedConnectionResponse(LECreditBasedConnectionResponse)
    case flowControlCreditIndication(FlowControlCreditIndication)
    /// Any other code, with its data as received.
    case unknown(code: L2CAPSignalingCode, data: [UInt8])

    /// The command's code.
    public var code: L2CAPSignalingCode {
        switch self {
        case .commandReject: CommandReject.code
        case .disconnectionRequest: DisconnectionRequest.code
        case .disconnectionResponse: DisconnectionResponse.code
        case .connectionParameterUpdateRequest: ConnectionParameterUpdateRequest.code
        case .connectionParameterUpdateResponse: ConnectionParameterUpdateResponse.code
        case .leCreditBasedConnectionRequest: LECreditBasedConnectionRequest.code
        case .leCreditBasedConnectionResponse: LECreditBasedConnectionResponse.code
        case .flowControlCreditIndication: FlowControlCreditIndication.code
        case .unknown(let code, _): code
        }
    }

    /// Decodes the data of a command with `code`; throws `.truncated` if `data` is too short.
    init(code: L2CAPSignalingCode, data: inout ByteBuffer) throws(L2CAPError) {
        switch code {
        case CommandReject.code: self = .commandReject(try CommandReject(data: &data))
        case DisconnectionRequest.code: self = .disconnectionRequest(try DisconnectionRequest(data: &data))
        case DisconnectionResponse.code: self = .disconnectionResponse(try DisconnectionResponse(data: &data))
        case ConnectionParameterUpdateRequest.code:
            self = .connectionParameterUpdateRequest(try ConnectionParameterUpdateRequest(data: &data))
        case ConnectionParameterUpdateResponse.code:
            self = .connectionParameterUpdateResponse(try ConnectionParameterUpdateResponse(data: &data))
        case LECreditBasedConnectionRequest.code:
            self = .leCreditBasedConnectionRequest(try LECreditBasedConnectionRequest(data: &data))
        case LECreditBasedConnectionResponse.code:
            self = .leCreditBasedConnectionResponse(try LECreditBasedConnectionResponse(data: &data))
        case FlowControlCreditIndication.code:
            self = .flowControlCreditIndication(try FlowControlCreditIndication(data: &data))
        default:
            self = .unknown(code: code, data: data.readRemainingBytes())
        }
    }

    /// Appends the command's data (not its header) to `buffer`.
    func encodeData(into buffer: inout ByteBuffer) {
        switch self {
        case .commandReject(let pdu): pdu.encode(into: &buffer)
        case .disconnectionRequest(let pdu): pdu.encode(into: &buffer)
        case .disconnectionResponse(let pdu): pdu.encode(into: &buffer)
        case .connectionParameterUpdateRequest(let pdu): pdu.encode(into: &buffer)
        case .connectionParameterUpdateResponse(let pdu): pdu.encode(into: &buffer)
        case .leCreditBasedConnectionRequest(let pdu): pdu.encode(into: &buffer)
        case .leCreditBasedConnectionResponse(let pdu): pdu.encode(into: &buffer)
        case .flowControlCreditIndication(let pdu): pdu.encode(into: &buffer)
        case .unknown(_, let data): buffer.writeBytes(data)
        }
    }

    public var description: String {
        switch self {
        case .commandReject(let pdu): "\(pdu)"
        case .disconnectionRequest(let pdu): "\(pdu)"
        case .disconnectionResponse(let pdu): "\(pdu)"
        case .connectionParameterUpdateRequest(let pdu): "\(pdu)"
        case .connectionParameterUpdateResponse(let pdu): "\(pdu)"
        case .leCreditBasedConnectionRequest(let pdu): "\(pdu)"
        case .leCreditBasedConnectionResponse(let pdu): "\(pdu)"
        case .flowControlCreditIndication(let pdu): "\(pdu)"
        case .unknown(let code, let data): "\(code) \(data.hexString)"
        }
    }
}

extension L2CAPSignalingPDU {
    /// L2CAP_COMMAND_REJECT_RSP: the peer's command was not understood or could not be answered.
    ///
    /// ```
    /// | Reason (2) | Data (0, 2 or 4) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.1.
    public struct CommandReject: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.commandReject

        /// Why a command was rejected. An open set.
        ///
        /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.1, Table 4.3.
        public struct Reason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
            public var rawValue: UInt16
            public init(rawValue: UInt16) { self.rawValue = rawValue }
            /// 0x0000: Command not understood. No data.
            public static let commandNotUnderstood = Reason(rawValue: 0x0000)
            /// 0x0001: Signaling MTU exceeded. Data: the rejecter's signalling MTU (2 octets).
            public static let signalingMTUExceeded = Reason(rawValue: 0x0001)
            /// 0x0002: Invalid CID in request. Data: the rejecter's local CID, then the remote CID (2 + 2).
            public static let invalidCIDInRequest = Reason(rawValue: 0x0002)

            public var description: String {
                switch rawValue {
                case 0x0000: "Command not understood"
                case 0x0001: "Signaling MTU exceeded"
                case 0x0002: "Invalid CID in request"
                default: "0x" + String(rawValue, radix: 16)
                }
            }
        }

        public var reason: Reason
        /// The reason's data, as sent (0, 2 or 4 octets for the known reasons).
        public var data: [UInt8]

        public init(reason: Reason, data: [UInt8] = []) {
            self.reason = reason
            self.data = data
        }

        /// A reject for an unknown or unsupported command.
        public static let commandNotUnderstood = CommandReject(reason: .commandNotUnderstood)

        /// A reject for a C-frame longer than `actualMTU`, the rejecter's signalling MTU.
        public static func signalingMTUExceeded(actualMTU: UInt16) -> CommandReject {
            CommandReject(reason: .signalingMTUExceeded, data: [UInt8(actualMTU & 0xFF), UInt8(actualMTU >> 8)])
        }

        /// A reject for a request naming channels the rejecter does not have. `local` is the rejecter's end
        /// (the request's destination CID), `remote` the requester's.
        public static func invalidCID(local: L2CAPChannelID, remote: L2CAPChannelID) -> CommandReject {
            CommandReject(
                reason: .invalidCIDInRequest,
                data: [
                    UInt8(local.rawValue & 0xFF), UInt8(local.rawValue >> 8),
                    UInt8(remote.rawValue & 0xFF), UInt8(remote.rawValue >> 8),
                ])
        }

        /// The rejecter's signalling MTU, for `.signalingMTUExceeded` with its 2 octets of data.
        public var actualMTU: UInt16? {
            guard reason == .signalingMTUExceeded, data.count >= 2 else { return nil }
            return UInt16(data[0]) | UInt16(data[1]) << 8
        }

        /// The channels named, for `.invalidCIDInRequest` with its 4 octets of data.
        public var invalidCIDs: (local: L2CAPChannelID, remote: L2CAPChannelID)? {
            guard reason == .invalidCIDInRequest, data.count >= 4 else { return nil }
            return (
                L2CAPChannelID(rawValue: UInt16(data[0]) | UInt16(data[1]) << 8),
                L2CAPChannelID(rawValue: UInt16(data[2]) | UInt16(data[3]) << 8)
            )
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.reason = Reason(rawValue: try buffer.readField("Reason"))
            self.data = buffer.readRemainingBytes()
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(reason.rawValue)
            buffer.writeBytes(data)
        }

        public var description: String {
            "CommandReject(\(reason)\(data.isEmpty ? "" : ", " + data.hexString))"
        }
    }

    /// L2CAP_DISCONNECTION_REQ: close a connection-oriented channel.
    ///
    /// ```
    /// | Destination CID (2) | Source CID (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.6.
    public struct DisconnectionRequest: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.disconnectionRequest
        /// The channel's end at the receiver of the request.
        public var destinationCID: L2CAPChannelID
        /// The channel's end at the sender of the request.
        public var sourceCID: L2CAPChannelID

        public init(destinationCID: L2CAPChannelID, sourceCID: L2CAPChannelID) {
            self.destinationCID = destinationCID
            self.sourceCID = sourceCID
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.destinationCID = L2CAPChannelID(rawValue: try buffer.readField("Destination CID"))
            self.sourceCID = L2CAPChannelID(rawValue: try buffer.readField("Source CID"))
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(destinationCID.rawValue)
            buffer.writeLE(sourceCID.rawValue)
        }

        public var description: String { "DisconnectionRequest(dcid: \(destinationCID), scid: \(sourceCID))" }
    }

    /// L2CAP_DISCONNECTION_RSP: the channel is closed. The CIDs echo the request's.
    ///
    /// ```
    /// | Destination CID (2) | Source CID (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.7.
    public struct DisconnectionResponse: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.disconnectionResponse
        public var destinationCID: L2CAPChannelID
        public var sourceCID: L2CAPChannelID

        public init(destinationCID: L2CAPChannelID, sourceCID: L2CAPChannelID) {
            self.destinationCID = destinationCID
            self.sourceCID = sourceCID
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.destinationCID = L2CAPChannelID(rawValue: try buffer.readField("Destination CID"))
            self.sourceCID = L2CAPChannelID(rawValue: try buffer.readField("Source CID"))
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(destinationCID.rawValue)
            buffer.writeLE(sourceCID.rawValue)
        }

        public var description: String { "DisconnectionResponse(dcid: \(destinationCID), scid: \(sourceCID))" }
    }

    /// L2CAP_CONNECTION_PARAMETER_UPDATE_REQ: a peripheral asks the central for new connection parameters.
    /// Only a central accepts it; a peripheral answers it with a Command Reject.
    ///
    /// ```
    /// | Interval Min (2) | Interval Max (2) | Latency (2) | Timeout (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.20.
    public struct ConnectionParameterUpdateRequest: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.connectionParameterUpdateRequest
        public var parameters: L2CAPConnectionParameters

        public init(parameters: L2CAPConnectionParameters) {
            self.parameters = parameters
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.parameters = L2CAPConnectionParameters(
                minimumInterval: try buffer.readField("Interval Min"),
                maximumInterval: try buffer.readField("Interval Max"),
                peripheralLatency: try buffer.readField("Latency"),
                supervisionTimeout: try buffer.readField("Timeout"))
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(parameters.minimumInterval)
            buffer.writeLE(parameters.maximumInterval)
            buffer.writeLE(parameters.peripheralLatency)
            buffer.writeLE(parameters.supervisionTimeout)
        }

        public var description: String { "ConnectionParameterUpdateRequest(\(parameters))" }
    }

    /// L2CAP_CONNECTION_PARAMETER_UPDATE_RSP: the central's answer.
    ///
    /// ```
    /// | Result (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.21.
    public struct ConnectionParameterUpdateResponse: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.connectionParameterUpdateResponse

        /// The answer. An open set.
        ///
        /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.21, Table 4.22.
        public struct Result: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
            public var rawValue: UInt16
            public init(rawValue: UInt16) { self.rawValue = rawValue }
            /// 0x0000: Connection Parameters accepted.
            public static let accepted = Result(rawValue: 0x0000)
            /// 0x0001: Connection Parameters rejected.
            public static let rejected = Result(rawValue: 0x0001)
            public var description: String {
                switch rawValue {
                case 0x0000: "accepted"
                case 0x0001: "rejected"
                default: "0x" + String(rawValue, radix: 16)
                }
            }
        }

        public var result: Result

        public init(result: Result) {
            self.result = result
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.result = Result(rawValue: try buffer.readField("Result"))
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(result.rawValue)
        }

        public var description: String { "ConnectionParameterUpdateResponse(\(result))" }
    }

    /// L2CAP_LE_CREDIT_BASED_CONNECTION_REQ: open an LE credit-based channel to a protocol/service multiplexer.
    ///
    /// ```
    /// | SPSM (2) | Source CID (2) | MTU (2) | MPS (2) | Initial Credits (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.22.
    public struct LECreditBasedConnectionRequest: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.leCreditBasedConnectionRequest
        /// The Simplified Protocol/Service Multiplexer: 0x0001...0x007F SIG-assigned, 0x0080...0x00FF dynamic.
        public var spsm: UInt16
        /// The requester's end of the new channel (0x0040...0x007F on LE).
        public var sourceCID: L2CAPChannelID
        /// The largest SDU the requester can receive, 23...65535.
        public var mtu: UInt16
        /// The largest PDU payload the requester can receive, 23...65533.
        public var mps: UInt16
        /// K-frames the receiver of this request may send at once, 0...65535.
        public var initialCredits: UInt16

        public init(spsm: UInt16, sourceCID: L2CAPChannelID, mtu: UInt16, mps: UInt16, initialCredits: UInt16) {
            self.spsm = spsm
            self.sourceCID = sourceCID
            self.mtu = mtu
            self.mps = mps
            self.initialCredits = initialCredits
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.spsm = try buffer.readField("SPSM")
            self.sourceCID = L2CAPChannelID(rawValue: try buffer.readField("Source CID"))
            self.mtu = try buffer.readField("MTU")
            self.mps = try buffer.readField("MPS")
            self.initialCredits = try buffer.readField("Initial Credits")
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(spsm)
            buffer.writeLE(sourceCID.rawValue)
            buffer.writeLE(mtu)
            buffer.writeLE(mps)
            buffer.writeLE(initialCredits)
        }

        public var description: String {
            "LECreditBasedConnectionRequest(spsm: 0x\(String(spsm, radix: 16)), scid: \(sourceCID), mtu: \(mtu), mps: \(mps), credits: \(initialCredits))"
        }
    }

    /// L2CAP_LE_CREDIT_BASED_CONNECTION_RSP: the answer to an LE credit-based connection request.
    ///
    /// ```
    /// | Destination CID (2) | MTU (2) | MPS (2) | Initial Credits (2) | Result (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.23.
    public struct LECreditBasedConnectionResponse: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.leCreditBasedConnectionResponse

        /// The outcome. An open set.
        ///
        /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.23, Table 4.25.
        public struct Result: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
            public var rawValue: UInt16
            public init(rawValue: UInt16) { self.rawValue = rawValue }
            public static let successful = Result(rawValue: 0x0000)
            public static let spsmNotSupported = Result(rawValue: 0x0002)
            public static let noResourcesAvailable = Result(rawValue: 0x0004)
            public static let insufficientAuthentication = Result(rawValue: 0x0005)
            public static let insufficientAuthorization = Result(rawValue: 0x0006)
            public static let encryptionKeySizeTooShort = Result(rawValue: 0x0007)
            public static let insufficientEncryption = Result(rawValue: 0x0008)
            public static let invalidSourceCID = Result(rawValue: 0x0009)
            public static let sourceCIDAlreadyAllocated = Result(rawValue: 0x000A)
            public static let unacceptableParameters = Result(rawValue: 0x000B)

            public var description: String {
                switch rawValue {
                case 0x0000: "Connection successful"
                case 0x0002: "SPSM not supported"
                case 0x0004: "No resources available"
                case 0x0005: "Insufficient Authentication"
                case 0x0006: "Insufficient Authorization"
                case 0x0007: "Encryption Key Size Too Short"
                case 0x0008: "Insufficient Encryption"
                case 0x0009: "Invalid Source CID"
                case 0x000A: "Source CID already allocated"
                case 0x000B: "Unacceptable parameters"
                default: "0x" + String(rawValue, radix: 16)
                }
            }
        }

        /// The responder's end of the new channel (0x0000 when refused).
        public var destinationCID: L2CAPChannelID
        public var mtu: UInt16
        public var mps: UInt16
        public var initialCredits: UInt16
        public var result: Result

        public init(destinationCID: L2CAPChannelID, mtu: UInt16, mps: UInt16, initialCredits: UInt16, result: Result) {
            self.destinationCID = destinationCID
            self.mtu = mtu
            self.mps = mps
            self.initialCredits = initialCredits
            self.result = result
        }

        /// A refusal: every field but the result is zero, as the specification asks.
        public static func refused(_ result: Result) -> LECreditBasedConnectionResponse {
            LECreditBasedConnectionResponse(
                destinationCID: L2CAPChannelID(rawValue: 0), mtu: 0, mps: 0, initialCredits: 0, result: result)
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.destinationCID = L2CAPChannelID(rawValue: try buffer.readField("Destination CID"))
            self.mtu = try buffer.readField("MTU")
            self.mps = try buffer.readField("MPS")
            self.initialCredits = try buffer.readField("Initial Credits")
            self.result = Result(rawValue: try buffer.readField("Result"))
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(destinationCID.rawValue)
            buffer.writeLE(mtu)
            buffer.writeLE(mps)
            buffer.writeLE(initialCredits)
            buffer.writeLE(result.rawValue)
        }

        public var description: String {
            "LECreditBasedConnectionResponse(dcid: \(destinationCID), mtu: \(mtu), mps: \(mps), credits: \(initialCredits), \(result))"
        }
    }

    /// L2CAP_FLOW_CONTROL_CREDIT_IND: more K-frames may be sent on a credit-based channel.
    ///
    /// ```
    /// | CID (2) | Credits (2) |
    /// ```
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.24.
    public struct FlowControlCreditIndication: Hashable, Sendable, CustomStringConvertible {
        public static let code = L2CAPSignalingCode.flowControlCreditIndication
        /// The sender's end of the channel (its source CID).
        public var cid: L2CAPChannelID
        /// Credits granted, 1...65535.
        public var credits: UInt16

        public init(cid: L2CAPChannelID, credits: UInt16) {
            self.cid = cid
            self.credits = credits
        }

        init(data buffer: inout ByteBuffer) throws(L2CAPError) {
            self.cid = L2CAPChannelID(rawValue: try buffer.readField("CID"))
            self.credits = try buffer.readField("Credits")
        }

        func encode(into buffer: inout ByteBuffer) {
            buffer.writeLE(cid.rawValue)
            buffer.writeLE(credits)
        }

        public var description: String { "FlowControlCreditIndication(cid: \(cid), credits: \(credits))" }
    }
}

extension ByteBuffer {
    /// A little-endian 16-bit field of a signalling command; throws `.truncated` naming it if absent.
    fileprivate mutating func readField(_ name: String) throws(L2CAPError) -> UInt16 {
        guard let value = readLE(UInt16.self) else {
            throw .truncated("signalling command data ends before \(name)")
        }
        return value
    }
}
