import BLE
import BLECore
import Foundation

/// Why a profile file was refused: `message` names the file, the place in it and what is wrong.
public struct ProfileFileError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A GATT database described in a JSON file, for `ble serve FILE`, read without trusting the file (a libFuzzer target, `json-profile`, feeds it). The format (also in `ble serve --help`):
///
///     {
///       "name": "My Sensor",                       advertised local name (optional; --name overrides)
///       "advertise": ["180D"],                     services to advertise (optional; default: the primary ones)
///       "manufacturerData": "4c00...",             optional hex: the company identifier (little-endian), then its data
///       "serviceData": {"FEAA": "10ec..."},        optional: hex data by service UUID (an Eddystone frame under FEAA)
///       "txPower": -8,                             optional: the TX Power Level field, dBm (-127...20)
///       "connectable": true,                       optional, default true; false: scannable or non-connectable
///       "iBeacon": {"uuid": "E2C5...", "major": 1, "minor": 42, "measuredPower": -59},   optional (Apple's data)
///       "services": [
///         {
///           "uuid": "180D",                        16-bit, 32-bit or 128-bit UUID
///           "primary": true,                       optional, default true
///           "includes": ["180F"],                  optional; services listed earlier in the file
///           "characteristics": [
///             {
///               "uuid": "2A37",
///               "properties": ["read", "write", "writeWithoutResponse", "notify", "indicate"],
///               "permissions": ["readable", "writeable"],   optional; default from the properties
///               "value": "0801" | null,            hex; see below
///               "descriptors": [{"uuid": "2901", "value": "hex"} | {"uuid": "2901", "text": "Heart rate"}]
///             }
///           ]
///         }
///       ]
///     }
///
/// A characteristic whose properties are only "read" (and "broadcast", "extendedProperties") and that has a
/// hex "value" is fixed: the stack answers its reads. Every other characteristic is dynamic: reads answer its
/// current value (the hex "value" when given, else empty), writes replace it, and subscribers are notified or
/// indicated of each new value. Permissions default to "readable" when the properties include "read" and
/// "writeable" when they include a write.
///
/// The advertising fields are those `PeripheralManager.startAdvertising` takes. The appearance, the advertising
/// interval and which fields go in the scan response are refused with the reason: the public API (as
/// CoreBluetooth's) has no field for the first two, and places fields itself (what does not fit the advertisement
/// goes in the scan response).
public struct ProfileFile: Sendable {
    /// The advertised local name, when the file gives one.
    public var name: String?
    /// The services to advertise, when the file lists them (else the primary ones).
    public var advertisedServices: [BluetoothUUID]?
    public var services: [ProfileService]
    /// What the device advertises beside its name and services.
    public var advertising = ProfileAdvertising()

    /// Reads the profile in `data`; `source` (the file's path) starts every error's message.
    ///
    /// - Throws: `ProfileFileError` for anything but a valid profile: not JSON (with the line and column), a
    ///   key the format does not have, a value of the wrong type, a service listed twice, an include of a service
    ///   not listed before, a bad UUID or hex value.
    public init(json data: Data, source path: String) throws(ProfileFileError) {
        do {
            self = try Self.parse(data, path: path)
        } catch let error as ProfileFileError {
            throw error
        } catch {
            throw ProfileFileError("\(path): \(error)")
        }
    }

    private init(name: String?, advertisedServices: [BluetoothUUID]?, services: [ProfileService]) {
        self.name = name
        self.advertisedServices = advertisedServices
        self.services = services
    }

