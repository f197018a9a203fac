import ArgumentParser
import BLE
import Foundation

/// `ble devices`: the devices the tool's store knows.
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the devices the tool knows (its store): identifier, name, address, last seen.",
        discussion: """
            The tool's device keeps a store of every device it reported, in $XDG_STATE_HOME/swift-ble/ble.sqlite \
            (~/.local/state/swift-ble/ where XDG_STATE_HOME is unset); a device keeps its identifier from one run to \
            the next. The most recently seen come first. With --json, one object per line:
              {"identifier": "<UUID>", "name": "<name>" | null, "address": "AA:BB:CC:DD:EE:FF",
               "addressType": "public" | "random", "lastSeen": "<ISO 8601>"}
            Times are the clock of the system that saw the device: the wall clock on the shared room and real controllers, \
            virtual time from 2026-01-01T00:00:00Z on --transport virtual. 'ble devices forget' forgets them.
            """,
        subcommands: [DevicesForget.self])

    @Flag(help: "One JSON object per line.")
    var json = false

    /// The tool's store, or nil when it has none yet.
    static func storePath() throws(ToolError) -> String? {
        guard let path = try StateDirectory.storePath(forDevice: "ble"), FileManager.default.fileExists(atPath: path)
        else { return nil }
        return path
    }

    func run() async throws {
        do {
            guard let path = try StateDirectory.storePath(forDevice: "ble"),
                FileManager.default.fileExists(atPath: path)
            else { return }
            let known = try BluetoothSystem.knownPeripherals(inStoreAt: path)
            let format = ISO8601DateFormatter()
            // A header, as `bonds` has one (JSON lines need none).
            if !json, !known.isEmpty {
                Output.line("IDENTIFIER                            ADDRESS            LAST SEEN             NAME")
            }
            for device in known {
                let seen = format.string(from: device.lastSeen)
                if json {
                    let object: [String: Any] = [
                        "identifier": device.identifier.uuidString, "name": device.name ?? NSNull(),
                        "address": device.address.string,
                        "addressType": device.address.type.isRandom ? "random" : "public", "lastSeen": seen,
                    ]
                    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                    Output.line(String(decoding: data, as: UTF8.self))
                } else {
                    Output.line(
                        "\(device.identifier.uuidString)  \(device.address.string)  \(seen)  "
                            + (device.name ?? "(no name)"))
                }
            }
        } catch let error as BluetoothError {
            throw ToolError.storeUnavailable(error)
        }
    }
}
