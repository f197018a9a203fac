import BLECore
import NIOCore

/// An HCI command: its opcode and its parameters, encoded by the host and decoded by the controller.
///
/// The set is open: commands are types conforming to `HCISyncCommand` (completed by Command Complete) or
/// `HCIAsyncCommand` (acknowledged by Command Status, completed by a later event). Vendor commands conform the
/// same way and can be added to an `HCICommandRegistry`.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 4.4 (Command flow control) and 7 (HCI commands and events).
public protocol HCICommand: Sendable, Hashable {
    static var opcode: HCIOpcode { get }
    /// Appends the command's parameters (everything after the parameter length byte).
    func encodeParameters(into buffer: inout ByteBuffer)
    /// Decodes the parameters (controller side); throws `HCIError` when they are short or out of range.
    /// Bytes after the last known parameter are ignored, as later spec versions may append parameters.
    init(parameters: inout ByteBuffer) throws
}

/// A command the controller completes with a Command Complete event carrying a status and `ReturnParameters`.
public protocol HCISyncCommand: HCICommand {
    associatedtype ReturnParameters: HCIReturnParameters
}

/// A command the controller acknowledges with a Command Status event; its outcome comes in a later event.
public protocol HCIAsyncCommand: HCICommand {}

/// The return parameters of a synchronous command: the bytes of its Command Complete event AFTER the status
/// byte. A controller that fails a command may send the status alone, so these are decoded only on success.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.14 (Command Complete event).
public protocol HCIReturnParameters: Sendable, Hashable {
    /// Decodes the bytes after the status; throws when they are short.
    init(decoding buffer: inout ByteBuffer) throws
    /// Appends the bytes that follow the status.
    func encode(into buffer: inout ByteBuffer)
}

/// The return parameters of a command that returns only its status.
public struct HCIEmptyReturn: HCIReturnParameters {
    public init() {}
    public init(decoding buffer: inout ByteBuffer) throws {}
    public func encode(into buffer: inout ByteBuffer) {}
}

/// The return parameters of a command that returns its status and the connection handle it concerned.
public struct HCIConnectionHandleReturn: HCIReturnParameters {
    public var handle: ConnectionHandle
    public init(handle: ConnectionHandle) { self.handle = handle }
    public init(decoding buffer: inout ByteBuffer) throws { handle = try buffer.hciReadHandle() }
    public func encode(into buffer: inout ByteBuffer) { buffer.writeInteger(handle.rawValue, endianness: .little) }
}

extension HCICommand {
    /// This command as an HCI Command packet.
    public var packet: HCICommandPacket { HCICommandPacket(command: self) }

    /// The command's parameter bytes.
    public var parameterBytes: [UInt8] {
        var buffer = ByteBuffer()
        encodeParameters(into: &buffer)
        return buffer.readRemainingBytes()
    }

    /// Decodes `Self` from a command packet, checking its opcode.
    public init(packet: HCICommandPacket) throws {
        guard packet.opcode == Self.opcode else {
            throw HCIError(.unexpectedOpcode, "expected \(Self.opcode)", opcode: packet.opcode)
        }
        var buffer = ByteBuffer(hciBytes: packet.parameters)
        try self.init(parameters: &buffer)
    }
}

extension HCIReturnParameters {
    /// The encoded bytes (without the status).
    public var bytes: [UInt8] {
        var buffer = ByteBuffer()
        encode(into: &buffer)
        return buffer.readRemainingBytes()
    }
}

extension HCICommandPacket {
    /// The packet carrying `command`.
    public init(command: some HCICommand) {
        var buffer = ByteBuffer()
        command.encodeParameters(into: &buffer)
        self.init(opcode: type(of: command).opcode, parameters: buffer.readRemainingBytes())
    }
}

/// Decodes command packets by opcode (the controller side). `standard` knows every command in this module;
/// `register(_:)` adds others, vendor commands among them.
public struct HCICommandRegistry: Sendable {
    public typealias Decoder = @Sendable (inout ByteBuffer) throws -> any HCICommand
    private var decoders: [HCIOpcode: Decoder] = [:]

    /// An empty registry.
    public init() {}

