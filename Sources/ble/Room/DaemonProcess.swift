import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A program started in the background in a session of its own from its first instruction, so that no signal of
/// the caller's terminal (a Ctrl-C, a hang-up) ever reaches it. Foundation's `Process` cannot do that: its child
/// starts in the caller's session and is out of reach only once it has called `setsid` itself. Its standard input
/// is /dev/null, its output and errors are appended to a log, it inherits no other open file of the caller's, and
/// its signals start at their defaults, none blocked.
///
/// The caller is its parent and collects its exit: `isRunning` while it waits for it to start, `reapWhenItEnds`
/// once it lets it run on.
struct DaemonProcess: Sendable {
    let pid: pid_t

    /// Starts `executable` with `arguments`, its output appended to `log` (made, mode 0600, when missing).
    static func spawn(_ executable: String, arguments: [String], log: String) throws(ToolError) -> DaemonProcess {
        // Opened here, not in the child, so that a log that cannot be written is named as such. Close-on-exec, and
        // above standard error, so that the child keeps only the two copies made for it below.
        var output = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if output >= 0, output <= STDERR_FILENO {
            let moved = fcntl(output, F_DUPFD_CLOEXEC, STDERR_FILENO + 1)
            close(output)
            output = moved
        }
        guard output >= 0 else {
            throw ToolError(.transport, "cannot open \(log): \(String(cString: strerror(errno)))")
        }
        defer { close(output) }

        #if canImport(Darwin)
            var actions: posix_spawn_file_actions_t?
            var attributes: posix_spawnattr_t?
        #else
            var actions = posix_spawn_file_actions_t()
            var attributes = posix_spawnattr_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, output, STDERR_FILENO)
        var flags = spawnNewSession | Int32(POSIX_SPAWN_SETSIGDEF) | Int32(POSIX_SPAWN_SETSIGMASK)
        #if canImport(Darwin)
            flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #else
            // What Darwin's POSIX_SPAWN_CLOEXEC_DEFAULT does: every other file the child would inherit is closed.
            for descriptor in inheritedDescriptors() {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        #endif
        posix_spawnattr_setflags(&attributes, Int16(truncatingIfNeeded: flags))
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv + environment { free(pointer) }
        }
        var pid: pid_t = 0
        let failure = posix_spawn(&pid, executable, &actions, &attributes, argv, environment)
        guard failure == 0 else {
            throw ToolError(.transport, "cannot start \(executable): \(String(cString: strerror(failure)))")
        }
        return DaemonProcess(pid: pid)
    }

    /// Whether it still runs. Once it has ended, this collects its exit (without waiting) and says false, then and
    /// every time after.
    var isRunning: Bool {
        var status: Int32 = 0
        var result: pid_t
        repeat {
            result = waitpid(pid, &status, WNOHANG)
        } while result < 0 && errno == EINTR
        return result == 0
    }

    /// Asks it to end (SIGTERM) if it still runs, and collects its exit when it does.
    func terminate() {
        // Only while it is ours and not yet collected: after that its number may be another process's.
        guard isRunning else { return }
        kill(pid, SIGTERM)
        reapWhenItEnds()
    }

    /// Collects its exit whenever it ends, so that it does not linger as a zombie under a caller that outlives it
    /// (`ble serve` while the room it started stops). Nothing else may wait for it after this.
    func reapWhenItEnds() {
        let pid = pid
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    #if !canImport(Darwin)
        /// This process's open files above standard error that a child would inherit (not close-on-exec).
        private static func inheritedDescriptors() -> [Int32] {
            let candidates: [Int32]
            if let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
                candidates = names.compactMap { Int32($0) }
            } else {
                candidates = Array(0..<Int32(min(sysconf(Int32(_SC_OPEN_MAX)), 4096)))
            }
            // A closed one (the listing's own, say) answers -1, which has the bit set.
            return candidates.filter { $0 > STDERR_FILENO && fcntl($0, F_GETFD) & FD_CLOEXEC == 0 }
        }
    #endif
}

#if canImport(Darwin)
    private let spawnNewSession = Int32(POSIX_SPAWN_SETSID)
#else
    /// glibc's POSIX_SPAWN_SETSID (spawn.h, since glibc 2.26), which the Glibc module leaves out: the header defines
    /// it only under _GNU_SOURCE.
    private let spawnNewSession: Int32 = 0x80
#endif
