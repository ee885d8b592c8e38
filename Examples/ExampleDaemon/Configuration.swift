import ExampleWire
import FoundationEssentials
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings: defaults, overridden by an optional file of `key = value` lines
/// (`name`, `access`, `status_interval_ms`, `drain_timeout_ms`, `log_requests`, `slow_callout_ms`,
/// `hang_threshold_ms`, `max_rounds`; `#` comments), re-read on SIGHUP (`name`, `access` and the
/// two health thresholds apply at start-up only: clients hold connections to the name, and the
/// watches are set up once; so does `max_rounds` for the distributed actor, made once).
struct Configuration: Sendable, CustomStringConvertible {
    var name = Wire.defaultName                          // the service port's published name
    var access: MessagePort.Access = .sameUser           // who may send requests
    var statusInterval: Duration = .seconds(1)          // how often STATUS= is sent
    var drainTimeout: Duration = .seconds(5)            // how long SIGTERM waits for replies
    var logRequests = false                             // a line on stderr per request, naming its client
    var slowCallout: Duration = .milliseconds(100)      // a callout this long is logged
    var hangThreshold: Duration = .seconds(1)           // a loop stuck this long is logged
    var maxRounds = Wire.defaultMaxRounds               // more in one request is refused, not worked on

    static func load(path: String?) throws -> Configuration {
        var configuration = Configuration()
        guard let path else { return configuration }
        for line in try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isNewline) {
            let words = line.prefix { $0 != "#" }.split { $0 == "=" || $0 == " " || $0 == "\t" }
            guard !words.isEmpty else { continue }
            guard words.count == 2 else {
                log("\(path): ignoring '\(line)'")
                continue
            }
            let value = String(words[1])
            switch (words[0], Int64(value)) {
            case ("name", _): configuration.name = value
            case ("access", _):
                guard let access = parseAccess(value) else {
                    log("\(path): access must be same-user, anyone, users:UID,… or groups:GID,…")
                    continue
                }
                configuration.access = access
            case ("status_interval_ms", let ms?) where ms > 0: configuration.statusInterval = .milliseconds(ms)
            case ("drain_timeout_ms", let ms?) where ms > 0: configuration.drainTimeout = .milliseconds(ms)
            case ("log_requests", _) where value == "yes" || value == "no": configuration.logRequests = value == "yes"
            case ("slow_callout_ms", let ms?) where ms >= 0: configuration.slowCallout = .milliseconds(ms)
            case ("hang_threshold_ms", let ms?) where ms > 0: configuration.hangThreshold = .milliseconds(ms)
            case ("max_rounds", _) where UInt64(value).map({ $0 > 0 }) == true: configuration.maxRounds = UInt64(value)!
            default: log("\(path): ignoring '\(line)'")
            }
        }
        return configuration
    }

    var description: String {
        "name \(name), access \(access), status every \(statusInterval), drain within \(drainTimeout), "
            + "slow callouts from \(slowCallout), hangs from \(hangThreshold), at most \(maxRounds) rounds a request"
            + (logRequests ? ", logging requests" : "")
    }

    private static func parseAccess(_ text: String) -> MessagePort.Access? {
        func ids(_ list: Substring) -> Set<UInt32>? {
            let ids = list.split(separator: ",").compactMap { UInt32($0) }
            return ids.isEmpty ? nil : Set(ids)
        }
        switch text {
        case "same-user": return .sameUser
        case "anyone": return .anyone
        case _ where text.hasPrefix("users:"): return ids(text.dropFirst(6)).map(MessagePort.Access.users)
        case _ where text.hasPrefix("groups:"): return ids(text.dropFirst(7)).map(MessagePort.Access.groups)
        default: return nil
        }
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