    /// Adds (or replaces) the decoder for `type`'s opcode.
    public mutating func register<C: HCICommand>(_ type: C.Type) {
        decoders[C.opcode] = { buffer in try C(parameters: &buffer) }
    }

    /// Whether a command type is registered for `opcode`.
    public func contains(_ opcode: HCIOpcode) -> Bool { decoders[opcode] != nil }

    /// The opcodes registered.
    public var opcodes: [HCIOpcode] { decoders.keys.sorted() }

    /// Decodes `packet` as the command its opcode names. Throws `HCIError` code `.unknownCommand` (answer
    /// Unknown HCI Command) for an opcode no type is registered for, and a decoding error (answer Invalid HCI
    /// Command Parameters) for short or out-of-range parameters; `HCIError.statusForController` maps both.
    public func decode(_ packet: HCICommandPacket) throws -> any HCICommand {
        guard let decoder = decoders[packet.opcode] else { throw HCIError.unknownCommand(packet.opcode) }
        var buffer = ByteBuffer(hciBytes: packet.parameters)
        do {
            return try decoder(&buffer)
        } catch var error as HCIError {
            error.opcode = packet.opcode
            throw error
        }
    }

    /// Every command this module defines.
    public static let standard: HCICommandRegistry = {
        var registry = HCICommandRegistry()
        for type in allStandardCommandTypes { registry.register(existential: type) }
        return registry
    }()

    /// Adds (or replaces) the decoder for a command type known only as an existential metatype.
    public mutating func register(existential type: any HCICommand.Type) {
        decoders[type.opcode] = Self.decoder(for: type)
    }

    private static func decoder<C: HCICommand>(for type: C.Type) -> Decoder {
        { buffer in try C(parameters: &buffer) }
    }

    /// The command types defined in this module, in opcode order.
    public static let allStandardCommandTypes: [any HCICommand.Type] = [
        HCIDisconnect.self,
        HCIReadRemoteVersionInformation.self,
        HCISetEventMask.self,
        HCIReset.self,
        HCISetEventMaskPage2.self,
        HCIWriteLEHostSupport.self,
        HCIReadLocalVersionInformation.self,
        HCIReadLocalSupportedCommands.self,
        HCIReadLocalSupportedFeatures.self,
        HCIReadBufferSize.self,
        HCIReadBDADDR.self,
        HCIReadRSSI.self,
        HCILESetEventMask.self,
        HCILEReadBufferSize.self,
        HCILEReadLocalSupportedFeatures.self,
        HCILESetRandomAddress.self,
        HCILESetAdvertisingParameters.self,
        HCILEReadAdvertisingPhysicalChannelTxPower.self,
        HCILESetAdvertisingData.self,
        HCILESetScanResponseData.self,
        HCILESetAdvertisingEnable.self,
        HCILESetScanParameters.self,
        HCILESetScanEnable.self,
        HCILECreateConnection.self,
        HCILECreateConnectionCancel.self,
        HCILEReadFilterAcceptListSize.self,
        HCILEClearFilterAcceptList.self,
        HCILEAddDeviceToFilterAcceptList.self,
        HCILEConnectionUpdate.self,
        HCILEReadRemoteFeatures.self,
        HCILEEncrypt.self,
        HCILERand.self,
        HCILEEnableEncryption.self,
        HCILELongTermKeyRequestReply.self,
        HCILELongTermKeyRequestNegativeReply.self,
        HCILEReadSupportedStates.self,
        HCILERemoteConnectionParameterRequestReply.self,
        HCILERemoteConnectionParameterRequestNegativeReply.self,
        HCILESetDataLength.self,
        HCILEReadSuggestedDefaultDataLength.self,
        HCILEWriteSuggestedDefaultDataLength.self,
        HCILEReadMaximumDataLength.self,
        HCILEReadPHY.self,
        HCILESetDefaultPHY.self,
        HCILESetPHY.self,
        HCILEReadBufferSizeV2.self,
    ]
}

/// Decodes a command packet with `HCICommandRegistry.standard`; throws `HCIError` code `.unknownCommand` for
/// an opcode this module does not define.
public func decodeCommand(_ packet: HCICommandPacket) throws -> any HCICommand {
    try HCICommandRegistry.standard.decode(packet)
}
