import Foundation
#if canImport(Glibc)
import Glibc
#endif
import PackageTestSupport
import RunLoopKit
import Testing

// The real `runloopctl` against a real daemon (Tests/IntrospectionHost), both found beside the
// test bundle.
private let runloopctl = executableBesideTests("runloopctl")
private let host = executableBesideTests("IntrospectionHost")

/// A running IntrospectionHost publishing a unique name; killed (by its pid) on `stop()`.
private final class Daemon {
    let pid: pid_t
    let name: String
    private let output: Int32

    init(introspection: Bool) throws {
        name = "introspect-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        (pid, output) = try spawnDaemon(host, ["serve", name],
                                        environment: introspection ? ["RUNLOOPKIT_INTROSPECTION": "1"] : [:],
                                        listeningSocket: nil, activationName: "")
        var seen = ""
        let deadline = ContinuousClock.now + .seconds(30)
        while !seen.contains("ready\n") {
            guard pollReady(output, before: deadline) else { stop(); throw TestFailure("daemon not ready: \(seen)") }
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = read(output, &buffer, buffer.count)
            guard n > 0 else { stop(); throw TestFailure("daemon exited: \(seen)") }
            seen += String(decoding: buffer[..<n], as: UTF8.self)
        }
    }

    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(output)
    }
}

/// A running `runloopctl monitor --json`, read line by line.
private final class MonitorChild {
    let pid: pid_t
    private let output: Int32
    private var pending = ""
    private(set) var lines: [String] = []

    init(_ target: String, bytes: Int = 0) throws {
        (pid, output) = try spawnDaemon(runloopctl, ["monitor", target, "--json", "--bytes", String(bytes)], environment: [:],
                                        listeningSocket: nil, activationName: "")
    }

    /// Reads until `condition` holds for the lines so far (false after 30 s, or at end of output).
    func read(until condition: ([String]) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition(lines) {
            guard pollReady(output, before: deadline) else { return false }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = Glibc.read(output, &buffer, buffer.count)
            guard n > 0 else { return false }
            pending += String(decoding: buffer[..<n], as: UTF8.self)
            while let newline = pending.firstIndex(of: "\n") {
                lines.append(String(pending[..<newline]))
                pending = String(pending[pending.index(after: newline)...])
            }
        }
        return true
    }

    var records: [[String: Any]] { lines.compactMap { try? json($0) as? [String: Any] } }

    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(output)
    }
}

/// The daemon's open descriptors and threads.
private func resources(_ pid: pid_t) -> (descriptors: Int, threads: Int) {
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? -1
    return (fds, tasks)
}

/// runloopctl's exit code and stdout (or stderr, `capturing: 2`).
private func ctl(_ arguments: [String], capturing: Int32 = 1, asNobody: Bool = false) throws -> (code: Int32?, text: String) {
    let outcome = asNobody
        ? runChild("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", runloopctl] + arguments,
                   capturing: capturing, timeout: .seconds(60))
        : runChild(runloopctl, arguments, capturing: capturing, timeout: .seconds(60))
    let result = try #require(outcome, "could not start runloopctl")
    return (result.exitCode, result.output)
}

private func json(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8))
}

@Suite("§3.44–3.48 runloopctl", .serialized)
struct IntrospectionTests {
    @Test("§3.44 without Introspection.enable() a process has no introspection thread, descriptor or name; enable adds them and disable removes them all")
    func offCostsNothing() throws {
        let outcome = try #require(runChild(host, ["counts"], timeout: .seconds(60)))
        #expect(outcome.exitCode == 0, "\(outcome.output)")
        let lines = outcome.output.split(separator: "\n").map(String.init)
        func numbers(_ stage: String) throws -> (threads: Int, descriptors: Int, endpoint: Bool) {
            let line = try #require(lines.first { $0.hasPrefix("\(stage): ") }, "\(outcome.output)")
            let words = line.split(whereSeparator: { $0 == " " || $0 == "," })
            let threads = try #require(words.firstIndex(of: "threads").flatMap { Int(words[$0 + 1]) })
            let descriptors = try #require(words.firstIndex(of: "descriptors").flatMap { Int(words[$0 + 1]) })
            return (threads, descriptors, words.last == "true")
        }
        let off = try numbers("off"), on = try numbers("on"), offAgain = try numbers("off again")
        #expect(!off.endpoint && on.endpoint && !offAgain.endpoint)
        #expect(on.threads == off.threads + 1)
        #expect(on.descriptors > off.descriptors)
        #expect(offAgain.threads == off.threads && offAgain.descriptors == off.descriptors)
        #expect(lines.contains("enabled: true") && lines.last == "enabled: false")
    }

