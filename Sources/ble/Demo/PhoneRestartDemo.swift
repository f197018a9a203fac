import ArgumentParser
import BLE
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `ble demo phone-restart`: the door lock across a restart of the phone (IOSRules.md 5e), with a real process
/// boundary. The phone runs in one process of this tool and the lock app's pending connection goes into the
/// phone's store; that process is killed with SIGKILL; a second process starts the phone again on the same store,
/// the system carries the pending connection on, and when the user comes home it relaunches the app, which
/// unlocks the door.
///
/// Without `--phase`, the command runs both phases as child processes of its own, kills the first itself and
/// prints what both print. `--phase before` and `--phase after` run one each, for a hand (or a test) that does
/// the killing.
enum PhoneRestartDemo {
    enum Phase: String, CaseIterable, ExpressibleByArgument {
        case before
        case after
    }

    /// What `before` prints once the store holds the pending connection, before it waits to be killed.
    static let readyMarker = "waiting to be killed"
    /// How long `before` waits for its kill before it gives up with an error.
    static let killWait: Duration = .seconds(120)
    /// How long the two-process run waits for each phase (wall clock) before it kills it and fails.
    static let phaseLimit: DispatchTimeInterval = .seconds(60)
    /// Set in a phase's environment by the two-process run: the phase ends when its parent does.
    static let parentVariable = "BLE_DEMO_PARENT_PID"
    static let appID = "com.example.lock"
    static let home = RadioPosition(x: 2, y: 1)
    static let away = RadioPosition(x: 5_000, y: 0)

    /// The lock app's object from its latest launch.
    final class Launched: Sendable {
        let app = Mutex<DoorLockDemo.LockApp?>(nil)
        let count = Mutex(0)
        func set(_ lockApp: DoorLockDemo.LockApp) {
            app.withLock { $0 = lockApp }
            count.withLock { $0 += 1 }
        }
        /// The identifier of the lock the app holds, read on its queue.
        var lockIdentifier: UUID? {
            guard let lockApp = app.withLock({ $0 }) else { return nil }
            return lockApp.queue.sync { lockApp.lock?.identifier }
        }
    }

    static func phone(on radio: SimulatedRadio, store: String) throws -> BluetoothSystem {
        do {
            return try BluetoothSystem.makeSimulated(
                on: radio, name: "phone", position: RadioPosition(x: 0, y: 0),
                configuration: .init(storePath: store))
        } catch {
            throw ToolError(.failure, "--store: \(error)")
        }
    }

    static func lock(on radio: SimulatedRadio, at position: RadioPosition, log: DemoLog) -> ServedDevice {
        let system = BluetoothSystem.simulated(on: radio, name: "DoorLock", position: position)
        return ServedDevice(system: system, profile: DoorLockProfile.make(name: "DoorLock")) { line in
            log("lock", line.split(separator: " ").dropFirst().joined(separator: " "))
        }
    }

    static func install(_ app: BluetoothSystem.App, log: DemoLog, unlocked: DoorLockDemo.Flag) -> Launched {
        let launched = Launched()
        app.onLaunch { launch in
            let lockApp = DoorLockDemo.LockApp(app: launch.app, options: launch.options, log: log, unlocked: unlocked)
            launched.set(lockApp)
            return lockApp
        }
        return launched
    }

    /// The first process: the app connects to the lock, the user leaves, the app asks to connect again and is
    /// suspended; the store holds the pending connection; then it waits for its kill.
    static func before(radio: SimulatedRadio, store: String, log: DemoLog, pacing: SimulationPacing) async throws {
        let lock = lock(on: radio, at: home, log: log)
        let phone = try phone(on: radio, store: store)
        let app = phone.app(id: appID, backgroundModes: [.bluetoothCentral])
        let launched = install(app, log: log, unlocked: DoorLockDemo.Flag())
        func run(_ duration: Duration) async throws { try await radio.run(for: duration, pacing: pacing) }
        log("user", "opens the lock app at the door")
        app.launch()
        try await run(.seconds(3))
        log("phone", "the lock is \(launched.lockIdentifier.map { "\($0)" } ?? "not found")")
        log("user", "puts the phone away and leaves")
        app.moveToBackground()
        lock.system.move(to: away)
        try await run(.seconds(30))
        log("phone", "the lock app is \(app.state), its connection request pending and kept in the store")
        log("phone", "process \(getpid()) \(readyMarker)")
        log.flush()
        fflush(nil)
        // Killed here. A run that nobody kills ends, with an error, rather than waiting for ever; one started by
        // the two-process run also ends when that run does (killed itself, say), rather than linger.
        let parent = ProcessInfo.processInfo.environment[parentVariable].flatMap { Int32($0) }
        let end = ContinuousClock.now + killWait
        while ContinuousClock.now < end {
            try await Task.sleep(for: .milliseconds(200))
            if let parent, getppid() != parent {
                throw ToolError(.failure, "the two-process run that started this phase ended")
            }
        }
        withExtendedLifetime((lock, phone)) {}
        throw ToolError(
            .failure, "the phone was not killed within \(killWait); run 'ble demo phone-restart' without --phase")
    }

