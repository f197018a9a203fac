import Foundation
import Logging

/// The tool's environment variables, checked once as it starts: a value it cannot use is a usage error (64) with
/// one line naming the variable, whatever the command, instead of each command taking it its own way (one
/// failing with 1, another ignoring it). `BLE_TRANSPORT` is checked where it is opened, as `--transport` is
/// (status 2, naming the variable).
enum EnvironmentCheck {
    /// The first problem with the environment, as the line to print; nil when every variable is usable.
    static func problem(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let speed = environment["BLE_SIM_SPEED"], !speed.isEmpty, !["fast", "realtime"].contains(speed) {
            return "BLE_SIM_SPEED=\(speed): expected 'fast' (as fast as possible) or 'realtime' (the default)"
        }
        do {
            _ = try Session.privacy(environment["BLE_PRIVACY"])
        } catch {
            return error.message
        }
        if let level = environment["BLE_LOG_LEVEL"], !level.isEmpty, Logger.Level(rawValue: level.lowercased()) == nil {
            return "BLE_LOG_LEVEL=\(level): expected one of \(LogOptions.levels.joined(separator: ", "))"
        }
        if let idle = environment["BLE_ROOM_IDLE_TIMEOUT"], !idle.isEmpty {
            guard let seconds = Double(idle), (try? CommandLineNumbers.checkSeconds(seconds, option: "")) != nil
            else {
                return "BLE_ROOM_IDLE_TIMEOUT=\(idle): expected the seconds the room waits with nobody in it (0: never)"
            }
        }
        return nil
    }
}
