import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `monitor PID|NAME [--bytes N]`: a line per message the process's ports send or deliver, as
/// `busctl monitor` shows a bus — until interrupted. `--json`: JSON Lines, the first line the
/// process's acknowledgement (`{"monitoring":PID,"bytes":N}`), then one object per message, and
/// `{"dropped":N}` where the process could not keep up with this monitor.
enum Monitor {
    static func run(_ arguments: Arguments) throws {
        let target = try arguments.positional(0, "PID or NAME")
        try arguments.expectAtMost(1)
        let bytesText = arguments.options["--bytes"] ?? "0"
        guard let bytes = Int(bytesText), (0...65536).contains(bytes) else { throw Failure("--bytes needs 0–65536") }
        let pid = try resolveProcess(target)
        let endpoint = try Endpoint(pid: pid)
        var sendFailure: Error?
        do { try endpoint.send("monitor \(bytes)") } catch { sendFailure = error }
        guard let acknowledgement = try endpoint.receive() else {
            throw sendFailure ?? Failure("process \(pid) closed the connection")
        }
        if arguments.json {
            printJSON(acknowledgement)
        } else {
            FileHandle.standardError.write(Data("Monitoring process \(pid); interrupt to stop.\n".utf8))
        }
        while let record = try endpoint.receive(timeout: nil) {
            if arguments.json {
                printJSON(record)
            } else {
                say(line(record))
            }
        }
        throw Failure("process \(pid) went away")
    }

    static func line(_ record: [String: Any]) -> String {
        if let dropped = record["dropped"] { return "-- \(dropped) message(s) dropped: this monitor did not keep up" }
        let nanoseconds = (record["time"] as? NSNumber)?.int64Value ?? 0
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        let time = String(format: "%02d:%02d:%02d.%06d", parts.tm_hour, parts.tm_min, parts.tm_sec,
                          Int(nanoseconds % 1_000_000_000) / 1000)
        let direction = (record["direction"] as? String ?? "?").padding(toLength: 9, withPad: " ", startingAt: 0)
        var text = "\(time) \(direction) \(record["port"] as? String ?? "?")"
        if let name = record["name"] as? String { text += " (\(name))" }
        text += " msgid \(record["msgid"] ?? "?")"
        let components = (record["components"] as? [[String: Any]] ?? []).map { component -> String in
            guard component["type"] as? String == "data" else { return "port" }
            return "data \(component["size"] ?? 0)" + ((component["hex"] as? String).map { " \($0)" } ?? "")
        }
        text += " [\(components.joined(separator: ", "))]"
        if (record["reply"] as? Bool) == true { text += " +reply" }
        if let sender = record["sender"] as? [String: Any] { text += " from pid \(sender["pid"] ?? "?") uid \(sender["uid"] ?? "?")" }
        return text
    }
}
