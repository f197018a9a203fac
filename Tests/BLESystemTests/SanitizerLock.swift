// Under ThreadSanitizer (`Scripts/sanitizers.sh`, `-DBLE_TSAN`), the tests' `Mutex` is one the sanitizer
// understands (BLETransport's `SanitizedMutex`); otherwise it is the standard library's.
#if BLE_TSAN
    import BLETransport
    typealias Mutex<Value> = SanitizedMutex<Value>
#endif
