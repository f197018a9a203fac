/// Advertising_Type of LE Set Advertising Parameters: which legacy advertising PDU the controller sends.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.5; Vol 6, Part B, 2.3.1.
public struct HCIAdvertisingType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// ADV_IND: connectable and scannable undirected (the default).
    public static let advInd = HCIAdvertisingType(rawValue: 0x00)
    /// ADV_DIRECT_IND, high duty cycle: connectable directed.
    public static let advDirectIndHighDuty = HCIAdvertisingType(rawValue: 0x01)
    /// ADV_SCAN_IND: scannable undirected.
    public static let advScanInd = HCIAdvertisingType(rawValue: 0x02)
    /// ADV_NONCONN_IND: non-connectable undirected.
    public static let advNonconnInd = HCIAdvertisingType(rawValue: 0x03)
    /// ADV_DIRECT_IND, low duty cycle: connectable directed.
    public static let advDirectIndLowDuty = HCIAdvertisingType(rawValue: 0x04)

    public var description: String {
        switch rawValue {
        case 0x00: return "ADV_IND"
        case 0x01: return "ADV_DIRECT_IND (high duty)"
        case 0x02: return "ADV_SCAN_IND"
        case 0x03: return "ADV_NONCONN_IND"
        case 0x04: return "ADV_DIRECT_IND (low duty)"
        default: return hex2(rawValue)
        }
    }
}

/// Event_Type of one LE Advertising Report: which legacy PDU was received.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.2.
public struct HCIAdvertisingReportEventType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// ADV_IND: connectable and scannable undirected.
    public static let advInd = HCIAdvertisingReportEventType(rawValue: 0x00)
    /// ADV_DIRECT_IND: connectable directed.
    public static let advDirectInd = HCIAdvertisingReportEventType(rawValue: 0x01)
    /// ADV_SCAN_IND: scannable undirected.
    public static let advScanInd = HCIAdvertisingReportEventType(rawValue: 0x02)
    /// ADV_NONCONN_IND: non-connectable undirected.
    public static let advNonconnInd = HCIAdvertisingReportEventType(rawValue: 0x03)
    /// SCAN_RSP: a scan response.
    public static let scanRsp = HCIAdvertisingReportEventType(rawValue: 0x04)

    /// `true` for the PDUs a central may connect to (ADV_IND and ADV_DIRECT_IND).
    public var isConnectable: Bool { rawValue == 0 || rawValue == 1 }

    public var description: String {
        switch rawValue {
        case 0x00: return "ADV_IND"
        case 0x01: return "ADV_DIRECT_IND"
        case 0x02: return "ADV_SCAN_IND"
        case 0x03: return "ADV_NONCONN_IND"
        case 0x04: return "SCAN_RSP"
        default: return hex2(rawValue)
        }
    }
}

/// LE_Scan_Type of LE Set Scan Parameters.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.10.
public struct HCIScanType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Passive scanning: no scan requests are sent (the default).
    public static let passive = HCIScanType(rawValue: 0x00)
    /// Active scanning: scan requests may be sent.
    public static let active = HCIScanType(rawValue: 0x01)

    public var description: String {
        switch rawValue {
        case 0x00: return "passive"
        case 0x01: return "active"
        default: return hex2(rawValue)
        }
    }
}

/// Advertising_Filter_Policy of LE Set Advertising Parameters.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.5.
public struct HCIAdvertisingFilterPolicy: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Scan and connection requests from any device (the default).
    public static let acceptAll = HCIAdvertisingFilterPolicy(rawValue: 0x00)
    /// Scan requests only from the Filter Accept List; connection requests from any.
    public static let filterScanRequests = HCIAdvertisingFilterPolicy(rawValue: 0x01)
    /// Scan requests from any; connection requests only from the Filter Accept List.
    public static let filterConnectionRequests = HCIAdvertisingFilterPolicy(rawValue: 0x02)
    /// Scan and connection requests only from the Filter Accept List.
    public static let filterBoth = HCIAdvertisingFilterPolicy(rawValue: 0x03)

    public var description: String {
        switch rawValue {
        case 0x00: return "any"
        case 0x01: return "scan: accept list"
        case 0x02: return "connect: accept list"
        case 0x03: return "scan+connect: accept list"
        default: return hex2(rawValue)
        }
    }
}

/// Scanning_Filter_Policy of LE Set Scan Parameters.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.10.
public struct HCIScanningFilterPolicy: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Accept all advertising packets except directed ones not addressed to this device (the default).
    public static let basicUnfiltered = HCIScanningFilterPolicy(rawValue: 0x00)
    /// Accept only packets from devices on the Filter Accept List.
    public static let basicFiltered = HCIScanningFilterPolicy(rawValue: 0x01)
    /// As basic unfiltered, also accepting directed packets to a resolvable private address.
    public static let extendedUnfiltered = HCIScanningFilterPolicy(rawValue: 0x02)
    /// As basic filtered, also accepting directed packets to a resolvable private address.
    public static let extendedFiltered = HCIScanningFilterPolicy(rawValue: 0x03)

    public var description: String {
        switch rawValue {
        case 0x00: return "basic unfiltered"
        case 0x01: return "basic filtered"
        case 0x02: return "extended unfiltered"
        case 0x03: return "extended filtered"
        default: return hex2(rawValue)
        }
    }
}