    private static func parse(_ data: Data, path: String) throws -> ProfileFile {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw ProfileFileError("\(path): not JSON\(Self.position(of: error, in: data))")
        }
        guard let object = root as? [String: Any] else {
            throw ProfileFileError("\(path): the top level must be an object")
        }
        for (key, why) in unavailableKeys where object[key] != nil {
            throw ProfileFileError("\(path): \"\(key)\" cannot be set: \(why)")
        }
        try checkKeys(
            object,
            allowed: [
                "name", "advertise", "services", "manufacturerData", "serviceData", "txPower", "connectable", "iBeacon",
            ],
            at: "the top level", in: path)
        let services = try list(object["services"], at: "services", in: path).enumerated().map {
            try service($0.element, at: "services[\($0.offset)]", in: path)
        }
        guard !services.isEmpty else {
            throw ProfileFileError("\(path): \"services\" must list at least one service")
        }
        var seen: [BluetoothUUID] = []
        for (i, service) in services.enumerated() {
            for include in service.includes where !seen.contains(include) {
                throw ProfileFileError(
                    "\(path): services[\(i)].includes names \(include.uuidString), which is not a service listed before it"
                )
            }
            guard !seen.contains(service.uuid) else {
                throw ProfileFileError("\(path): services[\(i)]: \(service.uuid.uuidString) is listed twice")
            }
            seen.append(service.uuid)
        }
        let name = try optional(object["name"], String.self, at: "name", in: path)
        var advertised: [BluetoothUUID]?
        if object["advertise"] != nil {
            var listed: [BluetoothUUID] = []
            for text in try list(object["advertise"], at: "advertise", in: path) {
                let uuid = try uuid(text, at: "advertise", in: path)
                guard !listed.contains(uuid) else {
                    throw ProfileFileError("\(path): advertise lists \(uuid.uuidString) twice")
                }
                listed.append(uuid)
            }
            advertised = listed
        }
        var profile = ProfileFile(name: name, advertisedServices: advertised, services: services)
        profile.advertising = try advertising(object, in: path)
        return profile
    }

    /// Keys a user may expect from other advertisers, and why this one has none.
    static let unavailableKeys: [(String, String)] = [
        ("appearance", "PeripheralManager.startAdvertising takes no appearance (nor does CoreBluetooth's)"),
        ("interval", "PeripheralManager.startAdvertising takes no interval (the system chooses it, as iOS does)"),
        (
            "scanResponse",
            "PeripheralManager.startAdvertising places the fields itself: what does not fit the advertisement goes in the scan response"
        ),
    ]

    /// The most octets one AD structure's data may have in a legacy advertisement or scan response (31, less
    /// the length and type octets).
    static let largestField = AdvertisingData.legacyMaximumLength - 2

    private static func advertising(_ object: [String: Any], in path: String) throws -> ProfileAdvertising {
        var result = ProfileAdvertising()
        if let text = try optional(object["manufacturerData"], String.self, at: "manufacturerData", in: path) {
            guard let data = Data(lenientHex: text) else {
                throw ProfileFileError("\(path): manufacturerData is not hex")
            }
            guard (2...largestField).contains(data.count) else {
                throw ProfileFileError(
                    "\(path): manufacturerData is the company identifier (2 octets, little-endian) and at most \(largestField - 2) more, not \(data.count) octets"
                )
            }
            result.manufacturerData = data
        }
        if let given = object["iBeacon"], !(given is NSNull) {
            guard result.manufacturerData == nil else {
                throw ProfileFileError("\(path): iBeacon is manufacturer data: give it or manufacturerData, not both")
            }
            guard let o = given as? [String: Any] else { throw ProfileFileError("\(path): iBeacon must be an object") }
            try checkKeys(o, allowed: ["uuid", "major", "minor", "measuredPower"], at: "iBeacon", in: path)
            guard let text = o["uuid"] as? String, let uuid = UUID(uuidString: text) else {
                throw ProfileFileError("\(path): iBeacon.uuid must be a UUID in the long form")
            }
            let beacon = IBeacon(
                proximityUUID: uuid,
                major: UInt16(try integer(o["major"], in: 0...65535, at: "iBeacon.major", in: path)),
                minor: UInt16(try integer(o["minor"], in: 0...65535, at: "iBeacon.minor", in: path)),
                measuredPower: Int8(
                    try integer(o["measuredPower"], in: -127...20, at: "iBeacon.measuredPower", in: path)))
            result.manufacturerData = Data(beacon.manufacturerData.bytes)
        }
        if let given = object["serviceData"], !(given is NSNull) {
            guard let o = given as? [String: Any] else {
                throw ProfileFileError("\(path): serviceData must be an object of UUID: hex")
            }
            var data: [BluetoothUUID: Data] = [:]
            for key in o.keys.sorted() {
                let uuid = try uuid(key, at: "serviceData", in: path)
                guard let text = o[key] as? String, let value = Data(lenientHex: text) else {
                    throw ProfileFileError("\(path): serviceData.\(key) must be hex")
                }
                // The UUID takes 2, 4 or 16 of the structure's octets.
                let room = largestField - uuid.width.rawValue
                guard value.count <= room else {
                    throw ProfileFileError(
                        "\(path): serviceData.\(key) is \(value.count) octets; at most \(room) fit beside its UUID")
                }
                data[uuid] = value
            }
            result.serviceData = data.isEmpty ? nil : data
        }
        if object["txPower"] != nil, !(object["txPower"] is NSNull) {
            result.txPowerLevel = try integer(object["txPower"], in: -127...20, at: "txPower", in: path)
        }
        result.connectable = try optional(object["connectable"], Bool.self, at: "connectable", in: path) ?? true
        return result
    }

    /// A whole number within `range`.
    private static func integer(_ any: Any?, in range: ClosedRange<Int>, at place: String, in path: String) throws
        -> Int
    {
        guard let number = any as? NSNumber, !(any is Bool), let value = Int(exactly: number.doubleValue),
            range.contains(value)
        else {
            throw ProfileFileError(
                "\(path): \(place) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    private static func service(_ any: Any, at place: String, in path: String) throws -> ProfileService {
        guard let o = any as? [String: Any] else { throw ProfileFileError("\(path): \(place) must be an object") }
        try checkKeys(o, allowed: ["uuid", "primary", "includes", "characteristics"], at: place, in: path)
        let characteristics = try list(o["characteristics"], at: "\(place).characteristics", in: path).enumerated().map
        {
            try characteristic($0.element, at: "\(place).characteristics[\($0.offset)]", in: path)
        }
        return ProfileService(
            uuid: try uuid(o["uuid"] as Any, at: "\(place).uuid", in: path),
            primary: try optional(o["primary"], Bool.self, at: "\(place).primary", in: path) ?? true,
            includes: try list(o["includes"], at: "\(place).includes", in: path).map {
                try uuid($0, at: "\(place).includes", in: path)
            },
            characteristics: characteristics)
    }

    // MARK: Checks

    /// Refuses keys the format does not have: a typo ("valu") must not lose a value in silence.
    private static func checkKeys(_ object: [String: Any], allowed: [String], at place: String, in path: String) throws
    {
        for key in object.keys.sorted() where !allowed.contains(key) {
            let near = allowed.min { key.editDistance(to: $0) < key.editDistance(to: $1) }
            let hint = near.map { key.editDistance(to: $0) <= 2 ? "; did you mean \"\($0)\"?" : "" } ?? ""
            throw ProfileFileError(
                "\(path): \(place): unknown key \"\(key)\" (known: \(allowed.joined(separator: ", ")))\(hint)")
        }
    }

    /// An optional list: absent is empty, anything but a list is an error.
    private static func list(_ any: Any?, at place: String, in path: String) throws -> [Any] {
        guard let any, !(any is NSNull) else { return [] }
        guard let list = any as? [Any] else { throw ProfileFileError("\(path): \(place) must be a list") }
        return list
    }

    /// An optional value of one type: absent is nil, another type is an error.
    private static func optional<T>(_ any: Any?, _ type: T.Type, at place: String, in path: String) throws -> T? {
        guard let any, !(any is NSNull) else { return nil }
        guard let value = any as? T else {
            throw ProfileFileError("\(path): \(place) must be \(T.self == Bool.self ? "true or false" : "a string")")
        }
        return value
    }

    /// " at line L, column C" for a syntax error, from the character offset Foundation reports.
    private static func position(of error: any Error, in data: Data) -> String {
        let text = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "\(error)"
        guard let range = text.range(of: #"character (\d+)"#, options: .regularExpression),
            let offset = Int(text[range].split(separator: " ")[1])
        else { return " (\(text))" }
        var line = 1
        var column = 1
        for byte in data.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return " (a syntax error at line \(line), column \(column))"
    }

    public static let propertyNames: [String: CharacteristicProperties] = [
        "broadcast": .broadcast, "read": .read, "writeWithoutResponse": .writeWithoutResponse, "write": .write,
        "notify": .notify, "indicate": .indicate, "authenticatedSignedWrites": .authenticatedSignedWrites,
        "extendedProperties": .extendedProperties,
    ]
    public static let permissionNames: [String: AttributePermissions] = [
        "readable": .readable, "writeable": .writeable, "readEncryptionRequired": .readEncryptionRequired,
        "writeEncryptionRequired": .writeEncryptionRequired,
    ]

    /// The option set the `names` make up, each looked up in `table`; an unknown name is refused with the known
    /// ones.
    private static func options<Options: OptionSet>(
        _ names: [String], named table: [String: Options], kind: String, at place: String, in path: String
    ) throws -> Options where Options.Element == Options {
        var set: Options = []
        for name in names {
            guard let option = table[name] else {
                throw ProfileFileError(
                    "\(path): \(place): unknown \(kind) '\(name)' (use \(table.keys.sorted().joined(separator: ", ")))")
            }
            set.insert(option)
        }
        return set
    }

    private static func characteristic(_ any: Any, at place: String, in path: String) throws -> ProfileCharacteristic {
        guard let o = any as? [String: Any] else { throw ProfileFileError("\(path): \(place) must be an object") }
        try checkKeys(o, allowed: ["uuid", "properties", "permissions", "value", "descriptors"], at: place, in: path)
        guard let propertyList = o["properties"] as? [String] else {
            throw ProfileFileError("\(path): \(place).properties must be a list of property names")
        }
        guard !propertyList.isEmpty else {
            throw ProfileFileError("\(path): \(place).properties must list at least one property")
        }
        let properties = try options(propertyList, named: propertyNames, kind: "property", at: place, in: path)
        var permissions: AttributePermissions = []
        if let given = o["permissions"], !(given is NSNull) {
            guard let names = o["permissions"] as? [String] else {
                throw ProfileFileError("\(path): \(place).permissions must be a list of strings")
            }
            permissions = try options(names, named: permissionNames, kind: "permission", at: place, in: path)
        } else {
            if properties.contains(.read) { permissions.insert(.readable) }
            if !properties.isDisjoint(with: [.write, .writeWithoutResponse, .authenticatedSignedWrites]) {
                permissions.insert(.writeable)
            }
        }
        var value: Data?
        if let text = try optional(o["value"], String.self, at: "\(place).value", in: path) {
            guard let v = Data(lenientHex: text) else { throw ProfileFileError("\(path): \(place).value is not hex") }
            value = v
        }
        var descriptors: [(uuid: BluetoothUUID, value: Data)] = []
        for (i, d) in try list(o["descriptors"], at: "\(place).descriptors", in: path).enumerated() {
            let at = "\(place).descriptors[\(i)]"
            guard let d = d as? [String: Any] else { throw ProfileFileError("\(path): \(at) must be an object") }
            try checkKeys(d, allowed: ["uuid", "value", "text"], at: at, in: path)
            let type = try uuid(d["uuid"] as Any, at: "\(at).uuid", in: path)
            let bytes: Data
            let hasValue = d["value"].map { !($0 is NSNull) } ?? false
            let hasText = d["text"].map { !($0 is NSNull) } ?? false
            if let text = try optional(d["text"], String.self, at: "\(at).text", in: path), !hasValue {
                bytes = Data(text.utf8)
            } else if let hex = try optional(d["value"], String.self, at: "\(at).value", in: path), !hasText,
                let v = Data(lenientHex: hex)
            {
                bytes = v
            } else {
                throw ProfileFileError("\(path): \(at) needs a hex \"value\" or a \"text\", one of them")
            }
            // Characteristic Presentation Format (Core Spec Supplement, Part B; GATT 3.3.3.5): format, exponent,
            // unit (2, little-endian), name space, description (2): 7 bytes.
            if type == BluetoothUUID(0x2904) && bytes.count != 7 {
                throw ProfileFileError(
                    "\(path): \(at): a Presentation Format (2904) value is 7 bytes (format, exponent, unit, name space, description), not \(bytes.count)"
                )
            }
            descriptors.append((type, bytes))
        }
        let fixed = value != nil && properties.subtracting([.read, .broadcast, .extendedProperties]).isEmpty
        return ProfileCharacteristic(
            uuid: try uuid(o["uuid"] as Any, at: "\(place).uuid", in: path),
            properties: properties, permissions: permissions,
            value: fixed ? value : nil, initial: fixed ? nil : value, descriptors: descriptors)
    }

    private static func uuid(_ any: Any, at place: String, in path: String) throws -> BluetoothUUID {
        guard let text = any as? String, let uuid = BluetoothUUID(string: text) else {
            throw ProfileFileError("\(path): \(place) must be a UUID string (\"180D\" or the long form)")
        }
        return uuid
    }
}

/// What a profile file's device advertises beside its name and services: the fields of `AdvertisementData`
/// that `PeripheralManager.startAdvertising` sends.
public struct ProfileAdvertising: Sendable {
    /// Manufacturer Specific Data: the company identifier (little-endian), then its data.
    ///
    /// - SeeAlso: Core Specification Supplement v11, Part A, 1.4.
    public var manufacturerData: Data?
    /// Service Data by service UUID (Supplement, Part A, 1.11).
    public var serviceData: [BluetoothUUID: Data]?
    /// The TX Power Level field, in dBm (Supplement, Part A, 1.5).
    public var txPowerLevel: Int?
    /// False: the device advertises without accepting connections.
    public var connectable = true

    public init() {}
}
