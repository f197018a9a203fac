#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutual-exclusion lock over a value, on a POSIX mutex: the lock that ThreadSanitizer builds use in place of
/// the standard library's `Mutex` (`Scripts/sanitizers.sh` passes `-DBLE_TSAN`).
///
/// `Synchronization.Mutex` locks with atomic futex operations inside a library that is not instrumented, so
/// ThreadSanitizer sees no ordering between two critical sections and reports every access under the lock as a
/// race. `pthread_mutex_lock` is one of the calls it intercepts. Each module that takes locks declares, under
/// `BLE_TSAN` only, `typealias Mutex<Value> = SanitizedMutex<Value>`, which shadows the standard one for that
/// module's code: the same source, checked by the sanitizer, with the lock it understands. Release builds keep
/// `Synchronization.Mutex`.
public final class SanitizedMutex<Value>: @unchecked Sendable {
    // @unchecked: `value` is touched only between `pthread_mutex_lock` and `pthread_mutex_unlock`.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    public func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    public func withLockIfAvailable<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
