import BLECore
import NIOCore

/// HCI_Set_Event_Mask: choose which events the controller may send.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.1.
public struct HCISetEventMask: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.setEventMask

    /// The events enabled (8 bytes); default after Reset `HCIEventMask.controllerDefault`.
    public var eventMask: HCIEventMask

    public init(eventMask: HCIEventMask) { self.eventMask = eventMask }

    public init(parameters: inout ByteBuffer) throws {
        eventMask = HCIEventMask(rawValue: try parameters.hciRead(UInt64.self, "Event_Mask"))
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(eventMask.rawValue, endianness: .little)
    }
}

/// HCI_Reset: reset the controller (and its link layer) to its initial state.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.2.
public struct HCIReset: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.reset

    public init() {}
    public init(parameters: inout ByteBuffer) throws {}
    public func encodeParameters(into buffer: inout ByteBuffer) {}
}

/// HCI_Set_Event_Mask_Page_2: choose which page-2 events the controller may send.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.69.
public struct HCISetEventMaskPage2: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.setEventMaskPage2

    /// The page-2 events enabled (8 bytes); default none.
    public var eventMaskPage2: HCIEventMaskPage2

    public init(eventMaskPage2: HCIEventMaskPage2) { self.eventMaskPage2 = eventMaskPage2 }

    public init(parameters: inout ByteBuffer) throws {
        eventMaskPage2 = HCIEventMaskPage2(rawValue: try parameters.hciRead(UInt64.self, "Event_Mask_Page_2"))
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(eventMaskPage2.rawValue, endianness: .little)
    }
}

/// HCI_Write_LE_Host_Support: tell a dual-mode controller that the host supports LE.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.3.79.
public struct HCIWriteLEHostSupport: HCISyncCommand {
    public typealias ReturnParameters = HCIEmptyReturn
    public static let opcode = HCIOpcode.writeLEHostSupport

    /// LE_Supported_Host: 0x00 disabled, 0x01 enabled.
    public var leSupportedHost: Bool
    /// Simultaneous_LE_Host: reserved, shall be 0x00; kept as sent.
    public var simultaneousLEHost: UInt8

    public init(leSupportedHost: Bool = true, simultaneousLEHost: UInt8 = 0) {
        self.leSupportedHost = leSupportedHost
        self.simultaneousLEHost = simultaneousLEHost
    }

    public init(parameters: inout ByteBuffer) throws {
        leSupportedHost = try parameters.hciReadBool("LE_Supported_Host")
        simultaneousLEHost = try parameters.hciRead(UInt8.self, "Simultaneous_LE_Host")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.hciWriteBool(leSupportedHost)
        buffer.writeInteger(simultaneousLEHost)
    }
}
