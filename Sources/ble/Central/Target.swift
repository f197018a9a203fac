import ArgumentParser
import BLE
import Foundation

/// TARGET and how long to look for it, shared by the commands that connect.
struct TargetOptions: ParsableArguments {
    @Argument(
        help: ArgumentHelp(
            "The device: an address (AA:BB:CC:DD:EE:FF), a peripheral identifier (UUID), or an advertised name.",
            valueName: "target"))
    var target: String

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Seconds to scan for the target before giving up.", valueName: "seconds"))
    var timeout: Double = 10

    func validate() throws {
        try CommandLineNumbers.checkSeconds(timeout, option: "--timeout", zeroAllowed: false)
    }

    var timeoutDuration: Duration { CommandLineNumbers.duration(seconds: timeout) }
}

/// Matches advertisements against a TARGET string.
struct TargetMatcher {
    let text: String

    func matches(_ peripheral: Peripheral, _ advertisement: AdvertisementData) -> Bool {
        if let address = BluetoothAddress(string: text), address.bytes == peripheral.address.bytes { return true }
        if let id = UUID(uuidString: text), id == peripheral.identifier { return true }
        return advertisement.localName == text || peripheral.name == text
    }
}

/// Parses a CHAR or `--service` argument: a 16-bit ("2A37"), 32-bit or 128-bit UUID.
func parseUUID(_ text: String, what: String) throws -> BluetoothUUID {
    guard let uuid = BluetoothUUID(string: text) else {
        throw ValidationError("\(what) '\(text)' is not a UUID: give 4 hex digits (2A37), 8, or the long form")
    }
    return uuid
}
