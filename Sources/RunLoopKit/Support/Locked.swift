#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a pthread mutex (package-wide: RunLoopKitSystemd uses it too).
///
/// Used instead of `Synchronization.Mutex` for two reasons: the loop's state holds
/// non-Sendable bookkeeping (key paths, shared `ModeState` objects) that `Mutex` would demand be
/// `sending`, and ThreadSanitizer intercepts pthread mutexes but does not see the futex-based
/// `Mutex` as synchronisation, so every access it guards would be reported as a race.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Guarded by `mutex`; the runtime exclusivity check would only repeat what the lock ensures.
    @exclusivity(unchecked) private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0, "RunLoopKit: pthread_mutex_init failed")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