    @Test("§3.44 runloopctl list shows a published name with its publisher's pid, uid and command, without introspection")
    func listWithoutIntrospection() throws {
        let daemon = try Daemon(introspection: false)
        defer { daemon.stop() }
        // The kernel's socket table is read in pieces, and a test run that makes and closes
        // sockets meanwhile can make one read miss an entry: a few reads, as a hang guard.
        var listed: (code: Int32?, text: String, entry: [String: Any]?) = (nil, "", nil)
        for _ in 0..<5 where listed.entry == nil {
            let (code, text) = try ctl(["list", "--json"])
            let names = try #require(try json(text) as? [[String: Any]])
            listed = (code, text, names.first { $0["name"] as? String == daemon.name })
        }
        #expect(listed.code == 0)
        let entry = try #require(listed.entry, "\(listed.text)")
        #expect((entry["pid"] as? NSNumber)?.int32Value == daemon.pid)
        #expect((entry["uid"] as? NSNumber)?.uint32Value == geteuid())
        #expect((entry["scope"] as? NSNumber)?.uint32Value == geteuid())
        #expect((entry["command"] as? String).map { "IntrospectionHost".hasPrefix($0) } == true)
        #expect(entry["introspection"] as? Bool == false)
        // The human form names it too; status needs introspection and says so.
        let (_, table) = try ctl(["list"])
        #expect(table.contains(daemon.name) && table.contains(String(daemon.pid)))
        let (statusCode, error) = try ctl(["status", daemon.name], capturing: 2)
        #expect(statusCode != 0)
        #expect(error.contains("does not have introspection on"))
        #expect(error.split(separator: "\n").count == 1)
    }

    @Test("§3.45 runloopctl status shows every loop of the process: thread, state, mode, its ports with queue and counts, its timers")
    func statusShowsEveryLoop() throws {
        let daemon = try Daemon(introspection: true)
        defer { daemon.stop() }
        // One request first, so the port's counts are not all zero.
        let (callCode, _) = try ctl(["call", daemon.name, "7", "--text", "x"])
        #expect(callCode == 0)
        let (code, text) = try ctl(["status", daemon.name, "--json"])
        #expect(code == 0, "\(text)")
        let report = try #require(try json(text) as? [String: Any])
        #expect((report["pid"] as? NSNumber)?.int32Value == daemon.pid)
        let loops = try #require(report["loops"] as? [[String: Any]])
        // The main loop and the worker; not the introspection thread's own loop.
        #expect(loops.count == 2, "\(text)")
        let main = try #require(loops.first { $0["main"] as? Bool == true })
        #expect((main["tid"] as? NSNumber)?.int32Value == daemon.pid)
        #expect(main["state"] as? String == "asleep")
        #expect(main["mode"] as? String == ThreadRunLoop.Mode.default.rawValue)
        let modes = try #require(main["modes"] as? [[String: Any]])
        let defaultItems = try #require(modes.first { $0["name"] as? String == ThreadRunLoop.Mode.default.rawValue }?["items"] as? [String: Any])
        let port = try #require((defaultItems["ports"] as? [[String: Any]])?.first)
        #expect(port["label"] as? String == "requests")
        #expect(port["name"] as? String == daemon.name)
        #expect((port["queueLimit"] as? NSNumber)?.intValue == 1024)
        #expect((port["queued"] as? NSNumber)?.intValue == 0)
        #expect((port["sent"] as? NSNumber)?.intValue == 1)
        #expect((port["delivered"] as? NSNumber)?.intValue == 1)
        let worker = try #require(loops.first { $0["thread"] as? String == "worker" }, "\(text)")
        #expect(worker["state"] as? String == "asleep")
        let workerModes = try #require(worker["modes"] as? [[String: Any]])
        let timers = workerModes.flatMap { ($0["items"] as? [String: Any])?["timers"] as? [[String: Any]] ?? [] }
        let tick = try #require(timers.first { $0["label"] as? String == "tick" })
        #expect(((tick["firesIn"] as? NSNumber)?.doubleValue ?? 0) > 0)
        // The same by pid, in the human form.
        let (humanCode, human) = try ctl(["status", String(daemon.pid)])
        #expect(humanCode == 0)
        #expect(human.contains("thread \(daemon.pid)") && human.contains("\"worker\"") && human.contains("port \"requests\""))
        #expect(human.contains("timer \"tick\""))
    }