    /// The second process: the phone starts again on the store, the user comes home hours later, the system
    /// reconnects and relaunches the app, which unlocks the door.
    static func after(radio: SimulatedRadio, store: String, log: DemoLog, pacing: SimulationPacing) async throws {
        let lock = lock(on: radio, at: away, log: log)
        let phone = try phone(on: radio, store: store)
        let app = phone.app(id: appID)
        log(
            "phone",
            "starts again on its store: the lock app is \(app.state), its work kept for \(app.keptCentralManagers)")
        let unlocked = DoorLockDemo.Flag()
        let launched = install(app, log: log, unlocked: unlocked)
        func run(_ duration: Duration) async throws { try await radio.run(for: duration, pacing: pacing) }
        func run(until condition: () -> Bool, within limit: Duration, _ what: String) async throws {
            let end = radio.now + limit
            while !condition() {
                guard radio.now < end else {
                    throw ToolError(.failure, "the phone-restart demo stalled waiting for \(what)")
                }
                try await run(.milliseconds(100))
            }
        }
        let awayFor = Duration.seconds(10 * 3600)
        try await run(awayFor)
        log("user", "comes home \(Int(awayFor.inSeconds / 3600)) hours later")
        lock.system.move(to: home)
        try await run(until: { launched.count.withLock { $0 } == 1 }, within: .seconds(30), "the relaunch")
        let relaunch = radio.now
        try await run(until: { unlocked.isSet }, within: .seconds(30), "the unlock")
        log(
            "phone",
            String(
                format: "the door unlocked %.1f s after the relaunch; the lock is %@", (radio.now - relaunch).inSeconds,
                launched.lockIdentifier?.uuidString ?? "unknown"))
        log.flush()
        withExtendedLifetime(lock) {}
    }

    /// Both phases as child processes of this tool: the first killed with SIGKILL once it is ready.
    static func both(store: String?, seed: UInt64) throws {
        let path =
            store
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("ble-phone-\(UUID().uuidString).sqlite")
            .path
        defer {
            if store == nil {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        let first = try child(.before, store: path, seed: seed)
        let killed = Mutex(false)
        let overdue = first.killWhenOverdue()
        _ = first.lines { line in
            print(line)
            fflush(nil)
            guard line.contains(readyMarker), !killed.withLock({ $0 }) else { return }
            killed.withLock { $0 = true }
            kill(first.process.processIdentifier, SIGKILL)
        }
        first.process.waitUntilExit()
        overdue.cancel()
        guard killed.withLock({ $0 }), first.process.terminationReason == .uncaughtSignal,
            first.process.terminationStatus == SIGKILL
        else {
            throw ToolError(
                .failure,
                "the first phase ended (status \(first.process.terminationStatus)) before it could be killed")
        }
        print("---- the phone's process \(first.process.processIdentifier) was killed with SIGKILL ----")
        fflush(nil)
        let second = try child(.after, store: path, seed: seed)
        let secondOverdue = second.killWhenOverdue()
        _ = second.lines { line in
            print(line)
            fflush(nil)
        }
        second.process.waitUntilExit()
        secondOverdue.cancel()
        guard second.process.terminationReason == .exit, second.process.terminationStatus == 0 else {
            throw ToolError(.failure, "the second phase failed (status \(second.process.terminationStatus))")
        }
    }

    /// A child process of this tool running one phase, its standard output piped.
    struct Child {
        let process: Process
        let output: Pipe

        /// Kills the child if it is still running `phaseLimit` from now (a phase that stalls before its
        /// marker, or never ends); cancel it once the child has ended.
        func killWhenOverdue() -> DispatchWorkItem {
            let pid = process.processIdentifier
            let item = DispatchWorkItem { [process] in
                guard process.isRunning else { return }
                Output.stderr("ble: a phase of the demo overran \(phaseLimit); killed\n")
                kill(pid, SIGKILL)
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + phaseLimit, execute: item)
            return item
        }

        /// Hands each line of the child's output to `body` until the output ends; returns whether any came.
        func lines(_ body: (String) -> Void) -> Bool {
            var pending = Data()
            var any = false
            let handle = output.fileHandleForReading
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    any = true
                    body(line)
                }
            }
            if !pending.isEmpty {
                any = true
                body(String(decoding: pending, as: UTF8.self))
            }
            return any
        }
    }

    static func child(_ phase: Phase, store: String, seed: UInt64) throws -> Child {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executablePath)
        process.arguments = ["demo", "phone-restart", "--phase", phase.rawValue, "--store", store, "--seed", "\(seed)"]
        let output = Pipe()
        process.standardOutput = output
        var environment = ProcessInfo.processInfo.environment
        environment[parentVariable] = "\(getpid())"
        process.environment = environment
        do {
            try process.run()
        } catch {
            throw ToolError(.failure, "could not start the \(phase.rawValue) phase: \(error)")
        }
        return Child(process: process, output: output)
    }

    /// This tool's own executable.
    static var executablePath: String {
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return resolved
        }
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
    }
}
