import BLECore
import NIOCore

/// HCI_Read_Local_Version_Information: the controller's HCI and link-layer versions and manufacturer.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.4.1.
public struct HCIReadLocalVersionInformation: HCISyncCommand {
    public static let opcode = HCIOpcode.readLocalVersionInformation

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// HCI_Version: the Core Specification version of the HCI (Assigned Numbers).
        public var hciVersion: HCICoreVersion
        /// HCI_Subversion: manufacturer-defined revision.
        public var hciSubversion: UInt16
        /// LMP_Version (the LL version on LE): Assigned Numbers.
        public var lmpVersion: HCICoreVersion
        /// Company_Identifier of the manufacturer (Assigned Numbers).
        public var companyIdentifier: UInt16
        /// LMP_Subversion: manufacturer-defined revision of the link layer.
        public var lmpSubversion: UInt16

        public init(
            hciVersion: HCICoreVersion, hciSubversion: UInt16, lmpVersion: HCICoreVersion,
            companyIdentifier: UInt16, lmpSubversion: UInt16
        ) {
            self.hciVersion = hciVersion
            self.hciSubversion = hciSubversion
            self.lmpVersion = lmpVersion
            self.companyIdentifier = companyIdentifier
            self.lmpSubversion = lmpSubversion
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            hciVersion = HCICoreVersion(rawValue: try buffer.hciRead(UInt8.self, "HCI_Version"))
            hciSubversion = try buffer.hciRead(UInt16.self, "HCI_Subversion")
            lmpVersion = HCICoreVersion(rawValue: try buffer.hciRead(UInt8.self, "LMP_Version"))
            companyIdentifier = try buffer.hciRead(UInt16.self, "Company_Identifier")
            lmpSubversion = try buffer.hciRead(UInt16.self, "LMP_Subversion")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(hciVersion.rawValue)
            buffer.writeInteger(hciSubversion, endianness: .little)
            buffer.writeInteger(lmpVersion.rawValue)
            buffer.writeInteger(companyIdentifier, endianness: .little)
            buffer.writeInteger(lmpSubversion, endianness: .little)
        }
    }
}

/// HCI_Read_Local_Supported_Commands: which HCI commands the controller implements, as a 64-octet bitmask.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.4.2 and 6.27 (Supported Commands).
public struct HCIReadLocalSupportedCommands: HCISyncCommand {
    public static let opcode = HCIOpcode.readLocalSupportedCommands

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// Supported_Commands (64 octets).
        public var supportedCommands: HCISupportedCommands

        public init(supportedCommands: HCISupportedCommands) { self.supportedCommands = supportedCommands }

        public init(decoding buffer: inout ByteBuffer) throws {
            supportedCommands = HCISupportedCommands(
                octets: try buffer.hciReadBytes(HCISupportedCommands.octetCount, "Supported_Commands"))
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeBytes(supportedCommands.octets)
        }
    }
}

/// HCI_Read_Local_Supported_Features: the controller's LMP feature mask, page 0 (whether it supports LE,
/// whether it lacks BR/EDR).
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.4.3.
public struct HCIReadLocalSupportedFeatures: HCISyncCommand {
    public static let opcode = HCIOpcode.readLocalSupportedFeatures

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// LMP_Features (8 octets).
        public var lmpFeatures: HCILMPFeatures

        public init(lmpFeatures: HCILMPFeatures) { self.lmpFeatures = lmpFeatures }

        public init(decoding buffer: inout ByteBuffer) throws {
            lmpFeatures = HCILMPFeatures(rawValue: try buffer.hciRead(UInt64.self, "LMP_Features"))
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(lmpFeatures.rawValue, endianness: .little)
        }
    }
}

/// HCI_Read_Buffer_Size: the controller's shared ACL (and synchronous) data buffers. An LE controller that
/// reports a non-zero LE buffer size (LE Read Buffer Size) uses those for LE instead.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.4.5.
public struct HCIReadBufferSize: HCISyncCommand {
    public static let opcode = HCIOpcode.readBufferSize

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// ACL_Data_Packet_Length: the largest ACL data payload one packet may carry, in octets.
        public var aclDataPacketLength: UInt16
        /// Synchronous_Data_Packet_Length: the largest synchronous data payload, in octets.
        public var synchronousDataPacketLength: UInt8
        /// Total_Num_ACL_Data_Packets: how many ACL packets the controller can buffer.
        public var totalNumACLDataPackets: UInt16
        /// Total_Num_Synchronous_Data_Packets.
        public var totalNumSynchronousDataPackets: UInt16

        public init(
            aclDataPacketLength: UInt16, synchronousDataPacketLength: UInt8,
            totalNumACLDataPackets: UInt16, totalNumSynchronousDataPackets: UInt16
        ) {
            self.aclDataPacketLength = aclDataPacketLength
            self.synchronousDataPacketLength = synchronousDataPacketLength
            self.totalNumACLDataPackets = totalNumACLDataPackets
            self.totalNumSynchronousDataPackets = totalNumSynchronousDataPackets
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            aclDataPacketLength = try buffer.hciRead(UInt16.self, "ACL_Data_Packet_Length")
            synchronousDataPacketLength = try buffer.hciRead(UInt8.self, "Synchronous_Data_Packet_Length")
            totalNumACLDataPackets = try buffer.hciRead(UInt16.self, "Total_Num_ACL_Data_Packets")
            totalNumSynchronousDataPackets = try buffer.hciRead(UInt16.self, "Total_Num_Synchronous_Data_Packets")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(aclDataPacketLength, endianness: .little)
            buffer.writeInteger(synchronousDataPacketLength)
            buffer.writeInteger(totalNumACLDataPackets, endianness: .little)
            buffer.writeInteger(totalNumSynchronousDataPackets, endianness: .little)
        }
    }
}

/// HCI_Read_BD_ADDR: the controller's public device address (all zeros if it has none).
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.4.6.
public struct HCIReadBDADDR: HCISyncCommand {
    public static let opcode = HCIOpcode.readBDADDR

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}

    public struct ReturnParameters: HCIReturnParameters {
        /// BD_ADDR: the public address (type `.publicDevice`).
        public var address: BluetoothAddress

        public init(address: BluetoothAddress) { self.address = address }

        public init(decoding buffer: inout ByteBuffer) throws {
            address = try buffer.hciReadAddress(type: .publicDevice, "BD_ADDR")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeAddress(address)
        }
    }
}
