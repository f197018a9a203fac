/// Event_Mask of Set Event Mask: which events (other than Command Complete and Command Status, which are
/// never masked) the controller may send. Bit n enables one event; LE Meta (bit 61) gates all LE subevents,
/// which `HCILEEventMask` then selects.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.1.
public struct HCIEventMask: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 0: Inquiry Complete.
    public static let inquiryComplete = HCIEventMask(rawValue: 1 << 0)
    /// Bit 1: Inquiry Result.
    public static let inquiryResult = HCIEventMask(rawValue: 1 << 1)
    /// Bit 2: Connection Complete.
    public static let connectionComplete = HCIEventMask(rawValue: 1 << 2)
    /// Bit 3: Connection Request.
    public static let connectionRequest = HCIEventMask(rawValue: 1 << 3)
    /// Bit 4: Disconnection Complete.
    public static let disconnectionComplete = HCIEventMask(rawValue: 1 << 4)
    /// Bit 5: Authentication Complete.
    public static let authenticationComplete = HCIEventMask(rawValue: 1 << 5)
    /// Bit 6: Remote Name Request Complete.
    public static let remoteNameRequestComplete = HCIEventMask(rawValue: 1 << 6)
    /// Bit 7: Encryption Change [v1].
    public static let encryptionChange = HCIEventMask(rawValue: 1 << 7)
    /// Bit 8: Change Connection Link Key Complete.
    public static let changeConnectionLinkKeyComplete = HCIEventMask(rawValue: 1 << 8)
    /// Bit 9: Link Key Type Changed.
    public static let linkKeyTypeChanged = HCIEventMask(rawValue: 1 << 9)
    /// Bit 10: Read Remote Supported Features Complete.
    public static let readRemoteSupportedFeaturesComplete = HCIEventMask(rawValue: 1 << 10)
    /// Bit 11: Read Remote Version Information Complete.
    public static let readRemoteVersionInformationComplete = HCIEventMask(rawValue: 1 << 11)
    /// Bit 12: QoS Setup Complete.
    public static let qosSetupComplete = HCIEventMask(rawValue: 1 << 12)
    /// Bit 15: Hardware Error.
    public static let hardwareError = HCIEventMask(rawValue: 1 << 15)
    /// Bit 16: Flush Occurred.
    public static let flushOccurred = HCIEventMask(rawValue: 1 << 16)
    /// Bit 17: Role Change.
    public static let roleChange = HCIEventMask(rawValue: 1 << 17)
    /// Bit 19: Mode Change.
    public static let modeChange = HCIEventMask(rawValue: 1 << 19)
    /// Bit 20: Return Link Keys.
    public static let returnLinkKeys = HCIEventMask(rawValue: 1 << 20)
    /// Bit 21: PIN Code Request.
    public static let pinCodeRequest = HCIEventMask(rawValue: 1 << 21)
    /// Bit 22: Link Key Request.
    public static let linkKeyRequest = HCIEventMask(rawValue: 1 << 22)
    /// Bit 23: Link Key Notification.
    public static let linkKeyNotification = HCIEventMask(rawValue: 1 << 23)
    /// Bit 24: Loopback Command.
    public static let loopbackCommand = HCIEventMask(rawValue: 1 << 24)
    /// Bit 25: Data Buffer Overflow.
    public static let dataBufferOverflow = HCIEventMask(rawValue: 1 << 25)
    /// Bit 26: Max Slots Change.
    public static let maxSlotsChange = HCIEventMask(rawValue: 1 << 26)
    /// Bit 27: Read Clock Offset Complete.
    public static let readClockOffsetComplete = HCIEventMask(rawValue: 1 << 27)
    /// Bit 28: Connection Packet Type Changed.
    public static let connectionPacketTypeChanged = HCIEventMask(rawValue: 1 << 28)
    /// Bit 29: QoS Violation.
    public static let qosViolation = HCIEventMask(rawValue: 1 << 29)
    /// Bit 31: Page Scan Repetition Mode Change.
    public static let pageScanRepetitionModeChange = HCIEventMask(rawValue: 1 << 31)
    /// Bit 32: Flow Specification Complete.
    public static let flowSpecificationComplete = HCIEventMask(rawValue: 1 << 32)
    /// Bit 33: Inquiry Result with RSSI.
    public static let inquiryResultWithRSSI = HCIEventMask(rawValue: 1 << 33)
    /// Bit 34: Read Remote Extended Features Complete.
    public static let readRemoteExtendedFeaturesComplete = HCIEventMask(rawValue: 1 << 34)
    /// Bit 43: Synchronous Connection Complete.
    public static let synchronousConnectionComplete = HCIEventMask(rawValue: 1 << 43)
    /// Bit 44: Synchronous Connection Changed.
    public static let synchronousConnectionChanged = HCIEventMask(rawValue: 1 << 44)
    /// Bit 45: Sniff Subrating.
    public static let sniffSubrating = HCIEventMask(rawValue: 1 << 45)
    /// Bit 46: Extended Inquiry Result.
    public static let extendedInquiryResult = HCIEventMask(rawValue: 1 << 46)
    /// Bit 47: Encryption Key Refresh Complete.
    public static let encryptionKeyRefreshComplete = HCIEventMask(rawValue: 1 << 47)
    /// Bit 48: IO Capability Request.
    public static let ioCapabilityRequest = HCIEventMask(rawValue: 1 << 48)
    /// Bit 49: IO Capability Response.
    public static let ioCapabilityResponse = HCIEventMask(rawValue: 1 << 49)
    /// Bit 50: User Confirmation Request.
    public static let userConfirmationRequest = HCIEventMask(rawValue: 1 << 50)
    /// Bit 51: User Passkey Request.
    public static let userPasskeyRequest = HCIEventMask(rawValue: 1 << 51)
    /// Bit 52: Remote OOB Data Request.
    public static let remoteOOBDataRequest = HCIEventMask(rawValue: 1 << 52)
    /// Bit 53: Simple Pairing Complete.
    public static let simplePairingComplete = HCIEventMask(rawValue: 1 << 53)
    /// Bit 55: Link Supervision Timeout Changed.
    public static let linkSupervisionTimeoutChanged = HCIEventMask(rawValue: 1 << 55)
    /// Bit 56: Enhanced Flush Complete.
    public static let enhancedFlushComplete = HCIEventMask(rawValue: 1 << 56)
    /// Bit 58: User Passkey Notification.
    public static let userPasskeyNotification = HCIEventMask(rawValue: 1 << 58)
    /// Bit 59: Keypress Notification.
    public static let keypressNotification = HCIEventMask(rawValue: 1 << 59)
    /// Bit 60: Remote Host Supported Features Notification.
    public static let remoteHostSupportedFeaturesNotification = HCIEventMask(rawValue: 1 << 60)
    /// Bit 61: LE Meta.
    public static let leMeta = HCIEventMask(rawValue: 1 << 61)

    /// The value the controller uses after Reset: 0x00001FFFFFFFFFFF.
    public static let controllerDefault = HCIEventMask(rawValue: 0x0000_1FFF_FFFF_FFFF)
    /// What an LE-only host needs: disconnections, encryption, remote version, errors, key refresh, LE Meta.
    public static let leHost: HCIEventMask = [
        .disconnectionComplete, .encryptionChange, .readRemoteVersionInformationComplete, .hardwareError,
        .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta,
    ]

    private static let names: [(bit: Int, name: String)] = [
        (0, "inquiryComplete"),
        (1, "inquiryResult"),
        (2, "connectionComplete"),
        (3, "connectionRequest"),
        (4, "disconnectionComplete"),
        (5, "authenticationComplete"),
        (6, "remoteNameRequestComplete"),
        (7, "encryptionChange"),
        (8, "changeConnectionLinkKeyComplete"),
        (9, "linkKeyTypeChanged"),
        (10, "readRemoteSupportedFeaturesComplete"),
        (11, "readRemoteVersionInformationComplete"),
        (12, "qosSetupComplete"),
        (15, "hardwareError"),
        (16, "flushOccurred"),
        (17, "roleChange"),
        (19, "modeChange"),
        (20, "returnLinkKeys"),
        (21, "pinCodeRequest"),
        (22, "linkKeyRequest"),
        (23, "linkKeyNotification"),
        (24, "loopbackCommand"),
        (25, "dataBufferOverflow"),
        (26, "maxSlotsChange"),
        (27, "readClockOffsetComplete"),
        (28, "connectionPacketTypeChanged"),
        (29, "qosViolation"),
        (31, "pageScanRepetitionModeChange"),
        (32, "flowSpecificationComplete"),
        (33, "inquiryResultWithRSSI"),
        (34, "readRemoteExtendedFeaturesComplete"),
        (43, "synchronousConnectionComplete"),
        (44, "synchronousConnectionChanged"),
        (45, "sniffSubrating"),
        (46, "extendedInquiryResult"),
        (47, "encryptionKeyRefreshComplete"),
        (48, "ioCapabilityRequest"),
        (49, "ioCapabilityResponse"),
        (50, "userConfirmationRequest"),
        (51, "userPasskeyRequest"),
        (52, "remoteOOBDataRequest"),
        (53, "simplePairingComplete"),
        (55, "linkSupervisionTimeoutChanged"),
        (56, "enhancedFlushComplete"),
        (58, "userPasskeyNotification"),
        (59, "keypressNotification"),
        (60, "remoteHostSupportedFeaturesNotification"),
        (61, "leMeta"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// Event_Mask_Page_2 of Set Event Mask Page 2: further events, default all disabled.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.69.
public struct HCIEventMaskPage2: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 8: Number Of Completed Data Blocks.
    public static let numberOfCompletedDataBlocks = HCIEventMaskPage2(rawValue: 1 << 8)
    /// Bit 14: Triggered Clock Capture.
    public static let triggeredClockCapture = HCIEventMaskPage2(rawValue: 1 << 14)
    /// Bit 15: Synchronization Train Complete.
    public static let synchronizationTrainComplete = HCIEventMaskPage2(rawValue: 1 << 15)
    /// Bit 23: Authenticated Payload Timeout Expired.
    public static let authenticatedPayloadTimeoutExpired = HCIEventMaskPage2(rawValue: 1 << 23)
    /// Bit 24: SAM Status Change.
    public static let samStatusChange = HCIEventMaskPage2(rawValue: 1 << 24)
    /// Bit 25: Encryption Change [v2].
    public static let encryptionChangeV2 = HCIEventMaskPage2(rawValue: 1 << 25)

    private static let names: [(bit: Int, name: String)] = [
        (8, "numberOfCompletedDataBlocks"),
        (14, "triggeredClockCapture"),
        (15, "synchronizationTrainComplete"),
        (23, "authenticatedPayloadTimeoutExpired"),
        (24, "samStatusChange"),
        (25, "encryptionChangeV2"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// LE_Event_Mask of LE Set Event Mask: which LE Meta subevents the controller may send. Bit n-1 enables
/// subevent n.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.1.
public struct HCILEEventMask: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 0: LE Connection Complete.
    public static let connectionComplete = HCILEEventMask(rawValue: 1 << 0)
    /// Bit 1: LE Advertising Report.
    public static let advertisingReport = HCILEEventMask(rawValue: 1 << 1)
    /// Bit 2: LE Connection Update Complete.
    public static let connectionUpdateComplete = HCILEEventMask(rawValue: 1 << 2)
    /// Bit 3: LE Read Remote Features Complete.
    public static let readRemoteFeaturesComplete = HCILEEventMask(rawValue: 1 << 3)
    /// Bit 4: LE Long Term Key Request.
    public static let longTermKeyRequest = HCILEEventMask(rawValue: 1 << 4)
    /// Bit 5: LE Remote Connection Parameter Request.
    public static let remoteConnectionParameterRequest = HCILEEventMask(rawValue: 1 << 5)
    /// Bit 6: LE Data Length Change.
    public static let dataLengthChange = HCILEEventMask(rawValue: 1 << 6)
    /// Bit 7: LE Read Local P-256 Public Key Complete.
    public static let readLocalP256PublicKeyComplete = HCILEEventMask(rawValue: 1 << 7)
    /// Bit 8: LE Generate DHKey Complete.
    public static let generateDHKeyComplete = HCILEEventMask(rawValue: 1 << 8)
    /// Bit 9: LE Enhanced Connection Complete.
    public static let enhancedConnectionComplete = HCILEEventMask(rawValue: 1 << 9)
    /// Bit 10: LE Directed Advertising Report.
    public static let directedAdvertisingReport = HCILEEventMask(rawValue: 1 << 10)
    /// Bit 11: LE PHY Update Complete.
    public static let phyUpdateComplete = HCILEEventMask(rawValue: 1 << 11)
    /// Bit 12: LE Extended Advertising Report.
    public static let extendedAdvertisingReport = HCILEEventMask(rawValue: 1 << 12)
    /// Bit 16: LE Scan Timeout.
    public static let scanTimeout = HCILEEventMask(rawValue: 1 << 16)
    /// Bit 17: LE Advertising Set Terminated.
    public static let advertisingSetTerminated = HCILEEventMask(rawValue: 1 << 17)
    /// Bit 18: LE Scan Request Received.
    public static let scanRequestReceived = HCILEEventMask(rawValue: 1 << 18)
    /// Bit 19: LE Channel Selection Algorithm.
    public static let channelSelectionAlgorithm = HCILEEventMask(rawValue: 1 << 19)

    /// The value the controller uses after Reset: 0x000000000000001F.
    public static let controllerDefault = HCILEEventMask(rawValue: 0x1F)

    /// The bit that enables `subevent` (bit n-1 for subevent n).
    public init(subevent: HCILEMetaSubevent) {
        self.rawValue = subevent.rawValue == 0 || subevent.rawValue > 64 ? 0 : 1 << UInt64(subevent.rawValue - 1)
    }

    private static let names: [(bit: Int, name: String)] = [
        (0, "connectionComplete"),
        (1, "advertisingReport"),
        (2, "connectionUpdateComplete"),
        (3, "readRemoteFeaturesComplete"),
        (4, "longTermKeyRequest"),
        (5, "remoteConnectionParameterRequest"),
        (6, "dataLengthChange"),
        (7, "readLocalP256PublicKeyComplete"),
        (8, "generateDHKeyComplete"),
        (9, "enhancedConnectionComplete"),
        (10, "directedAdvertisingReport"),
        (11, "phyUpdateComplete"),
        (12, "extendedAdvertisingReport"),
        (16, "scanTimeout"),
        (17, "advertisingSetTerminated"),
        (18, "scanRequestReceived"),
        (19, "channelSelectionAlgorithm"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// The LE features a controller (or, through LE Read Remote Features, a peer's link layer) supports: the
/// 64-bit FeatureSet, bit n of octet k being bit 8k+n.
///
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.6 (Feature support); Vol 4, Part E, 7.8.3.
public struct LEFeatures: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 0: LE Encryption.
    public static let leEncryption = LEFeatures(rawValue: 1 << 0)
    /// Bit 1: Connection Parameters Request procedure.
    public static let connectionParametersRequest = LEFeatures(rawValue: 1 << 1)
    /// Bit 2: Extended Reject Indication.
    public static let extendedRejectIndication = LEFeatures(rawValue: 1 << 2)
    /// Bit 3: Peripheral-initiated Features Exchange.
    public static let peripheralInitiatedFeaturesExchange = LEFeatures(rawValue: 1 << 3)
    /// Bit 4: LE Ping.
    public static let lePing = LEFeatures(rawValue: 1 << 4)
    /// Bit 5: LE Data Packet Length Extension.
    public static let dataPacketLengthExtension = LEFeatures(rawValue: 1 << 5)
    /// Bit 6: LL Privacy.
    public static let llPrivacy = LEFeatures(rawValue: 1 << 6)
    /// Bit 7: Extended Scanning Filter Policies.
    public static let extendedScanningFilterPolicies = LEFeatures(rawValue: 1 << 7)
    /// Bit 8: LE 2M PHY.
    public static let le2MPHY = LEFeatures(rawValue: 1 << 8)
    /// Bit 9: Stable Modulation Index - Transmitter.
    public static let stableModulationIndexTransmitter = LEFeatures(rawValue: 1 << 9)
    /// Bit 10: Stable Modulation Index - Receiver.
    public static let stableModulationIndexReceiver = LEFeatures(rawValue: 1 << 10)
    /// Bit 11: LE Coded PHY.
    public static let leCodedPHY = LEFeatures(rawValue: 1 << 11)
    /// Bit 12: LE Extended Advertising.
    public static let extendedAdvertising = LEFeatures(rawValue: 1 << 12)
    /// Bit 13: LE Periodic Advertising.
    public static let periodicAdvertising = LEFeatures(rawValue: 1 << 13)
    /// Bit 14: Channel Selection Algorithm #2.
    public static let channelSelectionAlgorithm2 = LEFeatures(rawValue: 1 << 14)
    /// Bit 15: LE Power Class 1.
    public static let lePowerClass1 = LEFeatures(rawValue: 1 << 15)
    /// Bit 16: Minimum Number of Used Channels procedure.
    public static let minimumNumberOfUsedChannels = LEFeatures(rawValue: 1 << 16)
    /// Bit 17: Connection CTE Request.
    public static let connectionCTERequest = LEFeatures(rawValue: 1 << 17)
    /// Bit 18: Connection CTE Response.
    public static let connectionCTEResponse = LEFeatures(rawValue: 1 << 18)
    /// Bit 19: Connectionless CTE Transmitter.
    public static let connectionlessCTETransmitter = LEFeatures(rawValue: 1 << 19)
    /// Bit 20: Connectionless CTE Receiver.
    public static let connectionlessCTEReceiver = LEFeatures(rawValue: 1 << 20)
    /// Bit 21: Antenna Switching During CTE Transmission (AoD).
    public static let antennaSwitchingDuringCTETransmission = LEFeatures(rawValue: 1 << 21)
    /// Bit 22: Antenna Switching During CTE Reception (AoA).
    public static let antennaSwitchingDuringCTEReception = LEFeatures(rawValue: 1 << 22)
    /// Bit 23: Receiving Constant Tone Extensions.
    public static let receivingConstantToneExtensions = LEFeatures(rawValue: 1 << 23)
    /// Bit 24: Periodic Advertising Sync Transfer - Sender.
    public static let periodicAdvertisingSyncTransferSender = LEFeatures(rawValue: 1 << 24)
    /// Bit 25: Periodic Advertising Sync Transfer - Recipient.
    public static let periodicAdvertisingSyncTransferRecipient = LEFeatures(rawValue: 1 << 25)
    /// Bit 26: Sleep Clock Accuracy Updates.
    public static let sleepClockAccuracyUpdates = LEFeatures(rawValue: 1 << 26)
    /// Bit 27: Remote Public Key Validation.
    public static let remotePublicKeyValidation = LEFeatures(rawValue: 1 << 27)
    /// Bit 28: Connected Isochronous Stream - Central.
    public static let connectedIsochronousStreamCentral = LEFeatures(rawValue: 1 << 28)
    /// Bit 29: Connected Isochronous Stream - Peripheral.
    public static let connectedIsochronousStreamPeripheral = LEFeatures(rawValue: 1 << 29)
    /// Bit 30: Isochronous Broadcaster.
    public static let isochronousBroadcaster = LEFeatures(rawValue: 1 << 30)
    /// Bit 31: Synchronized Receiver.
    public static let synchronizedReceiver = LEFeatures(rawValue: 1 << 31)
    /// Bit 32: Connected Isochronous Stream (Host Support).
    public static let connectedIsochronousStreamHostSupport = LEFeatures(rawValue: 1 << 32)
    /// Bit 33: LE Power Control Request.
    public static let lePowerControlRequest = LEFeatures(rawValue: 1 << 33)
    /// Bit 34: LE Power Control Request (second bit, always equal to bit 33).
    public static let lePowerControlRequest2 = LEFeatures(rawValue: 1 << 34)
    /// Bit 35: LE Path Loss Monitoring.
    public static let lePathLossMonitoring = LEFeatures(rawValue: 1 << 35)
    /// Bit 36: Periodic Advertising ADI support.
    public static let periodicAdvertisingADISupport = LEFeatures(rawValue: 1 << 36)
    /// Bit 37: Connection Subrating.
    public static let connectionSubrating = LEFeatures(rawValue: 1 << 37)
    /// Bit 38: Connection Subrating (Host Support).
    public static let connectionSubratingHostSupport = LEFeatures(rawValue: 1 << 38)
    /// Bit 39: Channel Classification.
    public static let channelClassification = LEFeatures(rawValue: 1 << 39)
    /// Bit 40: Advertising Coding Selection.
    public static let advertisingCodingSelection = LEFeatures(rawValue: 1 << 40)
    /// Bit 41: Advertising Coding Selection (Host Support).
    public static let advertisingCodingSelectionHostSupport = LEFeatures(rawValue: 1 << 41)
    /// Bit 43: Periodic Advertising with Responses - Advertiser.
    public static let periodicAdvertisingWithResponsesAdvertiser = LEFeatures(rawValue: 1 << 43)
    /// Bit 44: Periodic Advertising with Responses - Scanner.
    public static let periodicAdvertisingWithResponsesScanner = LEFeatures(rawValue: 1 << 44)

    private static let names: [(bit: Int, name: String)] = [
        (0, "leEncryption"),
        (1, "connectionParametersRequest"),
        (2, "extendedRejectIndication"),
        (3, "peripheralInitiatedFeaturesExchange"),
        (4, "lePing"),
        (5, "dataPacketLengthExtension"),
        (6, "llPrivacy"),
        (7, "extendedScanningFilterPolicies"),
        (8, "le2MPHY"),
        (9, "stableModulationIndexTransmitter"),
        (10, "stableModulationIndexReceiver"),
        (11, "leCodedPHY"),
        (12, "extendedAdvertising"),
        (13, "periodicAdvertising"),
        (14, "channelSelectionAlgorithm2"),
        (15, "lePowerClass1"),
        (16, "minimumNumberOfUsedChannels"),
        (17, "connectionCTERequest"),
        (18, "connectionCTEResponse"),
        (19, "connectionlessCTETransmitter"),
        (20, "connectionlessCTEReceiver"),
        (21, "antennaSwitchingDuringCTETransmission"),
        (22, "antennaSwitchingDuringCTEReception"),
        (23, "receivingConstantToneExtensions"),
        (24, "periodicAdvertisingSyncTransferSender"),
        (25, "periodicAdvertisingSyncTransferRecipient"),
        (26, "sleepClockAccuracyUpdates"),
        (27, "remotePublicKeyValidation"),
        (28, "connectedIsochronousStreamCentral"),
        (29, "connectedIsochronousStreamPeripheral"),
        (30, "isochronousBroadcaster"),
        (31, "synchronizedReceiver"),
        (32, "connectedIsochronousStreamHostSupport"),
        (33, "lePowerControlRequest"),
        (34, "lePowerControlRequest2"),
        (35, "lePathLossMonitoring"),
        (36, "periodicAdvertisingADISupport"),
        (37, "connectionSubrating"),
        (38, "connectionSubratingHostSupport"),
        (39, "channelClassification"),
        (40, "advertisingCodingSelection"),
        (41, "advertisingCodingSelectionHostSupport"),
        (43, "periodicAdvertisingWithResponsesAdvertiser"),
        (44, "periodicAdvertisingWithResponsesScanner"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// LMP_Features of Read Local Supported Features (page 0): bit n of octet k is bit 8k+n. An LE-only controller
/// sets `leSupportedController` and `brEdrNotSupported`.
///
/// - SeeAlso: Core Spec 5.4, Vol 2, Part C, 3.3 (Feature mask definition); Vol 4, Part E, 7.4.3.
public struct HCILMPFeatures: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 2: Encryption.
    public static let encryption = HCILMPFeatures(rawValue: 1 << 2)
    /// Bit 37: BR/EDR Not Supported.
    public static let brEdrNotSupported = HCILMPFeatures(rawValue: 1 << 37)
    /// Bit 38: LE Supported (Controller).
    public static let leSupportedController = HCILMPFeatures(rawValue: 1 << 38)
    /// Bit 41: Simultaneous LE and BR/EDR to Same Device Capable (Controller).
    public static let simultaneousLEAndBREDRController = HCILMPFeatures(rawValue: 1 << 41)
    /// Bit 51: Secure Simple Pairing (Controller).
    public static let secureSimplePairingController = HCILMPFeatures(rawValue: 1 << 51)

    private static let names: [(bit: Int, name: String)] = [
        (2, "encryption"),
        (37, "brEdrNotSupported"),
        (38, "leSupportedController"),
        (41, "simultaneousLEAndBREDRController"),
        (51, "secureSimplePairingController"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// Advertising_Channel_Map of LE Set Advertising Parameters: the primary advertising channels to use.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.5.
public struct HCIAdvertisingChannelMap: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bit 0: Channel 37.
    public static let channel37 = HCIAdvertisingChannelMap(rawValue: 1 << 0)
    /// Bit 1: Channel 38.
    public static let channel38 = HCIAdvertisingChannelMap(rawValue: 1 << 1)
    /// Bit 2: Channel 39.
    public static let channel39 = HCIAdvertisingChannelMap(rawValue: 1 << 2)

    /// All three channels (the default, 0x07).
    public static let all: HCIAdvertisingChannelMap = [.channel37, .channel38, .channel39]

    private static let names: [(bit: Int, name: String)] = [
        (0, "channel37"),
        (1, "channel38"),
        (2, "channel39"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// TX_PHYs / RX_PHYs of LE Set Default PHY and LE Set PHY: the PHYs the host prefers.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.48.
public struct HCIPHYPreferences: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bit 0: LE 1M.
    public static let le1M = HCIPHYPreferences(rawValue: 1 << 0)
    /// Bit 1: LE 2M.
    public static let le2M = HCIPHYPreferences(rawValue: 1 << 1)
    /// Bit 2: LE Coded.
    public static let leCoded = HCIPHYPreferences(rawValue: 1 << 2)

    private static let names: [(bit: Int, name: String)] = [
        (0, "le1M"),
        (1, "le2M"),
        (2, "leCoded"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}

/// All_PHYs of LE Set Default PHY and LE Set PHY: directions for which the host has no preference (then the
/// matching TX_PHYs or RX_PHYs is ignored).
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.48.
public struct HCIAllPHYsPreference: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bit 0: No preference among transmitter PHYs.
    public static let noTransmitPreference = HCIAllPHYsPreference(rawValue: 1 << 0)
    /// Bit 1: No preference among receiver PHYs.
    public static let noReceivePreference = HCIAllPHYsPreference(rawValue: 1 << 1)

    private static let names: [(bit: Int, name: String)] = [
        (0, "noTransmitPreference"),
        (1, "noReceivePreference"),
    ]

    public var description: String {
        var parts: [String] = []
        var rest = rawValue
        for (bit, name) in Self.names where rawValue & (1 << bit) != 0 {
            parts.append(name)
            rest &= ~(1 << bit)
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return "[" + parts.joined(separator: ", ") + "]"
    }
}
