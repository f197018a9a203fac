import Foundation
import Synchronization

/// A request to stop (Ctrl-C's SIGINT, SIGTERM, Ctrl-\'s SIGQUIT, or the output closing) as a flag the run loops
/// poll, so commands stop cleanly: links closed politely, the store flushed.
final class Interrupt: Sendable {
    static let shared = Interrupt()
    private let flag = Mutex(false)

    /// The signals that stop a command that polls `fired`.
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGQUIT, SIGHUP]

    var fired: Bool { flag.withLock { $0 } || StopSignal.received != 0 }

    /// The status a command stopped by `fired` exits with: 128 plus the signal's number, as a shell reports a
    /// command the signal ended (130 for SIGINT, 143 for SIGTERM, 131 for SIGQUIT, 129 for SIGHUP); 130 when no
    /// signal came.
    var status: Int32 {
        let signal = StopSignal.received
        return signal == 0 ? 128 + SIGINT : 128 + signal
    }

    /// After Ctrl-C at a terminal, which echoed "^C" where the cursor was: a line end, so what the command (or the
    /// shell, after it) prints next starts a line of its own ("^Cstopped", "^Crc=130" before).
    /// Once per process: `ble serve` calls it before "stopped", the tool's main after any command.
    func endEchoedLine() {
        guard StopSignal.received == SIGINT, isatty(STDERR_FILENO) == 1 else { return }
        guard
            lineEnded.withLock({ ended in
                defer { ended = true }
                return !ended
            })
        else { return }
        Output.stderr("\n")
    }
    private let lineEnded = Mutex(false)

    /// Ends the command as Ctrl-C would (its output closed, say).
    func fire() {
        flag.withLock { $0 = true }
    }

    /// Installs the handlers (idempotent).
    func install() {
        StopSignal.install(Self.signals)
    }
}

/// The signal that asked the tool to stop, set by a C signal handler that does nothing else, for run loops to
/// poll. The handler is in place when `install` returns, so a signal sent at once (a script that signals as soon
/// as the tool says it is ready) is never lost: a dispatch signal source, armed some time after it is resumed,
/// left a moment in which the signal, set to be ignored for the source's sake, was dropped.
enum StopSignal {
    /// The last stop signal's number, 0 before any.
    static var received: Int32 { stopSignalNumber.load(ordering: .relaxed) }

    /// The signal's name, as `kill -l` gives it with its prefix.
    static func name(_ number: Int32) -> String {
        switch number {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGQUIT: "SIGQUIT"
        case SIGHUP: "SIGHUP"
        default: "signal \(number)"
        }
    }

    static func install(_ numbers: [Int32]) {
        // The atomic is a lazily made global: made here, so a handler never runs its one-time initialisation.
        _ = stopSignalNumber.load(ordering: .relaxed)
        for number in numbers {
            signal(number) { stopSignalNumber.store($0, ordering: .relaxed) }
        }
    }
}

/// An atomic store is all a signal handler may do here (it is async-signal-safe).
private let stopSignalNumber = Atomic<Int32>(0)
