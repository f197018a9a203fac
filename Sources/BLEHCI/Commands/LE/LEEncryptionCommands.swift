import BLECore
import NIOCore

/// HCI_LE_Encrypt: one AES-128 block computed by the controller (the security function e), the host's way to
/// AES without a library of its own.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.22.
public struct HCILEEncrypt: HCISyncCommand {
    public static let opcode = HCIOpcode.leEncrypt

    /// Key: 16 octets, least significant octet first (the order HCI carries keys in).
    public var key: [UInt8]
    /// Plaintext_Data: 16 octets, least significant octet first.
    public var plaintext: [UInt8]

    public init(key: [UInt8], plaintext: [UInt8]) {
        self.key = key
        self.plaintext = plaintext
    }

    public init(parameters: inout ByteBuffer) throws {
        key = try parameters.hciReadBytes(16, "Key")
        plaintext = try parameters.hciReadBytes(16, "Plaintext_Data")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        precondition(key.count == 16 && plaintext.count == 16, "a key and a block have 16 octets")
        buffer.writeBytes(key)
        buffer.writeBytes(plaintext)
    }

    public struct ReturnParameters: HCIReturnParameters {
        /// Encrypted_Data: 16 octets, least significant octet first.
        public var encryptedData: [UInt8]

        public init(encryptedData: [UInt8]) { self.encryptedData = encryptedData }

        public init(decoding buffer: inout ByteBuffer) throws {
            encryptedData = try buffer.hciReadBytes(16, "Encrypted_Data")
        }

        public func encode(into buffer: inout ByteBuffer) {
            precondition(encryptedData.count == 16, "an encrypted block has 16 octets")
            buffer.writeBytes(encryptedData)
        }
    }
}

/// HCI_LE_Enable_Encryption: as central, start (or restart) encryption with a long term key. Acknowledged by
/// Command Status; Encryption Change (or Encryption Key Refresh Complete when already encrypted) follows.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.24.
public struct HCILEEnableEncryption: HCIAsyncCommand {
    public static let opcode = HCIOpcode.leEnableEncryption

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// Random_Number (Rand, 8 octets); zero for LE Secure Connections keys.
    public var randomNumber: UInt64
    /// Encrypted_Diversifier (EDIV); zero for LE Secure Connections keys.
    public var encryptedDiversifier: UInt16
    /// Long_Term_Key: 16 octets in wire (little-endian) order.
    public var longTermKey: [UInt8]

    public init(handle: ConnectionHandle, randomNumber: UInt64, encryptedDiversifier: UInt16, longTermKey: [UInt8]) {
        self.handle = handle
        self.randomNumber = randomNumber
        self.encryptedDiversifier = encryptedDiversifier
        self.longTermKey = longTermKey
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        randomNumber = try parameters.hciRead(UInt64.self, "Random_Number")
        encryptedDiversifier = try parameters.hciRead(UInt16.self, "Encrypted_Diversifier")
        longTermKey = try parameters.hciReadBytes(16, "Long_Term_Key")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        precondition(longTermKey.count == 16, "a long term key has 16 octets")
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeInteger(randomNumber, endianness: .little)
        buffer.writeInteger(encryptedDiversifier, endianness: .little)
        buffer.writeBytes(longTermKey)
    }
}

/// HCI_LE_Long_Term_Key_Request_Reply: as peripheral, answer LE Long Term Key Request with the key.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.25.
public struct HCILELongTermKeyRequestReply: HCISyncCommand {
    public typealias ReturnParameters = HCIConnectionHandleReturn
    public static let opcode = HCIOpcode.leLongTermKeyRequestReply

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle
    /// Long_Term_Key: 16 octets in wire (little-endian) order.
    public var longTermKey: [UInt8]

    public init(handle: ConnectionHandle, longTermKey: [UInt8]) {
        self.handle = handle
        self.longTermKey = longTermKey
    }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle()
        longTermKey = try parameters.hciReadBytes(16, "Long_Term_Key")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        precondition(longTermKey.count == 16, "a long term key has 16 octets")
        buffer.writeInteger(handle.rawValue, endianness: .little)
        buffer.writeBytes(longTermKey)
    }
}

/// HCI_LE_Long_Term_Key_Request_Negative_Reply: as peripheral, answer LE Long Term Key Request with "no key".
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.8.26.
public struct HCILELongTermKeyRequestNegativeReply: HCISyncCommand {
    public typealias ReturnParameters = HCIConnectionHandleReturn
    public static let opcode = HCIOpcode.leLongTermKeyRequestNegativeReply

    /// Connection_Handle (0x0000...0x0EFF).
    public var handle: ConnectionHandle

    public init(handle: ConnectionHandle) { self.handle = handle }

    public init(parameters: inout ByteBuffer) throws { handle = try parameters.hciReadHandle() }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
    }
}