    @Test("§3.45 a process of another uid cannot attach: a clear one-line error, non-zero exit, nothing of the process",
          .enabled(if: geteuid() == 0, "needs root to run runloopctl as nobody"))
    func otherUserRefused() throws {
        let daemon = try Daemon(introspection: true)
        defer { daemon.stop() }
        let (code, error) = try ctl(["status", String(daemon.pid), "--json"], capturing: 2, asNobody: true)
        #expect(code == 1)
        #expect(error.contains("access denied"), "\(error)")
        #expect(error.split(separator: "\n").count == 1)
        let (_, output) = try ctl(["status", String(daemon.pid), "--json"], capturing: 1, asNobody: true)
        #expect(output.isEmpty)
    }

    @Test("§3.46 runloopctl monitor shows every message the process's ports deliver and send while attached, in order per port, with sender and sizes; detached, nothing of it remains")
    func monitorShowsMessagesInOrder() throws {
        let daemon = try Daemon(introspection: true)
        defer { daemon.stop() }
        let before = resources(daemon.pid)
        let monitor = try MonitorChild(daemon.name, bytes: 4)
        #expect(monitor.read { $0.count >= 1 })
        #expect((monitor.records.first?["monitoring"] as? NSNumber)?.int32Value == daemon.pid)
        for msgid in [7, 9, 11] {
            let (code, _) = try ctl(["call", daemon.name, String(msgid), "--text", "m\(msgid)"])
            #expect(code == 0)
        }
        // Each request delivered to "requests", each reply sent (to the caller's reply port).
        #expect(monitor.read { lines in lines.count >= 7 }, "\(monitor.lines)")
        let records = monitor.records.dropFirst()
        let delivered = records.filter { $0["direction"] as? String == "delivered" && $0["port"] as? String == "requests" }
        let sent = records.filter { $0["direction"] as? String == "sent" }
        #expect(delivered.compactMap { ($0["msgid"] as? NSNumber)?.intValue } == [7, 9, 11])
        #expect(sent.compactMap { ($0["msgid"] as? NSNumber)?.intValue } == [8, 10, 12])
        let first = try #require(delivered.first)
        #expect(first["name"] as? String == daemon.name)
        #expect(first["reply"] as? Bool == true)
        #expect(((first["sender"] as? [String: Any])?["uid"] as? NSNumber)?.uint32Value == geteuid())
        let component = try #require((first["components"] as? [[String: Any]])?.first)
        #expect((component["size"] as? NSNumber)?.intValue == 2)
        #expect(component["hex"] as? String == "6d37")  // "m7", the bytes asked for
        monitor.stop()
        // Detached: the daemon is back to what it had before the monitor came.
        #expect(waitUntil { resources(daemon.pid) == before }, "\(resources(daemon.pid)) vs \(before)")
    }

