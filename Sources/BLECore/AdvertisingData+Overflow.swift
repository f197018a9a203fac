import Foundation

/// The "overflow area" an iOS app's service UUIDs move to when it advertises in the background (IOSRules.md 2.4,
/// 2.7): a Manufacturer Specific Data structure of Apple (company 0x004C), type 0x01, then a 128-bit bitmask in
/// which each service UUID sets one bit. Only a scanner that asks for a UUID explicitly can tell whether it is
/// there (IOSRules.md 1.8, 2.8), and different UUIDs can share a bit.
///
/// Apple's hash from UUID to bit is not published; reverse-engineered tables exist. This one is our own: the
/// FNV-1a hash (`stableHash`) of the UUID's canonical 128-bit string, modulo 128, bit `n` being bit `n % 8`
/// (least significant first) of octet `n / 8`. Our advertisers and scanners agree with each other, not with iOS.
public enum AppleOverflowArea {
    public static let company = CompanyIdentifier(0x004C)
    public static let type: UInt8 = 0x01

    /// The bit `uuid` sets, 0..<128.
    public static func bit(for uuid: BluetoothUUID) -> Int {
        Int(stableHash(uuid.uuid.uuidString.uppercased()) % 128)
    }

    /// The manufacturer data that lists `uuids`: the type, then the 16-octet bitmask.
    public static func manufacturerData(for uuids: [BluetoothUUID]) -> ManufacturerSpecificData {
        var mask = [UInt8](repeating: 0, count: 16)
        for uuid in uuids {
            let bit = bit(for: uuid)
            mask[bit / 8] |= 1 << UInt8(bit % 8)
        }
        return ManufacturerSpecificData(companyIdentifier: company, data: [type] + mask)
    }

    /// The bitmask an advertisement carries in its overflow area, if it has one.
    public static func bitmask(in data: AdvertisingData) -> [UInt8]? {
        for m in data.allManufacturerData where m.companyIdentifier == company {
            guard m.data.count == 17, m.data[0] == type else { continue }
            return Array(m.data[1...])
        }
        return nil
    }

    /// Whether `bitmask` has the bit of `uuid` set.
    public static func contains(_ uuid: BluetoothUUID, in bitmask: [UInt8]) -> Bool {
        let bit = bit(for: uuid)
        return bitmask.count == 16 && bitmask[bit / 8] & (1 << UInt8(bit % 8)) != 0
    }

    /// Those of `uuids` an advertisement lists in its overflow area.
    public static func listed(_ uuids: [BluetoothUUID], in data: AdvertisingData) -> [BluetoothUUID] {
        guard let mask = bitmask(in: data) else { return [] }
        return uuids.filter { contains($0, in: mask) }
    }
}
