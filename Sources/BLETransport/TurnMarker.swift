#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which serial domain (`HostScheduler.execute`) the calling thread is working in, if any: a thread-local value
/// the domain sets around the work it runs, so that work arriving from inside it runs at once and work from
/// anywhere else waits its turn. The value is the domain's identity (an object's address, never dereferenced).
public enum TurnMarker {
    /// One key for the process: a thread works in one domain at a time (a domain's work that reaches another
    /// domain's runs with that one's mark, and the first's comes back after).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "no thread-local key for the serial domains (pthread_key_create: \(status))")
        return key
    }()

    /// The domain the calling thread works in.
    public static var current: UnsafeMutableRawPointer? { pthread_getspecific(key) }

    /// Runs `body` marked as work of `domain`, and puts the previous mark back after.
    public static func run<T>(in domain: UnsafeMutableRawPointer, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, domain)
        defer { pthread_setspecific(key, previous) }
        return try body()
    }
}
