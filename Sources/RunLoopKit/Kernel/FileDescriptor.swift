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

extension FileDescriptor {
    /// The first line of a small kernel file (`/proc`, `/sys`), without its newline, from one
    /// read(2) of at most `capacity` bytes; nil when it cannot be opened or reads nothing.
    /// Any thread; an open, a read and a close.
    static func firstLine(ofFile path: String, capacity: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var buffer = [UInt8](repeating: 0, count: capacity)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
    }
}
