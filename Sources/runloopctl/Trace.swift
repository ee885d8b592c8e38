import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `trace PID|NAME [--duration D] -o FILE`: records the process's callouts and messages for D
/// (default 5 s) and writes them as a Perfetto protobuf trace (`Trace`, DESIGN §2h), built by
/// hand — the "synthetic track event" recipe, no SDK — which ui.perfetto.dev and
/// trace_processor open. Several processes' files concatenated (`cat a b > c`) are one trace:
/// every uuid, sequence id and flow id is made unique by the pid.
enum TraceCommand {
    static func run(_ arguments: Arguments) throws {
        let target = try arguments.positional(0, "PID or NAME")
        try arguments.expectAtMost(1)
        guard let path = arguments.options["-o"] else { throw Failure("trace: missing -o FILE (see runloopctl --help)") }
        let duration = try arguments.options["--duration"].map(parseDuration) ?? .seconds(5)
        let pid = try resolveProcess(target)
        let endpoint = try Endpoint(pid: pid)
        var sendFailure: Error?
        do { try endpoint.send("trace") } catch { sendFailure = error }
        guard let acknowledgement = try endpoint.receive() else {
            throw sendFailure ?? Failure("process \(pid) closed the connection")
        }
        if !arguments.json {
            FileHandle.standardError.write(Data("Tracing process \(pid) for \(duration)…\n".utf8))
        }
        var events: [[String: Any]] = []
        var dropped = 0
        func take(_ record: [String: Any]) {
            if let count = (record["dropped"] as? NSNumber)?.intValue { dropped += count } else { events.append(record) }
        }
        let deadline = ContinuousClock.now + duration
        while case let remaining = deadline - .now, remaining > .zero {
            guard try endpoint.readable(within: remaining) else { break }
            guard let record = try endpoint.receive() else { throw Failure("process \(pid) went away") }
            take(record)
        }
        // Ends the recording; the process sends what it still holds, then {"end":true}.
        try endpoint.send("end")
        while let record = try endpoint.receive(), record["end"] == nil { take(record) }

        // The kernel's command name is cut at 15 bytes; the program's file name is not.
        let program = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")))
            .flatMap { $0.split(separator: 0).first }
            .map { String(decoding: $0, as: UTF8.self).split(separator: "/").last.map(String.init) ?? "" }
            .flatMap { $0.isEmpty ? nil : $0 }
        var trace = PerfettoTrace(pid: pid, command: program ?? acknowledgement["command"] as? String ?? "process \(pid)")
        for loop in acknowledgement["loops"] as? [[String: Any]] ?? [] {
            guard let tid = (loop["tid"] as? NSNumber)?.int32Value else { continue }
            trace.thread(tid, name: loop["thread"] as? String)
        }
        trace.add(events)
        let bytes = trace.encoded()
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
            throw Failure("cannot write \(path)")
        }
        if arguments.json {
            printJSON(["file": path, "pid": pid, "callouts": trace.callouts, "messages": trace.messages,
                       "flows": trace.flows, "dropped": dropped, "bytes": bytes.count])
        } else {
            say("Wrote \(path): \(trace.callouts) callouts, \(trace.messages) messages (\(trace.flows) flows) of process \(pid)"
                + (dropped > 0 ? "; \(dropped) events dropped: the process recorded faster than this trace read" : "")
                + ". Open it in https://ui.perfetto.dev.")
        }
    }
}

extension Endpoint {
    /// Whether a record is waiting within `timeout`.
    func readable(within timeout: Duration) throws -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000 + 1)
        while true {
            let n = poll(&entry, 1, milliseconds)
            if n >= 0 { return n > 0 }
            if errno != EINTR { throw Failure("poll: \(String(cString: strerror(errno)))") }
        }
    }
}

/// The events of one process as Perfetto's `Trace` proto (protos/perfetto/trace/trace.proto):
/// a `TrackDescriptor` for the process, one per thread (loop threads, and threads that sent
/// messages), one counter track per port's queue depth; a SLICE_BEGIN/SLICE_END pair per callout,
/// an INSTANT per send and per delivery, joined by a flow; a COUNTER per queue depth seen.
///
/// Every packet is on one sequence (`trusted_packet_sequence_id` = pid) and needs no incremental
/// state: names are inline, every event names its `track_uuid`, and the first packet says the
/// state is cleared. Timestamps are CLOCK_BOOTTIME nanoseconds, the trace's default clock.
///
/// Flows: the process records, for each port, its sends and its deliveries in order. A port's
/// queue is FIFO, so the n-th local send to a port is the n-th delivery: the trace pairs them
/// per port, starting at a send that found the port's queue empty (what was queued before the
/// trace started has no recorded send). Deliveries from another process and sends to another
/// process's port are shown without a flow.
struct PerfettoTrace {
    let pid: Int32
    let command: String
    private(set) var callouts = 0
    private(set) var messages = 0
    private(set) var flows = 0
    private var threadNames: [Int32: String] = [:]
    private var threadOrder: [Int32] = []
    private var ports: [UInt64: String] = [:]
    private var portOrder: [UInt64] = []
    /// Every TrackEvent, encoded, with its timestamp and its order among events of one instant.
    private var timeline: [(time: Int64, order: Int, event: [UInt8])] = []

