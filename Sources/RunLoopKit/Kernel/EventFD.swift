#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A non-blocking, close-on-exec eventfd used as a doorbell.
///
/// Doorbells are registered edge-triggered and are never read: each `ring()` makes a new
/// edge, which is all a sleeping epoll needs, and the counter (at most one increment per
/// burst, see callers) cannot reach its 2^64-2 limit in the lifetime of a process.
/// That saves the read(2) a level-triggered doorbell would cost on every wake-up.
struct EventFD: Sendable {
    let descriptor: FileDescriptor

    /// Creates the eventfd. Throws the errno (EMFILE, ENFILE, ENOMEM) on failure.
    init() throws(Errno) {
        let fd = try syscallRetryingEINTR { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// Adds one to the counter, waking every epoll that watches it.
    /// EAGAIN (counter saturated) already means "rung", so it is not an error.
    func ring() {
        _ = try? syscallRetryingEINTR { crlk_eventfd_ring(descriptor.rawValue) }
    }

    func close() { descriptor.close() }
}
