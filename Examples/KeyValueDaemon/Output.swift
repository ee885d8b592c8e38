#if canImport(Glibc)
import Glibc
#endif

/// One line on stderr, for diagnostics.
func log(_ text: String) {
    writeLine("kv-daemon: \(text)", to: STDERR_FILENO)
}

/// One line on stdout ("ready port=…", "stopping", "stopped: …") for scripts and tests that
/// drive the daemon: one unbuffered write(2) per line.
func say(_ text: String) {
    writeLine(text, to: STDOUT_FILENO)
}

private func writeLine(_ text: String, to fd: Int32) {
    var line = text + "\n"
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}
