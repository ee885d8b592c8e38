import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings: defaults, overridden by an optional file of `key = value` lines
/// (`request_interval_ms`, `status_interval_ms`, `drain_timeout_ms`; `#` comments), re-read
/// on SIGHUP.
struct Configuration: Sendable, CustomStringConvertible {
    var requestInterval: Duration = .milliseconds(20)   // how often a request is accepted
    var statusInterval: Duration = .seconds(1)          // how often STATUS= is sent
    var drainTimeout: Duration = .seconds(5)            // how long SIGTERM waits for replies

    static func load(path: String?) throws -> Configuration {
        var configuration = Configuration()
        guard let path else { return configuration }
        for line in try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isNewline) {
            let words = line.prefix { $0 != "#" }.split { $0 == "=" || $0 == " " || $0 == "\t" }
            guard !words.isEmpty else { continue }
            guard words.count == 2, let ms = Int64(words[1]), ms > 0 else {
                log("\(path): ignoring '\(line)'")
                continue
            }
            switch words[0] {
            case "request_interval_ms": configuration.requestInterval = .milliseconds(ms)
            case "status_interval_ms": configuration.statusInterval = .milliseconds(ms)
            case "drain_timeout_ms": configuration.drainTimeout = .milliseconds(ms)
            default: log("\(path): unknown key '\(words[0])'")
            }
        }
        return configuration
    }

    var description: String {
        "request every \(requestInterval), status every \(statusInterval), drain within \(drainTimeout)"
    }
}

/// One line on stderr, for diagnostics.
func log(_ text: String) {
    writeLine("example-daemon: \(text)", to: STDERR_FILENO)
}

/// One line on stdout ("ready", "reloaded", "stopping", "stopped: …") for scripts and tests
/// that drive the daemon: one unbuffered write(2) per line.
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
