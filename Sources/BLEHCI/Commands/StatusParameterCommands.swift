import BLECore
import NIOCore

/// HCI_Read_RSSI: the received signal strength on a connection.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.5.4.
public struct HCIReadRSSI: HCISyncCommand {
    public static let opcode = HCIOpcode.readRSSI

    /// The connection (0x0000...0x0EFF).
    public var handle: ConnectionHandle

    public init(handle: ConnectionHandle) { self.handle = handle }

    public init(parameters: inout ByteBuffer) throws {
        handle = try parameters.hciReadHandle("Handle")
    }

    public func encodeParameters(into buffer: inout ByteBuffer) {
        buffer.writeInteger(handle.rawValue, endianness: .little)
    }

    public struct ReturnParameters: HCIReturnParameters {
        public var handle: ConnectionHandle
        /// RSSI: on LE the absolute received signal strength, dBm, -127...20; 127 when not available.
        public var rssi: Int8

        public init(handle: ConnectionHandle, rssi: Int8) {
            self.handle = handle
            self.rssi = rssi
        }

        public init(decoding buffer: inout ByteBuffer) throws {
            handle = try buffer.hciReadHandle("Handle")
            rssi = try buffer.hciRead(Int8.self, "RSSI")
        }

        public func encode(into buffer: inout ByteBuffer) {
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(rssi)
        }
    }
}
