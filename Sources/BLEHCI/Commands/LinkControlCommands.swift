import BLECore
import NIOCore

/// HCI_Disconnect: terminate a connection. Acknowledged by Command Status; Disconnection Complete follows.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.1.6.
public struct HCIDisconnect: HCIAsyncCommand {
    public static let opcode = HCIOpcode.disconnect

    /// The connection to terminate (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// Why: one of Authentication Failure (0x05), Remote User Terminated Connection (0x13), Remote Device
    /// Terminated due to Low Resources (0x14) or Power Off (0x15), Unsupported Remote Feature (0x1A),
    /// Pairing With Unit Key Not Supported (0x29), Unacceptable Connection Parameters (0x3B).
    public var reason: HCIStatus

    public init(handle: ConnectionHandle, reason: HCIStatus = .remoteUserTerminatedConnection) {
        self.handle = handle
        self.reason = reason
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        reason = try parameters.hciReadStatus("Reason")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(reason.rawValue)
    }
}

/// HCI_Read_Remote_Version_Information: ask the peer's link layer for its version. Acknowledged by Command
/// Status; Read Remote Version Information Complete follows.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.1.23.
public struct HCIReadRemoteVersionInformation: HCIAsyncCommand {
    public static let opcode = HCIOpcode.readRemoteVersionInformation

    /// The connection whose peer is asked (0x0000...0x0EFF).
    public var handle: ConnectionHandle

    public init(handle: ConnectionHandle) { self.handle = handle }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
    }
}
