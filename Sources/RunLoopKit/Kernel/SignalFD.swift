#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A non-blocking, close-on-exec signalfd(2): the signals in its set, once blocked, are
/// queued to this descriptor instead of running a handler, and read back as records.
///
/// A signalfd reports the signals pending for the process and for the *reading* thread, so
/// it is read on the thread that waits on it (the run loop's). A signal that is not blocked
/// in the thread the kernel picks for it is delivered the ordinary way and never reaches the
/// descriptor: see `SignalFD.block(_:)`.
struct SignalFD: Sendable {
    let descriptor: FileDescriptor

    /// Creates a signalfd for `signals`. Throws EINVAL for a number outside 1...SIGRTMAX or
    /// for SIGKILL/SIGSTOP (which the kernel would silently leave out), or the errno of
    /// signalfd(2) (EMFILE, ENFILE, ENOMEM).
    init(signals: [Int32]) throws(Errno) {
        var set = try Self.makeSet(signals)
        let fd = try syscallRetryingEINTR { signalfd(-1, &set, Int32(SFD_NONBLOCK | SFD_CLOEXEC)) }
        descriptor = FileDescriptor(rawValue: fd)
    }

    /// Reads every queued record and calls `body` with its signal number, in the order the
    /// kernel reports them. Returns when nothing more is queued (EAGAIN). Standard signals
    /// are not queued twice: one sent again before it was read is reported once.
    func drain(_ body: (Int32) -> Void) {
        let recordSize = MemoryLayout<signalfd_siginfo>.size
        let batch = 8
        withUnsafeTemporaryAllocation(byteCount: recordSize * batch, alignment: 8) { buffer in
            while true {
                guard let n = try? syscallRetryingEINTR({ read(descriptor.rawValue, buffer.baseAddress, buffer.count) }),
                      n >= recordSize else { return }
                for record in 0..<(n / recordSize) {
                    body(Int32(bitPattern: buffer.load(fromByteOffset: record * recordSize, as: signalfd_siginfo.self).ssi_signo))
                }
                if n < buffer.count { return }
            }
        }
    }

    func close() { descriptor.close() }

    /// Blocks `signals` in the calling thread (pthread_sigmask(SIG_BLOCK)). Threads created
    /// afterwards by this thread inherit the mask; threads that already exist keep theirs.
    static func block(_ signals: [Int32]) throws(Errno) {
        try mask(SIG_BLOCK, signals)
    }

    /// Unblocks `signals` in the calling thread. Signals still pending are delivered at once.
    static func unblock(_ signals: [Int32]) throws(Errno) {
        try mask(SIG_UNBLOCK, signals)
    }

    /// True when `signal` can be caught, blocked and read from a signalfd: a valid number
    /// other than SIGKILL and SIGSTOP.
    static func isCatchable(_ signal: Int32) -> Bool {
        var set = sigset_t()
        sigemptyset(&set)
        return signal != SIGKILL && signal != SIGSTOP && sigaddset(&set, signal) == 0
    }

    /// True when `signal` is blocked in the calling thread.
    static func isBlocked(_ signal: Int32) -> Bool {
        var current = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &current)
        return sigismember(&current, signal) == 1
    }

    private static func mask(_ how: Int32, _ signals: [Int32]) throws(Errno) {
        var set = try makeSet(signals)
        let rc = pthread_sigmask(how, &set, nil)   // returns the error number; does not set errno
        if rc != 0 { throw Errno(rawValue: rc) }
    }

    private static func makeSet(_ signals: [Int32]) throws(Errno) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals {
            guard isCatchable(signal) else { throw Errno(rawValue: EINVAL) }
            sigaddset(&set, signal)
        }
        return set
    }
}