    init(pid: Int32, command: String) {
        self.pid = pid
        self.command = command
    }

    // Uuids unique across processes (files of several processes may be concatenated):
    // a kind in the top byte, the pid, then the thread or port.
    var processUUID: UInt64 { 1 << 56 | UInt64(UInt32(bitPattern: pid)) }
    func threadUUID(_ tid: Int32) -> UInt64 { 2 << 56 | UInt64(UInt32(bitPattern: pid)) << 24 | UInt64(UInt32(bitPattern: tid)) & 0xFF_FFFF }
    func counterUUID(_ port: UInt64) -> UInt64 { 3 << 56 | UInt64(UInt32(bitPattern: pid)) << 24 | port & 0xFF_FFFF }

    mutating func thread(_ tid: Int32, name: String?) {
        guard threadNames[tid] == nil else { return }
        threadNames[tid] = name
            ?? (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines)
            ?? "thread \(tid)"
        threadOrder.append(tid)
    }

    mutating func add(_ events: [[String: Any]]) {
        var pending: [UInt64: [UInt64]] = [:]  // port → flow ids of sends not yet delivered
        var pairing: Set<UInt64> = []          // ports whose sends and deliveries are in step
        var nextFlow: UInt64 = 1
        var slices: [Int32: [(begin: Int64, end: Int64, name: String, annotations: [[UInt8]])]] = [:]
        for event in events {
            guard let kind = event["event"] as? String, let tid = (event["tid"] as? NSNumber)?.int32Value else { continue }
            thread(tid, name: nil)
            let label = event["label"] as? String
            switch kind {
            case "callout":
                guard let begin = (event["begin"] as? NSNumber)?.int64Value, let end = (event["end"] as? NSNumber)?.int64Value
                else { continue }
                let calloutKind = event["kind"] as? String ?? "callout"
                var annotations = [Proto.debugAnnotation("kind", string: calloutKind)]
                if let mode = event["mode"] as? String { annotations.append(Proto.debugAnnotation("mode", string: mode)) }
                if let msgid = (event["msgid"] as? NSNumber)?.uint64Value { annotations.append(Proto.debugAnnotation("msgid", uint: msgid)) }
                slices[tid, default: []].append((begin, end, label ?? calloutKind, annotations))
                callouts += 1
            case "sent", "delivered":
                guard let port = (event["port"] as? NSNumber)?.uint64Value, let time = (event["time"] as? NSNumber)?.int64Value,
                      let msgid = (event["msgid"] as? NSNumber)?.uint64Value else { continue }
                messages += 1
                let queued = (event["queued"] as? NSNumber)?.int64Value
                let portName = label ?? "port #\(port)"
                var flowIDs: [UInt64] = [], terminating: [UInt64] = []
                if kind == "sent", let queued {
                    if queued == 0 { pairing.insert(port) }
                    if pairing.contains(port) {
                        let flow = UInt64(UInt32(bitPattern: pid)) << 32 | nextFlow
                        nextFlow += 1
                        pending[port, default: []].append(flow)
                        flowIDs = [flow]
                    }
                } else if kind == "delivered", event["remote"] as? Bool != true, pairing.contains(port) {
                    if let flow = pending[port]?.first {
                        pending[port]!.removeFirst()
                        terminating = [flow]
                        flows += 1
                    }
                }
                var event = Proto()
                event.varint(9, 3)  // TYPE_INSTANT
                event.varint(11, threadUUID(tid))
                event.string(23, "\(kind == "sent" ? "send to" : "deliver") \(portName)")
                event.message(4, Proto.debugAnnotation("port", string: portName))
                event.message(4, Proto.debugAnnotation("msgid", uint: msgid))
                for flow in flowIDs { event.fixed64(47, flow) }
                for flow in terminating { event.fixed64(48, flow) }
                timeline.append((time, 1, event.bytes))
                if let queued {
                    if ports[port] == nil { ports[port] = portName; portOrder.append(port) }
                    var counter = Proto()
                    counter.varint(9, 4)  // TYPE_COUNTER
                    counter.varint(11, counterUUID(port))
                    counter.varint(30, UInt64(bitPattern: queued))
                    timeline.append((time, 1, counter.bytes))
                }
            default:
                continue
            }
        }
        // Callouts of one thread nest (a nested run's callouts inside the one that ran it):
        // begins sorted outermost first, each end emitted before the next begin after it.
        for (tid, list) in slices {
            let track = threadUUID(tid)
            var open: [Int64] = []
            func end(_ time: Int64) {
                var slice = Proto()
                slice.varint(9, 2)  // TYPE_SLICE_END
                slice.varint(11, track)
                timeline.append((time, 0, slice.bytes))
            }
            for slice in list.sorted(by: { $0.begin != $1.begin ? $0.begin < $1.begin : $0.end > $1.end }) {
                while let last = open.last, last <= slice.begin { end(last); open.removeLast() }
                var event = Proto()
                event.varint(9, 1)  // TYPE_SLICE_BEGIN
                event.varint(11, track)
                event.string(23, slice.name)
                for annotation in slice.annotations { event.message(4, annotation) }
                timeline.append((slice.begin, 2, event.bytes))
                open.append(slice.end)
            }
            while let last = open.popLast() { end(last) }
        }
    }

