import BLE
import BLEProfiles
import Foundation
import Testing

@testable import ble

/// Each served name has a store of its own (and with it an identity and bonds); what `ble serve` warns about
/// before advertising.
@Suite struct StoreNameTests {
    @Test func plainNamesKeepTheirFileName() {
        #expect(StateDirectory.fileName("ble") == "ble")
        #expect(StateDirectory.fileName("HRM-Demo") == "HRM-Demo")
        #expect(StateDirectory.fileName("my_device.2") == "my_device.2")
    }

    @Test func namesThatWouldCollideGetFileNamesOfTheirOwn() {
        let names = ["a/b", "a_b", "a b", "日本語のセンサー", "中文传感器名称!", "________", "", ".", "..", "a:b"]
        let files = names.map(StateDirectory.fileName)
        #expect(Set(files).count == names.count, "\(files)")
        #expect(StateDirectory.fileName("a/b").hasPrefix("a_b-"))
        for file in files {
            #expect(!file.hasPrefix("."))
            #expect(file.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) })
        }
        // The same name, the same file, in every process.
        #expect(StateDirectory.fileName("a/b") == "a_b-" + StateDirectory.hash("a/b"))
        #expect(StateDirectory.hash("") == "cbf29ce484222325")
    }

    @Test func aLongNameIsCutAndHashed() {
        let long = String(repeating: "N", count: 300)
        let file = StateDirectory.fileName(long)
        #expect(file.count == StateDirectory.longestKeptName + 17)
        #expect(file != StateDirectory.fileName(long + "N"))
    }

    @Test func anUnreachableSecondaryServiceIsNamedAndNotAdvertised() {
        let characteristic = ProfileCharacteristic(
            uuid: BluetoothUUID(0x2A6E), properties: [.read], permissions: [.readable], value: Data([1]))
        var profile = Profile(
            name: "Sec",
            services: [
                ProfileService(uuid: .battery, characteristics: [characteristic]),
                ProfileService(uuid: BluetoothUUID(0x181A), primary: false, characteristics: [characteristic]),
            ])
        profile.advertisedServices = [.battery, BluetoothUUID(0x181A)]
        #expect(profile.unreachableServices == [BluetoothUUID(0x181A)])
        #expect(profile.servicesToAdvertise == [.battery])
        #expect(profile.warnings.count == 1)
        profile.services[0].includes = [BluetoothUUID(0x181A)]
        #expect(profile.unreachableServices.isEmpty)
        #expect(profile.servicesToAdvertise == [.battery, BluetoothUUID(0x181A)])
        #expect(profile.warnings.isEmpty)
    }

    @Test func aNameTooLongForAScanResponseIsWarnedAbout() {
        var profile = Profile(name: String(repeating: "x", count: 29), services: [])
        #expect(profile.warnings.isEmpty)
        profile.name = String(repeating: "x", count: 30)
        #expect(profile.warnings.count == 1)
        #expect(
            profile.warnings.first?.contains("advertised shortened, as \"\(String(repeating: "x", count: 26))\"")
                == true)
    }
}
