import BLECore
import NIOCore

extension HCIEvent {
    /// Hardware Error: the controller hit a hardware failure; the host should reset it.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.16.
    public struct HardwareError: HCIEventParameters {
        public static let eventCode = HCIEventCode.hardwareError

        /// Hardware_Code: manufacturer-specific.
        public var hardwareCode: UInt8

        public init(hardwareCode: UInt8) { self.hardwareCode = hardwareCode }

        public init(parameters: inout ByteBuffer) throws {
            hardwareCode = try parameters.hciRead(UInt8.self, "Hardware_Code")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) { buffer.writeInteger(hardwareCode) }
    }

    /// Number Of Completed Packets: the controller has freed buffers for ACL packets the host sent, per
    /// connection. The arrayed parameters come one entry after another (handle, count), as controllers send
    /// them.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.19; 5.2 (arrayed parameters).
    public struct NumberOfCompletedPackets: HCIEventParameters {
        public static let eventCode = HCIEventCode.numberOfCompletedPackets

        /// One connection's completed packets.
        public struct Entry: Sendable, Hashable {
            /// Connection_Handle[i] (0x0000...0x0EFF).
            public var handle: ConnectionHandle
            /// Num_Completed_Packets[i]: packets completed since the previous event.
            public var numCompletedPackets: UInt16

            public init(handle: ConnectionHandle, numCompletedPackets: UInt16) {
                self.handle = handle
                self.numCompletedPackets = numCompletedPackets
            }
        }

        /// The entries, at most 255 (Num_Handles is one byte).
        public var entries: [Entry]

        public init(entries: [Entry]) { self.entries = entries }

        public init(parameters: inout ByteBuffer) throws {
            let count = Int(try parameters.hciRead(UInt8.self, "Num_Handles"))
            guard parameters.readableBytes >= count * 4 else {
                throw HCIError.truncated("\(count) Connection_Handle and Num_Completed_Packets entries")
            }
            var entries: [Entry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let handle = try parameters.hciReadHandle()
                let completed = try parameters.hciRead(UInt16.self, "Num_Completed_Packets")
                entries.append(Entry(handle: handle, numCompletedPackets: completed))
            }
            self.entries = entries
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            precondition(entries.count <= 255, "at most 255 entries fit one event")
            buffer.writeInteger(UInt8(entries.count))
            for entry in entries {
                buffer.writeInteger(entry.handle.rawValue, endianness: .little)
                buffer.writeInteger(entry.numCompletedPackets, endianness: .little)
            }
        }
    }

    /// Data Buffer Overflow: the host sent more data packets than the controller had buffers for.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.26.
    public struct DataBufferOverflow: HCIEventParameters {
        public static let eventCode = HCIEventCode.dataBufferOverflow

        /// Link_Type: 0x00 synchronous buffer overflow, 0x01 ACL buffer overflow.
        public var linkType: UInt8

        public init(linkType: UInt8) { self.linkType = linkType }

        public init(parameters: inout ByteBuffer) throws {
            linkType = try parameters.hciRead(UInt8.self, "Link_Type")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) { buffer.writeInteger(linkType) }
    }
}
