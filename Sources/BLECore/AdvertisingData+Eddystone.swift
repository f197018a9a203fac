/// A Google Eddystone frame, carried as Service Data for the 16-bit UUID 0xFEAA. The first octet of the service
/// data is the frame type; every multi-octet number in a frame is big-endian (Eddystone's own format).
///
/// - SeeAlso: Google, Eddystone Protocol Specification (github.com/google/eddystone, `protocol-specification.md`
///   and the `eddystone-uid`, `eddystone-url`, `eddystone-tlm` and `eddystone-eid` documents); Core
///   Specification Supplement v11, Part A, 1.11 (Service Data).
public enum EddystoneFrame: Sendable, Hashable, CustomStringConvertible {
    /// The service UUID Eddystone frames are carried under (its Service Data and its 16-bit service list).
    public static let serviceUUID = BluetoothUUID(0xFEAA)

    /// Eddystone-UID (type 0x00): a 10-octet namespace and a 6-octet instance.
    case uid(UID)
    /// Eddystone-URL (type 0x10): a compressed URL.
    case url(URLFrame)
    /// Eddystone-TLM (type 0x20), version 0x00: the beacon's telemetry in the clear.
    case tlm(TLM)
    /// Eddystone-TLM (type 0x20), version 0x01: telemetry encrypted with the beacon's EID key (12 octets of
    /// ETLM, a 2-octet salt and a 2-octet MIC), kept as it came.
    case encryptedTLM([UInt8])
    /// Eddystone-EID (type 0x30): an 8-octet ephemeral identifier.
    case eid(EID)
    /// A frame type this decoder does not know (0x40 and above are reserved or newer), with the octets after it.
    case unknown(frameType: UInt8, data: [UInt8])

    /// Eddystone-UID: Ranging Data (TX power at 0 m, dBm), Namespace (10 octets), Instance (6 octets), and 2
    /// reserved octets that many beacons leave out.
    public struct UID: Sendable, Hashable {
        public static let frameType: UInt8 = 0x00
        /// The calibrated TX power at 0 m, in dBm (-100...20).
        public var txPower: Int8
        /// 10 octets: which organisation's beacons these are.
        public var namespace: [UInt8]
        /// 6 octets: one beacon within the namespace.
        public var instance: [UInt8]

        public init(txPower: Int8, namespace: [UInt8], instance: [UInt8]) {
            self.txPower = txPower
            self.namespace = namespace
            self.instance = instance
        }
    }

    /// Eddystone-URL: Ranging Data (TX power at 0 m, dBm), a URL scheme prefix code and up to 17 octets of
    /// URL, in which codes 0x00...0x0D stand for common suffixes (".com/", ".org", ...).
    public struct URLFrame: Sendable, Hashable {
        public static let frameType: UInt8 = 0x10
        /// The calibrated TX power at 0 m, in dBm (-100...20).
        public var txPower: Int8
        /// The URL with its scheme and suffixes expanded ("https://swift.org").
        public var url: String

        public init(txPower: Int8, url: String) {
            self.txPower = txPower
            self.url = url
        }

        /// The URL scheme prefixes, by code 0x00...0x03.
        public static let schemes = ["http://www.", "https://www.", "http://", "https://"]
        /// The URL expansions, by code 0x00...0x0D.
        public static let expansions = [
            ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
            ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov",
        ]
    }

    /// Unencrypted Eddystone-TLM (version 0x00).
    public struct TLM: Sendable, Hashable {
        public static let frameType: UInt8 = 0x20
        /// Battery voltage in mV (1 mV per bit); 0 when the beacon does not measure it.
        public var batteryVoltage: UInt16
        /// Beacon temperature in °C, signed 8.8 fixed point on the wire; `nil` when not supported (0x8000).
        public var temperature: Double?
        /// Advertising PDUs sent since power-on or reboot.
        public var advertisingCount: UInt32
        /// Time since power-on or reboot, in units of 0.1 s.
        public var uptimeTenthsOfSecond: UInt32

        public init(
            batteryVoltage: UInt16, temperature: Double?, advertisingCount: UInt32, uptimeTenthsOfSecond: UInt32
        ) {
            self.batteryVoltage = batteryVoltage
            self.temperature = temperature
            self.advertisingCount = advertisingCount
            self.uptimeTenthsOfSecond = uptimeTenthsOfSecond
        }
    }

    /// Eddystone-EID: Ranging Data (TX power at 0 m, dBm) and an 8-octet ephemeral identifier.
    public struct EID: Sendable, Hashable {
        public static let frameType: UInt8 = 0x30
        /// The calibrated TX power at 0 m, in dBm (-100...20).
        public var txPower: Int8
        /// 8 octets, rotating.
        public var identifier: [UInt8]

        public init(txPower: Int8, identifier: [UInt8]) {
            self.txPower = txPower
            self.identifier = identifier
        }
    }