    @Test("§3.46 a monitor that stops reading never blocks the daemon: what it could not take is counted and shown as dropped")
    func slowMonitorDrops() throws {
        let daemon = try Daemon(introspection: true)
        defer { daemon.stop() }
        let monitor = try MonitorChild(daemon.name)
        defer { monitor.stop() }
        #expect(monitor.read { $0.count >= 1 })
        kill(monitor.pid, SIGSTOP)
        // 20,000 messages to the worker's sink (40,000 records: sent and delivered) while the
        // monitor reads nothing: the daemon answers all the same.
        let (code, text) = try ctl(["call", daemon.name, "77", "--text", "20000", "--json"])
        #expect(code == 0)
        let reply = try #require(try json(text) as? [String: Any])
        #expect((reply["msgid"] as? NSNumber)?.intValue == 78)
        let (statusCode, status) = try ctl(["status", daemon.name, "--json"])
        #expect(statusCode == 0)
        #expect(status.contains("\"sink\""))
        kill(monitor.pid, SIGCONT)
        // Once it reads again, every message is accounted for: shown, or counted as dropped.
        func accounted(_ lines: [String]) -> (shown: Int, dropped: Int) {
            let records = lines.compactMap { try? json($0) as? [String: Any] }
            return (records.filter { $0["direction"] != nil }.count,
                    records.compactMap { ($0["dropped"] as? NSNumber)?.intValue }.reduce(0, +))
        }
        // 40,000 to the sink, the request's delivery and its reply's send.
        #expect(monitor.read { lines in let (shown, dropped) = accounted(lines); return shown + dropped >= 40_002 },
                "\(accounted(monitor.lines))")
        let (shown, dropped) = accounted(monitor.lines)
        #expect(dropped > 0)
        #expect(shown + dropped == 40_002)
    }

    @Test("§3.47 runloopctl call sends a request to a published name and prints the reply's msgid and components")
    func callPrintsTheReply() throws {
        let daemon = try Daemon(introspection: false)
        defer { daemon.stop() }
        let (code, text) = try ctl(["call", daemon.name, "41", "--text", "hello", "--json"])
        #expect(code == 0, "\(text)")
        let reply = try #require(try json(text) as? [String: Any])
        #expect((reply["msgid"] as? NSNumber)?.intValue == 42)
        let components = try #require(reply["components"] as? [[String: Any]])
        #expect(components.count == 1)
        #expect(components.first?["text"] as? String == "echo:hello")
        // Bytes that are not UTF-8 print as hex; a port as a port.
        let (binaryCode, binary) = try ctl(["call", daemon.name, "13", "--hex", "0102", "--json"])
        #expect(binaryCode == 0)
        let binaryReply = try #require(try json(binary) as? [String: Any])
        #expect((binaryReply["msgid"] as? NSNumber)?.intValue == 14)
        let parts = try #require(binaryReply["components"] as? [[String: Any]])
        #expect(parts.first?["hex"] as? String == "00ff" && parts.last?["type"] as? String == "port")
        // And the human form.
        let (_, human) = try ctl(["call", daemon.name, "1", "--text", "hi"])
        #expect(human.contains("msgid 2") && human.contains("\"echo:hi\""))
    }

    @Test("§3.47 a call that fails exits non-zero with the error's description on one line")
    func callFailureExitsNonZero() throws {
        let missing = "introspect-missing-\(getpid())"
        let (code, error) = try ctl(["call", missing, "1"], capturing: 2)
        #expect(code == 1)
        #expect(error == "runloopctl: \(PortError.nameNotFound(missing).description)\n")
        let (usageCode, usage) = try ctl(["call", missing], capturing: 2)
        #expect(usageCode == 1)
        #expect(usage.contains("missing MSGID") && usage.split(separator: "\n").count == 1)
    }
}

/// Perfetto's own schema for Python (the PyPI package `perfetto` ships `perfetto_trace_pb2`),
/// installed when missing, as Scripts/install-prerequisites does. Nil when it can be imported;
/// otherwise why not, even after installing.
private func perfettoSchemaMissing() -> String? {
    let probe = ["python3", "-c", "import perfetto.protos.perfetto.trace.perfetto_trace_pb2"]
    if runChild("/usr/bin/env", probe, capturing: 2, timeout: .seconds(120))?.exitCode == 0 { return nil }
    let pip = ["python3", "-m", "pip", "install", "--quiet", "perfetto", "protobuf"]
    var install = runChild("/usr/bin/env", pip, capturing: 2, timeout: .seconds(600))
    if install?.exitCode != 0 {
        // Debian's system Python refuses pip outside a virtual environment (PEP 668) unless told.
        install = runChild("/usr/bin/env", pip + ["--break-system-packages"], capturing: 2, timeout: .seconds(600))
    }
    let again = runChild("/usr/bin/env", probe, capturing: 2, timeout: .seconds(120))
    return again?.exitCode == 0 ? nil : "pip install perfetto protobuf: \(install?.output ?? "could not run python3"); import: \(again?.output ?? "")"
}

