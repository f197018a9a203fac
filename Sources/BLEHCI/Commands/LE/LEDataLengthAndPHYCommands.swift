import BLECore
import NIOCore

/// HCI_LE_Set_Data_Length: suggest the largest payload and air time for a connection's transmissions. The
/// link layer negotiates; LE Data Length Change reports the outcome.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.33.
public struct HCILESetDataLength: HCISyncCommand {
    public typealias ReturnParameters = HCIConnectionHandleReturn
    public static let opcode = HCIOpcode.leSetDataLength

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// TX_Octets: preferred maximum payload octets per PDU, 0x001B...0x00FB (27...251).
    public var txOctets: UInt16
    /// TX_Time: preferred maximum transmission time, microseconds, 0x0148...0x4290 (328...17040).
    public var txTime: UInt16

    public init(handle: ConnectionHandle, txOctets: UInt16, txTime: UInt16) {
        self.handle = handle
        self.txOctets = txOctets
        self.txTime = txTime
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        txOctets = try parameters.hciRead(UInt16.self, "TX_Octets")
        txTime = try parameters.hciRead(UInt16.self, "TX_Time")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(txOctets, endianness: .little)
        buffer.writeInteger(txTime, endianness: .little)
    }
}

/// HCI_LE_Read_Suggested_Default_Data_Length: the host's suggested TX values for new connections.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.34.
public struct HCILEReadSuggestedDefaultDataLength: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadSuggestedDefaultDataLength

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// Suggested_Max_TX_Octets: 0x001B...0x00FB.
        public var suggestedMaxTxOctets: UInt16
        /// Suggested_Max_TX_Time: microseconds, 0x0148...0x4290.
        public var suggestedMaxTxTime: UInt16

        public init(suggestedMaxTxOctets: UInt16, suggestedMaxTxTime: UInt16) {
            self.suggestedMaxTxOctets = suggestedMaxTxOctets
            self.suggestedMaxTxTime = suggestedMaxTxTime
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            suggestedMaxTxOctets = try buffer.hciRead(UInt16.self, "Suggested_Max_TX_Octets")
            suggestedMaxTxTime = try buffer.hciRead(UInt16.self, "Suggested_Max_TX_Time")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(suggestedMaxTxOctets, endianness: .little)
            buffer.writeInteger(suggestedMaxTxTime, endianness: .little)
        }
    }
}

/// HCI_LE_Write_Suggested_Default_Data_Length: set the TX values the controller uses for new connections.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.35.
public struct HCILEWriteSuggestedDefaultDataLength: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leWriteSuggestedDefaultDataLength

    /// Suggested_Max_TX_Octets: 0x001B...0x00FB.
    public var suggestedMaxTxOctets: UInt16
    /// Suggested_Max_TX_Time: microseconds, 0x0148...0x4290.
    public var suggestedMaxTxTime: UInt16

    public init(suggestedMaxTxOctets: UInt16, suggestedMaxTxTime: UInt16) {
        self.suggestedMaxTxOctets = suggestedMaxTxOctets
        self.suggestedMaxTxTime = suggestedMaxTxTime
    }

    public init(parameters: inout ByteBuffer) throws {
        suggestedMaxTxOctets = try parameters.hciRead(UInt16.self, "Suggested_Max_TX_Octets")
        suggestedMaxTxTime = try parameters.hciRead(UInt16.self, "Suggested_Max_TX_Time")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(suggestedMaxTxOctets, endianness: .little)
        buffer.writeInteger(suggestedMaxTxTime, endianness: .little)
    }
}

/// HCI_LE_Read_Maximum_Data_Length: the largest payloads and times the controller supports.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.46.
public struct HCILEReadMaximumDataLength: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadMaximumDataLength

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// Supported_Max_TX_Octets: 0x001B...0x00FB.
        public var supportedMaxTxOctets: UInt16
        /// Supported_Max_TX_Time: microseconds, 0x0148...0x4290.
        public var supportedMaxTxTime: UInt16
        /// Supported_Max_RX_Octets: 0x001B...0x00FB.
        public var supportedMaxRxOctets: UInt16
        /// Supported_Max_RX_Time: microseconds, 0x0148...0x4290.
        public var supportedMaxRxTime: UInt16

        public init(
            supportedMaxTxOctets: UInt16, supportedMaxTxTime: UInt16,
            supportedMaxRxOctets: UInt16, supportedMaxRxTime: UInt16
        ) {
            self.supportedMaxTxOctets = supportedMaxTxOctets
            self.supportedMaxTxTime = supportedMaxTxTime
            self.supportedMaxRxOctets = supportedMaxRxOctets
            self.supportedMaxRxTime = supportedMaxRxTime
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            supportedMaxTxOctets = try buffer.hciRead(UInt16.self, "Supported_Max_TX_Octets")
            supportedMaxTxTime = try buffer.hciRead(UInt16.self, "Supported_Max_TX_Time")
            supportedMaxRxOctets = try buffer.hciRead(UInt16.self, "Supported_Max_RX_Octets")
            supportedMaxRxTime = try buffer.hciRead(UInt16.self, "Supported_Max_RX_Time")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(supportedMaxTxOctets, endianness: .little)
            buffer.writeInteger(supportedMaxTxTime, endianness: .little)
            buffer.writeInteger(supportedMaxRxOctets, endianness: .little)
            buffer.writeInteger(supportedMaxRxTime, endianness: .little)
        }
    }
}