    /// Decodes the service data of UUID 0xFEAA (without the UUID). Throws
    /// `AdvertisingDataError.malformedFrame` when the data is empty, a known frame has the wrong length, or a
    /// URL uses a reserved scheme or octet; an unknown frame type decodes to `.unknown`.
    public init(decoding serviceData: [UInt8]) throws(AdvertisingDataError) {
        guard let type = serviceData.first else { throw .malformedFrame("an Eddystone frame without a frame type") }
        let d = Array(serviceData.dropFirst())
        func power(_ octet: UInt8) -> Int8 { Int8(bitPattern: octet) }
        func bigEndian(_ range: Range<Int>) -> UInt32 { range.reduce(0) { $0 << 8 | UInt32(d[$1]) } }
        switch type {
        case UID.frameType:
            // 1 + 10 + 6 octets, and the 2 reserved octets or none.
            guard d.count == 17 || d.count == 19 else {
                throw .malformedFrame("Eddystone-UID has \(d.count + 1) octets; 18 or 20 expected")
            }
            self = .uid(UID(txPower: power(d[0]), namespace: Array(d[1..<11]), instance: Array(d[11..<17])))
        case URLFrame.frameType:
            guard d.count >= 2, d.count <= 19 else {
                throw .malformedFrame("Eddystone-URL has \(d.count + 1) octets; 3 to 20 expected")
            }
            guard Int(d[1]) < URLFrame.schemes.count else {
                throw .malformedFrame("Eddystone-URL scheme code 0x\(hex2(d[1])) is reserved")
            }
            var url = URLFrame.schemes[Int(d[1])]
            for octet in d[2...] {
                if Int(octet) < URLFrame.expansions.count {
                    url += URLFrame.expansions[Int(octet)]
                } else if octet > 0x20, octet < 0x7F {
                    url.unicodeScalars.append(Unicode.Scalar(octet))
                } else {
                    throw .malformedFrame("Eddystone-URL octet 0x\(hex2(octet)) is reserved")
                }
            }
            self = .url(URLFrame(txPower: power(d[0]), url: url))
        case TLM.frameType:
            guard let version = d.first else { throw .malformedFrame("Eddystone-TLM without a version") }
            switch version {
            case 0x00:
                guard d.count == 13 else {
                    throw .malformedFrame("Eddystone-TLM has \(d.count + 1) octets; 14 expected")
                }
                let rawTemperature = UInt16(d[3]) << 8 | UInt16(d[4])
                self = .tlm(
                    TLM(
                        batteryVoltage: UInt16(d[1]) << 8 | UInt16(d[2]),
                        temperature: rawTemperature == 0x8000 ? nil : Double(Int16(bitPattern: rawTemperature)) / 256,
                        advertisingCount: bigEndian(5..<9), uptimeTenthsOfSecond: bigEndian(9..<13)))
            case 0x01:
                guard d.count == 17 else {
                    throw .malformedFrame("encrypted Eddystone-TLM has \(d.count + 1) octets; 18 expected")
                }
                self = .encryptedTLM(Array(d[1...]))
            default:
                throw .malformedFrame("Eddystone-TLM version 0x\(hex2(version)) is unknown")
            }
        case EID.frameType:
            guard d.count == 9 else { throw .malformedFrame("Eddystone-EID has \(d.count + 1) octets; 10 expected") }
            self = .eid(EID(txPower: power(d[0]), identifier: Array(d[1..<9])))
        default:
            self = .unknown(frameType: type, data: d)
        }
    }

    /// The frame's name, as Eddystone's documents write it ("UID", "URL", "TLM", "EID").
    public var name: String {
        switch self {
        case .uid: "UID"
        case .url: "URL"
        case .tlm, .encryptedTLM: "TLM"
        case .eid: "EID"
        case .unknown(let type, _): "0x" + hex2(type)
        }
    }

    public var description: String {
        switch self {
        case .uid(let f):
            "Eddystone-UID namespace \(f.namespace.hexString) instance \(f.instance.hexString) tx \(f.txPower) dBm"
        case .url(let f): "Eddystone-URL \(f.url) tx \(f.txPower) dBm"
        case .tlm(let f):
            "Eddystone-TLM battery \(f.batteryVoltage) mV, temperature "
                + (f.temperature.map { "\($0) °C" } ?? "not supported")
                + ", \(f.advertisingCount) advertisements, up \(Double(f.uptimeTenthsOfSecond) / 10) s"
        case .encryptedTLM(let data): "Eddystone-TLM encrypted \(data.hexString)"
        case .eid(let f): "Eddystone-EID \(f.identifier.hexString) tx \(f.txPower) dBm"
        case .unknown(let type, let data): "Eddystone frame 0x\(hex2(type)) \(data.hexString)"
        }
    }
}

extension AdvertisingData {
    /// The Eddystone frame in the Service Data of 0xFEAA, if there is one and it decodes; a malformed frame is
    /// `nil` here (decode `serviceData[EddystoneFrame.serviceUUID]` with `EddystoneFrame(decoding:)` to learn
    /// why), and its octets stay in `structures`.
    public var eddystone: EddystoneFrame? {
        serviceData[EddystoneFrame.serviceUUID].flatMap { try? EddystoneFrame(decoding: $0) }
    }
}

extension AdvertisingDataError.Code {
    /// A frame inside an AD structure (an Eddystone frame in its service data) is too short, too long or uses a
    /// reserved value.
    public static let malformedFrame = AdvertisingDataError.Code(rawValue: "malformedFrame")
}

extension AdvertisingDataError {
    /// A frame inside an AD structure is malformed.
    public static func malformedFrame(_ message: String) -> AdvertisingDataError {
        AdvertisingDataError(code: .malformedFrame, message: message)
    }
}

/// Two upper-case hex digits.
private func hex2(_ octet: UInt8) -> String { String(String(format4: UInt16(octet)).dropFirst(2)) }
