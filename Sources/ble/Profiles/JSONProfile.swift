import ArgumentParser
import BLE
import BLEProfiles
import Foundation

/// `ble serve FILE`: a GATT database described in a JSON file, read by `BLEProfiles.ProfileFile` (whose
/// documentation gives the format, as `ble serve --help` does).
enum JSONProfile {
    static func load(path: String, name: String?) throws -> Profile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError(
                "cannot read '\(path)': not a profile name (\(BuiltInProfiles.names.joined(separator: ", "))) nor a readable file"
            )
        }
        let file: ProfileFile
        do {
            file = try ProfileFile(json: data, source: path)
        } catch {
            throw ValidationError(error.message)
        }
        var profile = Profile(name: name ?? file.name ?? "ble", services: file.services)
        profile.advertisedServices = file.advertisedServices
        profile.manufacturerData = file.advertising.manufacturerData
        profile.serviceData = file.advertising.serviceData
        profile.txPowerLevel = file.advertising.txPowerLevel
        profile.connectable = file.advertising.connectable
        return profile
    }
}
