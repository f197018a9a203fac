/// The subevent code that follows the LE Meta event code. An open set: unknown subevents round-trip.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65 (LE Meta event).
public struct HCILEMetaSubevent: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// LE Connection Complete.
    public static let connectionComplete = HCILEMetaSubevent(rawValue: 0x01)
    /// LE Advertising Report.
    public static let advertisingReport = HCILEMetaSubevent(rawValue: 0x02)
    /// LE Connection Update Complete.
    public static let connectionUpdateComplete = HCILEMetaSubevent(rawValue: 0x03)
    /// LE Read Remote Features Complete.
    public static let readRemoteFeaturesComplete = HCILEMetaSubevent(rawValue: 0x04)
    /// LE Long Term Key Request.
    public static let longTermKeyRequest = HCILEMetaSubevent(rawValue: 0x05)
    /// LE Remote Connection Parameter Request.
    public static let remoteConnectionParameterRequest = HCILEMetaSubevent(rawValue: 0x06)
    /// LE Data Length Change.
    public static let dataLengthChange = HCILEMetaSubevent(rawValue: 0x07)
    /// LE Read Local P-256 Public Key Complete.
    public static let readLocalP256PublicKeyComplete = HCILEMetaSubevent(rawValue: 0x08)
    /// LE Generate DHKey Complete.
    public static let generateDHKeyComplete = HCILEMetaSubevent(rawValue: 0x09)
    /// LE Enhanced Connection Complete.
    public static let enhancedConnectionComplete = HCILEMetaSubevent(rawValue: 0x0A)
    /// LE Directed Advertising Report.
    public static let directedAdvertisingReport = HCILEMetaSubevent(rawValue: 0x0B)
    /// LE PHY Update Complete.
    public static let phyUpdateComplete = HCILEMetaSubevent(rawValue: 0x0C)
    /// LE Extended Advertising Report.
    public static let extendedAdvertisingReport = HCILEMetaSubevent(rawValue: 0x0D)
    /// LE Periodic Advertising Sync Established.
    public static let periodicAdvertisingSyncEstablished = HCILEMetaSubevent(rawValue: 0x0E)
    /// LE Periodic Advertising Report.
    public static let periodicAdvertisingReport = HCILEMetaSubevent(rawValue: 0x0F)
    /// LE Periodic Advertising Sync Lost.
    public static let periodicAdvertisingSyncLost = HCILEMetaSubevent(rawValue: 0x10)
    /// LE Scan Timeout.
    public static let scanTimeout = HCILEMetaSubevent(rawValue: 0x11)
    /// LE Advertising Set Terminated.
    public static let advertisingSetTerminated = HCILEMetaSubevent(rawValue: 0x12)
    /// LE Scan Request Received.
    public static let scanRequestReceived = HCILEMetaSubevent(rawValue: 0x13)
    /// LE Channel Selection Algorithm.
    public static let channelSelectionAlgorithm = HCILEMetaSubevent(rawValue: 0x14)
    /// LE CIS Established.
    public static let cisEstablished = HCILEMetaSubevent(rawValue: 0x19)
    /// LE CIS Request.
    public static let cisRequest = HCILEMetaSubevent(rawValue: 0x1A)
    /// LE Create BIG Complete.
    public static let createBIGComplete = HCILEMetaSubevent(rawValue: 0x1B)
    /// LE Terminate BIG Complete.
    public static let terminateBIGComplete = HCILEMetaSubevent(rawValue: 0x1C)
    /// LE Request Peer SCA Complete.
    public static let requestPeerSCAComplete = HCILEMetaSubevent(rawValue: 0x21)
    /// LE Path Loss Threshold.
    public static let pathLossThreshold = HCILEMetaSubevent(rawValue: 0x22)
    /// LE Transmit Power Reporting.
    public static let transmitPowerReporting = HCILEMetaSubevent(rawValue: 0x23)
    /// LE BIGInfo Advertising Report.
    public static let bigInfoAdvertisingReport = HCILEMetaSubevent(rawValue: 0x24)
    /// LE Subrate Change.
    public static let subrateChange = HCILEMetaSubevent(rawValue: 0x25)
    /// LE Enhanced Connection Complete [v2].
    public static let enhancedConnectionCompleteV2 = HCILEMetaSubevent(rawValue: 0x29)

    /// The name the Core Specification gives this code, or `nil` for one this table does not name.
    public var name: String? {
        switch rawValue {
        case 0x01: return "LE Connection Complete"
        case 0x02: return "LE Advertising Report"
        case 0x03: return "LE Connection Update Complete"
        case 0x04: return "LE Read Remote Features Complete"
        case 0x05: return "LE Long Term Key Request"
        case 0x06: return "LE Remote Connection Parameter Request"
        case 0x07: return "LE Data Length Change"
        case 0x08: return "LE Read Local P-256 Public Key Complete"
        case 0x09: return "LE Generate DHKey Complete"
        case 0x0A: return "LE Enhanced Connection Complete"
        case 0x0B: return "LE Directed Advertising Report"
        case 0x0C: return "LE PHY Update Complete"
        case 0x0D: return "LE Extended Advertising Report"
        case 0x0E: return "LE Periodic Advertising Sync Established"
        case 0x0F: return "LE Periodic Advertising Report"
        case 0x10: return "LE Periodic Advertising Sync Lost"
        case 0x11: return "LE Scan Timeout"
        case 0x12: return "LE Advertising Set Terminated"
        case 0x13: return "LE Scan Request Received"
        case 0x14: return "LE Channel Selection Algorithm"
        case 0x19: return "LE CIS Established"
        case 0x1A: return "LE CIS Request"
        case 0x1B: return "LE Create BIG Complete"
        case 0x1C: return "LE Terminate BIG Complete"
        case 0x21: return "LE Request Peer SCA Complete"
        case 0x22: return "LE Path Loss Threshold"
        case 0x23: return "LE Transmit Power Reporting"
        case 0x24: return "LE BIGInfo Advertising Report"
        case 0x25: return "LE Subrate Change"
        case 0x29: return "LE Enhanced Connection Complete [v2]"
        default: return nil
        }
    }

    public var description: String {
        guard let name else { return hex2(rawValue) }
        return "\(name) (\(hex2(rawValue)))"
    }
}
