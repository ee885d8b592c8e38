#if canImport(Glibc)
import Glibc
#endif

/// An errno value returned by a failed system call.
///
/// Only the kernel layer produces these; the layers above translate them into the
/// public error types (`PortError`, …) at the API boundary.
struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32

    init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno`, read right after a failing call.
    static var current: Errno { Errno(rawValue: errno) }

    static let interrupted = Errno(rawValue: EINTR)
    static let wouldBlock = Errno(rawValue: EAGAIN)
    /// Not an open descriptor.
    static let badDescriptor = Errno(rawValue: EBADF)
    /// The operation is not supported on this file (epoll on a regular file or /dev/null).
    static let notPermitted = Errno(rawValue: EPERM)
    static let noEntry = Errno(rawValue: ENOENT)

    /// True for the errno values that mean "the process or system ran out of something".
    var isResourceExhaustion: Bool {
        [EMFILE, ENFILE, ENOMEM, ENOSPC, ENOBUFS].contains(rawValue)
    }

    var description: String { "errno \(rawValue) (\(String(cString: strerror(rawValue))))" }
}

/// Runs a system call that reports failure as -1 + errno, retrying on EINTR.
@inline(__always)
func syscallRetryingEINTR<T: FixedWidthInteger>(_ body: () -> T) throws(Errno) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let error = Errno.current
        if error != .interrupted { throw error }
    }
}
