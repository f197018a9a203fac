import BLECore
import NIOCore

/// Throwing readers for whole-PDU decoding: any shortfall is a truncated PDU.
extension ByteBuffer {
    mutating func attUInt8(_ opcode: ATTOpcode) throws(ATTError) -> UInt8 {
        guard let value = readLE(UInt8.self) else { throw ATTError(.truncatedPDU, opcode: opcode) }
        return value
    }

    mutating func attUInt16(_ opcode: ATTOpcode) throws(ATTError) -> UInt16 {
        guard let value = readLE(UInt16.self) else { throw ATTError(.truncatedPDU, opcode: opcode) }
        return value
    }

    mutating func attHandle(_ opcode: ATTOpcode) throws(ATTError) -> AttributeHandle {
        AttributeHandle(try attUInt16(opcode))
    }

    mutating func attBytes(_ count: Int, _ opcode: ATTOpcode) throws(ATTError) -> [UInt8] {
        guard let bytes = readBytes(length: count) else { throw ATTError(.truncatedPDU, opcode: opcode) }
        return bytes
    }

    /// A 2- or 16-octet UUID, little-endian.
    mutating func attUUID(length: Int, _ opcode: ATTOpcode) throws(ATTError) -> BluetoothUUID {
        guard length == 2 || length == 16 else {
            throw ATTError(.invalidLength, opcode: opcode, "a UUID on ATT has 2 or 16 octets, not \(length)")
        }
        guard let uuid = readUUID(length: length) else { throw ATTError(.truncatedPDU, opcode: opcode) }
        return uuid
    }

    /// The rest of the PDU must be a 2- or 16-octet UUID.
    mutating func attRemainingUUID(_ opcode: ATTOpcode) throws(ATTError) -> BluetoothUUID {
        try attUUID(length: readableBytes, opcode)
    }

    func attExpectEnd(_ opcode: ATTOpcode) throws(ATTError) {
        guard readableBytes == 0 else {
            throw ATTError(.invalidLength, opcode: opcode, "\(readableBytes) unexpected trailing octets")
        }
    }

    mutating func writeHandle(_ handle: AttributeHandle) {
        writeLE(handle.rawValue)
    }

    /// A UUID in ATT's wire form: 2 octets for a 16-bit alias, 16 otherwise.
    mutating func writeATTUUID(_ uuid: BluetoothUUID) {
        writeBytes(uuid.attWireBytes)
    }
}
