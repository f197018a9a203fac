import BLECore
import NIOCore

/// HCI_LE_Set_Event_Mask: choose which LE Meta subevents the controller may send.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.1.
public struct HCILESetEventMask: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetEventMask

    /// The subevents enabled (8 bytes); default after Reset `HCILEEventMask.controllerDefault` (0x1F).
    public var leEventMask: HCILEEventMask

    public init(leEventMask: HCILEEventMask) { self.leEventMask = leEventMask }

    public init(parameters: inout ByteBuffer) throws {
        leEventMask = HCILEEventMask(rawValue: try parameters.hciRead(UInt64.self, "LE_Event_Mask"))
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(leEventMask.rawValue, endianness: .little)
    }
}

/// HCI_LE_Read_Buffer_Size [v1]: the controller's LE ACL data buffers. A length of zero means LE shares the
/// buffers of Read Buffer Size.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.2.
public struct HCILEReadBufferSize: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadBufferSize

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// LE_ACL_Data_Packet_Length: the largest LE ACL payload per packet, octets (0: use Read Buffer Size).
        public var leACLDataPacketLength: UInt16
        /// Total_Num_LE_ACL_Data_Packets: how many LE ACL packets the controller can buffer.
        public var totalNumLEACLDataPackets: UInt8

        public init(leACLDataPacketLength: UInt16, totalNumLEACLDataPackets: UInt8) {
            self.leACLDataPacketLength = leACLDataPacketLength
            self.totalNumLEACLDataPackets = totalNumLEACLDataPackets
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            leACLDataPacketLength = try buffer.hciRead(UInt16.self, "LE_ACL_Data_Packet_Length")
            totalNumLEACLDataPackets = try buffer.hciRead(UInt8.self, "Total_Num_LE_ACL_Data_Packets")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(leACLDataPacketLength, endianness: .little)
            buffer.writeInteger(totalNumLEACLDataPackets)
        }
    }
}

/// HCI_LE_Read_Buffer_Size [v2]: the LE ACL buffers and the isochronous data buffers.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.2.
public struct HCILEReadBufferSizeV2: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadBufferSizeV2

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// LE_ACL_Data_Packet_Length, octets (0: use Read Buffer Size).
        public var leACLDataPacketLength: UInt16
        /// Total_Num_LE_ACL_Data_Packets.
        public var totalNumLEACLDataPackets: UInt8
        /// ISO_Data_Packet_Length, octets (0: no isochronous buffers).
        public var isoDataPacketLength: UInt16
        /// Total_Num_ISO_Data_Packets.
        public var totalNumISODataPackets: UInt8

        public init(
            leACLDataPacketLength: UInt16, totalNumLEACLDataPackets: UInt8,
            isoDataPacketLength: UInt16, totalNumISODataPackets: UInt8
        ) {
            self.leACLDataPacketLength = leACLDataPacketLength
            self.totalNumLEACLDataPackets = totalNumLEACLDataPackets
            self.isoDataPacketLength = isoDataPacketLength
            self.totalNumISODataPackets = totalNumISODataPackets
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            leACLDataPacketLength = try buffer.hciRead(UInt16.self, "LE_ACL_Data_Packet_Length")
            totalNumLEACLDataPackets = try buffer.hciRead(UInt8.self, "Total_Num_LE_ACL_Data_Packets")
            isoDataPacketLength = try buffer.hciRead(UInt16.self, "ISO_Data_Packet_Length")
            totalNumISODataPackets = try buffer.hciRead(UInt8.self, "Total_Num_ISO_Data_Packets")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(leACLDataPacketLength, endianness: .little)
            buffer.writeInteger(totalNumLEACLDataPackets)
            buffer.writeInteger(isoDataPacketLength, endianness: .little)
            buffer.writeInteger(totalNumISODataPackets)
        }
    }
}