/// Initiator_Filter_Policy of LE Create Connection.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.12.
public struct HCIInitiatorFilterPolicy: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Connect to the device named by Peer_Address_Type and Peer_Address.
    public static let usePeerAddress = HCIInitiatorFilterPolicy(rawValue: 0x00)
    /// Connect to any device on the Filter Accept List; the peer address is ignored.
    public static let useFilterAcceptList = HCIInitiatorFilterPolicy(rawValue: 0x01)

    public var description: String {
        switch rawValue {
        case 0x00: return "peer address"
        case 0x01: return "accept list"
        default: return hex2(rawValue)
        }
    }
}

/// Role of a new LE connection, as LE Connection Complete reports it.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.1.
public struct HCIRole: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// This device is the central.
    public static let central = HCIRole(rawValue: 0x00)
    /// This device is the peripheral.
    public static let peripheral = HCIRole(rawValue: 0x01)

    public var description: String {
        switch rawValue {
        case 0x00: return "central"
        case 0x01: return "peripheral"
        default: return hex2(rawValue)
        }
    }
}

/// An LE PHY as LE Read PHY and LE PHY Update Complete report it.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.47.
public struct HCIPHY: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// LE 1M.
    public static let le1M = HCIPHY(rawValue: 0x01)
    /// LE 2M.
    public static let le2M = HCIPHY(rawValue: 0x02)
    /// LE Coded.
    public static let leCoded = HCIPHY(rawValue: 0x03)

    public var description: String {
        switch rawValue {
        case 0x01: return "LE 1M"
        case 0x02: return "LE 2M"
        case 0x03: return "LE Coded"
        default: return hex2(rawValue)
        }
    }
}

/// A Bluetooth Core Specification version number, as HCI_Version and LMP_Version (and LL version) carry it.
///
/// - SeeAlso: Bluetooth Assigned Numbers, 2.1 (Link Layer / HCI versions); Core Spec 5.4, Vol 4, Part E, 7.4.1.
public struct HCICoreVersion: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Core 4.0.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v4_0 = HCICoreVersion(rawValue: 0x06)
    /// Core 4.1.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v4_1 = HCICoreVersion(rawValue: 0x07)
    /// Core 4.2.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v4_2 = HCICoreVersion(rawValue: 0x08)
    /// Core 5.0.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v5_0 = HCICoreVersion(rawValue: 0x09)
    /// Core 5.1.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v5_1 = HCICoreVersion(rawValue: 0x0A)
    /// Core 5.2.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v5_2 = HCICoreVersion(rawValue: 0x0B)
    /// Core 5.3.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v5_3 = HCICoreVersion(rawValue: 0x0C)
    /// Core 5.4.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v5_4 = HCICoreVersion(rawValue: 0x0D)
    /// Core 6.0.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    public static let v6_0 = HCICoreVersion(rawValue: 0x0E)

    public var description: String {
        switch rawValue {
        case 0x06: return "4.0"
        case 0x07: return "4.1"
        case 0x08: return "4.2"
        case 0x09: return "5.0"
        case 0x0A: return "5.1"
        case 0x0B: return "5.2"
        case 0x0C: return "5.3"
        case 0x0D: return "5.4"
        case 0x0E: return "6.0"
        default: return hex2(rawValue)
        }
    }
}

/// Central_Clock_Accuracy of LE Connection Complete: the central's sleep clock accuracy.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.1.
public struct HCIClockAccuracy: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// 500 ppm.
    public static let ppm500 = HCIClockAccuracy(rawValue: 0x00)
    /// 250 ppm.
    public static let ppm250 = HCIClockAccuracy(rawValue: 0x01)
    /// 150 ppm.
    public static let ppm150 = HCIClockAccuracy(rawValue: 0x02)
    /// 100 ppm.
    public static let ppm100 = HCIClockAccuracy(rawValue: 0x03)
    /// 75 ppm.
    public static let ppm75 = HCIClockAccuracy(rawValue: 0x04)
    /// 50 ppm.
    public static let ppm50 = HCIClockAccuracy(rawValue: 0x05)
    /// 30 ppm.
    public static let ppm30 = HCIClockAccuracy(rawValue: 0x06)
    /// 20 ppm.
    public static let ppm20 = HCIClockAccuracy(rawValue: 0x07)

    public var description: String {
        switch rawValue {
        case 0x00: return "500 ppm"
        case 0x01: return "250 ppm"
        case 0x02: return "150 ppm"
        case 0x03: return "100 ppm"
        case 0x04: return "75 ppm"
        case 0x05: return "50 ppm"
        case 0x06: return "30 ppm"
        case 0x07: return "20 ppm"
        default: return hex2(rawValue)
        }
    }
}