/// Parses a trace with Perfetto's schema and prints what §3.48 asks of it as JSON: the thread
/// tracks, the slices with their annotations, the flows' ends, the counter tracks and values.
/// `intact` says every byte was a field the schema knows (re-encoded without unknown fields, the
/// trace is as long as the file).
private let traceSummary = #"""
import json, sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
data = open(sys.argv[1], "rb").read()
trace = pb.Trace()
trace.ParseFromString(data)
trace.DiscardUnknownFields()
threads, counters, slices, sends, deliveries, values = {}, {}, [], [], [], {}
for packet in trace.packet:
    if packet.HasField("track_descriptor"):
        track = packet.track_descriptor
        if track.HasField("thread"):
            threads[str(track.uuid)] = {"tid": track.thread.tid, "name": track.thread.thread_name}
        if track.HasField("counter"):
            counters[str(track.uuid)] = track.name
    if packet.HasField("track_event"):
        event = packet.track_event
        if event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            annotations = {}
            for annotation in event.debug_annotations:
                annotations[annotation.name] = annotation.string_value if annotation.HasField("string_value") else annotation.uint_value
            slices.append({"name": event.name, "track": str(event.track_uuid), "annotations": annotations})
        for flow in event.flow_ids:
            sends.append({"flow": flow, "name": event.name})
        for flow in event.terminating_flow_ids:
            deliveries.append({"flow": flow, "name": event.name})
        if event.type == pb.TrackEvent.TYPE_COUNTER:
            values.setdefault(str(event.track_uuid), []).append(event.counter_value)
print(json.dumps({"intact": trace.ByteSize() == len(data), "packets": len(trace.packet),
                  "firstFlags": trace.packet[0].sequence_flags if trace.packet else 0,
                  "threads": threads, "counters": counters, "slices": slices, "sends": sends,
                  "deliveries": deliveries, "values": values}))
