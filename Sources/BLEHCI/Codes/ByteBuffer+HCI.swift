import BLECore
import NIOCore

/// Throwing readers used by every HCI decoder: each names the field it reads so that a short packet says
/// what was missing, and each consumes nothing when it throws.
extension ByteBuffer {
    @inlinable
    mutating func hciRead<T: FixedWidthInteger>(_: T.Type = T.self, _ field: @autoclosure () -> String) throws -> T {
        guard let value: T = readInteger(endianness: .little) else { throw HCIError.truncated(field()) }
        return value
    }

    mutating func hciReadBytes(_ count: Int, _ field: @autoclosure () -> String) throws -> [UInt8] {
        guard count >= 0, let bytes = readBytes(length: count) else { throw HCIError.truncated(field()) }
        return bytes
    }

    mutating func hciReadHandle(_ field: @autoclosure () -> String = "Connection_Handle") throws -> ConnectionHandle {
        ConnectionHandle(rawValue: try hciRead(UInt16.self, field()))
    }

    mutating func hciReadStatus(_ field: @autoclosure () -> String = "Status") throws -> HCIStatus {
        HCIStatus(rawValue: try hciRead(UInt8.self, field()))
    }

    /// A one-byte boolean: 0x00 or 0x01; anything else is an invalid parameter.
    mutating func hciReadBool(_ field: @autoclosure () -> String) throws -> Bool {
        let name = field()
        switch try hciRead(UInt8.self, name) {
        case 0: return false
        case 1: return true
        case let other: throw HCIError.invalidParameter("\(name) is \(hex2(other)), expected 0x00 or 0x01")
        }
    }

    /// Six little-endian address bytes, of the given type.
    mutating func hciReadAddress(type: BluetoothAddress.AddressType, _ field: @autoclosure () -> String) throws
        -> BluetoothAddress
    {
        guard let address = readAddress(type: type) else { throw HCIError.truncated(field()) }
        return address
    }

    /// An address type byte followed by six little-endian address bytes; consumes nothing when short.
    mutating func hciReadTypedAddress(_ field: @autoclosure () -> String) throws -> BluetoothAddress {
        guard readableBytes >= 7 else { throw HCIError.truncated(field()) }
        // Neither read can fail: the guard checked 7 readable bytes (the type and six address bytes).
        let type = BluetoothAddress.AddressType(rawValue: readInteger(as: UInt8.self)!)
        return readAddress(type: type)!
    }

    mutating func hciWriteBool(_ value: Bool) {
        writeInteger(value ? 1 : 0, as: UInt8.self)
    }

    mutating func hciWriteTypedAddress(_ address: BluetoothAddress) {
        writeInteger(address.type.rawValue)
        writeAddress(address)
    }
}

extension ByteBuffer {
    /// A fresh buffer holding `bytes`.
    init(hciBytes bytes: some Sequence<UInt8>) {
        self = ByteBuffer()
        writeBytes(bytes)
    }
}
