/// An HCI event code, the first byte of an HCI Event packet. An open set: unknown codes round-trip.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7 (Events).
public struct HCIEventCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Inquiry Complete.
    public static let inquiryComplete = HCIEventCode(rawValue: 0x01)
    /// Inquiry Result.
    public static let inquiryResult = HCIEventCode(rawValue: 0x02)
    /// Connection Complete.
    public static let connectionComplete = HCIEventCode(rawValue: 0x03)
    /// Connection Request.
    public static let connectionRequest = HCIEventCode(rawValue: 0x04)
    /// Disconnection Complete.
    public static let disconnectionComplete = HCIEventCode(rawValue: 0x05)
    /// Authentication Complete.
    public static let authenticationComplete = HCIEventCode(rawValue: 0x06)
    /// Remote Name Request Complete.
    public static let remoteNameRequestComplete = HCIEventCode(rawValue: 0x07)
    /// Encryption Change.
    public static let encryptionChange = HCIEventCode(rawValue: 0x08)
    /// Change Connection Link Key Complete.
    public static let changeConnectionLinkKeyComplete = HCIEventCode(rawValue: 0x09)
    /// Link Key Type Changed.
    public static let linkKeyTypeChanged = HCIEventCode(rawValue: 0x0A)
    /// Read Remote Supported Features Complete.
    public static let readRemoteSupportedFeaturesComplete = HCIEventCode(rawValue: 0x0B)
    /// Read Remote Version Information Complete.
    public static let readRemoteVersionInformationComplete = HCIEventCode(rawValue: 0x0C)
    /// QoS Setup Complete.
    public static let qosSetupComplete = HCIEventCode(rawValue: 0x0D)
    /// Command Complete.
    public static let commandComplete = HCIEventCode(rawValue: 0x0E)
    /// Command Status.
    public static let commandStatus = HCIEventCode(rawValue: 0x0F)
    /// Hardware Error.
    public static let hardwareError = HCIEventCode(rawValue: 0x10)
    /// Flush Occurred.
    public static let flushOccurred = HCIEventCode(rawValue: 0x11)
    /// Role Change.
    public static let roleChange = HCIEventCode(rawValue: 0x12)
    /// Number Of Completed Packets.
    public static let numberOfCompletedPackets = HCIEventCode(rawValue: 0x13)
    /// Mode Change.
    public static let modeChange = HCIEventCode(rawValue: 0x14)
    /// Return Link Keys.
    public static let returnLinkKeys = HCIEventCode(rawValue: 0x15)
    /// PIN Code Request.
    public static let pinCodeRequest = HCIEventCode(rawValue: 0x16)
    /// Link Key Request.
    public static let linkKeyRequest = HCIEventCode(rawValue: 0x17)
    /// Link Key Notification.
    public static let linkKeyNotification = HCIEventCode(rawValue: 0x18)
    /// Loopback Command.
    public static let loopbackCommand = HCIEventCode(rawValue: 0x19)
    /// Data Buffer Overflow.
    public static let dataBufferOverflow = HCIEventCode(rawValue: 0x1A)
    /// Max Slots Change.
    public static let maxSlotsChange = HCIEventCode(rawValue: 0x1B)
    /// Read Clock Offset Complete.
    public static let readClockOffsetComplete = HCIEventCode(rawValue: 0x1C)
    /// Connection Packet Type Changed.
    public static let connectionPacketTypeChanged = HCIEventCode(rawValue: 0x1D)
    /// QoS Violation.
    public static let qosViolation = HCIEventCode(rawValue: 0x1E)
    /// Page Scan Repetition Mode Change.
    public static let pageScanRepetitionModeChange = HCIEventCode(rawValue: 0x20)
    /// Flow Specification Complete.
    public static let flowSpecificationComplete = HCIEventCode(rawValue: 0x21)
    /// Inquiry Result with RSSI.
    public static let inquiryResultWithRSSI = HCIEventCode(rawValue: 0x22)
    /// Read Remote Extended Features Complete.
    public static let readRemoteExtendedFeaturesComplete = HCIEventCode(rawValue: 0x23)
    /// Synchronous Connection Complete.
    public static let synchronousConnectionComplete = HCIEventCode(rawValue: 0x2C)
    /// Synchronous Connection Changed.
    public static let synchronousConnectionChanged = HCIEventCode(rawValue: 0x2D)
    /// Sniff Subrating.
    public static let sniffSubrating = HCIEventCode(rawValue: 0x2E)
    /// Extended Inquiry Result.
    public static let extendedInquiryResult = HCIEventCode(rawValue: 0x2F)
    /// Encryption Key Refresh Complete.
    public static let encryptionKeyRefreshComplete = HCIEventCode(rawValue: 0x30)
    /// IO Capability Request.
    public static let ioCapabilityRequest = HCIEventCode(rawValue: 0x31)
    /// IO Capability Response.
    public static let ioCapabilityResponse = HCIEventCode(rawValue: 0x32)
    /// User Confirmation Request.
    public static let userConfirmationRequest = HCIEventCode(rawValue: 0x33)
    /// User Passkey Request.
    public static let userPasskeyRequest = HCIEventCode(rawValue: 0x34)
    /// Remote OOB Data Request.
    public static let remoteOOBDataRequest = HCIEventCode(rawValue: 0x35)
    /// Simple Pairing Complete.
    public static let simplePairingComplete = HCIEventCode(rawValue: 0x36)
    /// Link Supervision Timeout Changed.
    public static let linkSupervisionTimeoutChanged = HCIEventCode(rawValue: 0x38)
    /// Enhanced Flush Complete.
    public static let enhancedFlushComplete = HCIEventCode(rawValue: 0x39)
    /// User Passkey Notification.
    public static let userPasskeyNotification = HCIEventCode(rawValue: 0x3B)
    /// Keypress Notification.
    public static let keypressNotification = HCIEventCode(rawValue: 0x3C)
    /// Remote Host Supported Features Notification.
    public static let remoteHostSupportedFeaturesNotification = HCIEventCode(rawValue: 0x3D)
    /// LE Meta.
    public static let leMeta = HCIEventCode(rawValue: 0x3E)
    /// Number Of Completed Data Blocks.
    public static let numberOfCompletedDataBlocks = HCIEventCode(rawValue: 0x48)
    /// Authenticated Payload Timeout Expired.
    public static let authenticatedPayloadTimeoutExpired = HCIEventCode(rawValue: 0x57)
    /// Encryption Change [v2].
    public static let encryptionChangeV2 = HCIEventCode(rawValue: 0x59)
    /// Vendor Specific.
    public static let vendorSpecific = HCIEventCode(rawValue: 0xFF)

    /// The name the Core Specification gives this code, or `nil` for one this table does not name.
    public var name: String? {
        switch rawValue {
        case 0x01: return "Inquiry Complete"
        case 0x02: return "Inquiry Result"
        case 0x03: return "Connection Complete"
        case 0x04: return "Connection Request"
        case 0x05: return "Disconnection Complete"
        case 0x06: return "Authentication Complete"
        case 0x07: return "Remote Name Request Complete"
        case 0x08: return "Encryption Change"
        case 0x09: return "Change Connection Link Key Complete"
        case 0x0A: return "Link Key Type Changed"
        case 0x0B: return "Read Remote Supported Features Complete"
        case 0x0C: return "Read Remote Version Information Complete"
        case 0x0D: return "QoS Setup Complete"
        case 0x0E: return "Command Complete"
        case 0x0F: return "Command Status"
        case 0x10: return "Hardware Error"
        case 0x11: return "Flush Occurred"
        case 0x12: return "Role Change"
        case 0x13: return "Number Of Completed Packets"
        case 0x14: return "Mode Change"
        case 0x15: return "Return Link Keys"
        case 0x16: return "PIN Code Request"
        case 0x17: return "Link Key Request"
        case 0x18: return "Link Key Notification"
        case 0x19: return "Loopback Command"
        case 0x1A: return "Data Buffer Overflow"
        case 0x1B: return "Max Slots Change"
        case 0x1C: return "Read Clock Offset Complete"
        case 0x1D: return "Connection Packet Type Changed"
        case 0x1E: return "QoS Violation"
        case 0x20: return "Page Scan Repetition Mode Change"
        case 0x21: return "Flow Specification Complete"
        case 0x22: return "Inquiry Result with RSSI"
        case 0x23: return "Read Remote Extended Features Complete"
        case 0x2C: return "Synchronous Connection Complete"
        case 0x2D: return "Synchronous Connection Changed"
        case 0x2E: return "Sniff Subrating"
        case 0x2F: return "Extended Inquiry Result"
        case 0x30: return "Encryption Key Refresh Complete"
        case 0x31: return "IO Capability Request"
        case 0x32: return "IO Capability Response"
        case 0x33: return "User Confirmation Request"
        case 0x34: return "User Passkey Request"
        case 0x35: return "Remote OOB Data Request"
        case 0x36: return "Simple Pairing Complete"
        case 0x38: return "Link Supervision Timeout Changed"
        case 0x39: return "Enhanced Flush Complete"
        case 0x3B: return "User Passkey Notification"
        case 0x3C: return "Keypress Notification"
        case 0x3D: return "Remote Host Supported Features Notification"
        case 0x3E: return "LE Meta"
        case 0x48: return "Number Of Completed Data Blocks"
        case 0x57: return "Authenticated Payload Timeout Expired"
        case 0x59: return "Encryption Change [v2]"
        case 0xFF: return "Vendor Specific"
        default: return nil
        }
    }

    public var description: String {
        guard let name else { return hex2(rawValue) }
        return "\(name) (\(hex2(rawValue)))"
    }
}
