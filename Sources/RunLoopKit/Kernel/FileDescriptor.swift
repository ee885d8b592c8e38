#if canImport(Glibc)
import Glibc
#endif

/// A raw file descriptor owned by the kernel layer. A value type: whoever created it
/// is responsible for calling `close()` exactly once.
struct FileDescriptor: Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32

    init(rawValue: Int32) { self.rawValue = rawValue }

    /// Closes the descriptor. EINTR is not retried: on Linux the descriptor is gone
    /// whatever close(2) returns, and retrying could close a descriptor reused by another thread.
    func close() {
        _ = Glibc.close(rawValue)
    }

    var description: String { "fd \(rawValue)" }
}