    /// The `Trace`: descriptors first, then the events in time order (at one instant, ends before
    /// instants before begins, so that touching slices do not nest).
    func encoded() -> [UInt8] {
        var packets: [Proto] = []
        var process = Proto()
        process.varint(1, UInt64(UInt32(bitPattern: pid)))  // ProcessDescriptor.pid
        process.string(6, command)                          // ProcessDescriptor.process_name
        var processTrack = Proto()
        processTrack.varint(1, processUUID)                 // TrackDescriptor.uuid
        processTrack.message(3, process.bytes)              // TrackDescriptor.process
        packets.append(descriptorPacket(processTrack))
        for tid in threadOrder {
            var thread = Proto()
            thread.varint(1, UInt64(UInt32(bitPattern: pid)))  // ThreadDescriptor.pid
            thread.varint(2, UInt64(UInt32(bitPattern: tid)))  // ThreadDescriptor.tid
            thread.string(5, threadNames[tid] ?? "thread \(tid)")  // ThreadDescriptor.thread_name
            var track = Proto()
            track.varint(1, threadUUID(tid))
            track.varint(5, processUUID)                    // TrackDescriptor.parent_uuid
            track.message(4, thread.bytes)                  // TrackDescriptor.thread
            packets.append(descriptorPacket(track))
        }
        for port in portOrder {
            var track = Proto()
            track.varint(1, counterUUID(port))
            track.varint(5, processUUID)
            track.string(2, "queue \(ports[port] ?? "#\(port)")")  // TrackDescriptor.name
            track.message(8, [])                            // TrackDescriptor.counter: CounterDescriptor
            packets.append(descriptorPacket(track))
        }
        for entry in timeline.enumerated().sorted(by: { a, b in
            (a.element.time, a.element.order, a.offset) < (b.element.time, b.element.order, b.offset)
        }) {
            var packet = Proto()
            packet.varint(8, UInt64(bitPattern: entry.element.time))  // TracePacket.timestamp
            packet.message(11, entry.element.event)         // TracePacket.track_event
            packet.varint(10, UInt64(UInt32(bitPattern: pid)))  // TracePacket.trusted_packet_sequence_id
            packets.append(packet)
        }
        var trace = Proto()
        for (index, var packet) in packets.enumerated() {
            // TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED on the sequence's first packet.
            if index == 0 { packet.varint(13, 1) }
            trace.message(1, packet.bytes)                  // Trace.packet
        }
        return trace.bytes
    }

    private func descriptorPacket(_ track: Proto) -> Proto {
        var packet = Proto()
        packet.message(60, track.bytes)                     // TracePacket.track_descriptor
        packet.varint(10, UInt64(UInt32(bitPattern: pid)))
        return packet
    }
}

/// A protobuf message being written: fields as the wire format encodes them (varint, 64-bit,
/// length-delimited), in the order written.
struct Proto {
    private(set) var bytes: [UInt8] = []

    private mutating func raw(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func tag(_ field: Int, _ wireType: UInt64) { raw(UInt64(field) << 3 | wireType) }

    mutating func varint(_ field: Int, _ value: UInt64) {
        tag(field, 0)
        raw(value)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func message(_ field: Int, _ body: [UInt8]) {
        tag(field, 2)
        raw(UInt64(body.count))
        bytes += body
    }

    mutating func string(_ field: Int, _ value: String) { message(field, Array(value.utf8)) }

    /// A `DebugAnnotation` with a string value: name = 10, string_value = 6.
    static func debugAnnotation(_ name: String, string value: String) -> [UInt8] {
        var annotation = Proto()
        annotation.string(10, name)
        annotation.string(6, value)
        return annotation.bytes
    }

    /// A `DebugAnnotation` with an unsigned value: name = 10, uint_value = 3.
    static func debugAnnotation(_ name: String, uint value: UInt64) -> [UInt8] {
        var annotation = Proto()
        annotation.string(10, name)
        annotation.varint(3, value)
        return annotation.bytes
    }
}
