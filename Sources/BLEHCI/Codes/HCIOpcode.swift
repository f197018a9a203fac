/// A 16-bit HCI command opcode: a 6-bit OpCode Group Field (OGF) and a 10-bit OpCode Command Field (OCF),
/// sent little-endian. An open set: unknown and vendor opcodes (OGF 0x3F) round-trip.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.1 (HCI Command packet) and 7 (HCI commands and events).
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// From a group (OGF, 0x00...0x3F) and a command within it (OCF, 0x000...0x3FF); excess bits are dropped.
    public init(ogf: UInt8, ocf: UInt16) {
        self.rawValue = UInt16(ogf & 0x3F) << 10 | (ocf & 0x03FF)
    }

    /// The OpCode Group Field: 0x01 link control, 0x03 controller and baseband, 0x04 informational,
    /// 0x05 status, 0x08 LE controller, 0x3F vendor specific.
    public var ogf: UInt8 { UInt8(rawValue >> 10) }
    /// The OpCode Command Field.
    public var ocf: UInt16 { rawValue & 0x03FF }

    public static func < (a: HCIOpcode, b: HCIOpcode) -> Bool { a.rawValue < b.rawValue }

    /// No Operation (Core Spec 5.4, Vol 4, Part E, 5.4.1).
    public static let nop = HCIOpcode(rawValue: 0x0000)
    /// HCI_Disconnect (Core Spec 5.4, Vol 4, Part E, 7.1.6).
    public static let disconnect = HCIOpcode(rawValue: 0x0406)
    /// HCI_Read_Remote_Version_Information (Core Spec 5.4, Vol 4, Part E, 7.1.23).
    public static let readRemoteVersionInformation = HCIOpcode(rawValue: 0x041D)
    /// HCI_Set_Event_Mask (Core Spec 5.4, Vol 4, Part E, 7.3.1).
    public static let setEventMask = HCIOpcode(rawValue: 0x0C01)
    /// HCI_Reset (Core Spec 5.4, Vol 4, Part E, 7.3.2).
    public static let reset = HCIOpcode(rawValue: 0x0C03)
    /// HCI_Set_Event_Mask_Page_2 (Core Spec 5.4, Vol 4, Part E, 7.3.69).
    public static let setEventMaskPage2 = HCIOpcode(rawValue: 0x0C63)
    /// HCI_Write_LE_Host_Support (Core Spec 5.4, Vol 4, Part E, 7.3.79).
    public static let writeLEHostSupport = HCIOpcode(rawValue: 0x0C6D)
    /// HCI_Read_Local_Version_Information (Core Spec 5.4, Vol 4, Part E, 7.4.1).
    public static let readLocalVersionInformation = HCIOpcode(rawValue: 0x1001)
    /// HCI_Read_Local_Supported_Commands (Core Spec 5.4, Vol 4, Part E, 7.4.2).
    public static let readLocalSupportedCommands = HCIOpcode(rawValue: 0x1002)
    /// HCI_Read_Local_Supported_Features (Core Spec 5.4, Vol 4, Part E, 7.4.3).
    public static let readLocalSupportedFeatures = HCIOpcode(rawValue: 0x1003)
    /// HCI_Read_Buffer_Size (Core Spec 5.4, Vol 4, Part E, 7.4.5).
    public static let readBufferSize = HCIOpcode(rawValue: 0x1005)
    /// HCI_Read_BD_ADDR (Core Spec 5.4, Vol 4, Part E, 7.4.6).
    public static let readBDADDR = HCIOpcode(rawValue: 0x1009)
    /// HCI_Read_RSSI (Core Spec 5.4, Vol 4, Part E, 7.5.4).
    public static let readRSSI = HCIOpcode(rawValue: 0x1405)
    /// HCI_LE_Set_Event_Mask (Core Spec 5.4, Vol 4, Part E, 7.8.1).
    public static let leSetEventMask = HCIOpcode(rawValue: 0x2001)
    /// HCI_LE_Read_Buffer_Size [v1] (Core Spec 5.4, Vol 4, Part E, 7.8.2).
    public static let leReadBufferSize = HCIOpcode(rawValue: 0x2002)
    /// HCI_LE_Read_Local_Supported_Features (Core Spec 5.4, Vol 4, Part E, 7.8.3).
    public static let leReadLocalSupportedFeatures = HCIOpcode(rawValue: 0x2003)
    /// HCI_LE_Set_Random_Address (Core Spec 5.4, Vol 4, Part E, 7.8.4).
    public static let leSetRandomAddress = HCIOpcode(rawValue: 0x2005)
    /// HCI_LE_Set_Advertising_Parameters (Core Spec 5.4, Vol 4, Part E, 7.8.5).
    public static let leSetAdvertisingParameters = HCIOpcode(rawValue: 0x2006)
    /// HCI_LE_Read_Advertising_Physical_Channel_Tx_Power (Core Spec 5.4, Vol 4, Part E, 7.8.6).
    public static let leReadAdvertisingPhysicalChannelTxPower = HCIOpcode(rawValue: 0x2007)
    /// HCI_LE_Set_Advertising_Data (Core Spec 5.4, Vol 4, Part E, 7.8.7).
    public static let leSetAdvertisingData = HCIOpcode(rawValue: 0x2008)
    /// HCI_LE_Set_Scan_Response_Data (Core Spec 5.4, Vol 4, Part E, 7.8.8).
    public static let leSetScanResponseData = HCIOpcode(rawValue: 0x2009)
    /// HCI_LE_Set_Advertising_Enable (Core Spec 5.4, Vol 4, Part E, 7.8.9).
    public static let leSetAdvertisingEnable = HCIOpcode(rawValue: 0x200A)
    /// HCI_LE_Set_Scan_Parameters (Core Spec 5.4, Vol 4, Part E, 7.8.10).
    public static let leSetScanParameters = HCIOpcode(rawValue: 0x200B)
    /// HCI_LE_Set_Scan_Enable (Core Spec 5.4, Vol 4, Part E, 7.8.11).
    public static let leSetScanEnable = HCIOpcode(rawValue: 0x200C)
    /// HCI_LE_Create_Connection (Core Spec 5.4, Vol 4, Part E, 7.8.12).
    public static let leCreateConnection = HCIOpcode(rawValue: 0x200D)
    /// HCI_LE_Create_Connection_Cancel (Core Spec 5.4, Vol 4, Part E, 7.8.13).
    public static let leCreateConnectionCancel = HCIOpcode(rawValue: 0x200E)
    /// HCI_LE_Read_Filter_Accept_List_Size (Core Spec 5.4, Vol 4, Part E, 7.8.14).
    public static let leReadFilterAcceptListSize = HCIOpcode(rawValue: 0x200F)
    /// HCI_LE_Clear_Filter_Accept_List (Core Spec 5.4, Vol 4, Part E, 7.8.15).
    public static let leClearFilterAcceptList = HCIOpcode(rawValue: 0x2010)
    /// HCI_LE_Add_Device_To_Filter_Accept_List (Core Spec 5.4, Vol 4, Part E, 7.8.16).
    public static let leAddDeviceToFilterAcceptList = HCIOpcode(rawValue: 0x2011)
    /// HCI_LE_Remove_Device_From_Filter_Accept_List (Core Spec 5.4, Vol 4, Part E, 7.8.17).
    public static let leRemoveDeviceFromFilterAcceptList = HCIOpcode(rawValue: 0x2012)
    /// HCI_LE_Connection_Update (Core Spec 5.4, Vol 4, Part E, 7.8.18).
    public static let leConnectionUpdate = HCIOpcode(rawValue: 0x2013)
    /// HCI_LE_Read_Remote_Features (Core Spec 5.4, Vol 4, Part E, 7.8.21).
    public static let leReadRemoteFeatures = HCIOpcode(rawValue: 0x2016)
    /// HCI_LE_Encrypt (Core Spec 5.4, Vol 4, Part E, 7.8.22).
    public static let leEncrypt = HCIOpcode(rawValue: 0x2017)
    /// HCI_LE_Rand (Core Spec 5.4, Vol 4, Part E, 7.8.23).
    public static let leRand = HCIOpcode(rawValue: 0x2018)
    /// HCI_LE_Enable_Encryption (Core Spec 5.4, Vol 4, Part E, 7.8.24).
    public static let leEnableEncryption = HCIOpcode(rawValue: 0x2019)
    /// HCI_LE_Long_Term_Key_Request_Reply (Core Spec 5.4, Vol 4, Part E, 7.8.25).
    public static let leLongTermKeyRequestReply = HCIOpcode(rawValue: 0x201A)
    /// HCI_LE_Long_Term_Key_Request_Negative_Reply (Core Spec 5.4, Vol 4, Part E, 7.8.26).
    public static let leLongTermKeyRequestNegativeReply = HCIOpcode(rawValue: 0x201B)
    /// HCI_LE_Read_Supported_States (Core Spec 5.4, Vol 4, Part E, 7.8.27).
    public static let leReadSupportedStates = HCIOpcode(rawValue: 0x201C)
    /// HCI_LE_Remote_Connection_Parameter_Request_Reply (Core Spec 5.4, Vol 4, Part E, 7.8.31).
    public static let leRemoteConnectionParameterRequestReply = HCIOpcode(rawValue: 0x2020)
    /// HCI_LE_Remote_Connection_Parameter_Request_Negative_Reply (Core Spec 5.4, Vol 4, Part E, 7.8.32).
    public static let leRemoteConnectionParameterRequestNegativeReply = HCIOpcode(rawValue: 0x2021)
    /// HCI_LE_Set_Data_Length (Core Spec 5.4, Vol 4, Part E, 7.8.33).
    public static let leSetDataLength = HCIOpcode(rawValue: 0x2022)
    /// HCI_LE_Read_Suggested_Default_Data_Length (Core Spec 5.4, Vol 4, Part E, 7.8.34).
    public static let leReadSuggestedDefaultDataLength = HCIOpcode(rawValue: 0x2023)
    /// HCI_LE_Write_Suggested_Default_Data_Length (Core Spec 5.4, Vol 4, Part E, 7.8.35).
    public static let leWriteSuggestedDefaultDataLength = HCIOpcode(rawValue: 0x2024)
    /// HCI_LE_Read_Maximum_Data_Length (Core Spec 5.4, Vol 4, Part E, 7.8.46).
    public static let leReadMaximumDataLength = HCIOpcode(rawValue: 0x202F)
    /// HCI_LE_Read_PHY (Core Spec 5.4, Vol 4, Part E, 7.8.47).
    public static let leReadPHY = HCIOpcode(rawValue: 0x2030)
    /// HCI_LE_Set_Default_PHY (Core Spec 5.4, Vol 4, Part E, 7.8.48).
    public static let leSetDefaultPHY = HCIOpcode(rawValue: 0x2031)
    /// HCI_LE_Set_PHY (Core Spec 5.4, Vol 4, Part E, 7.8.49).
    public static let leSetPHY = HCIOpcode(rawValue: 0x2032)
    /// HCI_LE_Read_Buffer_Size [v2] (Core Spec 5.4, Vol 4, Part E, 7.8.2).
    public static let leReadBufferSizeV2 = HCIOpcode(rawValue: 0x2060)

    /// The command's name as the Core Specification writes it, or `nil` for one this table does not name.
    public var name: String? {
        switch rawValue {
        case 0x0000: return "No Operation"
        case 0x0406: return "HCI_Disconnect"
        case 0x041D: return "HCI_Read_Remote_Version_Information"
        case 0x0C01: return "HCI_Set_Event_Mask"
        case 0x0C03: return "HCI_Reset"
        case 0x0C63: return "HCI_Set_Event_Mask_Page_2"
        case 0x0C6D: return "HCI_Write_LE_Host_Support"
        case 0x1001: return "HCI_Read_Local_Version_Information"
        case 0x1002: return "HCI_Read_Local_Supported_Commands"
        case 0x1003: return "HCI_Read_Local_Supported_Features"
        case 0x1005: return "HCI_Read_Buffer_Size"
        case 0x1009: return "HCI_Read_BD_ADDR"
        case 0x1405: return "HCI_Read_RSSI"
        case 0x2001: return "HCI_LE_Set_Event_Mask"
        case 0x2002: return "HCI_LE_Read_Buffer_Size [v1]"
        case 0x2003: return "HCI_LE_Read_Local_Supported_Features"
        case 0x2005: return "HCI_LE_Set_Random_Address"
        case 0x2006: return "HCI_LE_Set_Advertising_Parameters"
        case 0x2007: return "HCI_LE_Read_Advertising_Physical_Channel_Tx_Power"
        case 0x2008: return "HCI_LE_Set_Advertising_Data"
        case 0x2009: return "HCI_LE_Set_Scan_Response_Data"
        case 0x200A: return "HCI_LE_Set_Advertising_Enable"
        case 0x200B: return "HCI_LE_Set_Scan_Parameters"
        case 0x200C: return "HCI_LE_Set_Scan_Enable"
        case 0x200D: return "HCI_LE_Create_Connection"
        case 0x200E: return "HCI_LE_Create_Connection_Cancel"
        case 0x200F: return "HCI_LE_Read_Filter_Accept_List_Size"
        case 0x2010: return "HCI_LE_Clear_Filter_Accept_List"
        case 0x2011: return "HCI_LE_Add_Device_To_Filter_Accept_List"
        case 0x2012: return "HCI_LE_Remove_Device_From_Filter_Accept_List"
        case 0x2013: return "HCI_LE_Connection_Update"
        case 0x2016: return "HCI_LE_Read_Remote_Features"
        case 0x2017: return "HCI_LE_Encrypt"
        case 0x2018: return "HCI_LE_Rand"
        case 0x2019: return "HCI_LE_Enable_Encryption"
        case 0x201A: return "HCI_LE_Long_Term_Key_Request_Reply"
        case 0x201B: return "HCI_LE_Long_Term_Key_Request_Negative_Reply"
        case 0x201C: return "HCI_LE_Read_Supported_States"
        case 0x2020: return "HCI_LE_Remote_Connection_Parameter_Request_Reply"
        case 0x2021: return "HCI_LE_Remote_Connection_Parameter_Request_Negative_Reply"
        case 0x2022: return "HCI_LE_Set_Data_Length"
        case 0x2023: return "HCI_LE_Read_Suggested_Default_Data_Length"
        case 0x2024: return "HCI_LE_Write_Suggested_Default_Data_Length"
        case 0x202F: return "HCI_LE_Read_Maximum_Data_Length"
        case 0x2030: return "HCI_LE_Read_PHY"
        case 0x2031: return "HCI_LE_Set_Default_PHY"
        case 0x2032: return "HCI_LE_Set_PHY"
        case 0x2060: return "HCI_LE_Read_Buffer_Size [v2]"
        default: return nil
        }
    }

    public var description: String {
        guard let name else { return "\(hex4(rawValue)) (OGF \(hex2(ogf)), OCF \(hex4(ocf)))" }
        return "\(name) (\(hex4(rawValue)))"
    }
}
