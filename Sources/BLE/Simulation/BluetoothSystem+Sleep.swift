import BLESystem
import BLETransport

extension BluetoothSystem {
    /// Suspends the calling task for `duration` of this system's time: virtual time on a simulated radio (so a
    /// task on the radio's executor waits as the radio's devices do), wall-clock time over a real controller.
    /// Throws `CancellationError` at once if the task is or becomes cancelled.
    public func sleep(for duration: Duration) async throws {
        try await core.scheduler.sleep(for: duration)
    }
}