/// HCI_LE_Read_PHY: the PHYs a connection currently uses.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.47.
public struct HCILEReadPHY: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadPHY

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle

    public init(handle: ConnectionHandle) { self.handle = handle }

    public init(parameters: inout ByteBuffer) throws { handle = try parameters.hciReadHandle() }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
    }

    public struct ReturnParameters: HCIReturnParameters {
        public var handle: ConnectionHandle
        /// TX_PHY.
        public var txPHY: HCIPHY
        /// RX_PHY.
        public var rxPHY: HCIPHY

        public init(handle: ConnectionHandle, txPHY: HCIPHY, rxPHY: HCIPHY) {
            self.handle = handle
            self.txPHY = txPHY
            self.rxPHY = rxPHY
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            handle = try buffer.hciReadHandle()
            txPHY = HCIPHY(rawValue: try buffer.hciRead(UInt8.self, "TX_PHY"))
            rxPHY = HCIPHY(rawValue: try buffer.hciRead(UInt8.self, "RX_PHY"))
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(txPHY.rawValue)
            buffer.writeInteger(rxPHY.rawValue)
        }
    }
}

/// HCI_LE_Set_Default_PHY: the PHYs the host prefers for new connections.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.48.
public struct HCILESetDefaultPHY: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetDefaultPHY

    /// All_PHYs: directions without a preference.
    public var allPHYs: HCIAllPHYsPreference
    /// TX_PHYs: preferred transmitter PHYs (ignored if `allPHYs` has `.noTransmitPreference`).
    public var txPHYs: HCIPHYPreferences
    /// RX_PHYs: preferred receiver PHYs (ignored if `allPHYs` has `.noReceivePreference`).
    public var rxPHYs: HCIPHYPreferences

    public init(allPHYs: HCIAllPHYsPreference = [], txPHYs: HCIPHYPreferences, rxPHYs: HCIPHYPreferences) {
        self.allPHYs = allPHYs
        self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs
    }

    public init(parameters: inout ByteBuffer) throws {
        allPHYs = HCIAllPHYsPreference(rawValue: try parameters.hciRead(UInt8.self, "All_PHYs"))
        txPHYs = HCIPHYPreferences(rawValue: try parameters.hciRead(UInt8.self, "TX_PHYs"))
        rxPHYs = HCIPHYPreferences(rawValue: try parameters.hciRead(UInt8.self, "RX_PHYs"))
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(allPHYs.rawValue)
        buffer.writeInteger(txPHYs.rawValue)
        buffer.writeInteger(rxPHYs.rawValue)
    }
}

/// HCI_LE_Set_PHY: ask for a PHY change on a connection. Acknowledged by Command Status; LE PHY Update
/// Complete follows.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.49.
public struct HCILESetPHY: HCIAsyncCommand {
    public static let opcode = HCIOpcode.leSetPHY

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// All_PHYs: directions without a preference.
    public var allPHYs: HCIAllPHYsPreference
    /// TX_PHYs: preferred transmitter PHYs.
    public var txPHYs: HCIPHYPreferences
    /// RX_PHYs: preferred receiver PHYs.
    public var rxPHYs: HCIPHYPreferences
    /// PHY_Options: for LE Coded, 0 no preference, 1 prefers S=2, 2 prefers S=8 (bits 0-1).
    public var phyOptions: UInt16

    public init(
        handle: ConnectionHandle, allPHYs: HCIAllPHYsPreference = [], txPHYs: HCIPHYPreferences,
        rxPHYs: HCIPHYPreferences, phyOptions: UInt16 = 0
    ) {
        self.handle = handle
        self.allPHYs = allPHYs
        self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs
        self.phyOptions = phyOptions
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        allPHYs = HCIAllPHYsPreference(rawValue: try parameters.hciRead(UInt8.self, "All_PHYs"))
        txPHYs = HCIPHYPreferences(rawValue: try parameters.hciRead(UInt8.self, "TX_PHYs"))
        rxPHYs = HCIPHYPreferences(rawValue: try parameters.hciRead(UInt8.self, "RX_PHYs"))
        phyOptions = try parameters.hciRead(UInt16.self, "PHY_Options")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(allPHYs.rawValue)
        buffer.writeInteger(txPHYs.rawValue)
        buffer.writeInteger(rxPHYs.rawValue)
        buffer.writeInteger(phyOptions, endianness: .little)
    }
}