/// HCI_LE_Read_Local_Supported_Features: the controller's LE feature set.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.3.
public struct HCILEReadLocalSupportedFeatures: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadLocalSupportedFeatures

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// LE_Features (8 octets).
        public var leFeatures: LEFeatures

        public init(leFeatures: LEFeatures) { self.leFeatures = leFeatures }

        public init(decoding buffer: inout ByteBuffer) throws {
            leFeatures = LEFeatures(rawValue: try buffer.hciRead(UInt64.self, "LE_Features"))
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(leFeatures.rawValue, endianness: .little)
        }
    }
}

/// HCI_LE_Set_Random_Address: the random device address used when an own address type says random.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.4.
public struct HCILESetRandomAddress: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leSetRandomAddress

    /// Random_Address (6 octets; decoded with type `.randomDevice`).
    public var randomAddress: BluetoothAddress

    public init(randomAddress: BluetoothAddress) { self.randomAddress = randomAddress }

    public init(parameters: inout ByteBuffer) throws {
        randomAddress = try parameters.hciReadAddress(type: .randomDevice, "Random_Address")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeAddress(randomAddress)
    }
}

/// HCI_LE_Read_Filter_Accept_List_Size: how many entries the Filter Accept List holds.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.14.
public struct HCILEReadFilterAcceptListSize: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadFilterAcceptListSize

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// Filter_Accept_List_Size: total entries, 0x01...0xFF.
        public var filterAcceptListSize: UInt8

        public init(filterAcceptListSize: UInt8) { self.filterAcceptListSize = filterAcceptListSize }

        public init(decoding buffer: inout ByteBuffer) throws {
            filterAcceptListSize = try buffer.hciRead(UInt8.self, "Filter_Accept_List_Size")
        }

        public func encode(into buffer: inout ByteBuffer) { buffer.writeInteger(filterAcceptListSize) }
    }
}

/// HCI_LE_Clear_Filter_Accept_List: empty the Filter Accept List.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.15.
public struct HCILEClearFilterAcceptList: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leClearFilterAcceptList

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}
}

/// HCI_LE_Add_Device_To_Filter_Accept_List: one device (public or random address) joins the Filter Accept List,
/// which initiating with the accept list policy (and scanning or advertising with a filter) consults.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.16.
public struct HCILEAddDeviceToFilterAcceptList: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.leAddDeviceToFilterAcceptList

    /// Address_Type (0 public, 1 random; the type is kept as sent) and Address.
    public var address: BluetoothAddress

    public init(address: BluetoothAddress) { self.address = address }

    public init(parameters: inout ByteBuffer) throws {
        address = try parameters.hciReadTypedAddress("Address_Type and Address")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.hciWriteTypedAddress(address)
    }
}

/// HCI_LE_Rand: 8 random octets from the controller's random number generator.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.23.
public struct HCILERand: HCISyncCommand {
    public static let opcode = HCIOpcode.leRand

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// Random_Number (8 octets, little-endian).
        public var randomNumber: UInt64

        public init(randomNumber: UInt64) { self.randomNumber = randomNumber }

        public init(decoding buffer: inout ByteBuffer) throws {
            randomNumber = try buffer.hciRead(UInt64.self, "Random_Number")
        }

        public func encode(into buffer: inout ByteBuffer) { buffer.writeInteger(randomNumber, endianness: .little) }
    }
}

/// HCI_LE_Read_Supported_States: which combinations of link-layer states the controller supports.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.27.
public struct HCILEReadSupportedStates: HCISyncCommand {
    public static let opcode = HCIOpcode.leReadSupportedStates

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// LE_States (8 octets): bit n set when state combination n of the spec's table is supported.
        public var leStates: UInt64

        public init(leStates: UInt64) { self.leStates = leStates }

        public init(decoding buffer: inout ByteBuffer) throws {
            leStates = try buffer.hciRead(UInt64.self, "LE_States")
        }

        public func encode(into buffer: inout ByteBuffer) { buffer.writeInteger(leStates, endianness: .little) }
    }
}
