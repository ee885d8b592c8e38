import Foundation

/// `status PID|NAME`: each loop of the process, as it describes itself (dumpsys, busctl status).
enum Status {
    static func run(_ arguments: Arguments) throws {
        let target = try arguments.positional(0, "PID or NAME")
        try arguments.expectAtMost(1)
        let pid = try resolveProcess(target)
        let report = try Endpoint.ask(pid, "status")
        if arguments.json {
            printJSON(report)
            return
        }
        say("process \(report["pid"] ?? pid) (\(report["command"] as? String ?? "?")), uid \(report["uid"] ?? "?")")
        for case let loop as [String: Any] in report["loops"] as? [Any] ?? [] {
            describe(loop)
        }
    }

    static func text(_ value: Any?) -> String {
        switch value {
        case let string as String: string
        case let number as NSNumber: number.stringValue
        default: "-"
        }
    }

    static func seconds(_ value: Any?) -> String {
        guard let number = value as? NSNumber else { return "-" }
        let seconds = number.doubleValue
        return seconds.magnitude < 1 ? String(format: "%.1f ms", seconds * 1000) : String(format: "%.3f s", seconds)
    }

    static func describe(_ loop: [String: Any]) {
        let name = (loop["thread"] as? String).map { " \"\($0)\"" } ?? ""
        var line = "\nthread \(text(loop["tid"]))\(name)\((loop["main"] as? Bool) == true ? " (main)" : ""): \(text(loop["state"]))"
        if let mode = loop["mode"] as? String { line += " in \(mode)" }
        say(line)
        if let callout = loop["callout"] as? [String: Any] {
            var what = text(callout["kind"])
            if let label = callout["label"] as? String { what += " \"\(label)\"" }
            if let msgid = callout["msgid"] as? NSNumber { what += " msgid \(msgid)" }
            say("  callout: \(what) in \(text(callout["mode"])) for \(seconds(callout["seconds"]))")
        } else if (loop["calloutsVisible"] as? Bool) != true && text(loop["state"]) == "running" {
            say("  callout: (not published: no HangWatch watches this loop)")
        }
        if let statistics = loop["statistics"] as? [String: Any] {
            say("  passes \(text(statistics["passes"])), wake-ups \(text(statistics["wakeUps"])), "
                + "handled sources \(text(statistics["handledSources"])), timer fires \(text(statistics["timerFires"])), "
                + "pending blocks \(text(loop["pendingBlocks"]))")
        }
        if let common = loop["commonItems"] as? [String: Any] { items("common modes", common) }
        for case let mode as [String: Any] in loop["modes"] as? [Any] ?? [] {
            items("mode \(text(mode["name"]))\((mode["common"] as? Bool) == true ? " (common)" : "")",
                  mode["items"] as? [String: Any] ?? [:])
        }
    }

    static func label(_ item: [String: Any]) -> String {
        (item["label"] as? String).map { " \"\($0)\"" } ?? ""
    }

    static func items(_ title: String, _ items: [String: Any]) {
        var lines: [String] = []
        for case let port as [String: Any] in items["ports"] as? [Any] ?? [] {
            let name = (port["name"] as? String).map { " published as \($0)" } ?? ""
            lines.append("port\(label(port))\(name): queued \(text(port["queued"]))/\(text(port["queueLimit"])), "
                + "sent \(text(port["sent"])), delivered \(text(port["delivered"])), discarded \(text(port["discarded"])), "
                + "high water \(text(port["queueHighWater"])), senders blocked \(text(port["sendersBlocked"]))")
        }
        for case let timer as [String: Any] in items["timers"] as? [Any] ?? [] {
            lines.append("timer\(label(timer)): fires in \(seconds(timer["firesIn"])), interval \(seconds(timer["interval"]))")
        }
        for case let source as [String: Any] in items["sources"] as? [Any] ?? [] {
            lines.append("source\(label(source)) order \(text(source["order"]))\((source["signalled"] as? Bool) == true ? ", signalled" : "")")
        }
        for case let source as [String: Any] in items["fileDescriptorSources"] as? [Any] ?? [] {
            lines.append("fd source\(label(source)) fd \(text(source["fd"]))")
        }
        for case let observer as [String: Any] in items["observers"] as? [Any] ?? [] {
            lines.append("observer\(label(observer))")
        }
        guard !lines.isEmpty else { return }
        say("  \(title):")
        for line in lines { say("    \(line)") }
    }
}
