#if canImport(Glibc)
import Glibc
#endif

/// What the kernel says of a pidfd's process in /proc/self/fdinfo: its pid in each pid
/// namespace from this process's down to its own ("NSpid:").
extension ProcessDescriptor {
    /// How many pid namespaces below this process's the process lives: 0 in this process's own
    /// namespace, `Int.max` when it cannot be seen from here ("NSpid: 0": outside this
    /// namespace's tree), nil when the kernel does not say (no procfs, a kernel without the
    /// line). One open, read and close of /proc/self/fdinfo/<fd>.
    var pidNamespaceDepth: Int? {
        let path = "/proc/self/fdinfo/\(descriptor.rawValue)"
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        var length = 0
        while length < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + length, $0.count - length) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            length += n
        }
        for line in bytes[..<length].split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("NSpid:".utf8)) {
            let fields = line.dropFirst(6).split(whereSeparator: { $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: " ") })
            guard let first = fields.first else { return nil }
            return first.elementsEqual([UInt8(ascii: "0")]) ? Int.max : fields.count - 1
        }
        return nil
    }
}
