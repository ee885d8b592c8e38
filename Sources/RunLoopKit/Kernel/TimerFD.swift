#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A CLOCK_MONOTONIC timerfd: a descriptor that becomes readable when its one-shot deadline
/// passes, so a deadline can sit in an epoll set beside sockets.
struct TimerFD: Sendable {
    let descriptor: FileDescriptor

    /// A disarmed, non-blocking, close-on-exec timer.
    init() throws(Errno) {
        let fd = try syscallRetryingEINTR {
            timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// Arms the timer to fire once at `deadline` (at once when it has passed), or disarms it
    /// with nil. Clears an expiry that was not read yet.
    func arm(at deadline: ContinuousClock.Instant?) {
        drain()
        var spec = itimerspec()
        if let deadline {
            let left = ContinuousClock.now.duration(to: deadline)
            let (seconds, attoseconds) = left.components
            if left <= .zero {
                spec.it_value.tv_nsec = 1
            } else {
                spec.it_value.tv_sec = Int(seconds)
                spec.it_value.tv_nsec = Int(attoseconds / 1_000_000_000)
                if spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0 { spec.it_value.tv_nsec = 1 }
            }
        }
        _ = timerfd_settime(descriptor.rawValue, 0, &spec, nil)
    }

    /// Reads (and so clears) a pending expiry, if any.
    func drain() {
        var expirations: UInt64 = 0
        _ = read(descriptor.rawValue, &expirations, MemoryLayout<UInt64>.size)
    }

    func close() { descriptor.close() }
}
