/// The error code an ATT Error Response carries (and, as `.success`, the "no error" result an app hands to
/// `respond(to:withResult:)`).
///
/// An open set: 0x80...0x9F are application errors, 0xE0...0xFF common profile and service error codes
/// (Core Specification Supplement, Part B), and any other value round-trips too.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.1.1 (Table 3.4: Error codes).
public struct ATTErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    /// Not an error: the request succeeded. Never sent in an Error Response.
    public static let success = ATTErrorCode(0x00)
    /// The attribute handle given was not valid on this server.
    public static let invalidHandle = ATTErrorCode(0x01)
    /// The attribute cannot be read.
    public static let readNotPermitted = ATTErrorCode(0x02)
    /// The attribute cannot be written.
    public static let writeNotPermitted = ATTErrorCode(0x03)
    /// The attribute PDU was invalid.
    public static let invalidPDU = ATTErrorCode(0x04)
    /// The attribute requires authentication before it can be read or written.
    public static let insufficientAuthentication = ATTErrorCode(0x05)
    /// The server does not support the request received from the client.
    public static let requestNotSupported = ATTErrorCode(0x06)
    /// The offset specified was past the end of the attribute.
    public static let invalidOffset = ATTErrorCode(0x07)
    /// The attribute requires authorization before it can be read or written.
    public static let insufficientAuthorization = ATTErrorCode(0x08)
    /// Too many prepare writes have been queued.
    public static let prepareQueueFull = ATTErrorCode(0x09)
    /// No attribute found within the given attribute handle range.
    public static let attributeNotFound = ATTErrorCode(0x0A)
    /// The attribute cannot be read using the Read Blob Request.
    public static let attributeNotLong = ATTErrorCode(0x0B)
    /// The Encryption Key Size used for encrypting this link is too short.
    public static let encryptionKeySizeTooShort = ATTErrorCode(0x0C)
    /// The attribute value length is invalid for the operation.
    public static let invalidAttributeValueLength = ATTErrorCode(0x0D)
    /// The request met an unlikely error and could not be completed.
    public static let unlikelyError = ATTErrorCode(0x0E)
    /// The attribute requires encryption before it can be read or written.
    public static let insufficientEncryption = ATTErrorCode(0x0F)
    /// The attribute type is not a supported grouping attribute as defined by a higher layer specification.
    public static let unsupportedGroupType = ATTErrorCode(0x10)
    /// Insufficient resources to complete the request.
    public static let insufficientResources = ATTErrorCode(0x11)
    /// The server requests the client to rediscover the database.
    public static let databaseOutOfSync = ATTErrorCode(0x12)
    /// The attribute parameter value was not allowed.
    public static let valueNotAllowed = ATTErrorCode(0x13)
    /// Common profile error: a write request was rejected (Supplement, Part B, 1.2).
    public static let writeRequestRejected = ATTErrorCode(0xFC)
    /// Common profile error: a Client Characteristic Configuration descriptor is not configured as the
    /// procedure requires (Supplement, Part B, 1.2).
    public static let cccdImproperlyConfigured = ATTErrorCode(0xFD)
    /// Common profile error: a procedure is already in progress (Supplement, Part B, 1.2).
    public static let procedureAlreadyInProgress = ATTErrorCode(0xFE)
    /// Common profile error: an attribute value is out of range (Supplement, Part B, 1.2).
    public static let outOfRange = ATTErrorCode(0xFF)

    /// 0x80...0x9F: defined by the application.
    public var isApplicationError: Bool { (0x80...0x9F).contains(rawValue) }

    public var name: String? {
        switch rawValue {
        case 0x00: return "Success"
        case 0x01: return "Invalid Handle"
        case 0x02: return "Read Not Permitted"
        case 0x03: return "Write Not Permitted"
        case 0x04: return "Invalid PDU"
        case 0x05: return "Insufficient Authentication"
        case 0x06: return "Request Not Supported"
        case 0x07: return "Invalid Offset"
        case 0x08: return "Insufficient Authorization"
        case 0x09: return "Prepare Queue Full"
        case 0x0A: return "Attribute Not Found"
        case 0x0B: return "Attribute Not Long"
        case 0x0C: return "Encryption Key Size Too Short"
        case 0x0D: return "Invalid Attribute Value Length"
        case 0x0E: return "Unlikely Error"
        case 0x0F: return "Insufficient Encryption"
        case 0x10: return "Unsupported Group Type"
        case 0x11: return "Insufficient Resources"
        case 0x12: return "Database Out Of Sync"
        case 0x13: return "Value Not Allowed"
        case 0xFC: return "Write Request Rejected"
        case 0xFD: return "Client Characteristic Configuration Descriptor Improperly Configured"
        case 0xFE: return "Procedure Already in Progress"
        case 0xFF: return "Out of Range"
        default: return nil
        }
    }

    public var description: String {
        if let name { return name }
        let hex = String(rawValue, radix: 16, uppercase: true)
        let code = "0x" + (hex.count == 1 ? "0" + hex : hex)
        return isApplicationError ? "Application Error \(code)" : code
    }
}
