import BLECore
import NIOCore

extension HCIEvent {
    /// Command Complete: the controller finished a command (or, with opcode 0x0000, only grants command
    /// credits) and returns its parameters.
    ///
    /// `returnParameters` holds everything after the opcode, the status byte INCLUDED: for opcode 0x0000 it is
    /// empty, and a controller that fails a command often sends the status alone. Use `status` and
    /// `decodeReturn(_:)` rather than slicing by hand.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.14.
    public struct CommandComplete: HCIEventParameters {
        public static let eventCode = HCIEventCode.commandComplete

        /// Num_HCI_Command_Packets: how many commands the host may now send (0 to stop it).
        public var numHCICommandPackets: UInt8
        /// Command_Opcode: the command completed, or 0x0000 (No Operation).
        public var opcode: HCIOpcode
        /// Return_Parameters: everything after the opcode, starting with the status (when present).
        public var returnParameters: [UInt8]

        public init(numHCICommandPackets: UInt8, opcode: HCIOpcode, returnParameters: [UInt8]) {
            self.numHCICommandPackets = numHCICommandPackets
            self.opcode = opcode
            self.returnParameters = returnParameters
        }

        /// A successful completion of `command`, returning `returnParameters`.
        public init<C: HCISyncCommand>(
            numHCICommandPackets: UInt8 = 1, completing command: C.Type,
            returning returnParameters: C.ReturnParameters
        ) {
            self.init(
                numHCICommandPackets: numHCICommandPackets, opcode: C.opcode,
                returnParameters: [HCIStatus.success.rawValue] + returnParameters.bytes)
        }

        /// A failed completion carrying the status alone, as real controllers send it.
        public init(numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode, failure status: HCIStatus) {
            self.init(numHCICommandPackets: numHCICommandPackets, opcode: opcode, returnParameters: [status.rawValue])
        }

        /// The status, the first return parameter; `nil` when there is none (opcode 0x0000).
        public var status: HCIStatus? { returnParameters.first.map(HCIStatus.init(rawValue:)) }

        /// Decodes the return parameters of `command` after checking the opcode and that the status is
        /// success. Throws `HCIError` `.commandFailed` (carrying the status) on failure, `.unexpectedOpcode`
        /// for another command's completion, and `.truncated` for short parameters.
        public func decodeReturn<C: HCISyncCommand>(_ command: C.Type) throws -> C.ReturnParameters {
            guard opcode == C.opcode else {
                throw HCIError(
                    .unexpectedOpcode, "Command Complete for \(opcode), expected \(C.opcode)", opcode: opcode)
            }
            guard let status else {
                throw HCIError(.truncated, "Command Complete carries no status", opcode: opcode)
            }
            guard status.isSuccess else { throw HCIError.commandFailed(opcode, status: status) }
            var buffer = ByteBuffer(hciBytes: returnParameters.dropFirst())
            do {
                return try C.ReturnParameters(decoding: &buffer)
            } catch var error as HCIError {
                error.opcode = opcode
                throw error
            }
        }

        public init(parameters: inout ByteBuffer) throws {
            numHCICommandPackets = try parameters.hciRead(UInt8.self, "Num_HCI_Command_Packets")
            opcode = HCIOpcode(rawValue: try parameters.hciRead(UInt16.self, "Command_Opcode"))
            returnParameters = parameters.readRemainingBytes()
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(numHCICommandPackets)
            buffer.writeInteger(opcode.rawValue, endianness: .little)
            buffer.writeBytes(returnParameters)
        }
    }

    /// Command Status: the controller accepted (status success) or refused an asynchronous command; its
    /// outcome comes in a later event. With opcode 0x0000 it only grants command credits.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.15.
    public struct CommandStatus: HCIEventParameters {
        public static let eventCode = HCIEventCode.commandStatus

        /// Status: success means "pending", anything else means the command failed.
        public var status: HCIStatus
        /// Num_HCI_Command_Packets: how many commands the host may now send.
        public var numHCICommandPackets: UInt8
        /// Command_Opcode: the command concerned, or 0x0000.
        public var opcode: HCIOpcode

        public init(status: HCIStatus, numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode) {
            self.status = status
            self.numHCICommandPackets = numHCICommandPackets
            self.opcode = opcode
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            numHCICommandPackets = try parameters.hciRead(UInt8.self, "Num_HCI_Command_Packets")
            opcode = HCIOpcode(rawValue: try parameters.hciRead(UInt16.self, "Command_Opcode"))
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(numHCICommandPackets)
            buffer.writeInteger(opcode.rawValue, endianness: .little)
        }
    }
}