"""#

extension IntrospectionTests {
    @Test("§3.48 runloopctl trace writes a trace Perfetto's schema parses: a track per loop thread, a slice per callout named by its label with kind, mode and msgid, a flow from send to delivery, a counter per port's queue depth")
    func traceParsesWithPerfettosSchema() throws {
        let missing = perfettoSchemaMissing()
        #expect(missing == nil, "\(missing ?? "")")
        guard missing == nil else { return }
        let daemon = try Daemon(introspection: true)
        defer { daemon.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("trace-\(getpid())-\(daemon.pid).pftrace").path
        defer { unlink(file) }
        let (tracer, output) = try spawnDaemon(runloopctl, ["trace", String(daemon.pid), "--duration", "1s", "-o", file, "--json"],
                                               environment: [:], listeningSocket: nil, activationName: "")
        defer { close(output) }
        // Requests (each sends 3 messages to the worker's sink, and a reply) until the trace ends.
        var status: Int32 = 0
        var calls = 0
        let hangGuard = ContinuousClock.now + .seconds(120)
        while waitpid(tracer, &status, WNOHANG) == 0 {
            guard ContinuousClock.now < hangGuard else { kill(tracer, SIGKILL); Issue.record("trace never ended"); return }
            let (code, _) = try ctl(["call", daemon.name, "77", "--text", "3"])
            #expect(code == 0)
            calls += 1
        }
        #expect(status == 0, "runloopctl trace exited with \(status)")
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(output, &buffer, buffer.count)
        let written = try #require(try json(String(decoding: buffer[..<max(n, 0)], as: UTF8.self)) as? [String: Any])
        #expect(written["file"] as? String == file)

        let parsed = try #require(runChild("/usr/bin/env", ["python3", "-c", traceSummary, file], timeout: .seconds(120)))
        #expect(parsed.exitCode == 0, "\(parsed.output)")
        let summary = try #require(try json(parsed.output) as? [String: Any], "\(parsed.output)")
        // Parsed without an error, every byte a field of the schema; the sequence starts cleared.
        #expect(summary["intact"] as? Bool == true)
        #expect((summary["firstFlags"] as? NSNumber)?.intValue == 1)
        // A track per loop thread, named as the thread is.
        let threads = try #require(summary["threads"] as? [String: [String: Any]])
        let worker = try #require(threads.first { $0.value["name"] as? String == "worker" }, "\(threads)")
        let main = try #require(threads.first { ($0.value["tid"] as? NSNumber)?.int32Value == daemon.pid }, "\(threads)")
        // The kernel's name of the main thread: the program's, cut at 15 bytes.
        #expect((main.value["name"] as? String).map { !$0.isEmpty && "IntrospectionHost".hasPrefix($0) } == true)
        // The requests' callouts on the main thread, the sink's on the worker's: named by the
        // port's label, with kind, mode and msgid.
        let slices = try #require(summary["slices"] as? [[String: Any]])
        let request = try #require(slices.first { $0["name"] as? String == "requests" }, "\(slices.prefix(5))")
        #expect(request["track"] as? String == main.key)
        let annotations = try #require(request["annotations"] as? [String: Any])
        #expect(annotations["kind"] as? String == "port")
        #expect(annotations["mode"] as? String == ThreadRunLoop.Mode.default.rawValue)
        #expect((annotations["msgid"] as? NSNumber)?.intValue == 77)
        let sink = try #require(slices.first { $0["name"] as? String == "sink" })
        #expect(sink["track"] as? String == worker.key)
        // A flow from a send to the sink to its delivery.
        let sends = try #require(summary["sends"] as? [[String: Any]])
        let deliveries = try #require(summary["deliveries"] as? [[String: Any]])
        let sentFlows = Set(sends.filter { $0["name"] as? String == "send to sink" }.compactMap { ($0["flow"] as? NSNumber)?.uint64Value })
        let deliveredFlows = Set(deliveries.filter { $0["name"] as? String == "deliver sink" }.compactMap { ($0["flow"] as? NSNumber)?.uint64Value })
        #expect(!sentFlows.intersection(deliveredFlows).isEmpty, "sent \(sentFlows), delivered \(deliveredFlows)")
        // A counter track of each port's queue depth, with values.
        let counters = try #require(summary["counters"] as? [String: String])
        let sinkQueue = try #require(counters.first { $0.value == "queue sink" }, "\(counters)")
        #expect(counters.values.contains("queue requests"))
        let values = try #require(summary["values"] as? [String: [NSNumber]])
        #expect(!(values[sinkQueue.key] ?? []).isEmpty)
        #expect(calls > 0)
    }

    @Test("§3.48 a trace that stops reading never blocks the daemon: what it could not take is counted and reported as dropped")
    func slowTraceDrops() throws {
        let daemon = try Daemon(introspection: true)
        defer { daemon.stop() }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("trace-slow-\(getpid())-\(daemon.pid).pftrace").path
        defer { unlink(file) }
        let (tracer, output) = try spawnDaemon(runloopctl, ["trace", String(daemon.pid), "--duration", "1s", "-o", file],
                                               environment: [:], listeningSocket: nil, activationName: "")
        defer { close(output) }
        var text = ""
        func readToEnd(until marker: String?) -> Bool {
            let deadline = ContinuousClock.now + .seconds(60)
            while marker.map({ !text.contains($0) }) ?? true {
                guard pollReady(output, before: deadline) else { return false }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = read(output, &buffer, buffer.count)
                guard n > 0 else { return marker == nil }
                text += String(decoding: buffer[..<n], as: UTF8.self)
            }
            return true
        }
        // Attached (the process acknowledged), then stopped: it reads nothing.
        #expect(readToEnd(until: "Tracing process"), "\(text)")
        kill(tracer, SIGSTOP)
        // 40,000 messages to the worker's sink: 120,000 events (send, delivery, callout), more
        // than the trace's buffer and socket hold. The daemon answers all the same.
        let (code, reply) = try ctl(["call", daemon.name, "77", "--text", "40000", "--json"])
        #expect(code == 0)
        #expect((try json(reply) as? [String: Any])?["msgid"] as? NSNumber == 78)
        kill(tracer, SIGCONT)
        #expect(readToEnd(until: nil), "\(text)")
        var status: Int32 = 0
        while waitpid(tracer, &status, 0) < 0 && errno == EINTR {}
        #expect(status == 0, "\(text)")
        #expect(text.contains("events dropped"), "\(text)")
        #expect(FileManager.default.fileExists(atPath: file))
    }
}
