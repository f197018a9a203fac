import BLECore
import NIOCore

extension HCILEMetaEvent {
    /// LE Advertising Report: one or more legacy advertising PDUs (or scan responses) received while scanning.
    /// The arrayed parameters come report by report (type, address, data, RSSI), as controllers send them.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.2; 5.2 (arrayed parameters).
    public struct AdvertisingReport: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.advertisingReport

        /// The RSSI value meaning "not available".
        public static let rssiNotAvailable: Int8 = 127

        /// One received PDU.
        public struct Report: Sendable, Hashable {
            /// Event_Type[i].
            public var eventType: HCIAdvertisingReportEventType
            /// Address_Type[i] (0x00...0x03) and Address[i] of the advertiser.
            public var address: BluetoothAddress
            /// Data[i]: the AD structures, 0...31 octets.
            public var data: [UInt8]
            /// RSSI[i]: dBm, -127...20; 127 when not available.
            public var rssi: Int8

            public init(eventType: HCIAdvertisingReportEventType, address: BluetoothAddress, data: [UInt8], rssi: Int8)
            {
                self.eventType = eventType
                self.address = address
                self.data = data
                self.rssi = rssi
            }
        }

        /// The reports, 1...25 (Num_Reports 0x01...0x19).
        public var reports: [Report]

        public init(reports: [Report]) { self.reports = reports }

        public init(parameters: inout ByteBuffer) throws {
            let count = Int(try parameters.hciRead(UInt8.self, "Num_Reports"))
            var reports: [Report] = []
            reports.reserveCapacity(count)
            for index in 0..<count {
                let eventType = HCIAdvertisingReportEventType(
                    rawValue: try parameters.hciRead(UInt8.self, "Event_Type[\(index)]"))
                let address = try parameters.hciReadTypedAddress("Address_Type[\(index)] and Address[\(index)]")
                let length = Int(try parameters.hciRead(UInt8.self, "Data_Length[\(index)]"))
                guard length <= 31 else {
                    throw HCIError.invalidParameter("Data_Length[\(index)] \(length) exceeds 31")
                }
                let data = try parameters.hciReadBytes(length, "Data[\(index)]")
                let rssi = try parameters.hciRead(Int8.self, "RSSI[\(index)]")
                reports.append(Report(eventType: eventType, address: address, data: data, rssi: rssi))
            }
            self.reports = reports
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            precondition(reports.count <= 25, "at most 25 reports fit one event")
            buffer.writeInteger(UInt8(reports.count))
            for report in reports {
                precondition(report.data.count <= 31, "legacy advertising data is at most 31 octets")
                buffer.writeInteger(report.eventType.rawValue)
                buffer.hciWriteTypedAddress(report.address)
                buffer.writeInteger(UInt8(report.data.count))
                buffer.writeBytes(report.data)
                buffer.writeInteger(report.rssi)
            }
        }
    }
}
