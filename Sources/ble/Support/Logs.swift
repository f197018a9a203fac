import ArgumentParser
import Foundation
import Logging
import Synchronization

/// `-v`/`--verbose` and `BLE_LOG_LEVEL`: how much of what the stack notices (a malformed event, a command the
/// controller did not answer, a Write Command our server refused) the tool shows, on stderr. The library only
/// logs through swift-log; the tool picks the handler, once per process.
struct LogOptions: ParsableArguments {
    @Flag(
        name: .shortAndLong,
        help: "Show what the stack notices on stderr: -v for information, -vv for every detail (or BLE_LOG_LEVEL).")
    var verbose: Int

    static let levels = Logger.Level.allCases.map(\.rawValue)

    func validate() throws {
        if let text = ProcessInfo.processInfo.environment["BLE_LOG_LEVEL"], !text.isEmpty,
            Logger.Level(rawValue: text.lowercased()) == nil
        {
            throw ValidationError("BLE_LOG_LEVEL must be one of \(Self.levels.joined(separator: ", ")), not '\(text)'")
        }
    }

    /// Warnings by default; -v information, -vv debug; BLE_LOG_LEVEL when given, unless -v asks for more.
    var level: Logger.Level {
        let fromFlags: Logger.Level = verbose >= 2 ? .debug : verbose == 1 ? .info : .warning
        guard let text = ProcessInfo.processInfo.environment["BLE_LOG_LEVEL"],
            let level = Logger.Level(rawValue: text.lowercased())
        else { return fromFlags }
        return verbose > 0 ? min(level, fromFlags) : level
    }

    /// Routes every logger of the process to stderr at `level`. Only the first call counts: swift-log allows one
    /// bootstrap per process.
    func install() {
        Logs.install(level)
    }
}

/// The one bootstrap of the process.
enum Logs {
    private static let installed = Mutex<Bool>(false)

    static func install(_ level: Logger.Level) {
        let first = installed.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
