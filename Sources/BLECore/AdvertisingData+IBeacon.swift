import Foundation

/// Apple's iBeacon advertisement, carried in Manufacturer Specific Data: company 0x004C, then the type 0x02 and
/// the length 0x15 (21 octets follow), the proximity UUID, major, minor and the measured power.
///
/// Layout of the manufacturer data (the AD data after the AD type octet):
///
/// | Octets | Field | |
/// | --- | --- | --- |
/// | 0-1 | company identifier | 0x004C, little-endian (Core Specification Supplement v11, Part A, 1.4) |
/// | 2 | iBeacon type | 0x02 |
/// | 3 | length of what follows | 0x15 |
/// | 4-19 | proximity UUID | big-endian, as printed |
/// | 20-21 | major | big-endian, 0...65535 |
/// | 22-23 | minor | big-endian, 0...65535 |
/// | 24 | measured power | signed, dBm at 1 m |
///
/// Unlike everything else in an advertisement, iBeacon's numbers are big-endian: Apple's own format, not the
/// Bluetooth SIG's.
///
/// - SeeAlso: Apple, "Proximity Beacon Specification", release R1; Core Specification Supplement v11, Part A,
///   1.4 (Manufacturer Specific Data).
public struct IBeacon: Sendable, Hashable, CustomStringConvertible {
    /// The iBeacon type octet after Apple's company identifier.
    public static let type: UInt8 = 0x02
    /// The length octet: the octets after it (UUID 16, major 2, minor 2, power 1).
    public static let length: UInt8 = 0x15

    /// The proximity UUID: which organisation's beacons these are.
    public var proximityUUID: UUID
    /// A group of beacons within the organisation.
    public var major: UInt16
    /// One beacon within the group.
    public var minor: UInt16
    /// The RSSI a receiver measures at 1 m, in dBm (calibrated by the deployer).
    public var measuredPower: Int8

    public init(proximityUUID: UUID, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// Decodes manufacturer data; `nil` unless it is Apple's and carries the iBeacon type and length with exactly
    /// the 21 octets that length promises (a shorter or longer structure is not an iBeacon).
    public init?(manufacturerData: ManufacturerSpecificData) {
        let d = manufacturerData.data
        guard manufacturerData.companyIdentifier == .apple, d.count == 2 + Int(Self.length), d[0] == Self.type,
            d[1] == Self.length
        else { return nil }
        let u = Array(d[2..<18])
        proximityUUID = UUID(
            uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15])
        )
        major = UInt16(d[18]) << 8 | UInt16(d[19])
        minor = UInt16(d[20]) << 8 | UInt16(d[21])
        measuredPower = Int8(bitPattern: d[22])
    }

    /// The manufacturer data that carries this beacon.
    public var manufacturerData: ManufacturerSpecificData {
        let u = proximityUUID.uuid
        let uuid = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15]
        return ManufacturerSpecificData(
            companyIdentifier: .apple,
            data: [Self.type, Self.length] + uuid + [
                UInt8(major >> 8), UInt8(major & 0xFF), UInt8(minor >> 8), UInt8(minor & 0xFF),
                UInt8(bitPattern: measuredPower),
            ])
    }

    public var description: String {
        "iBeacon \(proximityUUID.uuidString) major \(major) minor \(minor) measured power \(measuredPower) dBm"
    }
}

extension AdvertisingData {
    /// The first Manufacturer Specific Data structure that is an iBeacon, if any.
    public var iBeacon: IBeacon? {
        allManufacturerData.lazy.compactMap(IBeacon.init(manufacturerData:)).first
    }
}
