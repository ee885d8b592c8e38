#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex with a condition variable on CLOCK_MONOTONIC, for the places where a
/// thread must sleep in the kernel until another changes some state (senders blocked on a
/// full port, `perform(waitUntilDone:)`, thread start-up). Uncontended lock/unlock never
/// enters the kernel; waiting is a futex sleep, never a poll.
///
/// The state it protects lives in the owner's own (class) storage and is touched only
/// between `lock()` and `unlock()`: `wait` must be able to drop the lock while another
/// thread mutates that state, which an `inout` closure argument would forbid.
final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        precondition(pthread_mutex_init(mutex, nil) == 0, "RunLoopKit: pthread_mutex_init failed")
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        precondition(pthread_cond_init(condition, &attributes) == 0, "RunLoopKit: pthread_cond_init failed")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    @inline(__always) func lock() { pthread_mutex_lock(mutex) }
    @inline(__always) func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Called with the lock held: sleeps until `signal()`, `broadcast()` or `deadline` (nil: none).
    /// Returns false once the deadline has passed. Spurious wake-ups return true; callers
    /// re-check their condition in a loop.
    func wait(until deadline: ContinuousClock.Instant?) -> Bool {
        guard let deadline else {
            pthread_cond_wait(condition, mutex)
            return true
        }
        let remaining = ContinuousClock.now.duration(to: deadline).nanoseconds
        guard remaining > 0 else { return false }
        var absolute = Self.monotonicTimespec(afterNanoseconds: remaining)
        return pthread_cond_timedwait(condition, mutex, &absolute) != ETIMEDOUT
    }

    /// Wakes every waiter; call after changing the state they wait on.
    func broadcast() {
        pthread_cond_broadcast(condition)
    }

    /// Wakes at least one of the threads waiting at the time of the call. Where the change made room
    /// for more than one waiter, the one woken must wake the next (as `MessagePort` senders do).
    func signal() {
        pthread_cond_signal(condition)
    }

    /// CLOCK_MONOTONIC now + `nanoseconds` (ContinuousClock deadlines are converted through a
    /// relative duration; the two clocks differ only across suspend, where a wait ends late,
    /// never early). Waits beyond ~68 years are cut to that, which no caller can tell from
    /// forever, so that the sum cannot overflow `tv_sec`.
    private static func monotonicTimespec(afterNanoseconds nanoseconds: Int64) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        var result = timespec(tv_sec: now.tv_sec + Int(min(nanoseconds / 1_000_000_000, Int64(Int32.max))),
                              tv_nsec: now.tv_nsec + Int(nanoseconds % 1_000_000_000))
        if result.tv_nsec >= 1_000_000_000 {
            result.tv_sec += 1
            result.tv_nsec -= 1_000_000_000
        }
        return result
    }
}
