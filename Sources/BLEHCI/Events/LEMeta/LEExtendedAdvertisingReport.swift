import BLECore
import NIOCore

extension HCILEMetaEvent {
    /// LE Extended Advertising Report: advertising PDUs received while scanning, legacy ones included (with
    /// the legacy bit set in the event type). Some controllers send only this form once they support extended
    /// advertising, even to a host that scans with the legacy commands (Bumble 0.0.236 does), so a host
    /// decodes it either way.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.13.
    public struct ExtendedAdvertisingReport: HCILEMetaEventParameters {
        public static let subeventCode = HCILEMetaSubevent.extendedAdvertisingReport

        /// Event_Type[i]: a bit field (Vol 4, Part E, 7.7.65.13).
        public struct EventType: OptionSet, Sendable, Hashable {
            public var rawValue: UInt16
            public init(rawValue: UInt16) { self.rawValue = rawValue }
            public static let connectable = EventType(rawValue: 1 << 0)
            public static let scannable = EventType(rawValue: 1 << 1)
            public static let directed = EventType(rawValue: 1 << 2)
            public static let scanResponse = EventType(rawValue: 1 << 3)
            /// The report is of a legacy advertising PDU.
            public static let legacy = EventType(rawValue: 1 << 4)

            /// Bits 5-6: 0 complete, 1 incomplete with more to come, 2 incomplete and truncated.
            public var dataStatus: UInt16 { (rawValue >> 5) & 0b11 }
        }

        /// One received advertisement (or a fragment of one).
        public struct Report: Sendable, Hashable {
            public var eventType: EventType
            /// Address_Type[i] (0x00...0x03; 0xFF anonymous, kept as type 0xFF) and Address[i].
            public var address: BluetoothAddress
            /// Primary_PHY[i]: 1 LE 1M, 3 LE Coded.
            public var primaryPHY: UInt8
            /// Secondary_PHY[i]: 0 none, 1 LE 1M, 2 LE 2M, 3 LE Coded.
            public var secondaryPHY: UInt8
            /// Advertising_SID[i]: 0x00...0x0F, 0xFF none.
            public var advertisingSID: UInt8
            /// TX_Power[i]: dBm, 127 not available.
            public var txPower: Int8
            /// RSSI[i]: dBm, 127 not available.
            public var rssi: Int8
            /// Periodic_Advertising_Interval[i]: units of 1.25 ms, 0 none.
            public var periodicAdvertisingInterval: UInt16
            /// Direct_Address_Type[i] and Direct_Address[i] (directed advertising only).
            public var directAddress: BluetoothAddress
            /// Data[i]: 0...229 octets.
            public var data: [UInt8]

            public init(
                eventType: EventType, address: BluetoothAddress, primaryPHY: UInt8 = 1, secondaryPHY: UInt8 = 0,
                advertisingSID: UInt8 = 0xFF, txPower: Int8 = 127, rssi: Int8,
                periodicAdvertisingInterval: UInt16 = 0, directAddress: BluetoothAddress = .zero, data: [UInt8]
            ) {
                self.eventType = eventType
                self.address = address
                self.primaryPHY = primaryPHY
                self.secondaryPHY = secondaryPHY
                self.advertisingSID = advertisingSID
                self.txPower = txPower
                self.rssi = rssi
                self.periodicAdvertisingInterval = periodicAdvertisingInterval
                self.directAddress = directAddress
                self.data = data
            }
        }

        /// The reports, 1...10 (Num_Reports 0x01...0x0A).
        public var reports: [Report]

        public init(reports: [Report]) { self.reports = reports }

        public init(parameters: inout ByteBuffer) throws {
            let count = Int(try parameters.hciRead(UInt8.self, "Num_Reports"))
            var reports: [Report] = []
            for index in 0..<count {
                let eventType = EventType(rawValue: try parameters.hciRead(UInt16.self, "Event_Type[\(index)]"))
                let address = try parameters.hciReadTypedAddress("Address_Type[\(index)] and Address[\(index)]")
                let primary = try parameters.hciRead(UInt8.self, "Primary_PHY[\(index)]")
                let secondary = try parameters.hciRead(UInt8.self, "Secondary_PHY[\(index)]")
                let sid = try parameters.hciRead(UInt8.self, "Advertising_SID[\(index)]")
                let txPower = try parameters.hciRead(Int8.self, "TX_Power[\(index)]")
                let rssi = try parameters.hciRead(Int8.self, "RSSI[\(index)]")
                let interval = try parameters.hciRead(UInt16.self, "Periodic_Advertising_Interval[\(index)]")
                let direct = try parameters.hciReadTypedAddress(
                    "Direct_Address_Type[\(index)] and Direct_Address[\(index)]")
                let length = Int(try parameters.hciRead(UInt8.self, "Data_Length[\(index)]"))
                guard length <= 229 else {
                    throw HCIError.invalidParameter("Data_Length[\(index)] \(length) exceeds 229")
                }
                let data = try parameters.hciReadBytes(length, "Data[\(index)]")
                reports.append(
                    Report(
                        eventType: eventType, address: address, primaryPHY: primary, secondaryPHY: secondary,
                        advertisingSID: sid, txPower: txPower, rssi: rssi,
                        periodicAdvertisingInterval: interval, directAddress: direct, data: data))
            }
            self.reports = reports
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            precondition(reports.count <= 10, "at most 10 extended reports fit one event")
            buffer.writeInteger(UInt8(reports.count))
            for report in reports {
                precondition(report.data.count <= 229, "an extended report carries at most 229 octets")
                buffer.writeInteger(report.eventType.rawValue, endianness: .little)
                buffer.hciWriteTypedAddress(report.address)
                buffer.writeInteger(report.primaryPHY)
                buffer.writeInteger(report.secondaryPHY)
                buffer.writeInteger(report.advertisingSID)
                buffer.writeInteger(report.txPower)
                buffer.writeInteger(report.rssi)
                buffer.writeInteger(report.periodicAdvertisingInterval, endianness: .little)
                buffer.hciWriteTypedAddress(report.directAddress)
                buffer.writeInteger(UInt8(report.data.count))
                buffer.writeBytes(report.data)
            }
        }
    }
}
