import ArgumentParser
import BLE
import Foundation

/// A GATT database described in a JSON file, for `ble serve FILE`. The format (also in `ble serve --help`):
///
///     {
///       "name": "My Sensor",                       advertised local name (optional; --name overrides)
///       "advertise": ["180D"],                     services to advertise (optional; default: the primary ones)
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
enum JSONProfile {
    static func load(path: String, name: String?) throws -> Profile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError(
                "cannot read '\(path)': not a profile name (\(BuiltInProfiles.names.joined(separator: ", "))) nor a readable file"
            )
        }
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw ValidationError("\(path): not JSON (\(error.localizedDescription))")
        }
        guard let object = root as? [String: Any] else {
            throw ValidationError("\(path): the top level must be an object")
        }
        let services = try (object["services"] as? [Any] ?? []).enumerated().map {
            try service($0.element, at: "services[\($0.offset)]", in: path)
        }
        guard !services.isEmpty else { throw ValidationError("\(path): \"services\" must list at least one service") }
        var profile = Profile(name: name ?? (object["name"] as? String) ?? "ble", services: services)
        if let advertise = object["advertise"] as? [Any] {
            profile.advertisedServices = try advertise.map { try uuid($0, at: "advertise", in: path) }
        }
        return profile
    }

    private static func service(_ any: Any, at place: String, in path: String) throws -> ProfileService {
        guard let o = any as? [String: Any] else { throw ValidationError("\(path): \(place) must be an object") }
        let characteristics = try (o["characteristics"] as? [Any] ?? []).enumerated().map {
            try characteristic($0.element, at: "\(place).characteristics[\($0.offset)]", in: path)
        }
        return ProfileService(
            uuid: try uuid(o["uuid"] as Any, at: "\(place).uuid", in: path),
            primary: o["primary"] as? Bool ?? true,
            includes: try (o["includes"] as? [Any] ?? []).map { try uuid($0, at: "\(place).includes", in: path) },
            characteristics: characteristics)
    }

    static let propertyNames: [String: CharacteristicProperties] = [
        "broadcast": .broadcast, "read": .read, "writeWithoutResponse": .writeWithoutResponse, "write": .write,
        "notify": .notify, "indicate": .indicate, "authenticatedSignedWrites": .authenticatedSignedWrites,
        "extendedProperties": .extendedProperties,
    ]
    static let permissionNames: [String: AttributePermissions] = [
        "readable": .readable, "writeable": .writeable, "readEncryptionRequired": .readEncryptionRequired,
        "writeEncryptionRequired": .writeEncryptionRequired,
    ]

    private static func characteristic(_ any: Any, at place: String, in path: String) throws -> ProfileCharacteristic {
        guard let o = any as? [String: Any] else { throw ValidationError("\(path): \(place) must be an object") }
        var properties: CharacteristicProperties = []
        for name in o["properties"] as? [String] ?? [] {
            guard let p = propertyNames[name] else {
                throw ValidationError(
                    "\(path): \(place): unknown property '\(name)' (use \(propertyNames.keys.sorted().joined(separator: ", ")))"
                )
            }
            properties.insert(p)
        }
        var permissions: AttributePermissions = []
        if let names = o["permissions"] as? [String] {
            for name in names {
                guard let p = permissionNames[name] else {
                    throw ValidationError(
                        "\(path): \(place): unknown permission '\(name)' (use \(permissionNames.keys.sorted().joined(separator: ", ")))"
                    )
                }
                permissions.insert(p)
            }
        } else {
            if properties.contains(.read) { permissions.insert(.readable) }
            if !properties.isDisjoint(with: [.write, .writeWithoutResponse, .authenticatedSignedWrites]) {
                permissions.insert(.writeable)
            }
        }
        var value: Data?
        if let text = o["value"] as? String {
            guard let v = Data(hexArgument: text) else { throw ValidationError("\(path): \(place).value is not hex") }
            value = v
        }
        var descriptors: [(uuid: BluetoothUUID, value: Data)] = []
        for (i, d) in (o["descriptors"] as? [Any] ?? []).enumerated() {
            guard let d = d as? [String: Any] else {
                throw ValidationError("\(path): \(place).descriptors[\(i)] must be an object")
            }
            let type = try uuid(d["uuid"] as Any, at: "\(place).descriptors[\(i)].uuid", in: path)
            if let text = d["text"] as? String {
                descriptors.append((type, Data(text.utf8)))
            } else if let hex = d["value"] as? String, let v = Data(hexArgument: hex) {
                descriptors.append((type, v))
            } else {
                throw ValidationError("\(path): \(place).descriptors[\(i)] needs a hex \"value\" or a \"text\"")
            }
        }
        let fixed = value != nil && properties.subtracting([.read, .broadcast, .extendedProperties]).isEmpty
        return ProfileCharacteristic(
            uuid: try uuid(o["uuid"] as Any, at: "\(place).uuid", in: path),
            properties: properties, permissions: permissions,
            value: fixed ? value : nil, initial: fixed ? nil : value, descriptors: descriptors)
    }

    private static func uuid(_ any: Any, at place: String, in path: String) throws -> BluetoothUUID {
        guard let text = any as? String, let uuid = BluetoothUUID(string: text) else {
            throw ValidationError("\(path): \(place) must be a UUID string (\"180D\" or the long form)")
        }
        return uuid
    }
}
